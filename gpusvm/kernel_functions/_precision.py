"""Where kernel values keep their digits: centring for rbf, and the float32 condition.

Kernel values come from inner products: the rbf distance as ``|x|^2 + |y|^2 - 2 <x, y>``,
the linear and poly kernels from ``<x, y>`` itself. In a dtype of machine epsilon ``eps``
an inner product is off by about ``eps |x| |y|``, so rows far from the origin compared
with their spread lose the digits that tell them apart: on a unit-spread set shifted by
1e4 every float32 rbf distance is noise.

* **rbf** is invariant to translation, so a dense X is centred (its column means
  subtracted, in float64) before it is cast to the kernel's dtype; the model is the same
  with any centre, and prediction centres the support vectors and X by the vectors' mean.
  What is left is the rbf exponent's error, ``gamma * 4 eps max_i |x_i - m|^2``.
* **linear and poly** change under translation, so X is kept; their relative error is
  that of ``<x, y>`` against the spread of the rows about their mean,
  ``eps max_i |x_i|^2 / mean_i |x_i - m|^2`` (times ``degree``, with ``|coef0|`` added
  to the largest product, for poly).
* Values whose squares float32 cannot hold (below about 1e-16 in magnitude, or whose
  kernel values overflow) make float32 unusable whatever the kernel.

:func:`kernel_training_copy` computes these bounds from one pass over X (two when it
centres) and picks float32 only where the bound is below ``FLOAT32_KERNEL_TOLERANCE``
(by kernel).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import warnings

import numpy as np
import scipy.sparse

from .._backend import issparse, namespace_of, to_numpy

# The largest relative error of float32 kernel values (the bounds above) that 'auto'
# accepts, and that 'float32' accepts without a warning. Read off bench/kernel_precision.py
# (SBP on a standardized set shifted step by step, float32 against float64 at the same
# steps): each tolerance lies between the bounds at which the float32 and float64 models
# agreed and those at which they parted (of either sign: on rows far from their mean SBP's
# slow convergence sways both); rbf's rows are centred, which keeps their bound far below
# its tolerance at any shift (the figures: bench/results/kernel_precision-*.md).
FLOAT32_KERNEL_TOLERANCE = {"rbf": 1e-4, "poly": 1e-5, "linear": 3e-6}
_FLOAT32 = np.finfo(np.float32)
_BLOCK_VALUES = 1 << 20  # values of X made float64 at a time
# a spread below this fraction of the mean squared norm is lost to float64's rounding in
# ``E|x|^2 - |E x|^2``: taken as this fraction (float32 then fails the bound)
_CANCELLED = 1e-9


@dataclasses.dataclass(frozen=True)
class RowStatistics:
    """What the kernel's rounding depends on, in float64.

    Attributes
    ----------
    largest : float
        The largest squared row norm of X as the kernel sees it (centred when it is).
    largest_raw : float
        The largest squared row norm of X as given.
    spread : float
        The mean squared distance of the rows from their mean (the sum of the columns'
        variances).
    mean_square : float
        The mean square of the values that the products multiply (centred when X is;
        a sparse X's stored values).
    offset : float
        The squared norm of the rows' mean (``|m|^2``: 0 for centred features).
    """

    largest: float
    largest_raw: float
    spread: float
    mean_square: float
    offset: float = 0.0


def centres_rows(X, kernel):
    """Whether the kernel's copy of X is centred: rbf on a dense X (a sparse X would
    become dense)."""
    return kernel == "rbf" and not issparse(X)


@dataclasses.dataclass(frozen=True)
class RowMoments:
    """Sums over some of X's rows, in float64, that add up across parts of X (the
    workers of a cluster): the first pass of :func:`row_statistics`.

    Attributes
    ----------
    n_rows, n_values : int
        Rows, and the values that products multiply (a sparse X's stored values).
    column_sums : array of shape (n_features,), NumPy; for a sparse X a SciPy CSR row
        of the columns it uses (memory in proportion to its nonzeros, not its width)
    squares : float
        The sum of the squared values.
    largest_raw : float
        The largest squared row norm.
    sparse : bool
        Whether X is sparse.
    """

    n_rows: int
    n_values: int
    column_sums: np.ndarray
    squares: float
    largest_raw: float
    sparse: bool

    @classmethod
    def of(cls, X):
        """The moments of X (dense or CSR, NumPy or CuPy)."""
        if issparse(X):
            X = X.astype(np.float64)
            squares = X.multiply(X).sum(axis=1)
            return cls(X.shape[0], X.nnz, _sparse_column_sums(X), float(squares.sum()), _largest(squares), True)
        sums, squares, largest = np.zeros(X.shape[1]), 0.0, 0.0
        for block in _row_blocks(X):
            rows = X[block].astype(np.float64)
            sq_norms = (rows * rows).sum(axis=1)
            sums += to_numpy(rows.sum(axis=0))
            squares, largest = squares + float(sq_norms.sum()), max(largest, _largest(sq_norms))
        return cls(X.shape[0], X.size, sums, squares, largest, False)

    @classmethod
    def total(cls, parts):
        """The moments of the parts' rows together."""
        return cls(
            sum(part.n_rows for part in parts),
            sum(part.n_values for part in parts),
            functools.reduce(operator.add, [part.column_sums for part in parts]),
            sum(part.squares for part in parts),
            max(part.largest_raw for part in parts),
            any(part.sparse for part in parts),
        )

    def column_means(self):
        """The column means (as ``column_sums``: a CSR row for a sparse X)."""
        return self.column_sums / max(1, self.n_rows)


def _sparse_column_sums(X):
    """A CSR X's column sums as a SciPy CSR row over the columns it uses."""
    xp = namespace_of(X.data)
    columns, at = xp.unique(X.indices, return_inverse=True)
    sums = xp.bincount(at.ravel(), weights=X.data, minlength=columns.shape[0])
    columns, sums = to_numpy(columns), to_numpy(sums)
    return scipy.sparse.csr_matrix((sums, columns, [0, columns.size]), shape=(1, X.shape[1]))


def centred_moments(X, centre):
    """The sum and the largest of the squared norms of a dense X's rows about ``centre``
    (the second pass of :func:`row_statistics`)."""
    centre = namespace_of(X).asarray(centre)
    squares, largest = 0.0, 0.0
    for block in _row_blocks(X):
        rows = X[block].astype(np.float64) - centre
        sq_norms = (rows * rows).sum(axis=1)
        squares, largest = squares + float(sq_norms.sum()), max(largest, _largest(sq_norms))
    return squares, largest


def row_statistics(X, centred=False):
    """:class:`RowStatistics` of X (dense or CSR, NumPy or CuPy); ``centred``: whether
    the kernel's copy of X is centred on its column means (:func:`centres_rows`)."""
    moments = RowMoments.of(X)
    about_mean = None if issparse(X) else centred_moments(X, moments.column_means())
    return statistics_of(moments, about_mean, centred)


def statistics_of(moments, about_mean, centred):
    """:class:`RowStatistics` from X's :class:`RowMoments` and, for a dense X, its
    :func:`centred_moments` about its column means (None for a sparse X)."""
    n_rows = max(1, moments.n_rows)
    mean_sq_norm = moments.squares / n_rows
    if about_mean is None:  # sparse: the spread from the sums, floored where they cancel
        mean = moments.column_means()
        spread = max(mean_sq_norm - float(mean.multiply(mean).sum()), _CANCELLED * mean_sq_norm)
    else:
        spread = about_mean[0] / n_rows
    offset = max(0.0, mean_sq_norm - spread)  # |m|^2 = E|x|^2 - E|x - m|^2
    if centred:
        values = max(1, moments.n_values)
        return RowStatistics(about_mean[1], moments.largest_raw, spread, about_mean[0] / values, offset)
    mean_square = moments.squares / max(1, moments.n_values)
    return RowStatistics(moments.largest_raw, moments.largest_raw, spread, mean_square, offset)


def _largest(sq_norms):
    return float(sq_norms.max()) if sq_norms.shape[0] else 0.0


def _row_blocks(X):
    rows = max(1, _BLOCK_VALUES // max(1, X.shape[1]))
    return [slice(start, start + rows) for start in range(0, X.shape[0], rows)]


def float32_kernel_error(statistics, *, kernel, gamma, degree=3, coef0=0.0):
    """A bound on the relative error of kernel values computed in float32 (inf where
    float32 cannot hold them); see the module docstring."""
    eps = float(_FLOAT32.eps)
    largest, spread = statistics.largest, statistics.spread
    if 0 < statistics.mean_square and statistics.mean_square * eps < float(_FLOAT32.tiny):
        return math.inf  # products of the values fall below float32's normal numbers
    if kernel == "rbf":
        if not 4.0 * largest <= float(_FLOAT32.max) or not gamma <= float(_FLOAT32.max):
            return math.inf
        return 4.0 * eps * gamma * largest
    if kernel == "poly" and not gamma <= float(_FLOAT32.max):
        return math.inf
    largest_product = statistics.largest_raw if kernel == "linear" else gamma * statistics.largest_raw + abs(coef0)
    if not largest_product <= float(_FLOAT32.max) ** (1.0 / max(1, degree if kernel == "poly" else 1)):
        return math.inf
    if spread == 0:
        return 0.0  # every row the same: nothing to tell apart
    if kernel == "linear":
        return eps * largest_product / spread
    return degree * eps * largest_product / (gamma * spread)


def kernel_training_copy(
    X, *, kernel, gamma, degree=3, coef0=0.0, kernel_dtype="auto", parameter="kernel_dtype", overwrite_x=False
):
    """X as the kernel values of a fit are computed from it.

    Parameters
    ----------
    X : array or CSR matrix, NumPy or CuPy
        The training rows (and any held-out rows), in X's own dtype.
    kernel, gamma, degree, coef0 : the kernel, ``gamma`` resolved
    kernel_dtype : {'auto', 'float32', 'float64'}
        'auto': float32 where :func:`float32_kernel_error` is below the kernel's
        ``FLOAT32_KERNEL_TOLERANCE``, else float64. 'float32' as asked, with a
        ``UserWarning`` where that bound is above it.
    parameter : str or None
        The estimator's parameter that set ``kernel_dtype``, named in the warning; None
        when it is X's own dtype.
    overwrite_x : bool
        Whether X, when it is centred in its own dtype, may be centred in place (the
        caller's own copy: on a device, one copy of the rows fewer at the peak).

    Returns
    -------
    X_kernel : X centred for rbf on a dense X (:func:`centres_rows`), in the chosen dtype
        (X itself when neither changes it)
    dtype : numpy dtype, the chosen one
    """
    if kernel_dtype == "float64" and not centres_rows(X, kernel):
        return kernel_copy(X, None, np.dtype(np.float64)), np.dtype(np.float64)
    moments = RowMoments.of(X)
    centre = moments.column_means() if centres_rows(X, kernel) else None
    dtype = np.dtype(np.float64 if kernel_dtype == "auto" else kernel_dtype)
    if kernel_dtype != "float64":
        about_mean = None if issparse(X) else centred_moments(X, moments.column_means())
        statistics = statistics_of(moments, about_mean, centre is not None)
        dtype = float32_or_float64(
            statistics, kernel_dtype, parameter, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0
        )
    return kernel_copy(X, centre, dtype, overwrite_x=overwrite_x), dtype


def float32_or_float64(statistics, kernel_dtype, parameter="kernel_dtype", *, kernel, gamma, degree=3, coef0=0.0):
    """The kernel's dtype for ``kernel_dtype`` 'auto' or 'float32' on X of these
    :class:`RowStatistics` (as :func:`kernel_training_copy` picks it; warns for a
    'float32' that loses digits)."""
    error = float32_kernel_error(statistics, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
    accurate = error <= FLOAT32_KERNEL_TOLERANCE[kernel]
    if kernel_dtype == "auto":
        return np.dtype(np.float32 if accurate else np.float64)
    if not accurate:
        warnings.warn(float32_warning(error, kernel, parameter), UserWarning, stacklevel=5)
    return np.dtype(np.float32)


def kernel_copy(X, centre, dtype, overwrite_x=False):
    """X in ``dtype``, less ``centre`` (None: not centred); X itself when neither changes
    it, or when ``overwrite_x`` and X is centred in its own dtype, in place."""
    if centre is not None:
        return _centred(X, centre, dtype, out=X if overwrite_x and X.dtype == dtype else None)
    if X.dtype != dtype:  # no copy=False: cupyx sparse astype lacks it before CuPy 14.2
        X = X.astype(dtype)
    return X


def _centred(X, centre, dtype, out=None):
    """``X - centre`` in ``dtype``, subtracted in float64 block by block, into ``out``
    (which may be X)."""
    xp = namespace_of(X)
    centre = xp.asarray(centre)
    out = xp.empty(X.shape, dtype=dtype) if out is None else out
    for block in _row_blocks(X):
        out[block] = (X[block].astype(np.float64) - centre).astype(dtype)
    return out


def float32_warning(error, kernel, parameter="kernel_dtype"):
    """The warning of a fit whose float32 kernel values lose their digits; ``parameter``
    as :func:`kernel_training_copy`'s."""
    why = "cannot hold" if math.isinf(error) else f"are off by up to {error:.2g} (relative) on"
    asked = f"{parameter}='float32'" if parameter else "X is float32"
    remedy = f"Use {parameter}='float64' or 'auto'" if parameter else "Pass X as float64"
    return (
        f"{asked}: float32 {kernel!r} kernel values {why} this X (rows far from the origin compared "
        f"with their spread, or values too small or too large for float32), so the model can be far "
        f"from SVC's. {remedy}, or centre and scale the features (e.g. sklearn.preprocessing.StandardScaler)."
    )


def prediction_centre(support_vectors, kernel):
    """The centre that prediction subtracts from the support vectors and X: their
    column means for rbf on dense vectors, else None."""
    if not centres_rows(support_vectors, kernel) or support_vectors.shape[0] == 0:
        return None
    return namespace_of(support_vectors).asarray(RowMoments.of(support_vectors).column_means())
