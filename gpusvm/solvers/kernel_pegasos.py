"""Kernelized mini-batch Pegasos, one-vs-rest, on NumPy or CuPy (a step of each: ``HostSteps``,
``_kernel_pegasos_cuda.DeviceSteps``).

The model never forms ``w``: it keeps per class the weighted counts ``alpha[c, j]``,
the number of times example ``j`` was drawn while violating the margin (times its
sample weight).  With ``k`` rows per step, after step ``t``::

    w_{t+1} = 1 / (lam t k) * sum_j alpha[c, j] y_cj Phi(x_j)

which is exactly the linear algorithm of ``pegasos.py`` without projection, written in
the kernel's feature space (the margin test at step ``t`` therefore divides by
``lam (t - 1) k``; the paper's ``lam t`` is off by one step).  ``fit_intercept`` adds a
constant 1 to the kernel: a regularized bias, like the linear solver's.

The average of the iterates weighted by step number (as the linear solver's
``average=True``) costs one more counter: with ``stamps[c, j]`` the sum of each increment
of ``alpha[c, j]`` times the step it happened at,
``sum_{t=1..T} alpha^(t) = (T + 1) alpha^(T) - stamps``, so::

    sum_t t w_{t+1} / sum_t t = sum_j ((T + 1) alpha_j - stamps_j) y_j Phi(x_j) / (lam k T (T + 1) / 2)

Instead of evaluating ``K(x_i, support)`` for every drawn row, the solver keeps the
unscaled responses ``r[c, j] = sum_l alpha[c, l] y_cl K(x_l, x_j)`` for all training rows
and adds one kernel row per drawn row when it violates: ``K(X_batch, X)`` is one dense
matrix product, with no gather of the growing support set.  On the GPU a step is two
launches for every class (``kernels/kernel_pegasos.cu``): the draw, margin test and count
updates, then the responses' update from the violators' kernel rows (read from the
resident kernel matrix, or computed for every drawn row), with no host synchronisation
and, issued in blocks of steps, no Python per step.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import nvtx

from .._instrumentation import progress_bar
from .._random import random_index_block
from ..kernel_functions import kernel_rows, squared_row_norms

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
    kernel: str
    gamma: float
    degree: int
    coef0: float
    fit_intercept: bool
    seed: int

    def kernel_rows(self, rows, sq_norms):
        """``K(X[rows], X)`` (+1 with an intercept), float64."""
        return self.with_intercept(self.kernel_values(rows, sq_norms))

    def kernel_values(self, rows, sq_norms):
        """``K(X[rows], X)`` in X's dtype."""
        return kernel_rows(self.X, rows, sq_norms, kernel=self.kernel, gamma=self.gamma, degree=self.degree,
                           coef0=self.coef0)

    def with_intercept(self, values):
        """Kernel values as the step adds them: float64, +1 with an intercept."""
        block = values.astype("float64")
        if self.fit_intercept:
            block += 1.0
        return block


def run_kernel_pegasos(problem, *, n_epochs, xp, verbose=0, kernel_cache="auto"):
    """Train from scratch for ``n_epochs`` epochs of ``ceil(n / k)`` steps each.

    On CuPy, ``kernel_cache`` (as KernelPegasosSVC's) decides whether the whole kernel
    matrix is kept on the device, so that a step reads its rows instead of computing them.

    Returns
    -------
    counts : array of shape (n_classes, n_samples), float64
        The weighted violation counts ``alpha``.
    stamps : array of shape (n_classes, n_samples), float64
        Each increment of ``counts`` times the step it happened at.
    n_steps : int
        The number of steps ``T``; the last iterate is ``counts * y / (lam T k)``.
    kernel_values_source : {'matrix', 'products'}
        Where the steps read their kernel values: the whole kernel matrix resident on the
        device, or rows computed from X at each step (always, on the host).
    """
    sq_norms = squared_row_norms(problem.X)
    n_steps = n_epochs * max(1, math.ceil(problem.X.shape[0] / problem.batch_size))
    if xp.__name__ == "numpy":
        steps = HostSteps(problem, sq_norms, n_steps)
    else:
        from ._kernel_pegasos_cuda import DeviceSteps

        steps = DeviceSteps(problem, sq_norms, kernel_cache)
    bar = progress_bar(n_steps, "Kernel Pegasos", verbose)
    for first in range(1, n_steps + 1, SCHEDULE_STEPS):
        schedule = step_schedule(first, min(n_steps, first + SCHEDULE_STEPS - 1), problem.lam, problem.batch_size)
        steps.run(schedule)
        bar.update(len(schedule))
    bar.close()
    return steps.counts, steps.stamps, n_steps, steps.kernel_values_source


