"""Kernel functions as blocks ``K(X, Y)``, on NumPy or CuPy, dense or CSR.

The inner products come from BLAS / cuBLAS / cuSPARSE; on the GPU a RawKernel
(``kernels/kernel_functions.cu``) turns them into kernel values in place.  Conventions
follow scikit-learn's SVC:

* ``'linear'``: ``<x, y>``
* ``'rbf'``: ``exp(-gamma ||x - y||^2)``
* ``'poly'``: ``(gamma <x, y> + coef0) ** degree``

``gamma='scale'`` is ``1 / (n_features * X.var())`` and ``'auto'`` is ``1 / n_features``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from .._backend import issparse, namespace_of
from ._precision import (
    FLOAT32_KERNEL_TOLERANCE,
    RowMoments,
    centred_moments,
    float32_kernel_error,
    float32_or_float64,
    kernel_copy,
    kernel_training_copy,
    prediction_centre,
    row_statistics,
    statistics_of,
)

KERNELS = ("linear", "rbf", "poly")
KERNEL_CODES = {"linear": 0, "rbf": 1, "poly": 2}


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """An SVM kernel and its parameters, ``gamma`` resolved: the one description of a
    kernel that travels from the estimators through the solvers' problems to the CUDA
    launch arguments.

    Parameters
    ----------
    name : {'linear', 'rbf', 'poly'}
    gamma : float
        Resolved (see :func:`resolve_gamma`).
    degree : int
    coef0 : float
        As scikit-learn's SVC has them.
    """

    name: str
    gamma: float
    degree: int = 3
    coef0: float = 0.0

    @property
    def keywords(self):
        """The parameters as :func:`kernel_block` and the estimators name them."""
        return {"kernel": self.name, "gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}

    @property
    def code(self):
        """The kernel's number in the CUDA sources (``KERNEL_CODES``)."""
        return KERNEL_CODES[self.name]

    def rows(self, X, rows, sq_norms):
        """:func:`kernel_rows` of this kernel."""
        return kernel_rows(X, rows, sq_norms, **self.keywords)

    def largest_self_value(self, sq_norms):
        """``max_i K(x_i, x_i)`` from rows' squared norms (0 for no rows)."""
        norms = sq_norms.astype("float64")
        if self.name == "rbf" or norms.shape[0] == 0:
            return 1.0 if norms.shape[0] else 0.0
        if self.name == "poly":
            return float(((self.gamma * norms + self.coef0) ** self.degree).max())
        return float(norms.max())


def resolve_gamma(gamma, X):
    """The numeric ``gamma`` for ``'scale'``, ``'auto'`` or a positive float."""
    n_features = X.shape[1]
    if isinstance(gamma, str):
        if gamma == "auto":
            return 1.0 / n_features
        if gamma == "scale":
            return _scale_gamma(X)
        raise ValueError(f"gamma must be 'scale', 'auto' or a positive float, got {gamma!r}.")
    if not isinstance(gamma, numbers.Real) or not 0 < gamma < math.inf:
        raise ValueError(f"gamma must be 'scale', 'auto' or a positive float, got {gamma!r}.")
    return float(gamma)


def _variance(X):
    """The variance of all of X's values (dense or sparse, NumPy or CuPy); a sparse X's
    about its mean, as a dense one's (``E[x^2] - mean^2`` cancels to noise, even below 0,
    on near-constant values). Summed in float64 whatever X's dtype: float32 sums, which
    NumPy and CuPy add in different orders, gave the two backends gammas apart in the
    seventh digit, and so different models (nu='auto''s pilot SVC amplifies it)."""
    if not issparse(X):
        return _dense_variance(X)
    if not X.has_canonical_format:  # one stored value a position
        X = X.copy()
        X.sum_duplicates()
    n_values = X.shape[0] * X.shape[1]
    mean = float(X.data.sum(dtype=np.float64)) / n_values
    deviations = X.data.astype(np.float64) - mean
    return (float((deviations * deviations).sum()) + (n_values - X.nnz) * mean**2) / n_values


