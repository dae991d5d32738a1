"""Online logistic steps on the GPU: the launches of ``kernels/online_logistic.cu``.

A batch is three launches (margins, gradients, update); the state, the epoch's row
order, the running loss and the touched-column list stay on the device.  The values that
change from batch to batch (the example counter ``t``, the penalty ``level``, the batch's
rows) are a schedule the host computes before the batches run (:func:`online_schedule`),
so the launches of a block of batches are the same at every block and can be replayed as
a CUDA graph (:mod:`gpusvm._device.step_blocks`).  Nothing is copied back until the epoch ends.
"""

from __future__ import annotations

import cupy
import cupyx.scipy.sparse as cusparse
import numpy as np
import nvtx

from ..._device.cuda_modules import get_cuda_kernel, row_view_arguments
from ..._device.step_blocks import StepBlocks
from ..._validation import canonical_csr

_KINDS = {"ftrl": 0, "tg": 1, "fobos": 2, "rda": 3}
_ROWS_PER_BLOCK = 4  # one warp per batch row
_UPDATE_THREADS = 256


def rule_parameters(rule):
    """The ``params`` array the kernels read, in the order of ``OnlineRule`` in the .cu file."""
    return cupy.asarray([rule.l1, rule.l2, rule.alpha, rule.beta, rule.theta, rule.gamma], dtype=np.float64)


def online_schedule(problem, state, starts):
    """The values of the batches that start at ``starts`` (consecutive, ``batch_size``
    apart), one row each, in the column order of ``ONLINE_*`` in
    ``kernels/online_logistic.cu``: examples seen before the batch, the penalty level at
    its start and at its end, its first position in the epoch's order, its rows.

    Advances ``state.t`` and ``state.level`` past the batches, with the float64
    arithmetic of ``NumpyOnlineSteps`` (so both backends shrink by the same levels).
    """
    rule, rows = problem.rule, np.empty((len(starts), 5))
    for i, start in enumerate(starts):
        batch = min(problem.batch_size, problem.n_samples - start)
        next_level = state.level + rule.penalty_added(state.t, batch)
        rows[i] = (state.t, state.level, next_level, start, batch)
        state.t += batch
        state.level = next_level
    return rows


class CupyOnlineSteps:
    """Mini-batch steps on a CUDA device; same results as ``NumpyOnlineSteps`` up to rounding."""

    def __init__(self, problem, state):
        self.problem = problem
        self.state = state
        X = problem.X
        dtype = X.dtype
        n_samples, n_features = X.shape
        if cusparse.issparse(X):
            X = canonical_csr(X)
        self.rows = row_view_arguments(X)
        longest_row = problem.longest_row
        if longest_row is None:
            longest_row = int(cupy.diff(self.rows[2]).max()) if cusparse.issparse(X) else n_features
        # At most this many distinct columns (the intercept included) per batch.
        self.touched_bound = min(n_features + 1, problem.batch_size * longest_row + 1)
        n_models = state.first.shape[0]
        self.with_squares = problem.rule.kind == "ftrl"
        self.labels = cupy.ascontiguousarray(problem.labels, dtype=np.int32)
        self.residuals = cupy.empty((problem.batch_size, n_models), dtype=np.float64)
        self.gradient = cupy.zeros_like(state.first)
        self.squared = cupy.zeros_like(state.first) if self.with_squares else cupy.zeros(1, dtype=np.float64)
        self.marks = cupy.zeros(n_features + 1, dtype=np.int32)
        self.touched = cupy.empty(n_features + 1, dtype=np.int32)
        self.touched_count = cupy.zeros(1, dtype=np.int32)
        self.loss_sum = cupy.zeros(1, dtype=np.float64)
        self.params = rule_parameters(problem.rule)
        self.identity = cupy.arange(n_samples, dtype=np.int64)
        self.order = self.identity.copy()  # one buffer for every epoch: the recorded launches point at it
        self.blocks = StepBlocks(self._launch_batches)
        self.margins = get_cuda_kernel("online_logistic.cu", "online_margins", dtype)
        self.gradients = get_cuda_kernel("online_logistic.cu", "online_gradients", dtype)
        self.update = get_cuda_kernel("online_logistic.cu", "online_update")

    def start_epoch(self, order, loss_so_far=0.0):
        """Visit the rows in ``order`` (None: as given) during the coming epoch; the epoch's
        summed loss starts at ``loss_so_far`` (the rows of the epoch already seen elsewhere:
        a float, or another stepper's ``loss_sum``, copied on the device)."""
        self.order[...] = self.identity if order is None else cupy.asarray(order, dtype=np.int64)
        self.loss_sum[...] = loss_so_far

    def step(self, start):
        """Process rows ``start : start + batch_size`` of the epoch's order (asynchronous)."""
        self.run_batches(range(start, start + 1))

    def run_batches(self, starts):
        """Process the batches that start at ``starts`` of the epoch's order (consecutive,
        ``batch_size`` apart), in that order (asynchronous)."""
        rows = online_schedule(self.problem, self.state, starts)
        with nvtx.annotate("online.batches", color="green"):
            self.blocks.run(rows)

    def _launch_batches(self, length, launch):
        """The launches of ``length`` batches (see :class:`StepBlocks`)."""
        problem, state, rule = self.problem, self.state, self.problem.rule
        n_models, stride = state.first.shape
        n_features = np.int32(stride - 1)
        rule_args = (np.int32(_KINDS[rule.kind]), self.params)
        blocks = ((problem.batch_size + _ROWS_PER_BLOCK - 1) // _ROWS_PER_BLOCK,)
        threads = (32 * _ROWS_PER_BLOCK,)
        for offset in range(length):
            at = self.blocks.at(offset)
            launch(
                self.margins,
                blocks,
                threads,
                (
                    *self.rows,
                    n_features,
                    self.order,
                    *at,
                    self.labels,
                    np.int32(n_models),
                    np.int32(problem.positive_offset),
                    np.int32(problem.fit_intercept),
                    state.first,
                    state.second,
                    *rule_args,
                    self.residuals,
                    self.loss_sum,
                    self.touched_count,
                ),
            )
            launch(
                self.gradients,
                blocks,
                threads,
                (
                    *self.rows,
                    n_features,
                    self.order,
                    *at,
                    np.int32(n_models),
                    np.int32(problem.fit_intercept),
                    self.residuals,
                    np.float64(rule.eta0),
                    np.int32(rule.uses_step_sizes),
                    np.int32(self.with_squares),
                    self.gradient,
                    self.squared,
                    self.marks,
                    self.touched,
                    self.touched_count,
                ),
            )
            launch(
                self.update,
                ((self.touched_bound + _UPDATE_THREADS - 1) // _UPDATE_THREADS,),
                (_UPDATE_THREADS,),
                (
                    n_features,
                    np.int32(n_models),
                    state.first,
                    state.second,
                    *rule_args,
                    *at,
                    self.gradient,
                    self.squared,
                    np.int32(self.with_squares),
                    self.marks,
                    self.touched,
                    self.touched_count,
                ),
            )

    def epoch_loss_sum(self):
        """Summed logistic loss of the epoch's predictions (one copy to the host)."""
        return float(self.loss_sum.get()[0])
