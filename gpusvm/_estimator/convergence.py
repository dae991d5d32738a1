"""Warnings for fits that end without having settled, where scikit-learn's estimators
raise a :class:`~sklearn.exceptions.ConvergenceWarning`: a user who sets nothing gets
either an accurate model or a word that it is not, and why.

Raw features (breast cancer's up to 4,254, wine's up to 1,680) make the steps of Pegasos
and of the online learners far too large for their scale: Pegasos' objective ends above
that of the zero weights (wine: a third of the training rows right, against LinearSVC's
91%), and the online learners' loss above that of a constant (breast cancer: every row
given one class). Scaled, the same fits settle.
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
    None) gives the largest feature value to quote.

    Measured on PegasosSVC(): raw breast cancer, wine and digits end at 5.0 (best 3.7), 456
    (best 9.6) and 99 (best 20) against 1, 3 and 10; scaled, and on Adult, far below."""
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
