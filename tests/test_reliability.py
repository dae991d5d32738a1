"""Defects a hostile sweep found (issue 17), each with the test that failed before its fix:
overflowing data, unchecked class weights, a one-member class in SBP, wide sparse data
in the kernel models, a changed fit_intercept in partial_fit, nu_from_svc's inputs."""

import tracemalloc

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import SVC

from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
    nu_from_svc,
)
from gpusvm._validation import to_backend
from gpusvm.kernel_functions import inner_products

from .conftest import to_host

ALL_ESTIMATORS = [
    PegasosSVC,
    KernelPegasosSVC,
    SBPClassifier,
    FTRLClassifier,
    TruncatedGradientClassifier,
    FOBOSClassifier,
    RDAClassifier,
]
Z = np.random.default_rng(0).normal(size=(80, 4))
Y = (Z[:, 0] > 0).astype(int)


def fitted_copy(model):
    return {name: np.copy(value) if isinstance(value, np.ndarray) else value for name, value in model.__dict__.items()}


def assert_unchanged(model, before):
    assert model.__dict__.keys() == before.keys()
    for name, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(model.__dict__[name], value)


# --- 1. overflow ------------------------------------------------------------------


@pytest.mark.parametrize("Estimator", ALL_ESTIMATORS)
def test_values_whose_squares_overflow_are_refused_by_name(Estimator):
    with pytest.raises(ValueError, match=r"X holds values up to 3.77e\+300.*overflows float64.*StandardScaler"):
        Estimator(random_state=0).fit(Z * 1e300, Y)


def test_float32_values_whose_squares_overflow_float32_are_refused():
    with pytest.raises(ValueError, match="overflows float32"):
        PegasosSVC(random_state=0).fit((Z * 1e37).astype(np.float32), Y)
    X = sp.csr_matrix((Z * 1e37).astype(np.float32))
    with pytest.raises(ValueError, match="overflows float32"):
        FTRLClassifier(random_state=0).fit(X, Y)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_model_that_overflows_during_training_is_refused_and_partial_fit_rolls_back():
    # Row norms just below float64's largest value pass the input check; FTRL's sums overflow.
    near_limit = Z * np.sqrt(1.5e308 / (Z**2).sum(axis=1).max())
    with pytest.raises(ValueError, match="learned a model with NaN or infinite values.*feature scale"):
        FTRLClassifier(batch_size=32, random_state=0).fit(near_limit, Y)
    model = FTRLClassifier(batch_size=32, random_state=0).partial_fit(Z, Y, classes=[0, 1])
    before = fitted_copy(model)
    with pytest.raises(ValueError, match="learned a model with NaN"):
        model.partial_fit(np.vstack([near_limit] * 3), np.tile(Y, 3))
    assert_unchanged(model, before)


@pytest.mark.parametrize("Estimator", [KernelPegasosSVC, SBPClassifier])
def test_kernel_settings_that_overflow_are_refused(Estimator):
    for value in (np.nan, np.inf):
        with pytest.raises(ValueError, match="'coef0' parameter.*Got (nan|inf)"):
            Estimator(kernel="poly", coef0=value).fit(Z, Y)
    with pytest.raises(ValueError, match="'gamma' parameter.*Got inf"):
        Estimator(gamma=np.inf).fit(Z, Y)
    # SBP's kernel_dtype='auto' takes float64 where float32 overflows: float64's limit is the one named
    with pytest.raises(ValueError, match="The 'poly' kernel overflows float64.*gamma=1e\\+200"):
        Estimator(kernel="poly", gamma=1e200, random_state=0).fit(Z, Y)
    if Estimator is SBPClassifier:  # float32 forced: gamma itself overflows it, and float64 is the remedy
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # float32 asked where it cannot hold the values
            with pytest.raises(ValueError, match=r"gamma=1e\+200 overflows float32.*kernel_dtype='float64'"):
                Estimator(gamma=1e200, random_state=0, kernel_dtype="float32").fit(Z, Y)
    model = Estimator(gamma=1e200, random_state=0).fit(Z, Y)  # rbf: values in [0, 1] at any gamma
    assert np.isfinite(model.decision_function(Z)).all()


# --- 2. class_weight gets sample_weight's checks ---------------------------------------


@pytest.mark.parametrize("Estimator", [PegasosSVC, KernelPegasosSVC])
@pytest.mark.parametrize(
    "class_weight,message",
    [
        ({0: np.nan, 1: 1.0}, r"class_weight\[0\] = nan"),
        ({0: 1.0, 1: np.inf}, r"class_weight\[1\] = inf"),
        ({0: -1.0, 1: 1.0}, r"class_weight\[0\] = -1.0"),
        ({0: "heavy", 1: 1.0}, r"class_weight\[0\] = 'heavy'"),
        ({0: 0.0, 1: 0.0}, "Every row has weight 0"),
    ],
)
def test_bad_class_weights_are_refused_by_name(Estimator, class_weight, message):
    with pytest.raises(ValueError, match=message):
        Estimator(class_weight=class_weight, random_state=0).fit(Z, Y)


def test_class_weights_times_sample_weights_all_zero_are_refused_and_partial_fit_rolls_back():
    only_class_0 = np.where(Y == 0, 1.0, 0.0)
    with pytest.raises(ValueError, match="Every row has weight 0"):
        PegasosSVC(class_weight={0: 0.0, 1: 1.0}).fit(Z, Y, sample_weight=only_class_0)
    model = PegasosSVC(random_state=0).partial_fit(Z, Y, classes=[0, 1])
    before = fitted_copy(model)
    with pytest.raises(ValueError, match="class_weight"):
        model.set_params(class_weight={0: -2.0, 1: 1.0}).partial_fit(Z, Y)
    assert_unchanged(model, before)


