"""SBP steps on the GPU: the launches of ``kernels/sbp_level.cu`` and ``kernels/sbp.cu``.

The same algorithm as ``NumpySBPSteps`` (see ``_numpy.py``), with the state kept plainly
(no shared scale: the projection is part of the fused update, which touches every
response anyway) and every array on the device.  Every launch covers all problems
(one-vs-rest classes here, one-vs-one pairs in ``pairs/_cuda.py``) at once, so a
step is a fixed number of launches whatever their number: the level search (four,
``water_level/_sbp_level_cuda.py``), the draw of the covered rows (one launch, a block a
problem, up to ``ONE_BLOCK_DRAW_ROWS`` rows; else a count per tile, then the draw), then
the norm step and the fused update.  Each problem's rows, volume, stream and step scale
are its row of a problem table on the device (``SBPShape``), which
:class:`DeviceSBPLaunches` passes to every launch.

Kernel values come from, in order of preference:

* the whole kernel matrix (training rows by training and holdout columns, in X's
  dtype) when it fits in ``kernel_cache``: computed once at the start, in blocks of rows
  by matrix products; a step then reads its ``B`` rows per problem and nothing else, and
  no value comes back to the host;
* else a row cache in ``kernel_cache`` when it holds twice a step's rows
  (:class:`~gpusvm.solvers._kernel_values_cuda.DeviceRowCache`, the host cache's semantics): the
  host reads each step's drawn rows (a synchronisation), computes the missing ones with
  the lowest covered rows of every problem (the next draws) by one product (several,
  of a bounded size, when more rows miss than one holds), and the step reads its rows
  from the cache;
* else a step computes the drawn rows' inner products with every row (one product for
  all problems, or several of a bounded size when their rows are many; sparse rows made
  dense on the device, so no synchronisation) and the kernel values from them.

The step number and size are a schedule on the device (``_device/step_blocks.py``), so a block
of steps is the same launches every time: with the resident matrix it can be replayed
as a CUDA graph (the default; ``GPUSVM_CUDA_GRAPHS=0``: direct); with the cache's bookkeeping or products
each step, which run cuBLAS or cuSPARSE and allocate, the launches stay direct.
"""

from __future__ import annotations

import cupy
import numpy as np
import nvtx

from ..._device import step_blocks
from ..._device.cuda_modules import get_cuda_kernel
from ...kernel_functions import squared_row_norms
from ...water_level._sbp_level_cuda import ACTIVE_WORD, DeviceLevels, problem_table
from .._kernel_values_cuda import StepKernelValues, kernel_cache_bytes
from ._problem import PREFETCH_MAX_COVERED, LocalModel

_THREADS = 256
_TILE_ROWS = 2048  # SBP_TILE_ROWS in sbp.cu
_DRAWS_PER_BLOCK = 8  # SBP_DRAWS_PER_BLOCK in sbp.cu
_UPDATE_BLOCK = (32, 8)  # SBP_UPDATE_COLUMNS, SBP_UPDATE_ROW_GROUPS in sbp.cu
_ONE_BLOCK_THREADS = 1024  # SBP_ONE_BLOCK_THREADS in sbp.cu
# Training rows (the widest problem's) up to which a step counts and draws in one launch,
# a block a problem (SBP_ONE_BLOCK_ROWS in sbp.cu); 0: always by tiles (a test's switch).
ONE_BLOCK_DRAW_ROWS = 32 * _ONE_BLOCK_THREADS


