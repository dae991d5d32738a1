"""FTRL, TG, FOBOS and RDA against the plain per-example reference, across backends,
through partial_fit and pickling, and against scikit-learn on Adult."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.feature_extraction import FeatureHasher
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from gpusvm import FOBOSClassifier, FTRLClassifier, RDAClassifier, TruncatedGradientClassifier
from gpusvm.datasets import load_adult
from gpusvm.solvers.online_logistic import OnlineRule, shuffled_order

from .conftest import needs_device
from .reference import reference_online_logistic

# Hyperparameters that make every rule's penalty bite on the small problems below.
CASES = {
    "ftrl": (FTRLClassifier, dict(alpha=0.5, beta=1.0, l1=0.3, l2=0.2)),
    "fobos": (FOBOSClassifier, dict(eta0=0.5, l1=0.02)),
    "tg": (TruncatedGradientClassifier, dict(eta0=0.5, l1=0.05, theta=0.3, truncate_every=3)),
    "rda": (RDAClassifier, dict(gamma=1.0, l1=0.05)),
}
ESTIMATORS = [Estimator for Estimator, _ in CASES.values()]


def sparse_problem(rng, n=60, d=12, density=0.4):
    """A small logistic problem whose rows miss most features, so that lazy penalties matter."""
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    y = (X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def reference_weights(kind, X, y01, params, *, seed, epochs, batch_size, fit_intercept=True):
    orders = [shuffled_order(seed, epoch, X.shape[0]) for epoch in range(epochs)]
    return reference_online_logistic(kind, X, y01, orders, params, fit_intercept, batch_size)


def fitted_weights(model):
    return np.hstack([model.coef_, model.intercept_[:, None]])


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("batch_size", [1, 7])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_matches_the_per_example_reference(kind, batch_size, sparse, fit_intercept, rng):
    """batch_size=1 is the sequential algorithm; larger batches its documented merge."""
    Estimator, params = CASES[kind]
    X, y = sparse_problem(rng)
    model = Estimator(
        **params, batch_size=batch_size, max_iter=3, fit_intercept=fit_intercept, random_state=11, backend="numpy"
    )
    model.fit(sp.csr_matrix(X) if sparse else X, y)
    expected = reference_weights(
        kind, X, y, params, seed=11, epochs=3, batch_size=batch_size, fit_intercept=fit_intercept
    )
    np.testing.assert_allclose(fitted_weights(model)[0], expected, rtol=0, atol=1e-12)
    assert model.n_nonzero_ == np.count_nonzero(expected[:-1])
    assert model.t_ == 3 * X.shape[0] and model.n_iter_ == 3


@pytest.mark.parametrize("kind", CASES)
def test_penalties_make_zeros_and_reach_untouched_features(kind, rng):
    """A feature seen early then never again must still be shrunk (FOBOS, TG) or held (FTRL, RDA)."""
    Estimator, params = CASES[kind]
    if kind == "tg":  # weights above theta are never truncated, so more gravity need not zero more
        params = {**params, "theta": np.inf}
    X, y = sparse_problem(rng, n=80)
    X[:, 0] = 0.0
    X[:3, 0] = 5.0  # feature 0 appears in the first three rows of the stream only
    model = Estimator(**params, backend="numpy").partial_fit(X, y, classes=[0, 1])
    expected = reference_online_logistic(kind, X, y, [np.arange(80)], params, True, model.batch_size_)
    np.testing.assert_allclose(fitted_weights(model)[0], expected, rtol=0, atol=1e-12)
    stronger = Estimator(**{**params, "l1": 20 * params["l1"]}, backend="numpy").partial_fit(X, y, classes=[0, 1])
    assert stronger.n_nonzero_ < model.n_nonzero_


@pytest.mark.parametrize("kind", CASES)
def test_multiclass_is_one_binary_model_per_class(kind, rng):
    Estimator, params = CASES[kind]
    X, _ = sparse_problem(rng)
    y = np.arange(60) % 3
    model = Estimator(**params, batch_size=5, max_iter=2, random_state=3, backend="numpy").fit(X, y)
    assert model.coef_.shape == (3, 12)
    for k in range(3):
        expected = reference_weights(kind, X, (y == k).astype(float), params, seed=3, epochs=2, batch_size=5)
        np.testing.assert_allclose(fitted_weights(model)[k], expected, rtol=0, atol=1e-12)
    probabilities = model.predict_proba(X)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.classes_[probabilities.argmax(axis=1)], model.predict(X))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_binary_probabilities_are_the_logistic_of_the_decision(Estimator, rng):
    X, y = sparse_problem(rng)
    model = Estimator(random_state=0, backend="numpy").fit(X, np.where(y == 1, "yes", "no"))
    scores = model.decision_function(X)
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], 1 / (1 + np.exp(-scores)), rtol=1e-12)
    np.testing.assert_allclose(model.predict_log_proba(X), np.log(model.predict_proba(X)))
    assert set(model.predict(X)) <= {"yes", "no"}


@pytest.mark.parametrize("kind", CASES)
def test_partial_fit_in_chunks_and_after_pickling_continues_exactly(kind, rng):
    Estimator, params = CASES[kind]
    X, y = sparse_problem(rng, n=90)
    whole = Estimator(**params, batch_size=6, backend="numpy").partial_fit(X, y, classes=[0, 1])
    chunked = Estimator(**params, batch_size=6, backend="numpy").partial_fit(X[:30], y[:30], classes=[0, 1])
    chunked = pickle.loads(pickle.dumps(chunked))
    chunked.partial_fit(X[30:60], y[30:60]).partial_fit(X[60:], y[60:], classes=[1, 0])
    np.testing.assert_array_equal(fitted_weights(chunked), fitted_weights(whole))
    assert chunked.t_ == whole.t_ == 90


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_failed_partial_fit_leaves_the_model_as_it_was(Estimator, rng):
    X, y = sparse_problem(rng)
    model = Estimator(backend="numpy").partial_fit(X, y, classes=[0, 1])
    before = pickle.dumps(model)
    bad_X = X.copy()
    bad_X[3, 2] = np.nan
    for args, message in [
        ((X, np.where(y == 1, 2, 0)), "labels \\[2\\] that are not in classes \\[0, 1\\]"),
        ((bad_X, y), "NaN"),
        ((X[:, :5], y), "X has 5 features, but .* is expecting 12 features"),
        ((X, y, [0, 1, 2]), "classes=\\[0, 1, 2\\] is not the same as on the first call"),
    ]:
        with pytest.raises(ValueError, match=message):
            model.partial_fit(*args)
        assert pickle.dumps(model) == before


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_partial_fit_needs_classes_first(Estimator, rng):
    X, y = sparse_problem(rng)
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        Estimator().partial_fit(X, y)


@pytest.mark.parametrize(
    "Estimator,name,value",
    [
        (FTRLClassifier, "alpha", 0.0),
        (FTRLClassifier, "alpha", -1.0),
        (FTRLClassifier, "l1", -0.1),
        (FTRLClassifier, "l2", -2),
        (FTRLClassifier, "beta", -1),
        (FOBOSClassifier, "eta0", 0),
        (FOBOSClassifier, "l1", -1e-3),
        (TruncatedGradientClassifier, "theta", -1.0),
        (TruncatedGradientClassifier, "truncate_every", 0),
        (RDAClassifier, "gamma", 0.0),
        (RDAClassifier, "l1", -1.0),
        (RDAClassifier, "batch_size", 0),
        (FTRLClassifier, "max_iter", 0),
        (FTRLClassifier, "backend", "tpu"),
    ],
)
def test_bad_hyperparameters_name_the_parameter_and_value(Estimator, name, value, rng):
    X, y = sparse_problem(rng)
    with pytest.raises(ValueError, match=f"'{name}' parameter of {Estimator.__name__}.*Got {value!r}"):
        Estimator(**{name: value}).fit(X, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hashed_categorical_records(dtype):
    """Raw records go through FeatureHasher, as the README shows."""
    rng = np.random.default_rng(0)
    colours, sizes = ["red", "green", "blue"], ["s", "m", "l", "xl"]
    records = [{"colour": rng.choice(colours), "size": rng.choice(sizes)} for _ in range(400)]
    y = np.array([r["colour"] == "red" or r["size"] == "xl" for r in records], dtype=int)
    X = FeatureHasher(n_features=2**12, input_type="dict", dtype=dtype).transform(records)
    model = FTRLClassifier(alpha=0.5, l1=0.5, random_state=0, backend="numpy").fit(X, y)
    assert model.score(X, y) == 1.0
    assert model.coef_.shape == (1, 2**12) and model.n_nonzero_ <= 7  # only the 7 values ever seen


def test_close_to_logistic_regression_on_adult():
    """On real data each rule reaches LogisticRegression's test log loss within 0.01."""
    X, y, X_test, y_test = load_adult()
    reference = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
    best = log_loss(y_test, reference.predict_proba(X_test))
    for Estimator in ESTIMATORS:
        model = Estimator(random_state=0, backend="numpy").fit(X, y)
        assert log_loss(y_test, model.predict_proba(X_test)) < best + 0.01, Estimator.__name__


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_defaults_learn_from_a_few_hundred_rows(Estimator):
    """At their defaults on 284 standardized rows of breast cancer every learner ends within
    twice LogisticRegression's test log loss (0.067). With the former fixed batches (1024,
    256: an epoch of one or two steps) FTRL ended at 0.16, RDA at 0.27, TG and FOBOS at 1.19."""
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        StandardScaler().fit_transform(X), y, test_size=0.5, random_state=0, stratify=y
    )
    reference = log_loss(y_test, LogisticRegression().fit(X_train, y_train).predict_proba(X_test))
    model = Estimator(random_state=0, backend="numpy").fit(X_train, y_train)
    assert model.batch_size_ == 17  # 284 // 16: an epoch of 17 steps
    assert log_loss(y_test, model.predict_proba(X_test)) < 2 * reference


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_auto_batch_size_by_the_rows_that_start_the_model(Estimator, rng):
    """batch_size='auto': n // 16 over the rows of the call that starts the model (fit, a
    first partial_fit), up to the stream batch (1024 for FTRL, 256 for the others); later
    partial_fit calls keep it; fit_chunks takes the stream batch (its length unknown in
    advance); an int is kept."""
    stream = 1024 if Estimator is FTRLClassifier else 256
    X, y = sparse_problem(rng, n=100)
    big_X, big_y = sparse_problem(rng, n=16 * stream)
    assert Estimator(backend="numpy").fit(X, y).batch_size_ == 6  # 100 // 16
    assert Estimator(backend="numpy").fit(X[:15], y[:15]).batch_size_ == 1
    assert Estimator(backend="numpy").fit(big_X, big_y).batch_size_ == stream
    assert Estimator(backend="numpy").partial_fit(X, y, classes=[0, 1]).batch_size_ == 6
    assert Estimator(backend="numpy").partial_fit(big_X, big_y, classes=[0, 1]).batch_size_ == stream
    assert Estimator(backend="numpy").partial_fit(X, y, classes=[0, 1]).partial_fit(big_X, big_y).batch_size_ == 6
    assert Estimator(backend="numpy").fit(X, y).partial_fit(big_X, big_y).batch_size_ == 6
    assert Estimator(backend="numpy").fit_chunks([(X, y)]).batch_size_ == stream
    assert Estimator(batch_size=5, backend="numpy").fit(big_X, big_y).batch_size_ == 5
    assert Estimator(batch_size=5, backend="numpy").fit_chunks([(X, y)]).batch_size_ == 5


