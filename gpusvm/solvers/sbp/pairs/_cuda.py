"""One-vs-one SBP on the GPU: every pair of classes in each launch of ``kernels/sbp.cu``.

The host's :class:`~gpusvm.solvers.sbp.pairs._numpy.NumpyPairSteps` on a device, through the
launches of :class:`~gpusvm.solvers.sbp._cuda.DeviceSBPLaunches`: pair ``p`` is row p of
the ``(P, W)`` state arrays, its training columns its first class's training rows then
its second's, its holdout columns likewise, then padding up to the widest pair, which no
launch reads. Its kernel values are read through a table of its columns' rows of X from
the kernel matrix of every training row of the fit by every row: resident on the device
when it fits in ``kernel_cache``, else a row cache of it there
(:class:`~gpusvm.solvers._kernel_values_cuda.DeviceRowCache`, whose host bookkeeping reads
every step's drawn rows). A cached row serves every pair that draws it, so a row drawn
by several pairs of its class is computed once. Its step size, stream and volume are its
row of the problem table; a pair that has stopped is marked inactive there, and every
launch skips it. So a step of all the pairs is the same few launches as a step of one
(KEEL letter: 325 pairs), and with the resident matrix blocks of steps between
checkpoints can run as CUDA graphs.

:func:`~gpusvm.solvers.sbp.pairs.run_pair_stack` drives it as it drives the host's: each
pair keeps its own schedule and stopping rules, so the models are the host's up to
rounding; the pairs checkpoint at multiples of a common cadence, so that blocks of steps
are long and a checkpoint is one search of every pair's level and one copy to the host.
"""

from __future__ import annotations

import cupy
import numpy as np
import nvtx

from ....kernel_functions import squared_row_norms
from ....water_level._sbp_level_cuda import ACTIVE_WORD, problem_table
from ..._kernel_values_cuda import StepKernelValues, kernel_cache_bytes, kernel_values_source
from .._cuda import DeviceSBPLaunches


def pair_kernel_values(n_train, n_rows, dtype, kernel_cache, slots):
    """Where the pairs stepping together would read their kernel values: ``'matrix'``
    when the kernel matrix of the fit's ``n_train`` training rows by its ``n_rows`` rows
    (X's ``dtype``) fits in ``kernel_cache`` (as ``SBPClassifier.kernel_cache``), else
    ``'cache'`` when a row cache of that matrix there holds twice the ``slots`` rows
    that every pair draws in a step, else None (the pairs then train one after another)."""
    source = kernel_values_source(n_train, n_rows, dtype, kernel_cache_bytes(kernel_cache), slots)
    return None if source == "products" else source