# --- 3. SBP with a one-member class ------------------------------------------------


def test_sbp_trains_without_a_holdout_when_a_class_has_one_row():
    y = Y.copy()
    y[0] = 2
    model = SBPClassifier(random_state=0).fit(Z, y)  # 80 rows: batch_size='auto' is 2, 40 steps an epoch
    assert model.classes_.tolist() == [0, 1, 2] and model.support_.max() < Z.shape[0]
    assert all(record["holdout_error"] is None for record in model.history_)  # no holdout
    assert model.score(Z, y) > 0.9


# --- 5. wide sparse data in O(nnz) memory ---------------------------------------------


def wide_sparse(n_rows, n_columns, nnz, seed=0):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(
        (rng.normal(size=nnz), (rng.integers(0, n_rows, nnz), rng.integers(0, n_columns, nnz))),
        shape=(n_rows, n_columns),
    )


@pytest.mark.parametrize("shapes", [((3, 50), (7, 50)), ((7, 2**20), (3, 2**20)), ((64, 2**20), (200, 2**20))])
def test_sparse_inner_products_match_dense_ones(shapes, backend):
    (rows_x, cols), (rows_y, _) = shapes
    X = wide_sparse(rows_x, cols, 5 * rows_x, seed=1)
    Y = wide_sparse(rows_y, cols, 5 * rows_y, seed=2)
    Y = sp.vstack([Y, X[:2]]).tocsr()  # some columns shared for sure
    expected = (X @ Y.T).toarray()
    X_dev, Y_dev = to_backend(X, backend), to_backend(Y, backend)
    np.testing.assert_allclose(to_host(inner_products(X_dev, Y_dev)), expected, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(to_host(inner_products(Y_dev, X_dev)), expected.T, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("case", ["kernel-pegasos batch 64 fit", "kernel-pegasos predict", "sbp predict"])
def test_kernel_models_on_wide_sparse_data_stay_within_o_nnz_memory(case):
    # 200 rows x 2^20 columns with 4,000 nonzeros: densifying one side of a product was
    # 0.5 to 2.5 GiB here (on 2^24 columns, 8 to 18 GiB); SVC needs well under a MiB.
    X = wide_sparse(200, 2**20, 4000)
    y = np.random.default_rng(0).integers(0, 2, 200)
    if case == "kernel-pegasos batch 64 fit":
        run = lambda: KernelPegasosSVC(batch_size=64, random_state=0).fit(X, y)  # noqa: E731
    else:
        Estimator = KernelPegasosSVC if case.startswith("kernel") else SBPClassifier
        model = Estimator(random_state=0).fit(X, y)
        run = lambda: model.predict(X)  # noqa: E731
    tracemalloc.start()
    try:
        run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB"


# --- 6. partial_fit after fit_intercept changed ----------------------------------------


@pytest.mark.parametrize("trained_with", [False, True])
def test_pegasos_partial_fit_after_fit_intercept_changed_says_so_and_keeps_the_model(trained_with):
    model = PegasosSVC(fit_intercept=trained_with, random_state=0).partial_fit(Z, Y, classes=[0, 1])
    before = fitted_copy(model)
    model.set_params(fit_intercept=not trained_with)
    with pytest.raises(ValueError, match=f"trained with fit_intercept={trained_with}.*call fit"):
        model.partial_fit(Z, Y)
    assert_unchanged(model, before)
    model.set_params(fit_intercept=trained_with).partial_fit(Z, Y)  # back as trained: continues
    model.set_params(fit_intercept=not trained_with).fit(Z, Y)  # fit starts over with the new setting
    assert model._state.v.shape[1] == Z.shape[1] + int(not trained_with)


# --- 8. nu_from_svc ---------------------------------------------------------------


def test_nu_from_svc_reads_gpusvm_kernel_models_too():
    svc = SVC(gamma=0.5).fit(Z, Y)
    nu_svc = nu_from_svc(svc, Z, Y)
    for model in (
        KernelPegasosSVC(gamma=0.5, max_iter=20, random_state=0).fit(Z, Y),
        SBPClassifier(gamma=0.5, nu=nu_svc, max_iter=20, validation_fraction=0, random_state=0).fit(Z, Y),
    ):
        nu = nu_from_svc(model, Z, Y)
        assert 0 < nu < 1
    # SBP trained at SVC's nu sits near the same point of the path: nu read back is close
    assert nu == pytest.approx(nu_svc, rel=0.5)


def test_nu_from_svc_names_bad_inputs():
    svc = SVC().fit(Z, Y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples: \\[80, 50\\]"):
        nu_from_svc(svc, Z, Y[:50])
    with pytest.raises(ValueError, match="labels \\[7\\] that are not the model's classes"):
        nu_from_svc(svc, Z, np.where(Y == 1, 7, 0))
    with pytest.raises(ValueError, match="two classes"):
        nu_from_svc(SVC().fit(Z, np.arange(80) % 3), Z, np.arange(80) % 3)
    with pytest.raises(ValueError, match="'sigmoid'"):
        nu_from_svc(SVC(kernel="sigmoid").fit(Z, Y), Z, Y)
