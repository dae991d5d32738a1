"""Mini-batch Pegasos (Shalev-Shwartz et al. 2011), one-vs-rest, on NumPy or CuPy.

Objective per class, with targets ``y`` in {-1, +1} and per-sample weights ``s``::

    lam/2 ||w||^2 + 1/n sum_i s_i max(0, 1 - y_i <w, x_i>)

Step ``t`` (1-based, counted over the model's whole life so that ``partial_fit``
continues the same schedule) draws ``k`` rows with replacement from the shared random
stream at step ``t`` and applies, for every class at once::

    eta = 1 / (lam t)
    w  <- (1 - 1/t) w + (eta / k) sum_{violators} s_i y_i x_i
    w  <- min(1, r / ||w||) w,  r = sqrt(mean(s) / lam)     (projection, optional)

The weights of class ``c`` are stored as ``w_c = a_c v_c`` (see ``kernels/pegasos.cu``):
the shrink is O(1) and the update touches only the batch's nonzeros.  ``||v_c||^2`` is
kept up to date so projection is O(1).  The weighted average of the iterates from step
``average_start`` on is ``(P + B v) / sum(weights)``, with weight ``t`` for step ``t``
(Lacoste-Julien et al. 2012: an O(1/T) rate for this step size, with no need to know
``T`` in advance) or uniform weights.  The bias, when fitted, is column
``d`` of ``v``: the weight of an implicit constant feature of value 1, regularized and
projected like any other weight (as LIBLINEAR's ``intercept_scaling=1``).

The math, with the paper's notation: ``docs/algorithms.md``, section 1.  This folder:
the problem and the state (``_problem.py``), the NumPy steps, the reference
(``_numpy.py``), the CUDA steps (``_cuda.py``, ``kernels/pegasos.cu``), and here the
driver, the objectives and :func:`make_steps`, which picks the NumPy or CUDA steps.

References
----------
S. Shalev-Shwartz, Y. Singer, N. Srebro, A. Cotter. Pegasos: primal estimated
sub-gradient solver for SVM. Mathematical Programming 127(1), 2011.

S. Lacoste-Julien, M. Schmidt, F. Bach. A simpler approach to obtaining an O(1/t)
convergence rate for the projected stochastic subgradient method. arXiv:1212.2002, 2012.
"""

from __future__ import annotations

import math

import numpy as np
import nvtx

from ..._backend import on_device, to_numpy
from ..._instrumentation import progress_bar

from ._numpy import BatchBlocks, GivenBatches, NumpyPegasosSteps, csr_batch
from ._problem import (
    FOLD_RATIO,
    FUSED_MAX_BATCH,
    FUSED_MAX_CLASSES,
    FUSED_MAX_PAIRS,
    RENORMALIZE_BELOW,
    PegasosProblem,
    PegasosState,
    fits_fused_steps,
    pegasos_schedule,
    steps_per_epoch,
)

__all__ = [  # the problem, state and NumPy steps live in _problem and _numpy; these names stay here
    "FOLD_RATIO",
    "FUSED_MAX_BATCH",
    "FUSED_MAX_CLASSES",
    "FUSED_MAX_PAIRS",
    "RENORMALIZE_BELOW",
    "BatchBlocks",
    "GivenBatches",
    "NoImprovementStop",
    "NumpyPegasosSteps",
    "PegasosProblem",
    "PegasosState",
    "ProgressiveObjective",
    "csr_batch",
    "fits_fused_steps",
    "make_steps",
    "pegasos_schedule",
    "primal_objective",
    "run_pegasos",
    "steps_per_epoch",
    "weighted_hinge_sum",
]


def primal_objective(X, targets, sample_weight, weights, lam, fit_intercept):
    """``sum_c [lam/2 ||w_c||^2 + 1/n sum_i s_i max(0, 1 - y_ic <w_c, x_i>)]``, on X's backend.

    ``weights`` has shape (n_classes, n_features + fit_intercept); the bias, when there
    is one, is the last column and is regularized like the rest.
    """
    hinge_sum = weighted_hinge_sum(X, targets, sample_weight, weights, fit_intercept)
    return float(0.5 * lam * (weights**2).sum() + hinge_sum / X.shape[0])


def weighted_hinge_sum(X, targets, sample_weight, weights, fit_intercept, to_float=True):
    """``sum_c sum_i s_i max(0, 1 - y_ic <w_c, x_i>)`` over the rows of X (a float, or a
    0-d array on X's backend when not ``to_float``): the loss part of
    :func:`primal_objective`, which ``gpusvm.dask`` sums over its shards."""
    d = X.shape[1]
    # in X's dtype: a float64 right-hand side would make SciPy and CuPy copy a float32 X
    scores = (X @ weights[:, :d].T.astype(X.dtype)).astype(np.float64)
    if fit_intercept:
        scores = scores + weights[:, d]
    hinge = (1.0 - targets * scores).clip(0.0, None)
    total = (sample_weight[:, None] * hinge).sum()
    return float(total) if to_float else total