class CupyPairSteps(DeviceSBPLaunches):
    """SBP steps of every pair of a :class:`~gpusvm.solvers.sbp.pairs.PairStack` on a
    CUDA device; the host's ``NumpyPairSteps`` up to rounding.

    Parameters
    ----------
    stack : PairStack
        Its X on the device, the training rows of every class before any holdout row
        (as ``SBPClassifier`` lays them out).
    kernel_cache : 'auto', float or int
        Device memory for the kernel matrix, or else a cache of its rows
        (:func:`pair_kernel_values` must not be None).
    mode : {'direct', 'graph', 'replay'} or None
        How blocks of steps are issued (:class:`~gpusvm._device.step_blocks.StepBlocks`);
        'graph' runs direct with the row cache.
    """

    def __init__(self, stack, kernel_cache="auto", mode=None):
        self.stack = stack
        n_pairs, batch = stack.n_pairs, stack.batch_size
        train_widths = stack.class_train[stack.pairs]  # (P, 2)
        self.n_train, self.n_holdout = stack.n_train, stack.n_rows - stack.n_train
        n_fit_train = int(stack.class_train.sum())
        if any(rows[: stack.class_train[c]].max(initial=-1) >= n_fit_train for c, rows in enumerate(stack.class_rows)):
            raise ValueError(
                "CupyPairSteps needs every class's training rows among the first "
                f"{n_fit_train} rows of X (the fit's training rows)."
            )
        train_rows, holdout_rows, first_holdout = self._columns()
        self.first_holdout = cupy.asarray(first_holdout)  # holdout columns of the pair's first class
        self.holdout_valid = cupy.asarray(np.arange(holdout_rows.shape[1]) < self.n_holdout[:, None])
        width = train_rows.shape[1]
        labels = np.where(np.arange(width) < train_widths[:, :1], 1.0, -1.0)
        labels[np.arange(width) >= self.n_train[:, None]] = 0.0  # padding (never read)
        sq_norms = squared_row_norms(stack.X)
        self.eta0 = stack.first_step_sizes(cupy.asnumpy(sq_norms))
        n_rows, budget = stack.X.shape[0], kernel_cache_bytes(kernel_cache)
        if pair_kernel_values(n_fit_train, n_rows, stack.X.dtype, kernel_cache, n_pairs * batch) is None:
            raise ValueError(
                f"kernel_cache={kernel_cache!r} holds neither the pairs' kernel matrix "
                f"({n_fit_train} x {n_rows} values) nor a cache of twice the {n_pairs * batch} rows "
                "they draw in a step; check pair_kernel_values first."
            )
        values = StepKernelValues(
            stack.X,
            n_fit_train,
            sq_norms,
            stack.kernel,
            budget,
            n_pairs * batch,
        )
        self.kernel_matrix, self.row_cache = values.matrix, values.row_cache
        self.kernel_values_source = values.source  # 'matrix' or 'cache'
        self._train_rows = train_rows  # the row of X at each training position, for the cache
        # the schedule's step size is 1 / sqrt(t); each pair's is its eta_0 times that
        problems = problem_table(
            self.n_train, self.n_holdout, stack.nu * self.n_train, seed=stack.seeds, first_lane=0, eta_scale=self.eta0
        )
        class_sizes = [tuple(int(size) for size in sizes) for sizes in train_widths]
        # the cache's host bookkeeping at every step is not captured
        self._set_up(
            cupy.asarray(labels),
            class_sizes,
            problems,
            cupy.asarray(np.concatenate([train_rows, holdout_rows], axis=1)),
            holdout_rows.shape[1],
            values.arguments,
            batch_size=batch,
            fit_intercept=stack.fit_intercept,
            mode=mode,
            capturable=self.row_cache is None,
        )
        self.n_steps = np.zeros(n_pairs, dtype=np.int64)
        self._active = np.ones(n_pairs, dtype=bool)
        self._host_alpha = {}  # average -> the coefficients on the host, until the next step

    def _columns(self):
        """Each pair's training rows and holdout rows of X (padded with row 0, never read),
        and which holdout columns are its first class's."""
        stack = self.stack
        train = np.zeros((stack.n_pairs, max(1, int(self.n_train.max()))), dtype=np.int64)
        holdout = np.zeros((stack.n_pairs, max(1, int(self.n_holdout.max()))), dtype=np.int64)
        for p in range(stack.n_pairs):
            train[p, : self.n_train[p]] = stack.training_rows(p)
            holdout[p, : self.n_holdout[p]] = stack.holdout_rows(p)
        first_width = stack.block_widths[:, :1] - stack.class_train[stack.pairs[:, :1]]
        return train, holdout, np.arange(holdout.shape[1]) < first_width

    @property
    def kernel_rows_computed(self):
        """Rows of the kernel matrix computed so far (the whole matrix's once, or the
        cache's)."""
        return self.kernel_matrix.shape[0] if self.row_cache is None else self.row_cache.rows_computed

    @property
    def kernel_rows_distinct(self):
        return self.kernel_matrix.shape[0] if self.row_cache is None else self.row_cache.rows_distinct

    @property
    def kernel_row_cache(self):
        return self.row_cache

    def _launch_kernel_rows(self, launch):
        if self.row_cache is not None:
            launch(self._kernel_rows_of_drawn, None, None, ())

    def _kernel_rows_of_drawn(self, grid, block, args):
        """The active pairs' drawn rows kept in the row cache (a launch of StepBlocks: its
        arguments are unused)."""
        with nvtx.annotate("sbp.kernel_row", color="orange"):
            drawn = cupy.asnumpy(self.drawn).reshape(self._train_rows.shape[0], -1)
            rows = np.take_along_axis(self._train_rows, drawn, axis=1)
            self.row_cache.look_up(
                rows.ravel(), prefetch=self._lowest_covered, where=np.repeat(self._active, drawn.shape[1])
            )

    def run_steps(self, schedule, active):
        """Steps of the ``active`` pairs (int array), one per row ``(t, 1 / sqrt(t))`` of a
        host array, in order (asynchronous)."""
        mask = np.zeros(self.stack.n_pairs, dtype=bool)
        mask[active] = True
        if (mask != self._active).any():
            self.problems[:, ACTIVE_WORD] = cupy.asarray(mask.astype(np.int64))
            self._active = mask
        with nvtx.annotate("sbp.pair_steps", color="green"):
            self.blocks.run(schedule)
        self.n_steps[active] = int(schedule[-1, 0])
        self._host_alpha.clear()

    def _averaged(self, *totals):
        """Running sums of every pair's state over its steps so far."""
        steps = cupy.asarray(np.maximum(1, self.n_steps), dtype=np.float64)[:, None]
        return [total / steps for total in totals]

    def evaluate(self, average, pairs):
        """Level and bias of these pairs' models, and their holdout errors (NaN: no
        holdout), as host arrays: every pair's, in one copy to the host."""
        pairs = np.asarray(pairs)
        responses, holdout = self._averaged(self.c_sum, self.h_sum) if average else (self.C, self.H)
        level, bias = self.checkpoint_levels.search(responses)  # of every active pair
        divisor = cupy.where(level > 0, level, 1.0)
        predicted_first = (holdout + bias[:, None]) / divisor[:, None] > 0
        wrong = ((predicted_first != self.first_holdout) & self.holdout_valid).sum(axis=1)
        level, bias, wrong = cupy.asnumpy(cupy.stack([level, bias, wrong.astype(np.float64)]))[:, pairs]
        with np.errstate(invalid="ignore", divide="ignore"):
            return level, bias, wrong / self.n_holdout[pairs]

    def coefficients(self, average, pair):
        """``alpha`` of pair ``pair``'s training rows, shape (1, n_train)."""
        if average not in self._host_alpha:
            self._host_alpha[average] = cupy.asnumpy(self._averaged(self.alpha_sum)[0] if average else self.alpha)
        return self._host_alpha[average][pair : pair + 1, : self.n_train[pair]]
