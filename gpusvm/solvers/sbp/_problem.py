"""SBP's problem, its result and stopping rules, and what every kind of SBP steps shares
(the NumPy steps in ``_numpy.py``, the CUDA steps in ``_cuda.py``, the pairs in
``pairs/``, and gpusvm.dask's)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..._backend import to_numpy
from ...kernel_functions import KernelSpec
from ..row_cache import RowCacheUse


RENORMALIZE_BELOW = 1e-150


CHECKPOINTS_PER_EPOCH = 10


STEP_PHASES = ("level", "draw", "rows", "update")


PREFETCH_MAX_COVERED = 0.25


# The tol rule's smallest size of the objective, as a share of the largest response of a
# unit-norm model (1 / eta_0 = sqrt(max_i K(x_i, x_i))). SBP's guarantee on the level is
# absolute (within eps of the best after O(1 / eps^2) steps), so a gain relative to a level
# near zero, where a problem's classes barely separate at its nu, asks for a precision it
# reaches only after ~(1 / (tol * level))^2 steps: such a problem ran every epoch while its
# predictions no longer changed. 0.03 is by measurement: it leaves the models of the
# benchmarks' multiclass sets as they were, where larger floors stop some of them early
# (docs/benchmarks.md, "Figures behind the code").
LEVEL_FLOOR = 0.03


@dataclasses.dataclass(frozen=True)
class SBPProblem:
    """The data and settings of one SBP fit, on the training backend.

    ``X`` holds the training rows, then the holdout rows; kernel rows run over both, so
    that the holdout responses are kept up to date like the training ones.
    """

    X: object  # (n_train + n_holdout, n_features), dense or CSR
    n_train: int
    targets: object  # (n_train, n_problems) in {-1, +1}, float64
    holdout_labels: np.ndarray  # (n_holdout,) positions in classes_, on the host
    nu: float
    batch_size: int
    kernel: KernelSpec
    fit_intercept: bool
    seed: int

    @property
    def volume(self):
        """``n nu``: the total slack (water) poured at the level."""
        return self.n_train * self.nu

    @property
    def n_problems(self):
        return self.targets.shape[1]

    @property
    def n_rows(self):
        """Training plus holdout rows: the length of a kernel row."""
        return self.X.shape[0]

    @property
    def n_holdout(self):
        return self.n_rows - self.n_train

    def kernel_rows(self, rows, sq_norms):
        """``K(X[rows], X)`` over training and holdout columns, in X's dtype."""
        return self.kernel.rows(self.X, rows, sq_norms)

    def first_step_size(self, sq_norms):
        """``eta_0 = 1 / sqrt(max_i K(x_i, x_i))`` over the training rows."""
        return step_size_for(self.kernel.largest_self_value(sq_norms[: self.n_train]))


def step_size_for(largest_self_kernel_value):
    """``eta_0 = 1 / sqrt(max_i K(x_i, x_i))``, 1 when that is 0."""
    value = largest_self_kernel_value
    return 1.0 / math.sqrt(value) if value > 0 else 1.0


@dataclasses.dataclass
class SBPResult:
    """The averaged model after ``n_steps`` steps, on the host."""

    alpha: np.ndarray  # (n_problems, n_columns) averaged coefficients of y_i Phi(x_i)
    level: np.ndarray  # (n_problems,) water level of the averaged responses
    bias: np.ndarray  # (n_problems,) bias of the averaged responses (0 without intercept)
    n_steps: int
    history: list
    support: np.ndarray | None = None  # the training rows of alpha's columns; None: every row
    row_cache: RowCacheUse | None = None  # how the steps' kernel row cache was used; None: no cache


class HostCacheCounts:
    """What ``run_sbp`` and ``run_pair_stack`` read of host steps that keep their kernel
    rows (or a pair stack's class blocks) in ``self.cache``, a
    :class:`~gpusvm.solvers.row_cache.KernelRowCache`: rows computed, distinct rows, the
    cache itself."""

    @property
    def kernel_rows_computed(self):
        return self.cache.rows_computed

    @property
    def kernel_rows_distinct(self):
        return self.cache.rows_distinct

    @property
    def kernel_row_cache(self):
        return self.cache


