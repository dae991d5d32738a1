"""Pegasos' problem (data, step sizes, averaging) and state (the weights as ``a v``, the
average's sums), shared by the NumPy and CUDA steps: see the package's docstring."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ..._backend import to_numpy

# Renormalize v (v *= a, a = 1) when a falls below this, so that v stays in range.
RENORMALIZE_BELOW = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-9}
# Fold the average's B * v into P when B > FOLD_RATIO * a * (sum of weights): past
# that, P + B v cancels and loses digits (projection can shrink a by orders of
# magnitude in a few early steps, while B remembers the large early a's).
FOLD_RATIO = 16.0
# PEGASOS_FUSED_MAX_BATCH, _CLASSES and _PAIRS of kernels/pegasos.cu: what the fused
# steps' shared memory holds (see fits_fused_steps).
FUSED_MAX_BATCH, FUSED_MAX_CLASSES, FUSED_MAX_PAIRS = 1024, 64, 2048


@dataclasses.dataclass
class PegasosState:
    """What a Pegasos model carries from one step (or one ``partial_fit``) to the next.

    Arrays live on the backend that trains (NumPy or CuPy).
    """

    v: object  # (n_classes, n_weights) in the data's dtype; w = scale_a * v
    scale_a: object  # (n_classes,) float64
    sq_norm_v: object  # (n_classes,) float64, ||v||^2
    avg_p: object  # (n_classes, n_weights) float64: sum of iterates = avg_p + avg_b * v
    avg_b: object  # (n_classes,) float64
    avg_weight_sum: float = 0.0
    step: int = 0

    @classmethod
    def zeros(cls, n_classes, n_weights, dtype, xp):
        """A fresh model: ``w = 0``."""
        return cls(
            v=xp.zeros((n_classes, n_weights), dtype=dtype),
            scale_a=xp.ones(n_classes),
            sq_norm_v=xp.zeros(n_classes),
            avg_p=xp.zeros((n_classes, n_weights)),
            avg_b=xp.zeros(n_classes),
        )

    def copy(self):
        """A deep copy, so that a failed fit leaves the original untouched."""
        return dataclasses.replace(
            self,
            v=self.v.copy(),
            scale_a=self.scale_a.copy(),
            sq_norm_v=self.sq_norm_v.copy(),
            avg_p=self.avg_p.copy(),
            avg_b=self.avg_b.copy(),
        )

    def to(self, xp):
        """The same state with its arrays in ``xp``'s memory (NumPy or CuPy)."""
        move = to_numpy if xp is np else xp.asarray
        return dataclasses.replace(
            self,
            v=move(self.v),
            scale_a=move(self.scale_a),
            sq_norm_v=move(self.sq_norm_v),
            avg_p=move(self.avg_p),
            avg_b=move(self.avg_b),
        )

    def weights(self, averaged):
        """``(n_classes, n_weights)`` float64: the last iterate, or the average when asked and available."""
        if averaged and self.avg_weight_sum > 0:
            return (self.avg_p + self.avg_b[:, None] * self.v) / self.avg_weight_sum
        return self.scale_a[:, None] * self.v.astype(np.float64)


