"""The benchmarks' data: every data set they read, by name (:func:`load`), and the rows they
generate (:func:`make_linear_rule`, :func:`make_blobs`, :class:`HashedStream`).

The real data sets come from :mod:`gpusvm.datasets` (Adult ships with gpusvm; MNIST and
KEEL's sets are packages that ``bench/get_data.sh`` installs) and from scikit-learn. A script
takes the rows it needs with ``train_rows`` and ``test_rows``; the two families of scripts
that share a data set's rows share them through :func:`kernel_svm_rows` and
:func:`linear_svm_rows`.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

from gpusvm._random import splitmix64
from gpusvm.datasets import KEEL_DATASETS, load_adult, load_keel, load_mnist, one_vs_rest_labels

SCIKIT_LEARN = {"breast_cancer": load_breast_cancer, "wine": load_wine, "digits": load_digits}
CUTS = {  # name: (data set, its first training rows)
    "mnist8-20k": ("mnist8", 20_000),
    "mnist8-10k": ("mnist8", 10_000),
    "mnist10-20k": ("mnist10", 20_000),
    "mnist10-6k": ("mnist10", 6_000),
    "magic-600": ("magic", 600),
    "magic-2000": ("magic", 2_000),
    "satimage-800": ("satimage", 800),
}
NAMES = ("adult", "mnist8", "mnist10", *KEEL_DATASETS, *SCIKIT_LEARN, "synthetic", *CUTS)
NNZ_PER_ROW = 20  # make_linear_rule's sparse rows
DENSE_FEATURES, SPARSE_COLUMNS, SPARSE_DENSITY = 64, 4096, 0.02  # make_blobs' rows
PATTERN_ROWS = 100_000  # sparse rows whose pattern is drawn at once (bounded memory)


def load(name, *, train_rows=None, test_rows=None, n_features=100_000):
    """``(X, y, X_test, y_test)``: data set ``name``'s first ``train_rows`` training rows
    and first ``test_rows`` test rows (None: all of them).

    - ``'adult'``: UCI Adult as gpusvm ships it (a9a's 123 binary columns, CSR; labels
      -1 and +1);
    - ``'mnist8'``: MNIST's digit 8 against the rest (labels -1 and +1); ``'mnist10'``: its
      ten digits. Float32 pixels in [0, 1], read once a process and shared by every call:
      the callers slice them, never write to them;
    - KEEL's ``'magic'``, ``'letter'``, ``'penbased'``, ``'satimage'``, ``'texture'`` and
      ``'optdigits'`` (:func:`gpusvm.datasets.load_keel`: standardized, a stratified
      quarter tested);
    - scikit-learn's ``'breast_cancer'``, ``'wine'`` and ``'digits'``: every row a training
      row, and ``X_test`` and ``y_test`` None (the scripts split them);
    - ``'synthetic'``: ``train_rows`` rows (which it needs) of :func:`make_linear_rule`'s
      sparse problem with ``n_features`` columns, seed 1, and ``train_rows // 10`` more
      rows to test on;
    - a cut of :data:`CUTS` (``'mnist8-20k'``, ``'magic-600'``, ...): a data set's first
      training rows, with all its test rows.
    """
    if name in CUTS:
        name, rows = CUTS[name]
        train_rows = rows if train_rows is None else min(rows, train_rows)
    if name == "synthetic":
        if train_rows is None:
            raise ValueError("the synthetic data set needs train_rows (the rows it generates), got None.")
        X, y = make_linear_rule("linear", train_rows + train_rows // 10, n_features, seed=1)
        X, y, X_test, y_test = X[:train_rows], y[:train_rows], X[train_rows:], y[train_rows:]
        train_rows = None
    elif name == "adult":
        X, y, X_test, y_test = load_adult()
    elif name in ("mnist8", "mnist10"):
        X, y, X_test, y_test = _mnist()
        if name == "mnist8":
            y, y_test = one_vs_rest_labels(y, 8), one_vs_rest_labels(y_test, 8)
    elif name in KEEL_DATASETS:
        X, y, X_test, y_test = load_keel(name)
    elif name in SCIKIT_LEARN:
        X, y = SCIKIT_LEARN[name](return_X_y=True)
        return _first(X, train_rows), _first(y, train_rows), None, None
    else:
        raise ValueError(f"name must be one of {sorted(NAMES)}, got {name!r}.")
    return _first(X, train_rows), _first(y, train_rows), _first(X_test, test_rows), _first(y_test, test_rows)


def _first(array, rows):
    """The first ``rows`` rows of ``array``; the array itself for None."""
    return array if rows is None else array[:rows]


@functools.cache
def _mnist():
    """MNIST's ten digits, read once for all the calls of a process."""
    return load_mnist()


def kernel_svm_rows(name, quick):
    """:func:`load`'s rows of data set ``name`` in the SBP paper's experiments
    (``bench.sbp_kernel``, and the scripts that rerun its settings): all of them, or in a
    smoke run (``quick``) Adult's first 3,000 training rows, the others' first 2,000, and
    2,000 test rows."""
    if not quick:
        return {}
    return {"train_rows": 3_000 if name == "adult" else 2_000, "test_rows": 2_000}


