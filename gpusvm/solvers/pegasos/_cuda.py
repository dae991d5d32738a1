"""Pegasos steps on the GPU: the launches of ``kernels/pegasos.cu``.

One step is three launches: margins, accumulate, and finish (whose one block per class
also folds and renormalizes that class's weights, the rare times it is due).  Nothing is
copied to the host during an epoch: the batch is drawn on the device from the shared
random stream, and the scalars ``a``, ``||v||^2`` and the average's ``B`` live on the
device.  The per-step values are a schedule computed on the host before the steps run
(:func:`gpusvm.solvers.pegasos.pegasos_schedule`), so the launches of a block of steps
are the same at every block and can be replayed as a CUDA graph
(:mod:`gpusvm._device.step_blocks`).

With fused steps (by default at batches up to 64; ``GPUSVM_FUSED_STEPS=1`` up to the
kernel's limits, ``=0`` never), a block of steps is instead one launch of
``pegasos_fused_steps``: one thread block that takes the steps one after another, so a
step costs its memory latencies, not three launches.
"""

from __future__ import annotations

import cupy
import numpy as np
import nvtx

from ..._device.cuda_modules import get_cuda_kernel, row_view_arguments
from ..._device.step_blocks import StepBlocks
from ..._random import check_draw_range
from ._problem import FOLD_RATIO, FUSED_MAX_BATCH, RENORMALIZE_BELOW, fits_fused_steps, pegasos_schedule

_THREADS = 128
_FINISH_THREADS = 256
_FUSED_THREADS = FUSED_MAX_BATCH  # pegasos_fused_steps gives every batch row a group of lanes (at least one)


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
        self.margins = get_cuda_kernel("pegasos.cu", "pegasos_margins", dtype)
        self.accumulate = get_cuda_kernel("pegasos.cu", "pegasos_accumulate", dtype)
        self.finish = get_cuda_kernel("pegasos.cu", "pegasos_finish", dtype)
        self.fused_steps = get_cuda_kernel("pegasos.cu", "pegasos_fused_steps", dtype)
        self.renormalize_below = RENORMALIZE_BELOW[np.dtype(dtype)]
        fused = self._launch_fused if fits_fused_steps(problem.batch_size, n_classes) else None
        self.blocks = StepBlocks(self._launch_steps, launch_fused=fused, batch_size=problem.batch_size)

    def step(self):
        """Advance the model by one mini-batch step (asynchronous)."""
        self.run_steps(1)

    def run_steps(self, n_steps):
        """Advance the model by ``n_steps`` mini-batch steps (asynchronous)."""
        if n_steps == 0:
            return
        state = self.state
        first = state.step + 1
        rows = pegasos_schedule(self.problem, first, n_steps, state.avg_weight_sum, self.given_from)
        with nvtx.annotate("pegasos.steps", color="green"):
            self.blocks.run(rows)
        state.avg_weight_sum = float(rows[-1, 4])
        state.step = first + n_steps - 1

    def _launch_fused(self, length, launch):
        """One launch of ``pegasos_fused_steps`` for ``length`` steps (see :class:`StepBlocks`)."""
        problem, state = self.problem, self.state
        n_classes, v_stride = state.v.shape
        radius = problem.radius if problem.projection else 0.0
        launch(
            self.fused_steps,
            (1,),
            (_FUSED_THREADS,),
            (
                *self.rows,
                np.int64(problem.n_samples),
                np.int32(problem.n_features),
                self.targets,
                self.sample_weight,
                np.int32(n_classes),
                np.int32(v_stride),
                np.int32(problem.fit_intercept),
                np.uint64(problem.seed),
                *self.blocks.at(0),
                np.int32(length),
                np.int32(problem.batch_size),
                np.float64(radius),
                np.float64(FOLD_RATIO),
                np.float64(self.renormalize_below),
                state.scale_a,
                state.sq_norm_v,
                state.avg_b,
                state.v,
                state.avg_p,
            ),
        )

    def _launch_steps(self, length, launch):
        """The launches of ``length`` steps (see :class:`StepBlocks`), three a step."""
        problem, state = self.problem, self.state
        k = problem.batch_size
        n_classes, v_stride = state.v.shape
        data, indices, indptr, is_csr = self.rows
        common = (np.int32(n_classes), np.int32(v_stride), np.int32(problem.fit_intercept))
        radius = problem.radius if problem.projection else 0.0
        for offset in range(length):
            at = self.blocks.at(offset)
            launch(
                self.margins,
                (k,),
                (_THREADS,),
                (
                    data,
                    indices,
                    indptr,
                    is_csr,
                    np.int64(problem.n_samples),
                    np.int32(problem.n_features),
                    state.v,
                    state.scale_a,
                    self.targets,
                    self.sample_weight,
                    *common,
                    np.uint64(problem.seed),
                    *at,
                    self.batch_index,
                    self.coef,
                ),
            )
            launch(
                self.accumulate,
                (k, n_classes),
                (_THREADS,),
                (
                    data,
                    indices,
                    indptr,
                    is_csr,
                    np.int32(problem.n_features),
                    self.batch_index,
                    self.coef,
                    *common,
                    state.scale_a,
                    *at,
                    state.v,
                    state.sq_norm_v,
                    state.avg_p,
                    state.avg_b,
                ),
            )
            launch(
                self.finish,
                (n_classes,),
                (_FINISH_THREADS,),
                (
                    np.int32(v_stride),
                    *at,
                    np.float64(radius),
                    np.float64(FOLD_RATIO),
                    np.float64(self.renormalize_below),
                    state.scale_a,
                    state.sq_norm_v,
                    state.avg_b,
                    state.v,
                    state.avg_p,
                ),
            )
