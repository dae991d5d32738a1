"""Every bad input of the issue's list gets a clear error naming the problem and the value."""

import numpy as np
import pytest
import scipy.sparse as sp

from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
)

from .conftest import needs_device

ESTIMATORS = [PegasosSVC, KernelPegasosSVC, SBPClassifier, FTRLClassifier, RDAClassifier]
X_GOOD = np.random.default_rng(0).normal(size=(20, 3))
Y_GOOD = np.array([0, 1] * 10)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("sparse", [False, True])
def test_nan_or_inf_in_X(Estimator, value, sparse):
    X = X_GOOD.copy()
    X[4, 1] = value
    with pytest.raises(ValueError, match="NaN|infinity"):
        Estimator().fit(sp.csr_matrix(X) if sparse else X, Y_GOOD)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_empty_X(Estimator):
    with pytest.raises(ValueError, match="0 sample"):
        Estimator().fit(np.empty((0, 3)), np.empty(0))
    with pytest.raises(ValueError, match="0 feature"):
        Estimator().fit(np.empty((5, 0)), np.zeros(5))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_single_class(Estimator):
    with pytest.raises(ValueError, match="got 1 class.*\\[7\\]"):
        Estimator().fit(X_GOOD, np.full(20, 7))


def test_single_class_in_partial_fit_classes():
    with pytest.raises(ValueError, match="got 1 class"):
        PegasosSVC().partial_fit(X_GOOD, np.zeros(20), classes=[0])


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_continuous_labels(Estimator):
    with pytest.raises(ValueError, match="continuous"):
        Estimator().fit(X_GOOD, np.linspace(0, 1, 20))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_feature_count_mismatch_at_predict(Estimator):
    model = Estimator(max_iter=1, random_state=0).fit(X_GOOD, Y_GOOD)
    for method in (model.predict, model.decision_function):
        with pytest.raises(ValueError, match="X has 4 features, but .* is expecting 3 features"):
            method(np.ones((2, 4)))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_object_dtype(Estimator):
    X = X_GOOD.astype(object)
    Estimator(max_iter=1).fit(X, Y_GOOD)  # numbers in an object array are fine
    X[0, 0] = "not a number"
    with pytest.raises(ValueError, match="could not convert string to float: 'not a number'"):
        Estimator().fit(X, Y_GOOD)


@pytest.mark.parametrize("Estimator", [PegasosSVC, KernelPegasosSVC])
@pytest.mark.parametrize(
    "name,value",
    [
        ("C", 0),
        ("C", -1.0),
        ("lam", 0.0),
        ("lam", -2),
        ("batch_size", 0),
        ("max_iter", 0),
        ("backend", "tpu"),
        ("class_weight", "heavy"),
    ],
)
def test_bad_parameters_name_the_parameter_and_value(Estimator, name, value):
    with pytest.raises(ValueError, match=f"'{name}' parameter of {Estimator.__name__}.*Got {value!r}"):
        Estimator(**{name: value}).fit(X_GOOD, Y_GOOD)


@pytest.mark.parametrize(
    "name,value",
    [
        ("kernel", "sigmoid"),
        ("gamma", -0.5),
        ("gamma", "huge"),
        ("degree", 0),
        ("cache_size", 0),
        ("cache_size", "big"),
    ],
)
def test_bad_kernel_parameters(name, value):
    with pytest.raises(ValueError, match=f"'{name}' parameter of KernelPegasosSVC.*Got {value!r}"):
        KernelPegasosSVC(**{name: value}).fit(X_GOOD, Y_GOOD)


@pytest.mark.parametrize(
    "Estimator, name, value",
    [
        (PegasosSVC, "batch_size", 0),
        (PegasosSVC, "batch_size", -3),
        (PegasosSVC, "class_weight", "bal"),
        (FTRLClassifier, "alpha", -1.0),
        (FTRLClassifier, "l2", "x"),
        (TruncatedGradientClassifier, "truncate_every", 0),
        (FOBOSClassifier, "l1", -1.0),
        (RDAClassifier, "gamma", 0.0),
    ],
)
def test_a_parameter_set_between_partial_fits_is_checked_and_the_model_kept(Estimator, name, value):
    """scikit-learn checks the parameters at a partial_fit's first call only: one made
    bad by set_params after it is named at the next call, which leaves the model as it was."""
    model = Estimator(random_state=0).partial_fit(X_GOOD, Y_GOOD, classes=[0, 1])
    coef = model.coef_.copy()
    model.set_params(**{name: value})
    with pytest.raises(ValueError, match=f"'{name}' parameter of {Estimator.__name__}.*Got {value!r}"):
        model.partial_fit(X_GOOD, Y_GOOD)
    np.testing.assert_array_equal(model.coef_, coef)


