"""Warnings for fits that end without having settled, where scikit-learn's estimators
raise a :class:`~sklearn.exceptions.ConvergenceWarning`: a user who sets nothing gets
either an accurate model or a word that it is not, and why.

Raw features (breast cancer's up to 4,254, wine's up to 1,680) make the steps of Pegasos
and of the online learners far too large for their scale: Pegasos' objective ends above
that of the zero weights, and the online learners' loss above that of a constant (on raw
breast cancer, every row given one class). Scaled, the same fits settle (the figures:
``docs/benchmarks.md``, "Figures behind the code").

SBP's model is a separator of the training rows once its water level is above 0: with
``nu > 0`` the optimum's level is at least ``nu`` (the zero predictor's), so a level at or
below 0 is a fit that has not gone far enough; with ``nu = 0`` (no slack) it is also
where the classes do not separate. Features far from 0 slow SBP down: its step size
follows the largest norm, so with a linear kernel on such features the level can still
be below 0 after an epoch. ``nu='auto'``'s pilot SVC warns when it stopped on its caps
before converging, or read ``nu`` off too few rows.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._validation import largest_absolute_value

SCALE_ADVICE = "Scale the features, e.g. with sklearn.preprocessing.StandardScaler."
# Worse than the reference (the zero weights, a constant) by more than this factor: on
# labels that X does not predict (scikit-learn's estimator checks draw them at random) a
# settled fit ends a few percent either side of it.
CLEARLY_WORSE = 1.1
# An epoch of fewer steps than this: too few to move the weights far, whatever the scale.
FEW_STEPS = 16


def warn_if_worse_than_zero_weights(estimator, curve, zero_objective, X, *, stacklevel):
    """A ConvergenceWarning when the last epoch objective of ``curve`` is above
    ``CLEARLY_WORSE`` times ``zero_objective``, that of the zero weights (every hinge 1:
    the classes' count times the mean sample weight): the model returned is worse than
    none. The advice names ``max_iter`` when the fit ran all of its epochs. ``X`` (or
    None) gives the largest feature value to quote. Unscaled features put PegasosSVC()
    far above the threshold, scaled ones far below it (the figures: ``docs/benchmarks.md``,
    "Figures behind the code")."""
    if not curve or not curve[-1] > CLEARLY_WORSE * zero_objective:
        return
    scale = "" if X is None else f" (the largest |x| here is {largest_absolute_value(X):.3g})"
    cause = f"its steps are too large for the scale of the features{scale}. {SCALE_ADVICE}"
    if len(curve) >= estimator.max_iter:
        cause = f"it ran out of epochs (max_iter={estimator.max_iter}), or {cause}"
    warnings.warn(
        f"{type(estimator).__name__}'s objective after {len(curve)} epochs, {curve[-1]:.4g}, is above that of "
        f"the zero weights, {zero_objective:.4g} (its best epoch's was {min(curve):.4g}): {cause}",
        ConvergenceWarning,
        stacklevel=stacklevel + 1,
    )


def constant_log_loss(class_counts):
    """The mean log loss, per row and one-vs-rest model, of predicting every row's
    class frequencies (a model of intercepts alone): the binary entropy of the positive
    class for two classes, else its mean over the classes."""
    p = np.asarray(class_counts, dtype=np.float64) / np.sum(class_counts)
    p = p[1:] if p.size == 2 else p
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    return float(np.nan_to_num(entropy).mean())


def warn_if_no_better_than_a_constant(estimator, loss, class_counts, *, stacklevel):
    """A ConvergenceWarning when the last epoch's mean log loss ``loss`` is above
    ``CLEARLY_WORSE`` times that of predicting the class frequencies of ``class_counts``
    (:func:`constant_log_loss`): the steps diverged, or did not move the weights; the
    advice fits the likelier cause (an epoch of a few batches, or the features' scale)."""
    constant = constant_log_loss(class_counts)
    if not loss > CLEARLY_WORSE * constant:
        return
    rows, batch = int(np.sum(class_counts)), estimator.batch_size_
    steps = -(-rows // batch)
    if steps < FEW_STEPS and batch > 1:  # a smaller batch would give more steps
        advice = (
            f"An epoch of its {rows} rows is {steps} step{'s' if steps > 1 else ''} of batch_size={batch}: "
            "a smaller batch_size (or a larger max_iter) gives it the steps it needs. If the features are on "
            "raw scales, scale them too (e.g. sklearn.preprocessing.StandardScaler)."
        )
    else:
        advice = f"{SCALE_ADVICE} A larger max_iter may also help."
    warnings.warn(
        f"{type(estimator).__name__}'s last epoch's log loss, {loss:.4g}, is above that of predicting "
        f"the class frequencies, {constant:.4g}: its steps diverged or did not move the weights. {advice}",
        ConvergenceWarning,
        stacklevel=stacklevel + 1,
    )


def warn_if_pilot_unsettled(estimator, pilot, min_rows, time_limit, *, stacklevel):
    """``nu='auto'``'s warnings about its ``pilot`` (an ``auto_nu.Pilot``): a
    ConvergenceWarning when an SVC of it stopped on its iteration cap or ``time_limit``
    (seconds, or None) before converging, and a UserWarning when it had fewer than
    ``min_rows`` training rows. Both say to set ``nu`` by hand."""
    name = type(estimator).__name__
    if not pilot.converged:
        limit = f"its cap of {pilot.max_iter} iterations"
        if pilot.n_iter < pilot.max_iter:
            limit = f"{pilot.n_iter} iterations, all that its share of time_budget ({time_limit:.3g} s) allowed"
        warnings.warn(
            f"{name}(nu='auto'): the pilot SVC that nu is read off did not converge within {limit} "
            f"({pilot.seconds:.3g} s), so nu_={pilot.nu:.4g} is read off its last iterate and may be far "
            "from the nu that matches SVC(C). Set nu by hand (gpusvm.nu_from_svc reads it off a fitted SVC), "
            "or centre and scale the features (e.g. with sklearn.preprocessing.StandardScaler).",
            ConvergenceWarning,
            stacklevel=stacklevel + 1,
        )
    if pilot.n_rows < min_rows:
        warnings.warn(
            f"{name}(nu='auto') read nu_={pilot.nu:.4g} off a pilot SVC of {pilot.n_rows} training rows, "
            f"fewer than {min_rows}: too few margins to tell the slack the data needs. Set nu by hand.",
            UserWarning,
            stacklevel=stacklevel + 1,
        )


# a feature value above this suggests features that were not scaled (StandardScaler's are
# a few units at most), which the level warning then names
UNSCALED_FEATURES = 10.0


def warn_if_level_not_positive(estimator, levels, epochs, problems, *, X=None, stacklevel):
    """A ConvergenceWarning when an SBP model ends with a water level at or below 0 in
    one of its binary problems: ``levels`` and ``epochs`` (the epochs each ran), one per
    problem named in ``problems`` (e.g. "the pair of classes 0 and 1"). The advice fits
    the likelier cause: ``nu = 0`` on classes that do not separate, or a fit stopped too
    early (``max_iter``, or ``time_budget`` and ``max_kernel_evals``), on features far
    from 0 or kernel values forced to float32 (``kernel_dtype='float32'``). ``X``
    (or None) gives the largest feature value to quote."""
    levels, epochs = np.asarray(levels, dtype=np.float64), np.asarray(epochs, dtype=np.float64)
    low = np.flatnonzero(levels <= 0)
    if not low.size:
        return
    worst = low[np.argmin(levels[low])]
    name = type(estimator).__name__
    which = f"{name}'s model"
    if levels.size > 1:
        which = f"{low.size} of {name}'s {levels.size} binary models (the lowest, {problems[worst]}'s)"
    message = (
        f"{which} ended with a water level of {levels[worst]:.3g} <= 0 after {epochs[worst]:.3g} "
        "epochs: not yet a separator of the training rows, so its predictions are unreliable. "
    )
    if estimator.nu_ == 0:
        message += (
            "With nu=0 there is no slack, and the level stays at or below 0 where the classes do not separate "
            "with this kernel: set nu > 0 (nu='auto' reads one off SVC). "
        )
    if epochs[worst] >= estimator.max_iter:
        message += f"It ran all max_iter={estimator.max_iter} epochs: a larger max_iter lets it go on. "
    else:
        message += "It stopped on time_budget or max_kernel_evals: a larger budget lets it go on. "
    largest = None if X is None else largest_absolute_value(X)
    if largest is None or largest > UNSCALED_FEATURES:
        scale = "" if largest is None else f" (the largest |x| here is {largest:.3g})"
        message += f"Features far from 0{scale} slow SBP down: centre and scale them (e.g. StandardScaler). "
    if getattr(estimator, "kernel_dtype", None) == "float32":  # forced ('auto' takes float32 where it is accurate)
        message += (
            "Kernel values forced to float32 may add to it: kernel_dtype='auto' or 'float64' keeps their digits. "
        )
    warnings.warn(message.rstrip(), ConvergenceWarning, stacklevel=stacklevel + 1)


# the squared norm of the rows' mean over their mean squared distance from it above which
# a linear or poly SBP fit warns: 0 for standardized features, about 0.5 on MNIST's pixels
# and Adult's binary features; 25 for features near 5 with unit spread, where linear SBP
# fits already end below SVC's accuracy (bench/kernel_precision.py; docs/benchmarks.md,
# "Figures behind the code")
FAR_FROM_CENTRE = 10.0


def warn_if_far_from_centre(estimator, statistics, *, stacklevel):
    """A UserWarning when the rows of a linear or poly kernel SBP fit sit far from their
    mean compared with their spread (``statistics``: the rows'
    :class:`~gpusvm.kernel_functions._precision.RowStatistics`). These kernels change
    under translation, so the rows cannot be centred for the fit; SBP's step size follows
    the largest norm (``1 / sqrt(max K(x, x))``), so on such rows the level grows slowly
    and the model can stay far from SVC's at ``max_iter``, with no other sign."""
    ratio = statistics.offset / statistics.spread if statistics.spread > 0 else 0.0
    if estimator.kernel == "rbf" or not ratio > FAR_FROM_CENTRE:
        return
    warnings.warn(
        f"{type(estimator).__name__}(kernel={estimator.kernel!r}): the rows sit far from their mean compared with "
        f"their spread (the mean's squared norm is {ratio:.3g} times their mean squared distance from it). SBP's "
        "steps are sized by the largest norm, so it converges slowly here and its model can stay far from SVC's: "
        "centre the features (e.g. sklearn.preprocessing.StandardScaler).",
        UserWarning,
        stacklevel=stacklevel + 1,
    )
