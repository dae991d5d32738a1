"""Kernel Pegasos' steps on the host with NumPy: the reference that the CUDA steps
(``_cuda.py``) match up to rounding."""

from __future__ import annotations

import numpy as np
import nvtx

from ..._random import random_index_block
from ..row_cache import KernelRowCache
from ._problem import DRAW_BLOCK_STEPS


class NumpyKernelPegasosSteps:
    """Steps on the host: draws taken ``DRAW_BLOCK_STEPS`` steps at once, and only the
    violators' kernel rows read, from a cache of ``cache_bytes`` (the violators are the
    support vectors, drawn again epoch after epoch, so most rows asked for are kept
    already: the counts are in ``docs/user_guide/choosing_a_solver.md``).

    Owns the state the steps update: ``responses``, ``counts`` and ``stamps``, each of
    shape (n_classes, n_samples).
    """

    kernel_values_source = "products"  # the violators' kernel rows, computed from X

    def __init__(self, problem, sq_norms, n_steps, cache_bytes):
        self.problem, self.sq_norms, self.n_steps = problem, sq_norms, n_steps
        n = problem.X.shape[0]
        shape = (problem.targets.shape[1], n)
        self.responses, self.counts, self.stamps = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.row_cache = KernelRowCache(
            lambda rows: problem.kernel_values(rows, sq_norms), n, n, problem.X.dtype, cache_bytes
        )

    def run(self, schedule):
        """One step per row ``(t, scale)`` of ``schedule``, in order."""
        for t, scale in schedule:
            self.step(int(t), scale)

    def step(self, t, scale):
        """Step ``t``: the margin test at ``scale``; updates the state in place."""
        problem, responses = self.problem, self.responses
        with nvtx.annotate("kernel_pegasos.margins", color="blue"):
            if (t - 1) % DRAW_BLOCK_STEPS == 0:
                self.drawn = random_index_block(
                    problem.seed, t, min(DRAW_BLOCK_STEPS, self.n_steps - t + 1), problem.batch_size, responses.shape[1]
                )
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
                block = problem.with_intercept(self._drawn_kernel_rows(rows))
            # Only the classes that some row violates move: with many classes a row
            # violates a few (KEEL letter's counts: docs/user_guide/choosing_a_solver.md),
            # and the others would add 0.
            moved = violating.any(axis=0)
            if moved.all():
                responses += (coef * y).T @ block
            else:
                responses[moved] += (coef[:, moved] * y[:, moved]).T @ block

    def _drawn_kernel_rows(self, rows):
        """The kernel rows of ``rows`` (a row drawn twice is there twice, and counts
        twice), a new array from the row cache."""
        distinct, position = np.unique(rows, return_inverse=True)
        return self.row_cache.rows(distinct, order=position)
