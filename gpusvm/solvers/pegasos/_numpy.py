"""Pegasos' steps on NumPy and SciPy: the reference that the CUDA steps (``_cuda.py``)
match up to rounding."""

from __future__ import annotations

import numpy as np
import nvtx
import scipy.sparse as sp

from ..._random import random_index_block
from ._problem import FOLD_RATIO, RENORMALIZE_BELOW


def csr_batch(X, rows, constant_column=None):
    """The nonzeros of ``X[rows]`` for a CSR ``X``: (row position in batch, column, value).

    With ``constant_column``, each row also gets the entry ``(constant_column, 1.0)``
    (the bias feature).  Plain NumPy: SciPy's fancy row indexing builds several matrix
    objects per call, which costs more than the arithmetic of a small batch.
    """
    starts = X.indptr[rows].astype(np.int64)
    lengths = X.indptr[rows + 1] - starts
    widths = lengths + (0 if constant_column is None else 1)
    row_of = np.repeat(np.arange(rows.size), widths)
    within = np.arange(row_of.size) - np.repeat(np.cumsum(widths) - widths, widths)
    source = np.repeat(starts, widths) + within
    if constant_column is None:
        return row_of, X.indices[source], X.data[source]
    is_constant = within == np.repeat(lengths, widths)
    source = np.where(is_constant, 0, source)  # the constant's slot reads nothing real
    columns = np.where(is_constant, constant_column, X.indices[source] if X.nnz else 0)
    values = np.where(is_constant, X.dtype.type(1), X.data[source] if X.nnz else 0).astype(X.dtype)
    return row_of, columns, values


class BatchBlocks:
    """The batches of consecutive steps, drawn and gathered a block of steps at a time.

    Same rows as drawing step by step (see ``random_index_block``); gathering many
    batches at once saves the per-call overhead that dominates small CPU steps.  A block
    stops at the last step planned (:meth:`plan`), so that a call of a few steps (a
    small chunk of a streamed fit) gathers the batches of those steps only, not
    ``MAX_BLOCK_STEPS``.  Sparse batches carry the bias as an explicit entry in column
    ``n_features``.
    """

    MAX_BLOCK_STEPS = 64
    MAX_BLOCK_ELEMENTS = 2**22  # dense blocks: at most 32 MiB in float64

    def __init__(self, problem):
        self.problem = problem
        self.sparse = sp.issparse(problem.X)
        k, d = problem.batch_size, problem.n_features
        by_size = self.MAX_BLOCK_ELEMENTS // (k * (1 if self.sparse else d))
        self.block_steps = int(min(self.MAX_BLOCK_STEPS, max(1, by_size)))
        self.first_step, self.gathered, self.rows = None, 0, None
        self.last_planned = None  # the last step of the current run_steps call, or None

    def plan(self, last_step):
        """The steps up to ``last_step`` are the ones to come (None: unknown)."""
        self.last_planned = last_step

    def batch(self, step):
        """``(rows, batch)`` of ``step``: CSR entries ``(row_of, columns, values)`` or dense rows."""
        if self.first_step is None or not 0 <= step - self.first_step < self.gathered:
            self._gather(step)
        s = step - self.first_step
        if not self.sparse:
            return self.rows[s], self.dense[s]
        a, b = self.bounds[s], self.bounds[s + 1]
        return self.rows[s], (self.row_of[a:b] - s * self.problem.batch_size, self.columns[a:b], self.values[a:b])

    def _block_length(self, step):
        """The steps to gather from ``step`` on: a block, cut at the last step planned."""
        if self.last_planned is None or self.last_planned < step:
            return self.block_steps
        return min(self.block_steps, self.last_planned - step + 1)

    def _draw(self, step, n_steps):
        """The rows of steps ``step .. step + n_steps - 1``, shape (n_steps, batch_size)."""
        return random_index_block(self.problem.seed, step, n_steps, self.problem.batch_size, self.problem.n_samples)

    def _gather(self, step):
        problem = self.problem
        k = problem.batch_size
        n_steps = self._block_length(step)
        self.first_step, self.gathered = step, n_steps
        self.rows = self._draw(step, n_steps)
        flat = self.rows.ravel()
        if self.sparse:
            bias = problem.n_features if problem.fit_intercept else None
            self.row_of, self.columns, self.values = csr_batch(problem.X, flat, bias)
            self.bounds = np.searchsorted(self.row_of, np.arange(0, flat.size + 1, k))
        else:
            self.dense = problem.X[flat].reshape(n_steps, k, problem.n_features)


class GivenBatches(BatchBlocks):
    """The batches of steps ``given_from, given_from + 1, ...`` when ``problem.X`` holds
    their rows already, in draw order (``batch_size`` rows a step): ``gpusvm.dask`` draws
    the rows from the shared stream where the data live and gathers them here."""

    def __init__(self, problem, given_from):
        super().__init__(problem)
        self.given_from = given_from
        self.block_steps = problem.n_samples // problem.batch_size

    def _block_length(self, step):
        return self.block_steps  # every given row at once: they are in memory already

    def _draw(self, step, n_steps):
        if step != self.given_from:
            raise ValueError(f"The gathered rows start at step {self.given_from}; step {step} was asked for.")
        k = self.problem.batch_size
        return np.arange(n_steps * k, dtype=np.int64).reshape(n_steps, k)