@dataclasses.dataclass(frozen=True)
class PegasosProblem:
    """The data and settings of one fit, on the training backend."""

    X: object  # (n_samples, n_features), dense C-order or CSR
    targets: object  # (n_samples, n_classes) in {-1, +1}, X's dtype
    sample_weight: object  # (n_samples,), X's dtype
    lam: float
    batch_size: int
    fit_intercept: bool
    projection: bool
    average_start: int | None  # first step whose iterate enters the average; None: no average
    weight_by_step: bool  # average with weight t for step t (else uniform)
    seed: int
    # mean(s) over all the training rows, when X holds only some of them (gpusvm.dask)
    mean_weight: float | None = None

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]

    @functools.cached_property
    def radius(self):
        """Radius of the ball that holds the optimum: ``sqrt(mean(s) / lam)``.

        The dual bound ``||w*||^2 <= (1/lam) (1/n) sum_i s_i`` (each dual variable is at
        most ``s_i / n``); with unit weights it is Pegasos' ``1 / sqrt(lam)``.
        """
        mean_weight = self.mean_weight if self.mean_weight is not None else float(self.sample_weight.mean())
        return math.sqrt(mean_weight / self.lam)

    def step_size_over_batch(self, step):
        """``eta / k = 1 / (lam t k)`` at step ``t``: the factor of a violator's ``s_i y_i x_i``."""
        return 1.0 / (float(self.lam) * step * self.batch_size)

    @staticmethod
    def shrink(step):
        """``1 - 1/t``, the factor ``w`` is shrunk by at step ``t`` (1 at ``t = 1``, where ``w = 0``)."""
        return 1.0 - 1.0 / step if step > 1 else 1.0

    def averaging_at(self, step):
        return self.average_start is not None and step >= self.average_start

    def average_weight(self, step):
        """Weight of step ``step``'s iterate in the average (0 before it starts)."""
        if not self.averaging_at(step):
            return 0.0
        return float(step) if self.weight_by_step else 1.0

    # Array forms of the three above, for a whole schedule at once: the same float64
    # operations in the same order, so each value equals the scalar form's bit for bit.

    def step_sizes_over_batch(self, steps):
        """:meth:`step_size_over_batch` of each step of an int64 array, float64."""
        return 1.0 / (float(self.lam) * steps.astype(np.float64) * self.batch_size)

    @staticmethod
    def shrinks(steps):
        """:meth:`shrink` of each step of an int64 array (steps from 1), float64."""
        t = steps.astype(np.float64)
        return np.where(t > 1.0, 1.0 - 1.0 / t, 1.0)

    def average_weights(self, steps):
        """:meth:`average_weight` of each step of an int64 array, float64."""
        if self.average_start is None:
            return np.zeros(steps.shape)
        weight = steps.astype(np.float64) if self.weight_by_step else 1.0
        return np.where(steps >= self.average_start, weight, 0.0)


def pegasos_schedule(problem, first_step, n_steps, weight_sum, given_from=None):
    """The values of Pegasos steps ``first_step .. first_step + n_steps - 1``, for the CUDA
    steps (``gpusvm/solvers/pegasos/_cuda.py``).

    Parameters
    ----------
    problem : PegasosProblem
        Its methods give the step values, as they do to ``NumpyPegasosSteps``, so that the
        two backends take the same step sizes bit for bit.
    first_step, n_steps : int
        The steps, counted from 1 over the model's life.
    weight_sum : float
        The sum of the average's weights before ``first_step``.
    given_from : int or None
        The first step of the given rows (``GivenBatches``); None: rows are drawn.

    Returns
    -------
    ndarray of shape (n_steps, 6), float64
        One row a step, in the column order of ``PEGASOS_*`` in ``kernels/pegasos.cu``:
        ``t``, ``1 / (lam t k)``, the shrink ``1 - 1/t``, the iterate's weight in the
        average, the running sum of those weights from ``weight_sum`` (added one step after
        another, as ``NumpyPegasosSteps`` does), and the first given row (-1: drawn).
    """
    steps = np.arange(first_step, first_step + n_steps, dtype=np.int64)
    rows = np.empty((n_steps, 6))
    rows[:, 0] = steps
    rows[:, 1] = problem.step_sizes_over_batch(steps)
    rows[:, 2] = problem.shrinks(steps)
    rows[:, 3] = problem.average_weights(steps)
    running = np.empty(n_steps + 1)
    running[0] = weight_sum
    running[1:] = rows[:, 3]
    rows[:, 4] = np.cumsum(running)[1:]  # add.accumulate: sequential, from weight_sum
    rows[:, 5] = -1 if given_from is None else (steps - given_from) * problem.batch_size
    return rows


def fits_fused_steps(batch_size, n_classes):
    """Whether the CUDA path's fused steps (``pegasos_fused_steps``) can take a problem's
    steps: its shared memory holds a step's coefficients, rows and class scalars."""
    return (
        batch_size <= FUSED_MAX_BATCH and n_classes <= FUSED_MAX_CLASSES and batch_size * n_classes <= FUSED_MAX_PAIRS
    )


def steps_per_epoch(n_samples, batch_size):
    """Steps of one epoch: enough batches to draw ``n_samples`` rows."""
    return max(1, math.ceil(n_samples / batch_size))