def test_step_sizes_and_penalties_count_examples():
    fobos = OnlineRule("fobos", l1=0.5, eta0=2.0)
    np.testing.assert_allclose(fobos.step_sizes(3, 2), [2 / 2, 2 / np.sqrt(5)])
    assert fobos.penalty_added(3, 2) == pytest.approx(0.5 * (1 + 2 / np.sqrt(5)))
    tg = OnlineRule("tg", l1=0.5, eta0=2.0, truncate_every=3)
    assert tg.penalty_added(0, 2) == 0.0  # examples 1, 2: no truncation yet
    assert tg.penalty_added(1, 6) == pytest.approx(0.5 * 3 * (2 / np.sqrt(3) + 2 / np.sqrt(6)))
    assert OnlineRule("ftrl", l1=1.0).penalty_added(0, 10) == 0.0


@needs_device
@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_cupy_matches_numpy(kind, sparse, dtype, n_classes, rng):
    """Same seed, same shuffles, same batches: the device agrees with the CPU up to
    the order of atomic additions."""
    import cupy
    import cupyx.scipy.sparse as cusparse

    Estimator, params = CASES[kind]
    X, _ = sparse_problem(rng, n=500, d=40, density=0.2)
    X = X.astype(dtype)
    y = rng.integers(0, n_classes, size=500)
    X_device = cusparse.csr_matrix(sp.csr_matrix(X)) if sparse else cupy.asarray(X)
    models = [
        Estimator(**params, batch_size=16, max_iter=2, random_state=5, backend=backend).fit(data, y)
        for backend, data in (("numpy", X), ("cupy", X_device))
    ]
    np.testing.assert_allclose(fitted_weights(models[1]), fitted_weights(models[0]), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(models[1].loss_curve_, models[0].loss_curve_, rtol=1e-9)
    scores = models[1].decision_function(X_device)
    assert isinstance(scores, cupy.ndarray)
    np.testing.assert_allclose(scores.get(), models[0].decision_function(X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", CASES)
def test_blocks_of_batches_replayed_give_the_direct_model(step_block_mode, kind, rng, monkeypatch):
    """The launches of a block of batches, replayed with the arguments of their first run
    (as a CUDA graph replays them), train the model that direct launches train."""
    import gpusvm._device.step_blocks as step_blocks

    Estimator, params = CASES[kind]
    X, _ = sparse_problem(rng, n=78, d=30, density=0.2)
    y = rng.integers(0, 3, size=78)
    settings = dict(params, batch_size=8, max_iter=2, random_state=5, backend="cupy")
    replayed = Estimator(**settings).fit(X, y)  # 10 batches an epoch, the last of 6 rows: blocks of 3, 3, 3, 1
    monkeypatch.setattr(step_blocks, "default_mode", lambda: "direct")
    direct = Estimator(**settings).fit(X, y)
    np.testing.assert_allclose(fitted_weights(replayed), fitted_weights(direct), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(replayed.loss_curve_, direct.loss_curve_, rtol=1e-12)


@needs_device
def test_cupy_batch_size_one_matches_the_reference(rng):
    X, y = sparse_problem(rng)
    for kind, (Estimator, params) in CASES.items():
        model = Estimator(**params, batch_size=1, max_iter=2, random_state=2, backend="cupy").fit(X, y)
        expected = reference_weights(kind, X, y, params, seed=2, epochs=2, batch_size=1)
        np.testing.assert_allclose(fitted_weights(model)[0], expected, rtol=0, atol=1e-12)


@needs_device
def test_model_trained_on_the_device_resumes_on_the_cpu(rng):
    X, y = sparse_problem(rng, n=90)
    # split at a batch boundary: a partial_fit ends its last batch where its chunk ends
    on_device = FTRLClassifier(batch_size=6, backend="cupy").partial_fit(X[:48], y[:48], classes=[0, 1])
    resumed = pickle.loads(pickle.dumps(on_device))
    resumed.set_params(backend="numpy")
    resumed.partial_fit(X[48:], y[48:])
    whole = FTRLClassifier(batch_size=6, backend="numpy").partial_fit(X, y, classes=[0, 1])
    np.testing.assert_allclose(fitted_weights(resumed), fitted_weights(whole), rtol=1e-9, atol=1e-12)


def test_duplicate_entries_count_once_and_the_input_is_not_modified():
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 1.0]), np.array([1, 1, 0, 2]), np.array([0, 2, 4])), shape=(2, 3))
    summed = X.copy()
    summed.sum_duplicates()
    models = [FTRLClassifier(batch_size=1, shuffle=False, backend="numpy").fit(data, [0, 1]) for data in (X, summed)]
    np.testing.assert_array_equal(models[0].coef_, models[1].coef_)
    np.testing.assert_array_equal(X.data, [1.0, 2.0, 3.0, 1.0])
