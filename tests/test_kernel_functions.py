import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel
from sklearn.svm import SVC

from gpusvm._backend import to_numpy
from gpusvm._validation import to_backend
from gpusvm.kernel_functions import KernelSpec, kernel_block, resolve_gamma, squared_row_norms

from .conftest import needs_device

ORACLES = {
    "linear": lambda X, Y, gamma, degree, coef0: linear_kernel(X, Y),
    "rbf": lambda X, Y, gamma, degree, coef0: rbf_kernel(X, Y, gamma=gamma),
    "poly": lambda X, Y, gamma, degree, coef0: polynomial_kernel(X, Y, degree=degree, gamma=gamma, coef0=coef0),
}


@pytest.mark.parametrize("kernel", sorted(ORACLES))
@pytest.mark.parametrize("layout", ["dense", "sparse", "sparse-dense", "dense-sparse"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_block_matches_scikit_learn(backend, rng, kernel, layout, dtype):
    X = rng.normal(size=(23, 7)) * (rng.random((23, 7)) < 0.6)
    Y = rng.normal(size=(11, 7)) * (rng.random((11, 7)) < 0.6)
    gamma, degree, coef0 = float(rng.uniform(0.05, 0.5)), int(rng.integers(1, 4)), float(rng.normal())
    expected = ORACLES[kernel](X, Y, gamma, degree, coef0)
    as_x = sp.csr_matrix if layout in ("sparse", "sparse-dense") else np.asarray
    as_y = sp.csr_matrix if layout in ("sparse", "dense-sparse") else np.asarray
    Xb = to_backend(as_x(X.astype(dtype)), backend)
    Yb = to_backend(as_y(Y.astype(dtype)), backend)
    got = kernel_block(Xb, Yb, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
    got = to_numpy(got)
    tolerance = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * max(1.0, np.abs(expected).max()))


def test_gamma_scale_matches_svc(rng):
    X = rng.normal(size=(50, 6)) * (rng.random((50, 6)) < 0.5)
    y = rng.integers(0, 2, 50)
    svc = SVC(gamma="scale").fit(X, y)
    assert resolve_gamma("scale", X) == pytest.approx(svc._gamma, rel=1e-12)
    assert resolve_gamma("scale", sp.csr_matrix(X)) == pytest.approx(svc._gamma, rel=1e-12)
    assert resolve_gamma("auto", X) == pytest.approx(1 / 6)
    assert resolve_gamma(0.3, X) == 0.3
    with pytest.raises(ValueError, match="gamma.*-1"):
        resolve_gamma(-1, X)


@pytest.mark.parametrize("sparse", [False, True])
def test_gamma_scale_on_values_whose_squares_leave_the_float_range(rng, sparse):
    """X.var() overflows near 1e153 (and gamma came out 0, a kernel that ignores X): the
    variance is taken of X scaled to 1, so gamma is SVC's on the scaled X over the scale
    squared; where even that is not a float, a clear error (tiny values, gamma above the
    float range), not gamma=inf."""
    X = rng.normal(size=(50, 6)) * (rng.random((50, 6)) < 0.5)
    as_given = sp.csr_matrix if sparse else np.asarray
    gamma = resolve_gamma("scale", X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning reaches the user
        assert resolve_gamma("scale", as_given(X * 1e153)) == pytest.approx(gamma * 1e-306, rel=1e-10)
    with pytest.raises(ValueError, match=r"gamma='scale' is 1 / \(n_features \* X.var\(\)\) = inf .* Scale X"):
        resolve_gamma("scale", as_given(X * 1e-160))
    assert resolve_gamma("scale", as_given(np.ones((4, 3)))) == 1.0  # constant X: as SVC
    assert resolve_gamma("scale", as_given(np.full((3, 2), 0.3))) == 1.0  # (E[x^2] - mean^2 fell below 0)
    with pytest.raises(ValueError, match="= inf on this X"):  # squares that underflow to a variance of 0
        resolve_gamma("scale", as_given(X * 1e-170))


def test_gamma_scale_of_float32_x_is_summed_in_float64(backend, rng):
    """float32 X gets the gamma of its values summed in float64, on both backends: float32
    sums, which NumPy and CuPy add in different orders, gave gammas apart in the seventh
    digit (an H200 run, 2026-11-27), and SBP's nu='auto' pilot turned that into models
    apart in the fourth."""
    X = (1000 + rng.normal(size=(100_000, 10))).astype(np.float32)
    S = sp.random(20_000, 50, density=0.1, random_state=0, format="csr", dtype=np.float32)
    S.data += 100
    for given, exact in [(X, X.astype(np.float64)), (S, S.toarray().astype(np.float64))]:
        expected = 1 / (given.shape[1] * exact.var())
        assert resolve_gamma("scale", to_backend(given, backend)) == pytest.approx(expected, rel=1e-12)


def test_gamma_scale_of_sparse_x_is_dense_xs_on_near_constant_values(rng):
    """The sparse variance is taken about the mean: near-constant values gave a variance
    of rounding noise (or below 0: a division by zero, or a negative gamma)."""
    for _ in range(200):
        c = rng.normal() * 10.0 ** rng.integers(-5, 5)
        X = np.full((5, 3), c)
        X[rng.integers(5), rng.integers(3)] = np.nextafter(c, np.inf)
        X[rng.random((5, 3)) < 0.3] = 0
        assert resolve_gamma("scale", sp.csr_matrix(X)) == pytest.approx(resolve_gamma("scale", X), rel=1e-12)


def test_a_kernel_model_on_huge_values_is_the_model_on_the_values_scaled(rng):
    from gpusvm import KernelPegasosSVC

    X = rng.normal(size=(120, 4))
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int)
    scaled = KernelPegasosSVC(max_iter=2, random_state=0).fit(X, y)
    huge = KernelPegasosSVC(max_iter=2, random_state=0).fit(X * 1e153, y)
    assert huge.gamma_ == pytest.approx(scaled.gamma_ * 1e-306, rel=1e-10)
    np.testing.assert_array_equal(huge.predict(X * 1e153), scaled.predict(X))


def test_unknown_kernel_is_named():
    with pytest.raises(ValueError, match="kernel.*'sigmoid'"):
        kernel_block(np.ones((2, 2)), np.ones((2, 2)), kernel="sigmoid", gamma=1.0)


@needs_device
@pytest.mark.parametrize("density, dense_products", [(0.3, True), (0.01, False)])
def test_device_matrix_rows_of_a_csr_x_are_dense_products_where_it_is_dense_enough(
    rng, monkeypatch, density, dense_products
):
    """The resident matrix's and the row cache's kernel rows of a CSR X come from products
    of a dense copy where X is dense and small enough (on an H200, Adult's matrix took ten
    times as long by cuSPARSE as by cuBLAS's GEMMs), of its CSR rows otherwise; the same
    values either way."""
    import cupy

    import gpusvm.kernel_functions as kernel_functions
    from gpusvm._backend import issparse
    from gpusvm.solvers._kernel_values_cuda import matrix_rows_function

    X = sp.random(50, 12, density=density, format="csr", random_state=int(rng.integers(2**31)), dtype=np.float32)
    X_dev = to_backend(X, "cupy")
    layouts = []
    products = kernel_functions.inner_products

    def recorded(A, B):
        layouts.append((issparse(A), issparse(B)))
        return products(A, B)

    monkeypatch.setattr(kernel_functions, "inner_products", recorded)
    compute_rows = matrix_rows_function(X_dev, squared_row_norms(X_dev), KernelSpec("rbf", 0.5))
    for rows in (np.arange(10, 30), np.array([49, 0, 7])):
        got = to_numpy(compute_rows(cupy.asarray(rows)))
        np.testing.assert_allclose(got, rbf_kernel(X[rows].toarray(), X.toarray(), gamma=0.5), rtol=1e-5, atol=1e-6)
    assert layouts == [(not dense_products, not dense_products)] * 2