_VARIANCE_BLOCK = 1 << 20  # values of X made float64 at a time


def _dense_variance(X):
    """A dense X's variance, summed in float64 without a float64 copy of all of X
    (CuPy's ``var(dtype=float64)`` of float32 values rounds their deviations in float32)."""
    if X.dtype == np.float64 or X.size == 0:
        return float(X.var()) if X.size else math.nan
    rows = max(1, _VARIANCE_BLOCK // max(1, X.shape[1]))
    blocks = [slice(start, start + rows) for start in range(0, X.shape[0], rows)]
    mean = sum(float(X[block].astype(np.float64).sum()) for block in blocks) / X.size
    squares = 0.0
    for block in blocks:
        deviations = X[block].astype(np.float64) - mean
        squares += float((deviations * deviations).sum())
    return squares / X.size


def _scale_gamma(X):
    """``gamma='scale'``: ``1 / (n_features * X.var())``, 1 for a constant X.

    On values whose squares, or their sum, leave the float range (about 1e150 and up, or
    1e-150 and down, in float64) the variance is taken of X divided by its largest
    magnitude and the scale put back in the quotient; a ``gamma`` that is still 0 or
    infinite is refused, naming the remedy, rather than fitting a model that ignores X."""
    n_features = X.shape[1]
    with np.errstate(over="ignore", under="ignore"):  # measured below, and mended
        variance = _variance(X)
    if math.isfinite(variance) and variance > np.finfo(np.float64).tiny:
        gamma = 1.0 / (n_features * variance)
        if 0 < gamma < math.inf:
            return gamma
    scale = float(abs(X).max()) if X.shape[0] else 0.0
    scaled_variance = _variance(X / scale) if scale > 0 else 0.0
    if not scaled_variance > 0:  # a constant X, as SVC takes it
        return 1.0
    gamma = 1.0 / (n_features * scaled_variance) / scale / scale
    if not 0 < gamma < math.inf:
        raise ValueError(
            f"gamma='scale' is 1 / (n_features * X.var()) = {gamma!r} on this X (its largest magnitude "
            f"{scale:.3g}): no kernel can be computed from it. Scale X's features (e.g. StandardScaler) "
            "or give gamma a number."
        )
    return gamma


def check_kernel_range(X, *, kernel, gamma, degree=3, coef0=0.0, gamma_setting=None, dtype_parameter=None):
    """Refuse kernel settings whose values overflow X's dtype on X, before training.

    By Cauchy-Schwarz ``|<x, y>| <= m`` with ``m`` the largest squared row norm, so
    ``|K| <= (gamma m + |coef0|) ** degree`` for 'poly', ``m`` for 'linear', and the rbf
    distances are at most ``4 m``: when that bound is finite, every kernel value is. An
    rbf or poly ``gamma`` above X's dtype's range is refused too: ``gamma * 0`` would be NaN.

    ``gamma_setting``: the estimator's ``gamma`` when it is 'scale' or 'auto', named in
    the message; ``dtype_parameter``: the estimator's parameter that picks the kernel's
    dtype, named as the remedy when X is float32.
    """
    if not np.isfinite(coef0):
        raise ValueError(f"coef0 must be a finite number, got {coef0!r}.")
    largest = float(squared_row_norms(X).max()) if X.shape[0] else 0.0
    limit = float(np.finfo(X.dtype).max)
    gamma_text = f"gamma={gamma!r}" + (f" (from gamma={gamma_setting!r})" if isinstance(gamma_setting, str) else "")
    float64 = dtype_parameter is not None and X.dtype == np.float32  # the remedy when X fits float64
    float64_remedy = f"{dtype_parameter}='float64'" if float64 else ""
    if kernel in ("rbf", "poly") and not gamma <= limit:  # gamma * 0 would be NaN
        raise ValueError(
            f"{gamma_text} overflows {X.dtype} (above {limit:.3g}), the dtype the {kernel!r} kernel is computed in "
            f"on this X. Use {float64_remedy or 'a lower gamma'}, or scale the features (e.g. "
            "sklearn.preprocessing.StandardScaler)."
        )
    if kernel == "poly":
        base = gamma * largest + abs(coef0)
        bound = math.inf if base > 1 and degree * math.log(base) > math.log(limit) else base**degree
    else:
        bound = largest if kernel == "linear" else 4.0 * largest
    if not bound <= limit:
        raise ValueError(
            f"The {kernel!r} kernel overflows {X.dtype} on this X ({gamma_text}, coef0={coef0!r}, "
            f"degree={degree!r}; the largest squared row norm is {largest:.3g}): its values reach about "
            f"{bound:.3g}, above {limit:.3g}. Scale the features (e.g. sklearn.preprocessing.StandardScaler)"
            f"{', use ' + float64_remedy + ',' if float64 else ''} or lower gamma."
        )


def squared_row_norms(X):
    """``||x_i||^2`` for every row, in X's dtype and on X's backend."""
    if issparse(X):
        return namespace_of(X).asarray(X.multiply(X).sum(axis=1)).ravel().astype(X.dtype)
    return (X * X).sum(axis=1)


# Prediction densifies a sparse matrix at least this dense whose dense copy is this
# small: BLAS on blocks of a dense copy beats sparse products there (Adult: 11% dense).
# Training keeps the input's layout: a step reads all of X once, and a sparse X is fewer
# bytes.
DENSIFY_MIN_DENSITY = 0.05
DENSIFY_MAX_BYTES = 2**30


# inner_products densifies the smaller side of a sparse-by-sparse product when its dense
# copy holds at most this many times as many values as the output plus the other side's
# nonzeros.
DENSIFY_SIDE_FACTOR = 4


def compute_layout(X):
    """X as kernel products run fastest on it: a dense copy when it is dense enough and
    small enough (see ``DENSIFY_*``), else X itself."""
    if not issparse(X):
        return X
    n_rows, n_cols = X.shape
    dense_bytes = n_rows * n_cols * X.dtype.itemsize
    if dense_bytes <= DENSIFY_MAX_BYTES and X.nnz >= DENSIFY_MIN_DENSITY * n_rows * n_cols:
        return X.toarray()
    return X


def _dense(X):
    return X.toarray() if issparse(X) else X


def inner_products(X, Y):
    """``X @ Y.T`` as a dense array.

    Sparse by sparse, the side with fewer rows is densified (a dense product is fastest)
    when its dense copy is no larger than the work the product does anyway: the output
    block plus the other side's nonzeros. On wide data (say 2^24 hashed columns) both
    sides are first narrowed to the columns they share, so that memory stays
    O(nnz + output) however many columns X has.
    """
    if issparse(X) and issparse(Y):
        if _dense_side_too_large(X, Y):
            X, Y = _shared_columns(X, Y)
        if _dense_side_too_large(X, Y):
            return (X @ Y.T).toarray()
        if X.shape[0] <= Y.shape[0]:
            return (Y @ _dense(X).T).T.copy()
        return X @ _dense(Y).T
    if issparse(Y):
        return (Y @ X.T).T.copy()
    return X @ Y.T  # dense @ dense, or sparse @ dense: a dense array either way


def _dense_side_too_large(X, Y):
    small, large = (X, Y) if X.shape[0] <= Y.shape[0] else (Y, X)
    return small.shape[0] * small.shape[1] > DENSIFY_SIDE_FACTOR * (X.shape[0] * Y.shape[0] + large.nnz)


def _shared_columns(X, Y):
    """X and Y (CSR) restricted to the columns both use, renumbered from 0: the same
    inner products, over at most ``min(X.nnz, Y.nnz)`` columns."""
    xp = namespace_of(X.data)
    columns = xp.unique(X.indices)
    columns = columns[xp.isin(columns, Y.indices)]
    return _restrict_columns(X, columns, xp), _restrict_columns(Y, columns, xp)


def _restrict_columns(M, columns, xp):
    """M's entries in the sorted ``columns``, as a CSR matrix of ``len(columns)`` columns."""
    keep = xp.isin(M.indices, columns)
    kept_before = xp.concatenate([xp.zeros(1, dtype=M.indptr.dtype), xp.cumsum(keep, dtype=M.indptr.dtype)])
    indices = xp.searchsorted(columns, M.indices[keep]).astype(M.indices.dtype)
    return type(M)((M.data[keep], indices, kept_before[M.indptr]), shape=(M.shape[0], columns.shape[0]))


def kernel_block(X, Y, *, kernel, gamma, degree=3, coef0=0.0, X_sq_norms=None, Y_sq_norms=None):
    """The kernel matrix ``K(X, Y)`` of shape ``(len(X), len(Y))``.

    Parameters
    ----------
    X, Y : array or CSR matrix, NumPy/SciPy or CuPy/cupyx (both on the same backend)
    kernel : {'linear', 'rbf', 'poly'}
    gamma : float
        Already resolved (see :func:`resolve_gamma`).
    degree, coef0 : as in scikit-learn's SVC.
    X_sq_norms, Y_sq_norms : array, optional
        Precomputed :func:`squared_row_norms` (rbf only); computed when missing.
    """
    if kernel not in KERNEL_CODES:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}.")
    dots = inner_products(X, Y).astype(X.dtype, copy=False)
    if kernel == "rbf":
        X_sq_norms = squared_row_norms(X) if X_sq_norms is None else X_sq_norms
        Y_sq_norms = squared_row_norms(Y) if Y_sq_norms is None else Y_sq_norms
    if namespace_of(dots) is not np:
        from ._cuda import kernel_from_dots_cuda

        return kernel_from_dots_cuda(dots, X_sq_norms, Y_sq_norms, KernelSpec(kernel, gamma, degree, coef0))
    if kernel == "rbf":  # in place: a block is often the largest array in use
        sq_dist = np.multiply(dots, -2, out=dots if dots.flags.writeable and dots.flags.owndata else None)
        sq_dist += X_sq_norms[:, None]
        sq_dist += Y_sq_norms[None, :]
        np.maximum(sq_dist, 0, out=sq_dist)  # rounding can make it slightly negative
        sq_dist *= -gamma
        return np.exp(sq_dist, out=sq_dist)
    if kernel == "poly":
        return (gamma * dots + coef0) ** degree
    return dots


def kernel_rows(X, rows, sq_norms, *, kernel, gamma, degree=3, coef0=0.0):
    """Rows ``K(X[rows], X)`` of X's kernel matrix, from X's precomputed squared norms."""
    return kernel_block(
        X[rows],
        X,
        kernel=kernel,
        gamma=gamma,
        degree=degree,
        coef0=coef0,
        X_sq_norms=sq_norms[rows],
        Y_sq_norms=sq_norms,
    )


__all__ = [
    "DENSIFY_MAX_BYTES",
    "DENSIFY_MIN_DENSITY",
    "FLOAT32_KERNEL_TOLERANCE",
    "KERNELS",
    "KERNEL_CODES",
    "KernelSpec",
    "RowMoments",
    "centred_moments",
    "check_kernel_range",
    "compute_layout",
    "float32_kernel_error",
    "float32_or_float64",
    "inner_products",
    "kernel_block",
    "kernel_copy",
    "kernel_rows",
    "kernel_training_copy",
    "prediction_centre",
    "resolve_gamma",
    "row_statistics",
    "squared_row_norms",
    "statistics_of",
]
