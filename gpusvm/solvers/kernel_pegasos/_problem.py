"""Kernel Pegasos' problem, its step schedule and its model's coefficients: what the NumPy
steps (``_numpy.py``) and the CUDA steps (``_cuda.py``) share."""

from __future__ import annotations

import dataclasses

import numpy as np

from ...kernel_functions import KernelSpec

# Steps whose examples the host draws at once (the same draws as step by step; on the
# GPU each step draws its own, in its first launch).
DRAW_BLOCK_STEPS = 1024
SCHEDULE_STEPS = 1024  # steps issued together between progress updates


@dataclasses.dataclass(frozen=True)
class KernelPegasosProblem:
    """The data and settings of one kernel Pegasos fit, on the training backend."""

    X: object  # (n_samples, n_features), dense or CSR
    targets: object  # (n_samples, n_classes) in {-1, +1}, float64
    sample_weight: object  # (n_samples,), float64
    lam: float
    batch_size: int
    kernel: KernelSpec
    fit_intercept: bool
    seed: int

    def kernel_values(self, rows, sq_norms):
        """``K(X[rows], X)`` in X's dtype."""
        return self.kernel.rows(self.X, rows, sq_norms)

    def with_intercept(self, values):
        """Kernel values as the step adds them: float64, +1 with an intercept. ``values``
        must be the caller's own copy: float64 values are changed in place."""
        block = values.astype("float64", copy=False)
        if self.fit_intercept:
            block += 1.0
        return block


def step_schedule(first, last, lam, batch_size):
    """Rows ``(t, scale)`` for steps ``first..last``: the margin test of step ``t`` scales
    the unscaled responses by ``1 / (lam (t - 1) k)`` (0 at ``t = 1``, when they are 0)."""
    t = np.arange(first, last + 1, dtype=np.float64)
    scale = np.zeros_like(t)
    later = t > 1
    scale[later] = 1.0 / (lam * (t[later] - 1) * batch_size)
    return np.column_stack([t, scale])


def dual_coefficients(counts, stamps, targets, lam, batch_size, n_steps, average):
    """The coefficients of ``y_j Phi(x_j)``: last iterate, or the step-weighted average."""
    if average:
        summed = (n_steps + 1) * counts - stamps
        return summed * targets.T / (lam * batch_size * n_steps * (n_steps + 1) / 2)
    return counts * targets.T / (lam * n_steps * batch_size)
