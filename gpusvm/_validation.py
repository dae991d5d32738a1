"""Input checks shared by every estimator, on both backends.

NumPy and SciPy inputs go through scikit-learn's ``validate_data`` (its messages, its
dtype and sparse handling).  CuPy inputs are checked on the device with the same
wording, so that a GPU user is never asked to copy data to the host first.
"""

from __future__ import annotations

import numbers
import sys
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._backend import is_cupy_array, is_device_backend, issparse, namespace_of, to_numpy

FLOAT_DTYPES = (np.float64, np.float32)


class IntervalNotBool(Interval):
    """scikit-learn's ``Interval`` constraint, refusing booleans: to Python ``True`` is the
    Integral 1, so ``Interval(Real, 0, None)`` takes it (``cache_size=True`` a 1 MB cache),
    where it is a mistake. scikit-learn's own constraints accept booleans as numbers (for
    ``verbose`` it lists them on purpose); this one names them as refused."""

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)

    def __str__(self):
        return f"{super().__str__()}, not a bool"


def _check_cupy_X(estimator, X, reset):
    """The device-side twin of ``validate_data`` for a CuPy array or CSR matrix."""
    import cupy
    import cupyx.scipy.sparse as cusparse

    if cusparse.issparse(X):
        X = X.tocsr()
        values = X.data
    else:
        if X.ndim != 2:
            raise ValueError(
                f"Expected 2D array, got {X.ndim}D array instead. Reshape your data "
                "either using array.reshape(-1, 1) if your data has a single feature or "
                "array.reshape(1, -1) if it contains a single sample."
            )
        values = X
    if X.dtype not in FLOAT_DTYPES:
        X = X.astype(np.float64)
        values = X.data if cusparse.issparse(X) else X
    n_samples, n_features = X.shape
    name = type(estimator).__name__
    if n_samples == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required by {name}.")
    if n_features == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required by {name}.")
    if not bool(cupy.isfinite(values).all()):
        raise ValueError(f"Input X contains NaN or infinity; {name} does not accept missing values.")
    if reset:
        estimator.n_features_in_ = n_features
    elif n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {name} is expecting {estimator.n_features_in_} features as input."
        )
    return X


def warn_if_dask(estimator, *collections):
    """Warn when a single-node estimator gets dask collections: they would be computed
    into this process whole. Looks in ``sys.modules`` only, so dask is never imported."""
    dask = sys.modules.get("dask")
    if dask is None or not any(dask.is_dask_collection(data) for data in collections):
        return
    name = type(estimator).__name__
    distributed = f" gpusvm.dask.{name} trains where the chunks are." if name in _DASK_ESTIMATORS else ""
    warnings.warn(
        f"{name} got a dask collection: it is computed into this process (all of it) before training."
        f"{distributed} To train in memory without this warning, pass X.compute().",
        UserWarning,
        stacklevel=4,
    )


_DASK_ESTIMATORS = {"PegasosSVC", "FTRLClassifier", "TruncatedGradientClassifier", "FOBOSClassifier", "RDAClassifier"}


def check_X(estimator, X, *, reset):
    """Validate X and return it as float32/float64 (dense, or CSR when sparse).

    CuPy inputs stay on the device; everything else follows scikit-learn.
    """
    warn_if_dask(estimator, X)
    if is_cupy_array(X):
        return _check_cupy_X(estimator, X, reset)
    return validate_data(estimator, X, reset=reset, accept_sparse="csr", dtype=FLOAT_DTYPES, order="C")