class LocalModel:
    """What ``run_sbp`` asks of the steps of one process, from their ``model`` and
    ``levels`` (the steps of gpusvm.dask answer the same questions across workers)."""

    def evaluate(self, average):
        """Level and bias of each problem's model (host arrays), and its holdout error."""
        _, responses, holdout_responses = self.model(average)
        level, bias = self.levels(responses)
        level, bias = to_numpy(level), to_numpy(bias)
        return level, bias, holdout_error(self.problem, to_numpy(holdout_responses), level, bias)

    def coefficients(self, average):
        """``alpha`` of every training row (on the host), and None for "every row"."""
        return to_numpy(self.model(average)[0]), None


def holdout_error(problem, holdout_responses, level, bias):
    """Error rate on the holdout rows of the model ``(h + b) / level``, or None."""
    if problem.n_holdout == 0:
        return None
    return float((predicted_classes(holdout_responses, level, bias) != problem.holdout_labels).mean())


def predicted_classes(responses, level, bias):
    """Positions in ``classes_`` that the model ``(responses + b) / level`` predicts
    (responses of shape (n_problems, n), on the host)."""
    scores = (responses + bias[:, None]) / positive_level(level)[:, None]
    return (scores[0] > 0).astype(int) if scores.shape[0] == 1 else scores.argmax(axis=0)


def positive_level(level):
    """The divisor of the final model: the level where it is positive, else 1 (the
    predictor's signs are the same; only the margin-1 scaling is lost)."""
    level = np.asarray(level, dtype=float)
    return np.where(level > 0, level, 1.0)


@dataclasses.dataclass
class StoppingRules:
    """When to stop: epochs, wall-clock seconds, kernel evaluations, and either the holdout
    error (with a holdout) or the objective's gain (without one, ``tol``)."""

    max_epochs: int
    time_budget: float | None = None
    max_kernel_evals: int | None = None
    n_iter_no_change: int = 10
    tol: float | None = None

    def objective_stalled(self, history, largest_response=1.0):
        """Whether the objective (the averaged model's level, which grows as SBP
        converges) gained less than ``tol`` of its size over the last
        ``n_iter_no_change`` checkpoints: ``history`` is one problem's records, oldest first
        (``largest_response``: as :meth:`gained_too_little`)."""
        if self.tol is None or len(history) <= self.n_iter_no_change:
            return False
        before, now = history[-1 - self.n_iter_no_change]["objective"], history[-1]["objective"]
        return bool(self.gained_too_little(before, now, largest_response))

    def gained_too_little(self, before, now, largest_response=1.0):
        """Whether objectives went from ``before`` to ``now`` (scalars or arrays) by less
        than ``tol`` of their size (``tol`` not None), a size of at least ``LEVEL_FLOOR``
        times ``largest_response`` (``1 / eta_0``, scalar or array: the largest response
        of a unit-norm model, 1 for the rbf kernel)."""
        return now - before < self.tol * np.maximum(np.abs(before), LEVEL_FLOOR * np.asarray(largest_response))


def checkpoint_interval(steps_per_epoch):
    """Steps between a problem's checkpoints: ten an epoch at most (scalar or array)."""
    return np.maximum(1, -(-steps_per_epoch // CHECKPOINTS_PER_EPOCH))


def checkpoint_patience(n_iter_no_change, own_every, checkpoint_every):
    """Checkpoints the stopping rules look back over when a problem checkpoints every
    ``checkpoint_every`` steps instead of its own ``own_every``
    (:func:`checkpoint_interval`): the span of ``n_iter_no_change`` of its own
    checkpoints, rounded up to whole checkpoints (scalars or arrays)."""
    return -(-n_iter_no_change * own_every // checkpoint_every)
