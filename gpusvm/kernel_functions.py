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

import numbers

import numpy as np

from ._backend import issparse, namespace_of

KERNELS = ("linear", "rbf", "poly")
KERNEL_CODES = {"linear": 0, "rbf": 1, "poly": 2}


def resolve_gamma(gamma, X):
    """The numeric ``gamma`` for ``'scale'``, ``'auto'`` or a positive float."""
    n_features = X.shape[1]
    if isinstance(gamma, str):
        if gamma == "auto":
            return 1.0 / n_features
        if gamma == "scale":
            if issparse(X):
                mean = float(X.sum()) / (X.shape[0] * n_features)
                variance = float(X.multiply(X).sum()) / (X.shape[0] * n_features) - mean**2
            else:
                variance = float(X.var())
            return 1.0 / (n_features * variance) if variance > 0 else 1.0
        raise ValueError(f"gamma must be 'scale', 'auto' or a positive float, got {gamma!r}.")
    if not isinstance(gamma, numbers.Real) or not gamma > 0:
        raise ValueError(f"gamma must be 'scale', 'auto' or a positive float, got {gamma!r}.")
    return float(gamma)


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
    """``X @ Y.T`` as a dense array; a sparse-by-sparse product densifies the smaller side."""
    if issparse(X) and issparse(Y):
        if X.shape[0] <= Y.shape[0]:
            return (Y @ _dense(X).T).T.copy()
        return X @ _dense(Y).T
    if issparse(Y):
        return (Y @ X.T).T.copy()
    return X @ Y.T  # dense @ dense, or sparse @ dense: a dense array either way


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
        from ._kernel_functions_cuda import kernel_from_dots_cuda

        return kernel_from_dots_cuda(
            dots, X_sq_norms, Y_sq_norms, KERNEL_CODES[kernel], gamma, coef0, degree
        )
    if kernel == "rbf":
        sq_dist = X_sq_norms[:, None] + Y_sq_norms[None, :] - 2 * dots
        np.maximum(sq_dist, 0, out=sq_dist)  # rounding can make it slightly negative
        return np.exp(-gamma * sq_dist, out=sq_dist)
    if kernel == "poly":
        return (gamma * dots + coef0) ** degree
    return dots


def kernel_rows(X, rows, sq_norms, *, kernel, gamma, degree=3, coef0=0.0):
    """Rows ``K(X[rows], X)`` of X's kernel matrix, from X's precomputed squared norms."""
    return kernel_block(X[rows], X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                        X_sq_norms=sq_norms[rows], Y_sq_norms=sq_norms)