def step_schedule(first, last, lam, batch_size):
    """Rows ``(t, scale)`` for steps ``first..last``: the margin test of step ``t`` scales
    the unscaled responses by ``1 / (lam (t - 1) k)`` (0 at ``t = 1``, when they are 0)."""
    t = np.arange(first, last + 1, dtype=np.float64)
    scale = np.zeros_like(t)
    later = t > 1
    scale[later] = 1.0 / (lam * (t[later] - 1) * batch_size)
    return np.column_stack([t, scale])


class HostSteps:
    """Steps on the host: draws taken ``DRAW_BLOCK_STEPS`` steps at once, and only the
    violators' kernel rows computed.

    Owns the state the steps update: ``responses``, ``counts`` and ``stamps``, each of
    shape (n_classes, n_samples).
    """

    kernel_values_source = "products"  # the violators' kernel rows, computed at each step

    def __init__(self, problem, sq_norms, n_steps):
        self.problem, self.sq_norms, self.n_steps = problem, sq_norms, n_steps
        shape = (problem.targets.shape[1], problem.X.shape[0])
        self.responses, self.counts, self.stamps = np.zeros(shape), np.zeros(shape), np.zeros(shape)

    def run(self, schedule):
        """One step per row ``(t, scale)`` of ``schedule``, in order."""
        for t, scale in schedule:
            self.step(int(t), scale)

    def step(self, t, scale):
        """Step ``t``: the margin test at ``scale``; updates the state in place."""
        problem, responses = self.problem, self.responses
        with nvtx.annotate("kernel_pegasos.margins", color="blue"):
            if (t - 1) % DRAW_BLOCK_STEPS == 0:
                self.drawn = random_index_block(problem.seed, t, min(DRAW_BLOCK_STEPS, self.n_steps - t + 1),
                                                problem.batch_size, responses.shape[1])
            rows = self.drawn[(t - 1) % DRAW_BLOCK_STEPS]
            y = problem.targets[rows]
            violating = y * (scale * responses[:, rows].T) < 1.0
            coef = np.where(violating, problem.sample_weight[rows][:, None], 0.0)
        with nvtx.annotate("kernel_pegasos.update", color="green"):
            active = violating.any(axis=1)  # only the violators' kernel rows
            if not active.any():
                return
            rows, coef, y = rows[active], coef[active], y[active]
            np.add.at(self.counts.T, rows, coef)  # repeated rows add up
            np.add.at(self.stamps.T, rows, float(t) * coef)
            with nvtx.annotate("kernel_pegasos.kernel_rows", color="orange"):
                block = problem.kernel_rows(rows, self.sq_norms)
            responses += (coef * y).T @ block


def dual_coefficients(counts, stamps, targets, lam, batch_size, n_steps, average):
    """The coefficients of ``y_j Phi(x_j)``: last iterate, or the step-weighted average."""
    if average:
        summed = (n_steps + 1) * counts - stamps
        return summed * targets.T / (lam * batch_size * n_steps * (n_steps + 1) / 2)
    return counts * targets.T / (lam * n_steps * batch_size)