class NumpyPegasosSteps:
    """Pegasos steps on the CPU with NumPy (the reference for the CUDA path).

    With ``given_from``, ``problem.X`` holds the rows of the steps from ``given_from`` on
    in draw order (:class:`GivenBatches`) instead of the whole training set.
    """

    def __init__(self, problem, state, given_from=None):
        self.problem = problem
        self.state = state
        self.sparse = sp.issparse(problem.X)
        self.batches = BatchBlocks(problem) if given_from is None else GivenBatches(problem, given_from)
        self.renormalize_below = RENORMALIZE_BELOW[np.dtype(state.v.dtype)]

    def step(self):
        """Advance the model by one mini-batch step."""
        problem, state = self.problem, self.state
        t = state.step + 1
        k = problem.batch_size
        with nvtx.annotate("pegasos.margins", color="blue"):
            rows, batch = self.batches.batch(t)
            dots = self._dots(batch, k)
            y = problem.targets[rows].astype(np.float64)
            weight = problem.sample_weight[rows].astype(np.float64)[:, None]
            violating = y * (state.scale_a * dots) < 1.0
            coef = np.where(violating, problem.step_size_over_batch(t) * weight * y, 0.0)
        with nvtx.annotate("pegasos.update", color="green"):
            state.scale_a *= problem.shrink(t)
            if violating.any():
                self._add(batch, coef / state.scale_a, t)
            if problem.projection:
                norm_w = state.scale_a * np.sqrt(np.maximum(state.sq_norm_v, 0.0))
                radius = problem.radius
                over = norm_w > radius
                state.scale_a[over] *= radius / norm_w[over]
            average_weight = problem.average_weight(t)
            if average_weight:
                state.avg_b += average_weight * state.scale_a
                state.avg_weight_sum += average_weight
            self._maintain()
        state.step = t

    def run_steps(self, n_steps):
        """Advance the model by ``n_steps`` mini-batch steps (gathering the batches of
        these steps only)."""
        self.batches.plan(self.state.step + n_steps)
        try:
            for _ in range(n_steps):
                self.step()
        finally:
            self.batches.plan(None)

    def _dots(self, batch, k):
        """``<v_c, x_i>`` (plus the bias weight) for the batch rows, float64, shape (k, n_classes)."""
        v = self.state.v
        if self.sparse:  # the bias is an entry of the batch
            row_of, columns, values = batch
            products = values * v[:, columns]
            # float64 even when the batch has no entries (bincount of nothing is int64)
            return np.stack([np.bincount(row_of, products[c], minlength=k) for c in range(v.shape[0])], axis=1).astype(
                np.float64
            )
        d = self.problem.n_features
        dots = np.asarray(batch @ v[:, :d].T, dtype=np.float64)
        if self.problem.fit_intercept:
            dots += v[:, d]
        return dots

    def _add(self, batch, factor, t):
        """``v += factor.T @ X_batch`` on the touched columns; keeps ``||v||^2`` and the average."""
        problem, state = self.problem, self.state
        d = problem.n_features
        if self.sparse:
            row_of, columns, values = batch
            width = state.v.shape[1]
            if width <= 4 * columns.size:  # few features: all columns costs less than a sort
                touched, compact = slice(0, width), columns
            else:
                touched, compact = np.unique(columns, return_inverse=True)
                width = touched.size
            delta = np.stack(
                [np.bincount(compact, factor[row_of, c] * values, minlength=width) for c in range(factor.shape[1])]
            )
            self._apply(touched, delta.astype(state.v.dtype), t)
            return
        self._apply(slice(0, d), (factor.T @ batch).astype(state.v.dtype), t)
        if problem.fit_intercept:
            self._apply(slice(d, d + 1), factor.sum(axis=0)[:, None].astype(state.v.dtype), t)

    def _apply(self, columns, delta, t):
        state = self.state
        old = state.v[:, columns]
        new = old + delta
        state.sq_norm_v += (new.astype(np.float64) ** 2 - old.astype(np.float64) ** 2).sum(axis=1)
        state.v[:, columns] = new
        if self.problem.averaging_at(t):
            state.avg_p[:, columns] -= state.avg_b[:, None] * delta

    def _maintain(self):
        """Fold ``P += B v`` and renormalize ``v *= a`` for the classes that need it."""
        state = self.state
        due = (state.scale_a < self.renormalize_below) | (
            state.avg_b > FOLD_RATIO * state.scale_a * state.avg_weight_sum
        )
        if not due.any():
            return
        a = state.scale_a[due]
        state.avg_p[due] += state.avg_b[due][:, None] * state.v[due]
        state.avg_b[due] = 0.0
        state.v[due] = (state.v[due] * a[:, None]).astype(state.v.dtype)
        state.sq_norm_v[due] *= a * a
        state.scale_a[due] = 1.0
