"""Kernel Pegasos' step on the GPU: the launcher of ``kernels/kernel_pegasos.cu``."""

from __future__ import annotations

import cupy
import numpy as np

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