def test_wrong_shapes():
    with pytest.raises(ValueError, match="Expected 2D array"):
        PegasosSVC().fit(np.ones(20), Y_GOOD)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        PegasosSVC().fit(X_GOOD, Y_GOOD[:-1])
    with pytest.raises(ValueError, match="sample_weight.shape == \\(19,\\), expected \\(20,\\)"):
        PegasosSVC().fit(X_GOOD, Y_GOOD, sample_weight=np.ones(19))
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        PegasosSVC().fit(X_GOOD, Y_GOOD, sample_weight=-np.ones(20))


def test_new_label_in_partial_fit_is_named():
    model = PegasosSVC().partial_fit(X_GOOD, Y_GOOD, classes=[0, 1])
    with pytest.raises(ValueError, match="labels \\[5\\] that are not in classes \\[0, 1\\]"):
        model.partial_fit(X_GOOD, np.where(Y_GOOD == 1, 5, 0))


def test_predict_before_fit():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        PegasosSVC().predict(X_GOOD)


def test_sparse_data_past_int32_indices_is_refused_for_the_gpu():
    """The CUDA kernels index CSR matrices with int32: say which count is too large."""
    import types

    from gpusvm._validation import check_int32_indexable

    with pytest.raises(ValueError, match=r"2147483648 stored entries \(nnz\).*backend='numpy'"):
        check_int32_indexable(types.SimpleNamespace(nnz=2**31, shape=(10, 5)))
    with pytest.raises(ValueError, match=r"2147483648 columns"):
        check_int32_indexable(types.SimpleNamespace(nnz=3, shape=(10, 2**31)))
    check_int32_indexable(types.SimpleNamespace(nnz=2**31 - 1, shape=(10, 2**31 - 1)))


@needs_device
def test_a_device_matrix_with_duplicate_entries_is_not_modified():
    """cupyx products sum duplicates in place: the solvers work on a canonical copy."""
    import cupy
    import cupyx.scipy.sparse as cusparse

    from gpusvm import KernelPegasosSVC, PegasosSVC

    rng = np.random.default_rng(0)
    y = np.arange(40) % 2
    indices = np.tile(np.array([0, 1, 1, 2], dtype=np.int32), 40)  # column 1 twice in every row
    indptr = np.arange(0, 161, 4, dtype=np.int32)
    for Estimator in (PegasosSVC, KernelPegasosSVC):
        X_device = cusparse.csr_matrix(
            (cupy.asarray(rng.normal(size=160)), cupy.asarray(indices), cupy.asarray(indptr)), shape=(40, 3)
        )
        before = (X_device.data.get().copy(), X_device.indices.get().copy())
        model = Estimator(max_iter=2, random_state=0, backend="cupy").fit(X_device, y)
        model.decision_function(X_device)
        np.testing.assert_array_equal(X_device.data.get(), before[0])
        np.testing.assert_array_equal(X_device.indices.get(), before[1])


@pytest.mark.parametrize("Estimator", [PegasosSVC, KernelPegasosSVC, SBPClassifier, FTRLClassifier])
def test_batch_size_true_is_batch_size_one_as_scikit_learn_takes_it(Estimator):
    """True passes scikit-learn's integer check; PegasosSVC then failed in its solver."""
    one = Estimator(batch_size=1, random_state=0).fit(X_GOOD, Y_GOOD)
    true = Estimator(batch_size=True, random_state=0).fit(X_GOOD, Y_GOOD)
    np.testing.assert_array_equal(true.decision_function(X_GOOD), one.decision_function(X_GOOD))