class ProgressiveObjective:
    """The objective of a streamed epoch, each chunk's rows measured once, when the chunk
    arrives and before its steps, with the weights the model would return then.

    For the chunks ``j`` of an epoch (``n_j`` rows; ``N`` in all) and ``w_j`` the
    weights (the average, when averaging) before chunk ``j``'s steps::

        1/N sum_j [ n_j lam/2 sum_c ||w_jc||^2 + sum_{i in j} sum_c s_i max(0, 1 - y_ic <w_jc, x_i>) ]

    That is :func:`primal_objective` over all the rows, except that a row is measured
    with the weights of the moment its chunk comes: progressive validation at chunk
    granularity (as Vowpal Wabbit's average loss, measured on each example before it
    trains on it), which needs no pass of its own, since the chunk is in memory for its
    steps anyway, and costs one product ``X_j w_j`` a chunk, as ``fit``'s exact
    objective costs one ``X w`` an epoch.  It measures the weights the model returns and
    every row, so it falls and flattens with ``fit``'s objective, a fraction of an epoch
    behind it.  The sums stay on the training backend (no read from the device) until
    :meth:`value`.
    """

    def __init__(self, lam, fit_intercept, averaged, xp):
        self.lam, self.fit_intercept, self.averaged = lam, fit_intercept, averaged
        self.sums, self.rows = xp.zeros(2), 0  # the loss sum, and n_j-weighted sum of ||w_j||^2

    def add(self, X, targets, sample_weight, state):
        """Measure chunk ``(X, targets, sample_weight)`` with ``state``'s weights (before its steps)."""
        weights = state.weights(self.averaged)
        self.sums[0] += weighted_hinge_sum(X, targets, sample_weight, weights, self.fit_intercept, to_float=False)
        self.sums[1] += X.shape[0] * (weights**2).sum()
        self.rows += X.shape[0]

    def value(self):
        """The epoch's objective (one read from the device)."""
        hinge_sum, sq_norm_sum = (float(total) for total in to_numpy(self.sums))
        return (0.5 * self.lam * sq_norm_sum + hinge_sum) / self.rows


# The stopping rule looks back over at least this many steps as well as n_iter_no_change
# epochs. On a few hundred rows an epoch is a few steps of batch 64, the early iterates
# follow their last draws (the step 1 / (lam t) is large), and five epochs without a gain
# ended fits at a chance point, far above the objective this patience reaches
# (docs/user_guide/choosing_a_solver.md, PegasosSVC). From a few thousand rows up five
# epochs are more steps than this, and nothing changes.
PATIENCE_STEPS = 1_000


class NoImprovementStop:
    """scikit-learn's SGDClassifier rule: stop once an epoch's objective has not improved
    on the best so far by ``tol`` for ``n_iter_no_change`` epochs in a row, and (when the
    steps are given) for at least ``PATIENCE_STEPS`` steps (``tol=None``: never)."""

    def __init__(self, tol, n_iter_no_change):
        self.tol, self.n_iter_no_change = tol, n_iter_no_change
        self.best, self.stale, self.improved_at = math.inf, 0, 0

    def __call__(self, objective, steps=None):
        """Whether to stop after an epoch whose objective is ``objective``, ``steps`` steps
        into the fit (None: the epochs alone decide)."""
        if self.tol is None:
            return False
        if objective > self.best - self.tol:
            self.stale += 1
        else:
            self.stale, self.improved_at = 0, steps or 0
        self.best = min(self.best, objective)
        waited = steps is None or steps - self.improved_at >= PATIENCE_STEPS
        return self.stale >= self.n_iter_no_change and waited


def make_steps(problem, xp, *, state, given_from=None):
    """The steps of ``problem`` over ``state`` (modified in place) on the array module
    ``xp``: :class:`NumpyPegasosSteps` (the reference) or ``_cuda.CupyPegasosSteps``, the
    one place where the backend is chosen; see :class:`NumpyPegasosSteps` for ``given_from``."""
    if on_device(xp):
        from ._cuda import CupyPegasosSteps

        return CupyPegasosSteps(problem, state, given_from)
    return NumpyPegasosSteps(problem, state, given_from)


def run_pegasos(problem, state, *, n_epochs, tol, n_iter_no_change, xp, verbose=0):
    """Run up to ``n_epochs`` epochs of Pegasos steps from ``state`` (not modified).

    After each epoch the exact primal objective (:func:`primal_objective`, summed over
    classes) of the weights the model would return is computed in one pass over X.
    Like scikit-learn's SGDClassifier, training stops when it has not improved by
    ``tol`` for ``n_iter_no_change`` epochs in a row; ``tol=None`` runs every epoch.

    Returns
    -------
    state : PegasosState
    epochs_run : int
    objectives : list of float
    """
    stepper = make_steps(problem, xp, state=state.copy())
    n_steps = steps_per_epoch(problem.n_samples, problem.batch_size)
    averaged = problem.average_start is not None
    stop, objectives = NoImprovementStop(tol, n_iter_no_change), []
    with progress_bar(n_epochs * n_steps, "Pegasos", verbose) as bar:  # closed however the loop ends
        for _ in range(n_epochs):
            with nvtx.annotate("pegasos.epoch", color="purple"):
                stepper.run_steps(n_steps)
                bar.update(n_steps)
            with nvtx.annotate("pegasos.objective", color="red"):
                objective = primal_objective(
                    problem.X,
                    problem.targets,
                    problem.sample_weight,
                    stepper.state.weights(averaged),
                    problem.lam,
                    problem.fit_intercept,
                )
            objectives.append(objective)
            bar.set_postfix(objective=f"{objective:.5g}")
            if stop(objective, stepper.state.step):
                break
    return stepper.state, len(objectives), objectives
