"""Online logistic steps on the host with NumPy and SciPy: the reference that the CUDA
steps (``_cuda.py``) match up to rounding."""

from __future__ import annotations

import numpy as np
import nvtx
import scipy.sparse as sp
from scipy.special import expit

from ..._validation import canonical_csr
from ._problem import logistic_loss


class NumpyOnlineSteps:
    """Mini-batch steps on the CPU: SciPy sparse products, no loop over examples."""

    def __init__(self, problem, state):
        self.problem = problem
        self.state = state
        self.X = canonical_csr(problem.X) if sp.issparse(problem.X) else sp.csr_matrix(problem.X)
        self.labels = np.asarray(problem.labels)
        self.loss_sum = 0.0
        self._rows, self._labels = self.X, self.labels
        self._slot = np.empty(self.X.shape[1], dtype=np.int64)  # scratch of _distinct_columns

    def start_epoch(self, order, loss_so_far=0.0):
        """Visit the rows in ``order`` (None: as given) during the coming epoch; the epoch's
        summed loss starts at ``loss_so_far`` (``gpusvm.dask`` steps an epoch in blocks of rows)."""
        if order is None:
            self._rows, self._labels = self.X, self.labels
        else:
            self._rows, self._labels = self.X[order], self.labels[order]
        self.loss_sum = loss_so_far

    def step(self, start):
        """Process rows ``start : start + batch_size`` of the epoch's order."""
        problem, state, rule = self.problem, self.state, self.problem.rule
        stop = min(start + problem.batch_size, self._rows.shape[0])
        batch = stop - start
        indptr = self._rows.indptr[start : stop + 1]
        nonzeros = slice(indptr[0], indptr[-1])
        columns, local = self._distinct_columns(self._rows.indices[nonzeros])
        values = self._rows.data[nonzeros].astype(np.float64, copy=False)  # a view when float64
        row_of = np.repeat(np.arange(batch), np.diff(indptr))  # each nonzero's row in the batch
        n_columns, n_models = columns.shape[0], problem.n_models
        d = state.n_features
        if problem.fit_intercept:
            columns = np.append(columns, d)
        penalized = (columns < d).astype(np.float64)
        # Sums by np.bincount, one model at a time: the same order of additions as a
        # sparse product (over each row's nonzeros, and over rows per column).
        with nvtx.annotate("online.margins", color="blue"):
            weights = rule.weights(state, columns, penalized)
            margins = np.empty((batch, n_models))
            for k in range(n_models):
                margins[:, k] = np.bincount(row_of, weights=values * weights[k, local], minlength=batch)
            if problem.fit_intercept:
                margins += weights[:, -1]
            y01 = self._targets(self._labels[start:stop])
            self.loss_sum += float(logistic_loss(margins, y01).sum())
            residuals = expit(margins) - y01
        with nvtx.annotate("online.update", color="green"):
            scaled = residuals
            if rule.uses_step_sizes:
                scaled = residuals * rule.step_sizes(state.t, batch)[:, None]
            extra = int(problem.fit_intercept)
            gradient = np.empty((n_models, n_columns + extra))
            squared = np.empty_like(gradient) if rule.kind == "ftrl" else None
            for k in range(n_models):
                gradient[k, :n_columns] = np.bincount(local, weights=values * scaled[row_of, k], minlength=n_columns)
                if squared is not None:  # per-example gradients g_s, squared
                    squared[k, :n_columns] = np.bincount(
                        local, weights=(values * residuals[row_of, k]) ** 2, minlength=n_columns
                    )
            if problem.fit_intercept:
                gradient[:, -1] = scaled.sum(axis=0)
                if squared is not None:
                    squared[:, -1] = (residuals**2).sum(axis=0)
            next_level = state.level + rule.penalty_added(state.t, batch)
            rule.update(state, columns, penalized, weights, gradient, squared, next_level)
            state.t += batch
            state.level = next_level

    def run_batches(self, starts):
        """Process the batches that start at ``starts`` of the epoch's order, in that order."""
        for start in starts:
            self.step(start)

    def _distinct_columns(self, indices):
        """The distinct columns of a batch's nonzeros and each nonzero's position among them.

        Like ``np.unique(indices, return_inverse=True)`` but O(nnz) without a sort: each
        column's slot in a scratch array remembers its last occurrence in the batch.  The
        order of the columns does not change any sum (those run over rows), only labels.
        """
        occurrence = np.arange(indices.shape[0])
        self._slot[indices] = occurrence
        last = self._slot[indices]  # the last occurrence of each nonzero's column
        representatives = np.flatnonzero(last == occurrence)
        compact = np.empty(indices.shape[0], dtype=np.int64)
        compact[representatives] = np.arange(representatives.shape[0])
        return indices[representatives], compact[last]

    def _targets(self, labels):
        """``y01`` of shape (batch, n_models)."""
        problem = self.problem
        models = np.arange(problem.n_models) + problem.positive_offset
        return (labels[:, None] == models[None, :]).astype(np.float64)

    def epoch_loss_sum(self):
        """Summed logistic loss of the epoch's predictions (each made before its update)."""
        return self.loss_sum
