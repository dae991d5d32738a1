"""Pegasos steps on the GPU: the launches of ``kernels/pegasos.cu``.

One step is four launches: margins, accumulate, finish, and maintain (which exits at
once unless ``finish`` marked a class for a fold or a renormalization).  Nothing is
copied to the host during an epoch: the batch is drawn on the device from the shared random stream and the
scalars ``a``, ``||v||^2`` and the average's ``B`` live on the device.
"""

from __future__ import annotations

import cupy
import numpy as np
import nvtx

from .._kernels import get_kernel, row_view_arguments
from .._random import check_draw_range
from .pegasos import FOLD_RATIO, RENORMALIZE_BELOW

_THREADS = 128


class CupyPegasosSteps:
    """Pegasos steps on a CUDA device; same results as ``NumpyPegasosSteps`` up to rounding."""

    def __init__(self, problem, state, given_from=None):
        check_draw_range(problem.n_samples)  # pegasos_margins draws its rows in the kernel
        self.given_from = given_from  # see NumpyPegasosSteps
        self.problem = problem
        self.state = state
        X = problem.X
        dtype = X.dtype
        self.rows = row_view_arguments(X)
        n_classes = state.v.shape[0]
        self.targets = cupy.ascontiguousarray(problem.targets, dtype=dtype)
        self.sample_weight = cupy.ascontiguousarray(problem.sample_weight, dtype=dtype)
        self.batch_index = cupy.empty(problem.batch_size, dtype=np.int64)
        self.coef = cupy.empty((problem.batch_size, n_classes), dtype=np.float64)
        self.maintain_a = cupy.zeros(n_classes, dtype=np.float64)
        self.maintain_b = cupy.zeros(n_classes, dtype=np.float64)
        self.margins = get_kernel("pegasos.cu", "pegasos_margins", dtype)
        self.accumulate = get_kernel("pegasos.cu", "pegasos_accumulate", dtype)
        self.finish = get_kernel("pegasos.cu", "pegasos_finish")
        self.maintain = get_kernel("pegasos.cu", "pegasos_maintain", dtype)
        self.renormalize_below = RENORMALIZE_BELOW[np.dtype(dtype)]

    def step(self):
        """Advance the model by one mini-batch step (asynchronous)."""
        problem, state = self.problem, self.state
        t = state.step + 1
        k = problem.batch_size
        n_classes, v_stride = state.v.shape
        data, indices, indptr, is_csr = self.rows
        common = (np.int32(n_classes), np.int32(v_stride), np.int32(problem.fit_intercept))
        average_weight = problem.average_weight(t)
        step_scale = 1.0 - 1.0 / t if t > 1 else 1.0
        given_first_row = -1 if self.given_from is None else (t - self.given_from) * k
        with nvtx.annotate("pegasos.margins", color="blue"):
            self.margins(
                (k,), (_THREADS,),
                (data, indices, indptr, is_csr, np.int64(problem.n_samples), np.int32(problem.n_features),
                 state.v, state.scale_a, self.targets, self.sample_weight, *common,
                 np.uint64(problem.seed), np.uint64(t), np.float64(1.0 / (problem.lam * t * k)),
                 np.int64(given_first_row), self.batch_index, self.coef),
            )
        with nvtx.annotate("pegasos.update", color="green"):
            self.accumulate(
                (k, n_classes), (_THREADS,),
                (data, indices, indptr, is_csr, np.int32(problem.n_features), self.batch_index, self.coef,
                 *common, state.scale_a, np.float64(step_scale), state.v, state.sq_norm_v,
                 state.avg_p, state.avg_b, np.int32(average_weight > 0)),
            )
            radius = problem.radius if problem.projection else 0.0
            weight_sum = state.avg_weight_sum + average_weight
            self.finish(
                ((n_classes + 127) // 128,), (128,),
                (np.int32(n_classes), np.float64(step_scale), np.float64(radius), np.float64(average_weight),
                 np.float64(weight_sum), np.float64(FOLD_RATIO), np.float64(self.renormalize_below),
                 state.scale_a, state.sq_norm_v, state.avg_b, self.maintain_a, self.maintain_b),
            )
            blocks = max(1, min(1024, (v_stride + 255) // 256))
            self.maintain((blocks, n_classes), (256,),
                          (state.v, state.avg_p, self.maintain_a, self.maintain_b, np.int32(v_stride)))
        state.avg_weight_sum += average_weight
        state.step = t
