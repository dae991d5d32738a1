"""Pegasos steps on the GPU: the launches of ``kernels/pegasos.cu``.

One step is three launches (margins, accumulate, finish) and, every
``RENORMALIZE_EVERY`` steps, a fourth (renormalize).  Nothing is copied to the host
during an epoch: the batch is drawn on the device from the shared random stream and the
scalars ``a``, ``||v||^2`` and the average's ``B`` live on the device.
"""

from __future__ import annotations

import math

import cupy
import cupyx.scipy.sparse as cusparse
import numpy as np
import nvtx

from .._kernels import get_kernel
from .pegasos import RENORMALIZE_BELOW, RENORMALIZE_EVERY

_THREADS = 128


class CupyPegasosSteps:
    """Pegasos steps on a CUDA device; same results as ``NumpyPegasosSteps`` up to rounding."""

    def __init__(self, problem, state):
        self.problem = problem
        self.state = state
        X = problem.X
        dtype = X.dtype
        if cusparse.issparse(X):
            self.rows = (X.data, X.indices.astype(np.int32, copy=False), X.indptr.astype(np.int32, copy=False), np.int32(1))
        else:
            placeholder = cupy.zeros(1, dtype=np.int32)  # not read for dense rows
            self.rows = (cupy.ascontiguousarray(X), placeholder, placeholder, np.int32(0))
        n_classes = state.v.shape[0]
        self.targets = cupy.ascontiguousarray(problem.targets, dtype=dtype)
        self.sample_weight = cupy.ascontiguousarray(problem.sample_weight, dtype=dtype)
        self.batch_index = cupy.empty(problem.batch_size, dtype=np.int64)
        self.coef = cupy.empty((problem.batch_size, n_classes), dtype=np.float64)
        self.hinge_sum = cupy.zeros(n_classes, dtype=np.float64)
        self.renorm_factor = cupy.ones(n_classes, dtype=np.float64)
        self.margins = get_kernel("pegasos.cu", "pegasos_margins", dtype)
        self.accumulate = get_kernel("pegasos.cu", "pegasos_accumulate", dtype)
        self.finish = get_kernel("pegasos.cu", "pegasos_finish")
        self.renormalize = get_kernel("pegasos.cu", "pegasos_renormalize", dtype)
        self.renormalize_below = RENORMALIZE_BELOW[np.dtype(dtype)]

    def step(self):
        """Advance the model by one mini-batch step (asynchronous)."""
        problem, state = self.problem, self.state
        t = state.step + 1
        k = problem.batch_size
        n_classes, v_stride = state.v.shape
        data, indices, indptr, is_csr = self.rows
        common = (np.int32(n_classes), np.int32(v_stride), np.int32(problem.fit_intercept))
        averaging = problem.averaging_at(t)
        step_scale = 1.0 - 1.0 / t if t > 1 else 1.0
        with nvtx.annotate("pegasos.margins", color="blue"):
            self.margins(
                (k,), (_THREADS,),
                (data, indices, indptr, is_csr, np.int64(problem.n_samples), np.int32(problem.n_features),
                 state.v, state.scale_a, self.targets, self.sample_weight, *common,
                 np.uint64(problem.seed), np.uint64(t), np.float64(1.0 / (problem.lam * t * k)),
                 self.batch_index, self.coef, self.hinge_sum),
            )
        with nvtx.annotate("pegasos.update", color="green"):
            self.accumulate(
                (k, n_classes), (_THREADS,),
                (data, indices, indptr, is_csr, np.int32(problem.n_features), self.batch_index, self.coef,
                 *common, state.scale_a, np.float64(step_scale), state.v, state.sq_norm_v,
                 state.avg_p, state.avg_b, np.int32(averaging)),
            )
            renormalize_check = t % RENORMALIZE_EVERY == 0
            radius = 1.0 / math.sqrt(problem.lam) if problem.projection else 0.0
            self.finish(
                ((n_classes + 127) // 128,), (128,),
                (np.int32(n_classes), np.float64(step_scale), np.float64(radius), np.int32(averaging),
                 np.int32(renormalize_check), np.float64(self.renormalize_below), state.scale_a,
                 state.sq_norm_v, state.avg_b, self.renorm_factor),
            )
            if renormalize_check:
                size = n_classes * v_stride
                blocks = max(1, min(4096, (size + 255) // 256))
                self.renormalize((blocks,), (256,), (state.v, self.renorm_factor, np.int32(n_classes), np.int32(v_stride)))
        if averaging:
            state.n_averaged += 1
        state.step = t

    def take_hinge_sum(self):
        """Sum of ``s * hinge`` over the rows sampled since the last call (one device sync)."""
        total = self.hinge_sum.get()
        self.hinge_sum.fill(0)
        return total