class DeviceSBPLaunches:
    """The state and step launches of SBP problems on a CUDA device, shared by
    :class:`CupySBPSteps` (one-vs-rest problems over every row) and
    :class:`CupyPairSteps` (one-vs-one pairs over their classes' rows).

    Problem ``p``'s training columns are the first ``n_train`` of row p of the
    ``(k, train_width)`` arrays, its holdout columns the first ``n_holdout`` of row p of
    the ``(k, holdout_width)`` ones (``problems``, a
    :func:`~gpusvm.water_level._sbp_level_cuda.problem_table`); ``column_rows`` gives the row of X
    at each position (training column j at j, holdout column v at ``train_width + v``),
    None: the position itself.
    """

    def _set_up(
        self,
        labels,
        class_sizes,
        problems,
        column_rows,
        holdout_width,
        kernel_values,
        *,
        batch_size,
        fit_intercept,
        mode,
        capturable,
    ):
        k, width = labels.shape
        self.labels, self.problems, self.batch_size = labels, problems, batch_size
        self.two_basins = bool(fit_intercept)
        self.column_rows = cupy.zeros(1, dtype=np.int64) if column_rows is None else column_rows
        self.column_stride = np.int64(0 if column_rows is None else column_rows.shape[1])
        self.alpha, self.alpha_sum = cupy.zeros((k, width)), cupy.zeros((k, width))
        self.C, self.c_sum = cupy.zeros((k, width)), cupy.zeros((k, width))
        self.H, self.h_sum = cupy.zeros((k, max(1, holdout_width))), cupy.zeros((k, max(1, holdout_width)))
        self.r2, self.factor = cupy.zeros(k), cupy.ones(k)
        self.drawn = cupy.zeros(k * batch_size, dtype=np.int64)
        self.step_levels = DeviceLevels(labels, class_sizes, fit_intercept, problems=problems)
        self.checkpoint_levels = DeviceLevels(labels, class_sizes, fit_intercept, problems=problems)
        self.n_tiles = max(1, -(-width // _TILE_ROWS))
        self.tile_counts = cupy.zeros((k, self.n_tiles), dtype=np.int64)
        self.kernel_values = kernel_values
        self.blocks = step_blocks.StepBlocks(self._launch_steps, mode=mode, capturable=capturable)

    def _launch_steps(self, length, launch):
        """The launches of ``length`` steps (StepBlocks' ``launch_steps``)."""
        (k, width), batch = self.labels.shape, self.batch_size
        stride, holdout_width = np.int64(width), np.int64(self.H.shape[1])
        dtype = self.kernel_values[0].dtype
        norm_step = get_cuda_kernel("sbp.cu", "sbp_norm_step", dtype)
        update = get_cuda_kernel("sbp.cu", "sbp_update", dtype)
        update_blocks = max(1, min(65535, -(-(width + self.H.shape[1]) // _UPDATE_BLOCK[0])))
        values = (*self.kernel_values, self.column_rows, self.column_stride)
        for offset in range(length):
            at = self.blocks.at(offset)
            levels = self.step_levels
            levels.launch_search(self.C, launch)
            self._launch_draw(levels, at, launch)
            self._launch_kernel_rows(launch)
            launch(
                norm_step,
                (k,),
                (_THREADS,),
                (
                    *values,
                    self.drawn,
                    self.labels,
                    self.C,
                    self.alpha,
                    self.r2,
                    self.factor,
                    stride,
                    np.int32(batch),
                    self.problems,
                    *at,
                ),
            )
            launch(
                update,
                (update_blocks, k),
                _UPDATE_BLOCK,
                (
                    *values,
                    self.drawn,
                    self.labels,
                    self.factor,
                    self.C,
                    self.c_sum,
                    self.alpha,
                    self.alpha_sum,
                    self.H,
                    self.h_sum,
                    holdout_width,
                    np.int32(batch),
                    stride,
                    self.problems,
                    *at,
                ),
            )

    def _launch_draw(self, levels, at, launch):
        """Each problem's ``B`` draws among its covered rows: one launch, a block a problem,
        when no problem has more than ``ONE_BLOCK_DRAW_ROWS`` training rows; else the
        covered rows counted per tile, then the draws (two launches)."""
        (k, width), batch = self.labels.shape, self.batch_size
        stride, two_basins = np.int64(width), np.int32(self.two_basins)
        if width <= ONE_BLOCK_DRAW_ROWS:
            launch(
                get_cuda_kernel("sbp.cu", "sbp_count_and_draw"),
                (k,),
                (_ONE_BLOCK_THREADS,),
                (
                    self.C,
                    self.labels,
                    stride,
                    two_basins,
                    self.problems,
                    levels.state,
                    *at,
                    np.int32(batch),
                    self.drawn,
                ),
            )
            return
        launch(
            get_cuda_kernel("sbp.cu", "sbp_count_covered"),
            (self.n_tiles, k),
            (_THREADS,),
            (self.C, self.labels, stride, two_basins, self.problems, levels.state, self.tile_counts),
        )
        launch(
            get_cuda_kernel("sbp.cu", "sbp_draw"),
            (-(-batch // _DRAWS_PER_BLOCK), k),
            (32 * _DRAWS_PER_BLOCK,),
            (
                self.C,
                self.labels,
                stride,
                two_basins,
                self.problems,
                levels.state,
                self.tile_counts,
                np.int64(self.n_tiles),
                *at,
                np.int32(batch),
                self.drawn,
            ),
        )

    def _launch_kernel_rows(self, launch):
        """Whatever makes the drawn rows' kernel values readable (nothing: a resident matrix)."""

    def _lowest_covered(self):
        """The training rows (of X) under every problem's level, by rank of height within
        their problem (the host path's prefetch, ``NumpySBPSteps._lowest_first``): the
        rows the next steps will draw.  None of a stopped problem, nor of one whose
        covered rows are over ``PREFETCH_MAX_COVERED`` of its training rows (early on,
        when the water covers much and moves fast, most would not be drawn)."""
        levels, labels, problems = self.step_levels, self.labels, self.problems
        edges = levels.edges
        edge = cupy.where(labels < 0, edges[:, 1:2], edges[:, 0:1]) if self.two_basins else edges[:, 0:1]
        n_train = problems[:, 0:1]  # SBPShape.n_train: the padding after it is never drawn
        active = problems[:, ACTIVE_WORD : ACTIVE_WORD + 1] != 0
        covered = (self.C <= edge) & (cupy.arange(labels.shape[1]) < n_train) & active
        covered &= covered.sum(axis=1, keepdims=True) <= PREFETCH_MAX_COVERED * n_train
        heights = cupy.where(covered, self.C + levels.bias[:, None] * labels, cupy.inf)
        order = cupy.argsort(heights, axis=1)
        ranked_covered = cupy.take_along_axis(covered, order, axis=1)
        if self.column_stride:  # positions to rows of X
            order = cupy.take_along_axis(self.column_rows[:, : labels.shape[1]], order, axis=1)
        return cupy.asnumpy(order.T[ranked_covered.T])  # by rank, then problem

    def synchronize(self):
        """Wait for the steps queued on the device (before reading a host clock)."""
        cupy.cuda.Device().synchronize()

    @property
    def block_steps(self):
        """Steps issued together (the host loop checks its clock between blocks)."""
        return self.blocks.block_steps


class CupySBPSteps(DeviceSBPLaunches, LocalModel):
    """SBP steps on a CUDA device; same results as ``NumpySBPSteps`` up to rounding.

    Parameters
    ----------
    problem : SBPProblem
    kernel_cache : 'auto', float or int
        Device memory for the whole kernel matrix (:func:`kernel_cache_bytes`); when
        it needs more, for a cache of its rows, or kernel values are computed at every step.
    mode : {'direct', 'graph', 'replay'} or None
        How blocks of steps are issued (:class:`~gpusvm._device.step_blocks.StepBlocks`); None:
        the default. 'graph' runs direct without the resident matrix.
    """

    def __init__(self, problem, kernel_cache="auto", mode=None):
        self.problem = problem
        k, n, batch, n_holdout = problem.n_problems, problem.n_train, problem.batch_size, problem.n_holdout
        self.X = problem.X
        self.sq_norms = cupy.ascontiguousarray(squared_row_norms(self.X))
        self.eta0 = problem.first_step_size(self.sq_norms)
        labels = cupy.ascontiguousarray(problem.targets.T, dtype=np.float64)  # (k, n)
        n_positive = (problem.targets > 0).sum(axis=0).get()
        class_sizes = [(int(p), n - int(p)) for p in n_positive]
        values = StepKernelValues(
            self.X,
            n,
            self.sq_norms,
            problem.kernel,
            kernel_cache_bytes(kernel_cache),
            k * batch,
        )
        self.kernel_matrix, self.row_cache, self.products = values.matrix, values.row_cache, values.products
        self.kernel_values_source = values.source  # 'matrix', 'cache' or 'products'
        self._rows_computed = 0 if self.kernel_matrix is None else n  # by the products, or the matrix's
        self._drawn_ever = (
            cupy.zeros(n, dtype=bool) if self.products is not None else None
        )  # rows the products computed
        # every problem has every row; lanes p B + b of the fit's stream
        problems = problem_table(
            np.full(k, n), n_holdout, problem.volume, seed=problem.seed, first_lane=np.arange(k) * batch
        )
        # the cache's host bookkeeping and the products' allocations are not captured
        self._set_up(
            labels,
            class_sizes,
            problems,
            None,
            n_holdout,
            values.arguments,
            batch_size=batch,
            fit_intercept=problem.fit_intercept,
            mode=mode,
            capturable=self.kernel_matrix is not None,
        )
        self.n_steps = 0

    @property
    def kernel_rows_computed(self):
        """Kernel rows computed so far (the whole matrix counts its rows once)."""
        return self.row_cache.rows_computed if self.row_cache is not None else self._rows_computed

    @property
    def kernel_rows_distinct(self):
        """Distinct kernel rows computed so far (the products' are counted on the device:
        reading them waits for the queued steps)."""
        if self.row_cache is not None:
            return self.row_cache.rows_distinct
        return self.problem.n_train if self._drawn_ever is None else int(cupy.count_nonzero(self._drawn_ever))

    @property
    def kernel_row_cache(self):
        return self.row_cache

    def _launch_kernel_rows(self, launch):
        if self.kernel_matrix is None:
            launch(self._kernel_rows_of_drawn, None, None, ())

    def _kernel_rows_of_drawn(self, grid, block, args):
        """The drawn rows kept in the row cache, or their inner products with every row (a
        launch of StepBlocks: its arguments are unused)."""
        with nvtx.annotate("sbp.kernel_row", color="orange"):
            if self.row_cache is not None:
                self.row_cache.look_up(self.drawn, prefetch=self._lowest_covered)
            else:
                self.products.compute(self.drawn)
                self._rows_computed += self.drawn.size
                self._drawn_ever[self.drawn] = True

    def step(self, step, eta):
        """One SBP step ``t = step`` (from 1) with step size ``eta``."""
        self.run_steps(np.array([[step, eta]], dtype=np.float64))

    def run_steps(self, schedule):
        """One step per row ``(t, eta_t)`` of a host array, in order (asynchronous)."""
        with nvtx.annotate("sbp.steps", color="green"):
            self.blocks.run(schedule)
        self.n_steps = int(schedule[-1, 0])

    def levels(self, responses):
        """Water level and bias of each problem's responses (k, n_train), as device arrays
        (warm-started from the previous checkpoint's, like the host path)."""
        return self.checkpoint_levels.search(responses)

    def model(self, average):
        """``alpha``, responses and holdout responses (device arrays), averaged or last."""
        n_holdout = self.problem.n_holdout
        if not average:
            return self.alpha, self.C, self.H[:, :n_holdout]
        steps = max(1, self.n_steps)
        return self.alpha_sum / steps, self.c_sum / steps, self.h_sum[:, :n_holdout] / steps
