"""SBP steps on the GPU: the launches of ``kernels/sbp.cu`` and ``kernels/water_level.cu``.

The same algorithm as ``NumpySBPSteps`` (see ``sbp.py``), with the state kept plainly
(no shared scale: the projection is part of the fused update, which touches every
response anyway) and every array on the device.  Per step and problem: the water level
(radix select, or a device sort with the bias), the draw from the running count of the
rows at or below it, then one product ``X[drawn] X^T`` for all problems and two kernels
that turn it into the step.  No value comes back to the host; the drawn rows of all
problems share the one product, though a row drawn by two problems is computed twice
(deduplicating would need the host).  Kernel rows are not cached on the device: a row
costs one pass over X at memory bandwidth.
"""

from __future__ import annotations

import cupy
import numpy as np
import nvtx

from .._kernels import get_kernel
from .._water_level_cuda import DeviceWaterLevel, find_gamma_and_bias_cuda
from ..kernel_functions import KERNEL_CODES, inner_products, squared_row_norms
from .sbp import LocalModel

_THREADS = 256


class CupySBPSteps(LocalModel):
    """SBP steps on a CUDA device; same results as ``NumpySBPSteps`` up to rounding."""

    def __init__(self, problem):
        self.problem = problem
        k, n, n_holdout = problem.n_problems, problem.n_train, problem.n_holdout
        self.X = problem.X
        self.sq_norms = cupy.ascontiguousarray(squared_row_norms(self.X))
        self.eta0 = problem.first_step_size(self.sq_norms)
        self.labels = cupy.ascontiguousarray(problem.targets.T, dtype=np.float64)  # (k, n)
        n_positive = (problem.targets > 0).sum(axis=0).get()
        self.class_sizes = [(int(p), n - int(p)) for p in n_positive]
        self.alpha, self.alpha_sum = cupy.zeros((k, n)), cupy.zeros((k, n))
        self.C, self.c_sum = cupy.zeros((k, n)), cupy.zeros((k, n))
        self.H, self.h_sum = cupy.zeros((k, max(1, n_holdout))), cupy.zeros((k, max(1, n_holdout)))
        self.r2, self.factor = cupy.zeros(k), cupy.ones(k)
        self.drawn = cupy.empty(k * problem.batch_size, dtype=np.int64)
        self.water_level = DeviceWaterLevel(n)
        self.kernel_args = (np.int32(KERNEL_CODES[problem.kernel]), np.float64(problem.gamma),
                            np.float64(problem.coef0), np.int32(problem.degree))
        self.n_steps = 0
        self.kernel_rows_computed = 0

    def levels(self, responses, trackers=None):
        """Water level and bias of each problem's responses, as device arrays of shape (k,)."""
        k = self.problem.n_problems
        level, bias = cupy.empty(k), cupy.zeros(k)
        for p in range(k):
            values = cupy.ascontiguousarray(responses[p])
            if self.problem.fit_intercept:
                level[p], bias[p] = find_gamma_and_bias_cuda(self.labels[p], values, self.problem.volume,
                                                             *self.class_sizes[p])
            else:
                level[p] = self.water_level(values, self.problem.volume)
        return level, bias

    def step(self, step, eta):
        """One SBP step ``t = step`` (from 1) with step size ``eta``."""
        problem, batch = self.problem, self.problem.batch_size
        n, n_total = problem.n_train, problem.X.shape[0]
        with nvtx.annotate("sbp.water_level", color="purple"):
            level, bias = self.levels(self.C)
        draw = get_kernel("sbp.cu", "sbp_draw")
        for p in range(problem.n_problems):
            heights = self.C[p] + bias[p] * self.labels[p] if problem.fit_intercept else self.C[p]
            threshold = cupy.maximum(level[p], heights.min())
            running = cupy.cumsum(heights <= threshold, dtype=np.int64)
            draw((-(-batch // _THREADS),), (_THREADS,), (running, np.int64(n), np.uint64(problem.seed), np.uint64(step),
                                           np.int64(p * batch), np.int32(batch), self.drawn[p * batch:]))
        with nvtx.annotate("sbp.kernel_row", color="orange"):
            dots = cupy.ascontiguousarray(inner_products(self.X[self.drawn], self.X).astype(self.X.dtype, copy=False))
            self.kernel_rows_computed += self.drawn.size
        with nvtx.annotate("sbp.update", color="green"):
            norm_step = get_kernel("sbp.cu", "sbp_norm_step", dots.dtype)
            update = get_kernel("sbp.cu", "sbp_update", dots.dtype)
            blocks = max(1, min(65535, -(-n_total // _THREADS)))
            for p in range(problem.n_problems):
                first = np.int32(p * batch)
                norm_step((1,), (_THREADS,), (
                    dots, self.drawn, self.sq_norms, self.labels[p], self.C[p], self.alpha[p], self.r2[p:],
                    self.factor[p:], first, np.int32(batch), np.int64(n_total), np.float64(eta), *self.kernel_args))
                update((blocks,), (_THREADS,), (
                    dots, self.drawn, self.sq_norms, self.labels[p], self.factor[p:], self.C[p], self.c_sum[p],
                    self.alpha[p], self.alpha_sum[p], self.H[p], self.h_sum[p], first, np.int32(batch),
                    np.int64(n), np.int64(n_total), np.float64(eta), *self.kernel_args))
        self.n_steps = step

    def synchronize(self):
        """Wait for the steps queued on the device (before reading a host clock)."""
        cupy.cuda.Device().synchronize()

    def model(self, average):
        """``alpha``, responses and holdout responses (device arrays), averaged or last."""
        n_holdout = self.problem.n_holdout
        if not average:
            return self.alpha, self.C, self.H[:, :n_holdout]
        steps = max(1, self.n_steps)
        return self.alpha_sum / steps, self.c_sum / steps, self.h_sum[:, :n_holdout] / steps