def check_X_y(estimator, X, y, *, reset):
    """Validate X and y; y comes back as a NumPy array on the host."""
    warn_if_dask(estimator, X, y)
    if is_cupy_array(X) or is_cupy_array(y):
        X = _check_cupy_X(estimator, X, reset) if is_cupy_array(X) else check_X(estimator, X, reset=reset)
        y = to_numpy(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(
                f"y must be 1D with one label per row of X: X has {X.shape[0]} rows, y has shape {y.shape}."
            )
    else:
        X, y = validate_data(estimator, X, y, reset=reset, accept_sparse="csr", dtype=FLOAT_DTYPES, order="C")
    check_feature_scale(X)
    return X, y


def largest_absolute_value(X):
    """``max |x_ij|`` over the stored values of a dense or CSR X (0 when there are none),
    without a temporary copy."""
    values = X.data if issparse(X) else X
    return max(abs(float(values.max())), abs(float(values.min()))) if values.size else 0.0


def check_feature_scale(X):
    """Refuse an X whose squared row norms overflow its dtype: every solver's inner
    products would too, and the model would come out NaN. One pass over the values;
    the row norms are computed only when the largest value makes overflow possible."""
    largest = largest_absolute_value(X)
    limit = float(np.finfo(X.dtype).max)
    if largest * largest * X.shape[1] <= limit:
        return
    if issparse(X):
        sq_norms = X.multiply(X).sum(axis=1)
    else:
        sq_norms = namespace_of(X).einsum("ij,ij->i", X, X)
    if not np.isfinite(float(sq_norms.max())):
        raise ValueError(
            f"X holds values up to {largest:.3g} in absolute value: a row's squared norm overflows "
            f"{X.dtype} (at most {limit:.3g}), and so would the solver's inner products. "
            "Scale the features, e.g. with sklearn.preprocessing.StandardScaler."
        )


def check_weights(sample_weight, n_samples):
    """Per-sample weights as a float64 NumPy array (ones when None), non-negative."""
    if is_cupy_array(sample_weight):
        sample_weight = to_numpy(sample_weight)
    placeholder = np.empty((n_samples, 0))
    return _check_sample_weight(sample_weight, placeholder, dtype=np.float64, ensure_non_negative=True)


def class_weight_per_sample(class_weight, y):
    """Each row's weight from ``class_weight`` (a dict or 'balanced'), with the checks
    ``sample_weight`` gets: finite, not negative."""
    if isinstance(class_weight, dict):
        for label, value in class_weight.items():
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
                raise ValueError(
                    f"class_weight must map each class to a finite number at least 0; "
                    f"got class_weight[{label!r}] = {value!r}."
                )
    return compute_sample_weight(class_weight, y)


def check_some_weight(weights, class_weight):
    """Refuse weights (sample times class weights) that are all zero: nothing to learn."""
    if not np.any(weights > 0):
        raise ValueError(
            f"Every row has weight 0 (class_weight={class_weight!r} times sample_weight): "
            "at least one row needs a positive weight."
        )


def check_classes(y, estimator_name):
    """Sorted classes of y; raises when fewer than two."""
    classes = np.unique(y)
    if classes.shape[0] < 2:
        raise ValueError(
            f"The number of classes has to be greater than one; got {classes.shape[0]} "
            f"class (y contains only {classes.tolist()!r}); {estimator_name} needs two "
            "or more classes."
        )
    return classes


def class_positions(y, classes):
    """The position of each label of y in the sorted ``classes``; raises on unknown labels."""
    positions = np.searchsorted(classes, y)
    unknown = (positions >= classes.shape[0]) | (classes[np.minimum(positions, classes.shape[0] - 1)] != y)
    if unknown.any():
        raise ValueError(
            f"y contains labels {np.unique(y[unknown]).tolist()!r} that are not in classes {classes.tolist()!r}."
        )
    return positions


def one_vs_rest_targets(y, classes):
    """Targets in {-1, +1}: one column for two classes (+1 = classes[1]), else one per class."""
    positions = class_positions(y, classes)
    if classes.shape[0] == 2:
        return np.where(positions == 1, 1.0, -1.0)[:, None]
    targets = -np.ones((y.shape[0], classes.shape[0]))
    targets[np.arange(y.shape[0]), positions] = 1.0
    return targets


# The host memory a linear model takes a feature (column of X), at its peak: a scratch int64
# of the steps, and for each of its one-vs-rest models about seven float64 arrays (the state's
# two, the coefficients and their temporaries, the fitted coef_), the most that tracemalloc
# shows for any of FTRL, TG, FOBOS, RDA and PegasosSVC (docs/benchmarks.md, "Figures behind
# the code").
LINEAR_BYTES_PER_FEATURE = 8
LINEAR_BYTES_PER_FEATURE_AND_MODEL = 56


def check_linear_model_width(n_features, n_models, available_bytes):
    """Refuse, before any of it is allocated, a linear model whose dense arrays over X's
    ``n_features`` columns and an intercept (``n_models`` one-vs-rest models) would take
    more than the ``available_bytes`` this process may still allocate (None: unknown, no
    check). A sparse X of 2^31 columns and three entries a row is small; its model is not,
    and its fit grew until the kernel killed it, with no message.

    Raises
    ------
    MemoryError
        Naming ``n_features``, the bytes needed and those available, and feature hashing.
    """
    needed = (n_features + 1) * (LINEAR_BYTES_PER_FEATURE + n_models * LINEAR_BYTES_PER_FEATURE_AND_MODEL)
    if available_bytes is None or needed <= available_bytes:
        return
    raise MemoryError(
        f"X has n_features={n_features} columns: the linear model keeps dense arrays over them for its "
        f"{n_models} one-vs-rest model(s), about {needed} bytes ({needed / 2**30:.3g} GiB), more than the "
        f"{available_bytes} bytes ({available_bytes / 2**30:.3g} GiB) this process may still allocate. Hash the "
        "features to fewer columns (sklearn.feature_extraction.FeatureHasher(n_features=2**20), or "
        "HashingVectorizer), or number only the columns that hold values."
    )


INT32_LIMIT = 2**31 - 1


def check_int32_indexable(X):
    """Refuse a sparse X that the CUDA kernels' int32 indices cannot address, naming the
    count that is too large (the NumPy backend has no such limit)."""
    for what, count in (("stored entries (nnz)", X.nnz), ("columns", X.shape[1])):
        if count > INT32_LIMIT:
            raise ValueError(
                f"A sparse X with {count} {what} is too large for backend='cupy': its CUDA kernels "
                f"index with int32 (at most {INT32_LIMIT}). Split the data, or use backend='numpy'."
            )


def canonical_csr(X):
    """X (SciPy or cupyx CSR) with sorted indices and one entry per (row, feature). The
    caller's matrix is never modified: a copy is made when X is not canonical already
    (cupyx's products, for one, sum duplicates in place)."""
    if X.has_canonical_format:
        return X
    X = X.copy()
    X.sum_duplicates()
    return X


def to_backend(X, backend):
    """Move a validated X (dense or CSR) to the memory of ``backend`` (a resolved backend's
    name or its array module); on the device, a CSR X is canonical (see
    :func:`canonical_csr`) and its indices int32."""
    if not is_device_backend(backend):
        if is_cupy_array(X):
            return X.get()
        return X
    import cupy
    import cupyx.scipy.sparse as cusparse

    if is_cupy_array(X):
        if cusparse.issparse(X):
            check_int32_indexable(X)
            X = canonical_csr(X)
            if X.indices.dtype != np.int32 or X.indptr.dtype != np.int32:  # CuPy 14 keeps SciPy's int64
                X = cusparse.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)
                X.has_canonical_format = True  # as it was: spares the device a check
            return X
        return X
    if sp.issparse(X):
        X = X.tocsr()
        check_int32_indexable(X)
        return cusparse.csr_matrix(
            (cupy.asarray(X.data), cupy.asarray(X.indices, dtype=np.int32), cupy.asarray(X.indptr, dtype=np.int32)),
            shape=X.shape,
        )
    return cupy.ascontiguousarray(cupy.asarray(X))


__all__ = [
    "IntervalNotBool",
    "canonical_csr",
    "check_int32_indexable",
    "check_linear_model_width",
    "check_X",
    "check_X_y",
    "check_classes",
    "check_feature_scale",
    "check_some_weight",
    "class_weight_per_sample",
    "largest_absolute_value",
    "class_positions",
    "check_is_fitted",
    "check_weights",
    "one_vs_rest_targets",
    "to_backend",
]