def linear_svm_rows(name, rows, quick):
    """:func:`load`'s arguments for data set ``name`` in the linear SVM experiments
    (``bench.linear_objective``, ``bench.pegasos_steps``): Adult whole, or in a smoke run
    (``quick``) its first 3,000 training rows; the synthetic problem at ``rows`` training
    rows and 100,000 columns, or at 20,000 rows and 10,000 columns."""
    if name == "adult":
        return {"train_rows": 3_000} if quick else {}
    return {"train_rows": 20_000, "n_features": 10_000} if quick else {"train_rows": rows, "n_features": 100_000}


def make_linear_rule(family, n, d, seed=0):
    """Rows and labels ``sign(<w, x> + noise)`` of a random linear rule ``w``: CSR rows with
    ``NNZ_PER_ROW`` nonzeros (``family='linear'``), or dense Gaussian rows (``'kernel'``)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    if family == "linear":
        k = min(NNZ_PER_ROW, d)
        columns = rng.integers(0, d, size=(n, k)).astype(np.int32)
        values = rng.normal(size=(n, k))
        X = sp.csr_matrix((values.ravel(), columns.ravel(), np.arange(0, n * k + 1, k)), shape=(n, d))
        X.sum_duplicates()  # in place, also on `values` and `columns` (X's arrays are their views)
    else:
        X = rng.normal(size=(n, d)) / np.sqrt(d / 20)  # keep ||x||^2 near 20 so gamma = 0.05 stays sensible
    scores = X @ w
    y = np.where(scores + 0.3 * np.std(scores) * rng.normal(size=n) > 0, 1, -1)
    return X, y


def make_blobs(n, n_classes, sparse, seed=0):
    """Rows of ``n_classes`` Gaussian blobs (float32) and their labels: ``DENSE_FEATURES``
    dense columns, or ``SPARSE_COLUMNS`` sparse ones (:func:`_sparse_pattern`)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, max(2, n_classes), n)
    if not sparse:
        centers = rng.normal(size=(max(2, n_classes), DENSE_FEATURES)).astype(np.float32)
        return centers[labels] + rng.normal(size=(n, DENSE_FEATURES)).astype(np.float32), labels
    indices, indptr = _sparse_pattern(n, rng)
    data = rng.standard_normal(indices.size, dtype=np.float32)
    data += (labels[np.repeat(np.arange(n), np.diff(indptr))] == indices % max(2, n_classes)).astype(np.float32)
    return sp.csr_matrix((data, indices, indptr), shape=(n, SPARSE_COLUMNS)), labels


def _sparse_pattern(n, rng):
    """``indices`` and ``indptr`` of ``n`` CSR rows of ``SPARSE_COLUMNS`` columns, about
    ``SPARSE_DENSITY`` of them nonzero, in canonical form (sorted, distinct columns).

    Drawn with NumPy in O(nnz) and no sort (``scipy.sparse.random`` draws its positions
    without replacement over all ``n * SPARSE_COLUMNS``: 28 s at 1e5 rows, minutes at
    1e6): each row draws a binomial count of uniform columns, sorted as they are drawn
    (cumulative sums of exponential spacings over their total are sorted uniforms), and a
    column drawn twice in a row is kept once (about 1% of the draws at 2% of 4,096)."""
    indices, counts = [], []
    for start in range(0, n, PATTERN_ROWS):
        rows = min(PATTERN_ROWS, n - start)
        drawn = rng.binomial(SPARSE_COLUMNS, SPARSE_DENSITY, size=rows)
        row_of = np.repeat(np.arange(rows), drawn + 1)  # a row's draws, then its total
        sums = np.cumsum(rng.standard_exponential(row_of.size))
        last = np.cumsum(drawn + 1) - 1
        before = np.concatenate([[0.0], sums[last[:-1]]])  # the sum before each row's first spacing
        uniforms = (sums - before[row_of]) / (sums[last] - before)[row_of]
        columns = np.minimum(uniforms * SPARSE_COLUMNS, SPARSE_COLUMNS - 1).astype(np.int32)
        keep = np.ones(row_of.size, dtype=bool)
        keep[last] = False  # a row's total is no column
        keep[1:] &= (columns[1:] != columns[:-1]) | (row_of[1:] != row_of[:-1])
        indices.append(columns[keep])
        counts.append(np.bincount(row_of[keep], minlength=rows))
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
    return np.concatenate(indices), indptr


class HashedStream:
    """A large synthetic click-log stream: hashed categorical features, a known logistic
    model, in reproducible chunks ``(X, y)``.

    Each row has ``n_fields`` categorical fields; field ``f`` takes a value of popularity
    rank ``v`` with Zipf-like probability over a vocabulary of ``vocabulary[f]`` values, and
    ``(f, v)`` is hashed (splitmix64) to one of ``n_features`` columns with value 1. The
    label is drawn from ``sigmoid(<w_true, x> + b_true)``, ``w_true`` a fixed Gaussian
    vector over the hashed columns (collisions included, as in any hashed model). Chunks
    are regenerated from ``(seed, chunk index)``, so every library sees the same rows
    without the stream ever being held in memory.

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
