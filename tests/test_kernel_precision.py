"""Kernel values where their digits survive: rbf centred, float32 only where its bound holds
(``gpusvm.kernel_functions._precision``), and prediction centred as training is."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification

from gpusvm import KernelPegasosSVC, SBPClassifier
from gpusvm.kernel_functions import (
    FLOAT32_KERNEL_TOLERANCE,
    RowMoments,
    centred_moments,
    float32_kernel_error,
    kernel_training_copy,
    row_statistics,
    statistics_of,
)

from .conftest import to_host


@pytest.fixture(scope="module")
def standardized():
    """A standardized binary set: 1,500 training rows, 1,000 test rows, 20 features."""
    X, y = make_classification(n_samples=2500, n_features=20, n_informative=10, random_state=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X[:1500], y[:1500], X[1500:], y[1500:]


@pytest.mark.parametrize("shift", [1e4, 1e5])
def test_default_rbf_fit_on_rows_far_from_the_origin_is_the_centred_fit(standardized, shift):
    # float32 distances through |x|^2 + |y|^2 - 2 x.y were noise here (the sweep: 0.826 and
    # 0.623 against 0.897); centred, the shifted fit is the unshifted one up to rounding
    X, y, X_test, y_test = standardized
    centred = SBPClassifier(random_state=0).fit(X, y)
    shifted = SBPClassifier(random_state=0).fit(X + shift, y)
    assert shifted.kernel_dtype_ == "float32"
    assert shifted.nu_ == pytest.approx(centred.nu_, rel=1e-3)
    assert shifted.score(X_test + shift, y_test) >= centred.score(X_test, y_test) - 0.01


def test_kernel_pegasos_centres_float32_rbf_rows(standardized):
    X, y, X_test, y_test = standardized
    shift = np.float32(1e4)
    model = KernelPegasosSVC(random_state=0, max_iter=2)
    centred = model.fit(X.astype(np.float32), y).score(X_test.astype(np.float32), y_test)
    shifted = model.fit(X.astype(np.float32) + shift, y).score(X_test.astype(np.float32) + shift, y_test)
    assert shifted >= centred - 0.01


def test_rbf_prediction_centres_rows_far_from_the_origin(standardized):
    # float64 distances cancel too at 1e8 from the origin (|x|^2 ~ 1e17 against spreads of 10)
    X, y, X_test, _ = standardized
    shift = 1e8
    model = SBPClassifier(random_state=0, kernel_dtype="float64").fit(X, y)
    expected = model.decision_function(X_test)
    model.support_vectors_ = model.support_vectors_ + shift
    np.testing.assert_allclose(model.decision_function(X_test + shift), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:.*sit far from their mean:UserWarning")  # on purpose: features near 100
@pytest.mark.filterwarnings("ignore:.*water level:sklearn.exceptions.ConvergenceWarning")  # one epoch of them
def test_linear_kernel_on_shifted_rows_picks_float64_and_float32_warns(standardized):
    X, y, _, _ = standardized
    shifted = X + 100.0  # the sweep's linear case: features near 100, unit spread
    assert (
        SBPClassifier(kernel="linear", nu=0.01, max_iter=1, random_state=0).fit(shifted, y).kernel_dtype_ == "float64"
    )
    assert SBPClassifier(kernel="linear", nu=0.01, max_iter=1, random_state=0).fit(X, y).kernel_dtype_ == "float32"
    with pytest.warns(UserWarning, match="kernel_dtype='float64'"):
        SBPClassifier(kernel="linear", nu=0.01, max_iter=1, kernel_dtype="float32", random_state=0).fit(shifted, y)


def test_sparse_rows_are_not_centred_and_their_bound_decides(standardized):
    X, y, _, _ = standardized
    X_sparse = sp.csr_matrix(X + 100.0)
    copy, dtype = kernel_training_copy(X_sparse, kernel="rbf", gamma=1.0 / 20, kernel_dtype="auto")
    assert sp.issparse(copy) and dtype == np.float64
    copy, dtype = kernel_training_copy(sp.csr_matrix(X), kernel="rbf", gamma=1.0 / 20, kernel_dtype="auto")
    assert dtype == np.float32


@pytest.mark.parametrize("scale", [1e-20, 1e-30, 1e-50])
def test_values_float32_cannot_hold_pick_float64(standardized, scale):
    # the sweep: X x 1e-50 scored 0.494 (chance) in float32 with no error
    X, y, X_test, y_test = standardized
    expected = SBPClassifier(random_state=0, kernel_dtype="float64").fit(X, y).score(X_test, y_test)
    model = SBPClassifier(random_state=0).fit(X * scale, y)
    assert model.kernel_dtype_ == "float64"
    assert model.score(X_test * scale, y_test) >= expected - 0.01


def test_gamma_overflowing_float32_names_kernel_dtype_and_scale(standardized):
    X, y, _, _ = standardized
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # float32 asked on values it cannot hold
        with pytest.raises(ValueError, match=r"from gamma='scale'.*kernel_dtype='float64'"):
            SBPClassifier(kernel_dtype="float32").fit(X * 1e-30, y)


def test_statistics_add_up_across_parts(standardized):
    # the workers of gpusvm.dask each give their part's moments; their total is the whole's
    X = standardized[0] + 7.0
    for part_of in (lambda rows: rows, sp.csr_matrix):
        parts = [RowMoments.of(part_of(X[:600])), RowMoments.of(part_of(X[600:]))]
        total, whole = RowMoments.total(parts), RowMoments.of(part_of(X))
        dense = (lambda sums: sums.toarray().ravel()) if sp.issparse(whole.column_sums) else np.asarray
        np.testing.assert_allclose(dense(total.column_sums), dense(whole.column_sums))
        assert (total.n_rows, total.n_values, total.sparse) == (whole.n_rows, whole.n_values, whole.sparse)
        assert total.squares == pytest.approx(whole.squares) and total.largest_raw == whole.largest_raw
    total = RowMoments.total([RowMoments.of(X[:600]), RowMoments.of(X[600:])])  # dense: centred passes too
    about_mean = [centred_moments(X[:600], total.column_means()), centred_moments(X[600:], total.column_means())]
    merged = statistics_of(total, (sum(p[0] for p in about_mean), max(p[1] for p in about_mean)), True)
    direct = row_statistics(X, centred=True)
    assert merged.largest == pytest.approx(direct.largest) and merged.spread == pytest.approx(direct.spread)


def test_error_bounds_on_standardized_and_shifted_rows(standardized):
    X = standardized[0]
    for kernel in ("rbf", "linear", "poly"):
        centred = float32_kernel_error(row_statistics(X, centred=kernel == "rbf"), kernel=kernel, gamma=0.05, coef0=1.0)
        assert centred < FLOAT32_KERNEL_TOLERANCE[kernel] / 3
    shifted = row_statistics(X + 1e4, centred=False)
    assert float32_kernel_error(shifted, kernel="rbf", gamma=0.05) > 1  # the exponent is noise
    assert float32_kernel_error(row_statistics(X + 1e4, centred=True), kernel="rbf", gamma=0.05) < 1e-5


def test_sbp_models_agree_on_both_backends_on_shifted_rows(standardized, backend):
    X, y, X_test, _ = standardized
    X, y = X[:300] + 1e4, y[:300]
    numpy_model = SBPClassifier(random_state=0, nu=0.05, max_iter=1, backend="numpy").fit(X, y)
    model = SBPClassifier(random_state=0, nu=0.05, max_iter=1, backend=backend).fit(X, y)
    np.testing.assert_array_equal(model.support_, numpy_model.support_)
    np.testing.assert_allclose(
        to_host(model.decision_function(X_test[:50] + 1e4)), numpy_model.decision_function(X_test[:50] + 1e4), rtol=1e-4
    )


def test_the_bounds_of_a_wide_sparse_x_take_memory_of_its_nonzeros():
    # the sweep: column sums over 2^27 columns took 2.2 GB where the fit needs 3 MB
    import tracemalloc

    rng = np.random.default_rng(0)
    rows, columns = np.repeat(np.arange(200), 3), rng.integers(0, 2**27, 600)
    X = sp.csr_matrix((rng.random(600), (rows, columns)), shape=(200, 2**27))
    tracemalloc.start()
    try:
        copy, dtype = kernel_training_copy(X, kernel="linear", gamma=1.0, kernel_dtype="auto")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sp.issparse(copy) and dtype == np.float32
    assert peak < 2**20


def test_a_poly_gamma_past_float32_is_refused_where_float32_is_forced(standardized):
    # gamma='scale' on values near 1e-20 is 5e38: float32's gamma * <x, y> was inf * 0, NaN
    # responses and a ZeroDivisionError in the water level
    X, y, _, _ = standardized
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # float32 forced where it cannot hold the values
        with pytest.raises(ValueError, match=r"overflows float32.+'poly' kernel.+kernel_dtype='float64'"):
            SBPClassifier(kernel="poly", coef0=1.0, nu=0.01, max_iter=1, kernel_dtype="float32").fit(X * 1e-20, y)
    model = SBPClassifier(kernel="poly", coef0=1.0, nu=0.01, max_iter=1, random_state=0).fit(X * 1e-20, y)
    assert model.kernel_dtype_ == "float64"
