"""Kernel Pegasos' step on the GPU: the launcher of ``kernels/kernel_pegasos.cu``."""

from __future__ import annotations

import cupy
import numpy as np
import nvtx

from .._kernel_matrix_cuda import kernel_cache_bytes, resident_kernel_matrix
from .._kernels import get_kernel

_THREADS = 256


class DeviceViolations:
    """A step's draw, margin test and count updates in one launch, every class together.

    Parameters
    ----------
    problem : KernelPegasosProblem
    """

    def __init__(self, problem):
        self.problem = problem
        n_classes = problem.targets.shape[1]
        self.rows = cupy.empty(problem.batch_size, dtype=np.int64)
        self.weights = cupy.empty((n_classes, problem.batch_size))  # y * coef, (classes, batch)
        self.targets = cupy.ascontiguousarray(problem.targets, dtype=np.float64)
        self.sample_weight = cupy.ascontiguousarray(problem.sample_weight, dtype=np.float64)
        self._kernel = get_kernel("kernel_pegasos.cu", "kernel_pegasos_violations")

    def __call__(self, responses, counts, stamps, step, scale):
        """The step's rows and their weights in the combination of kernel rows, shape
        (classes, batch); updates ``counts`` and ``stamps`` in place."""
        problem = self.problem
        n_classes, batch = self.weights.shape
        n = responses.shape[1]
        blocks = max(1, -(-batch * n_classes // _THREADS))
        self._kernel((blocks,), (_THREADS,), (
            responses, self.targets, self.sample_weight, np.uint64(problem.seed), np.uint64(step), np.int64(n),
            np.int32(batch), np.int32(n_classes), np.float64(scale), counts, stamps, self.rows, self.weights))
        return self.rows, self.weights


class DeviceSteps:
    """Steps on the device: :class:`DeviceViolations`, then the drawn rows' kernel values,
    read from the whole kernel matrix when it fits in ``kernel_cache``, else computed
    (every drawn row, weighted by zero when it does not violate: no synchronisation)."""

    def __init__(self, problem, sq_norms, kernel_cache):
        self.problem, self.sq_norms = problem, sq_norms
        self.violations = DeviceViolations(problem)
        n = problem.X.shape[0]
        self.matrix = resident_kernel_matrix(lambda rows: problem.kernel_values(rows, sq_norms), n, n,
                                             problem.X.dtype, kernel_cache_bytes(kernel_cache))

    def __call__(self, t, scale, responses, counts, stamps):
        """Step ``t``: the margin test at ``scale``; updates the arrays in place."""
        rows, weights = self.violations(responses, counts, stamps, t, scale)
        with nvtx.annotate("kernel_pegasos.kernel_rows", color="orange"):
            if self.matrix is None:
                block = self.problem.kernel_rows(rows, self.sq_norms)
            else:
                block = self.problem.with_intercept(self.matrix[rows])
            responses += weights @ block
