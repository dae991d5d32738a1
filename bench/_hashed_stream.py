"""A large synthetic click-log stream: hashed categorical features, a known logistic model.

Each row has ``n_fields`` categorical fields; field ``f`` takes a value of popularity
rank ``v`` with Zipf-like probability over a vocabulary of ``vocabulary[f]`` values, and
``(f, v)`` is hashed (splitmix64) to one of ``n_features`` columns with value 1. The label
is drawn from ``sigmoid(<w_true, x> + b_true)``, ``w_true`` a fixed Gaussian vector over
the hashed columns (collisions included, as in any hashed model). Chunks are regenerated
from ``(seed, chunk index)``, so every library sees the same rows without the stream ever
being held in memory.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gpusvm._random import splitmix64


class HashedStream:
    """Chunks ``(X, y)`` of a reproducible hashed stream; see the module docstring.

    Parameters
    ----------
    n_rows : int
        Rows in the whole stream.
    chunk_rows : int
        Rows per chunk (the last one may be shorter).
    n_features : int
        Hashed columns.
    n_fields : int
        Categorical fields per row (nonzeros per row, before collisions).
    seed : int
    """

    def __init__(self, n_rows, *, chunk_rows=500_000, n_features=2**20, n_fields=20, seed=0):
        self.n_rows, self.chunk_rows, self.n_features, self.n_fields, self.seed = (
            n_rows,
            chunk_rows,
            n_features,
            n_fields,
            seed,
        )
        rng = np.random.default_rng(seed)
        # vocabularies from 4 to 1e6 values, log-spaced: a few dense fields, many rare values
        self.vocabulary = np.unique(np.geomspace(4, 1e6, n_fields).astype(np.int64))
        self.n_fields = self.vocabulary.shape[0]
        self.true_weights = rng.normal(0.0, 0.6, size=n_features)
        self.true_intercept = -1.5  # about 25% positives, as click logs are skewed

    @property
    def n_chunks(self):
        return -(-self.n_rows // self.chunk_rows)

    def chunk(self, index):
        """Chunk ``index`` as (CSR float32 X with sorted columns per row, int labels).

        Indices past the stream's end give full chunks of fresh rows (held-out data).
        """
        rows = self.chunk_rows
        if index < self.n_chunks:
            rows = min(rows, self.n_rows - index * self.chunk_rows)
        rng = np.random.default_rng([self.seed, index])
        # Zipf-like ranks: floor(V ** u) - 1 for u uniform is log-uniform over 1..V.
        u = rng.random((rows, self.n_fields))
        ranks = np.floor(self.vocabulary[None, :].astype(np.float64) ** u).astype(np.uint64) - np.uint64(1)
        fields = np.arange(self.n_fields, dtype=np.uint64)[None, :]
        columns = splitmix64((fields << np.uint64(40)) ^ ranks) % np.uint64(self.n_features)
        columns = np.sort(columns.astype(np.int32), axis=1)
        X = sp.csr_matrix(
            (
                np.ones(columns.size, dtype=np.float32),
                columns.ravel(),
                np.arange(0, columns.size + 1, self.n_fields, dtype=np.int64),
            ),
            shape=(rows, self.n_features),
        )
        X.sum_duplicates()  # two fields hashed to one column: value 2
        margins = X @ self.true_weights + self.true_intercept
        y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-margins))).astype(np.int64)
        return X, y

    def bayes_log_loss(self, X, y):
        """Log loss of the true model on (X, y): the floor any learner can reach."""
        margins = X @ self.true_weights + self.true_intercept
        return float(np.mean(np.logaddexp(0.0, margins) - y * margins))
