"""SBPClassifier (gpusvm.sbp): its models against SVC's optimum and the plain algorithm, on both
backends; one-vs-one and one-vs-rest, its parameters, history, warnings and automatic settings.

The solver's steps and stopping rules: ``tests/test_sbp_solver.py``; the row cache:
``tests/test_row_cache.py``."""

import functools
import itertools
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from gpusvm import SBPClassifier, nu_from_svc
from gpusvm import sbp as sbp_estimator  # SBPClassifier reads make_steps and run_sbp here
from gpusvm.solvers import sbp as sbp_solver
from gpusvm.solvers.sbp.pairs import _plan as pairs_plan  # plan_pairs reads its step makers here
from gpusvm.solvers import row_cache

from .conftest import needs_device, needs_numba
from .reference import reference_sbp
from .test_sbp_solver import four_classes, make_problem


@pytest.mark.parametrize("n_classes", [2, 3])
def test_history_says_where_the_kernel_values_came_from(rng, n_classes):
    """On the host, from its row cache (``cache_size``), one-vs-one pairs included."""
    X = rng.normal(size=(60, 3))
    y = rng.integers(0, n_classes, 60)
    model = SBPClassifier(max_iter=1, batch_size=2, validation_fraction=0.0, random_state=0, backend="numpy").fit(X, y)
    assert {record["kernel_values_source"] for record in model.history_} == {"cache"}


@needs_device
@pytest.mark.parametrize("kernel_cache, source", [("auto", "matrix"), (0, "products")])
def test_device_history_says_where_the_kernel_values_came_from(rng, kernel_cache, source):
    """On a device, the resident matrix or the drawn rows computed each step, as
    ``kernel_cache`` decides (a small fit: its matrix fits in half any device)."""
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    model = SBPClassifier(
        max_iter=1, batch_size=4, validation_fraction=0.0, kernel_cache=kernel_cache, random_state=0, backend="cupy"
    ).fit(X, y)
    assert {record["kernel_values_source"] for record in model.history_} == {source}
    last = model.history_[-1]
    if source == "products":  # every drawn row computed, the distinct ones counted on the device
        assert last["kernel_rows_computed"] == 4 * model.t_ and 0 < last["kernel_rows_distinct"] <= 30
    else:
        assert last["kernel_rows_computed"] == last["kernel_rows_distinct"] == 30


def test_history_records_the_step_time_of_each_phase(rng):
    """On the host (a device's steps are queued, not timed a phase apart: None there)."""
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(int)
    model = SBPClassifier(max_iter=2, batch_size=4, validation_fraction=0.0, random_state=0, backend="numpy").fit(X, y)
    phases = model.history_[-1]["phase_seconds"]
    assert set(phases) == {"level", "draw", "rows", "update"}
    assert all(seconds > 0 for seconds in phases.values())
    assert sum(phases.values()) <= model.history_[-1]["seconds"]


def recorded_steps(monkeypatch):
    """The host steps each fit makes from now on (SBPClassifier's ``make_steps``, and the
    pairs' ``make_steps`` and ``make_pair_steps``, recorded)."""
    made = []

    def recording(make):
        def make_and_record(*args, **kwargs):
            made.append(make(*args, **kwargs))
            return made[-1]

        return make_and_record

    monkeypatch.setattr(sbp_estimator, "make_steps", recording(sbp_solver.make_steps))
    monkeypatch.setattr(pairs_plan, "make_steps", recording(sbp_solver.make_steps))
    monkeypatch.setattr(pairs_plan, "make_pair_steps", recording(pairs_plan.make_pair_steps))
    return made


@pytest.mark.parametrize("X_dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "kernel_dtype, expected", [(None, np.float32), ("float32", np.float32), ("float64", np.float64)]
)
def test_kernel_values_are_in_kernel_dtype_whatever_x_is(rng, monkeypatch, X_dtype, kernel_dtype, expected):
    """The row cache holds kernel_dtype's values (float32 by default); the responses and
    the coefficients stay float64, the support vectors keep X's rows."""
    made = recorded_steps(monkeypatch)
    X = rng.normal(size=(60, 3)).astype(X_dtype)
    y = rng.integers(0, 3, 60)
    params = dict(max_iter=1, batch_size=2, random_state=0, backend="numpy") | (
        {} if kernel_dtype is None else {"kernel_dtype": kernel_dtype}
    )
    models = [SBPClassifier(**params).fit(X, y), SBPClassifier(**params).fit(X, y == 0)]  # one-vs-one, binary
    assert len(made) >= 2 and {steps.cache.store.dtype for steps in made} == {np.dtype(expected)}
    assert {steps.R.dtype for steps in made} == {np.dtype(np.float64)}
    for model in models:
        assert model.support_vectors_.dtype == X_dtype and model.dual_coef_.dtype == np.float64
        assert all(0 < r["kernel_rows_distinct"] <= r["kernel_rows_computed"] for r in model.history_)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_float64_x_gives_the_model_of_float32_x_to_float32_rounding(rng, n_classes):
    """By default X is centred (rbf) in float64 and cast to float32 for training: float64 X
    and the same X in float32 give the same model up to float32's rounding of X itself (a
    float64 X keeps the digits its float32 copy lost until it is centred). The support
    vectors keep each X's dtype."""
    X = rng.normal(size=(150, 4))
    y = rng.integers(0, n_classes, 150)
    wide = SBPClassifier(max_iter=2, random_state=0).fit(X, y)
    narrow = SBPClassifier(max_iter=2, random_state=0).fit(X.astype(np.float32), y)
    assert wide.kernel_dtype_ == narrow.kernel_dtype_ == "float32"
    np.testing.assert_array_equal(wide.support_, narrow.support_)
    np.testing.assert_allclose(wide.dual_coef_, narrow.dual_coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wide.intercept_, narrow.intercept_, rtol=1e-5, atol=1e-6)
    assert wide.gamma_ == pytest.approx(narrow.gamma_, rel=1e-6) and wide.t_ == narrow.t_
    float64 = SBPClassifier(max_iter=2, random_state=0, kernel_dtype="float64").fit(X, y)
    assert not np.array_equal(float64.dual_coef_, wide.dual_coef_)  # float64 kernel values: another rounding


def test_auto_cache_holds_the_whole_kernel_matrix_when_memory_allows(rng, monkeypatch):
    made = recorded_steps(monkeypatch)
    X = rng.normal(size=(100, 3))
    y = (X[:, 0] > 0).astype(int)
    monkeypatch.setattr(row_cache, "available_memory_bytes", lambda: 2**40)
    SBPClassifier(max_iter=1, random_state=0, backend="numpy").fit(X, y)
    monkeypatch.setattr(row_cache, "available_memory_bytes", lambda: 4 * 10 * 100 * 4)  # a quarter: 10 float32 rows
    SBPClassifier(max_iter=1, random_state=0, backend="numpy").fit(X, y)
    SBPClassifier(max_iter=1, random_state=0, kernel_dtype="float64", backend="numpy").fit(X, y)
    assert [steps.cache.capacity for steps in made] == [100, 10, 5]


def test_fit_warns_once_when_the_row_cache_thrashes(rng):
    """The host's row cache (cache_size; a device's is kernel_cache)."""
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int)
    params = dict(max_iter=5, tol=None, random_state=0, backend="numpy")
    with pytest.warns(UserWarning, match=r"cache_size=0\.01 kept 8 rows \(.+ MB\) of the \d+ distinct rows") as caught:
        model = SBPClassifier(cache_size=0.01, **params).fit(X, y)
    thrashed = [w for w in caught if "thrashed" in str(w.message)]
    assert len(thrashed) == 1 and thrashed[0].filename == __file__  # points at the caller of fit
    assert "Set cache_size to at least 1 (MB)" in str(thrashed[0].message)
    last = model.history_[-1]
    assert last["kernel_rows_computed"] > 3 * last["kernel_rows_distinct"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = SBPClassifier(cache_size=10, **params).fit(X, y)
    assert model.history_[-1]["kernel_rows_computed"] == model.history_[-1]["kernel_rows_distinct"]


@pytest.mark.parametrize("n_rows, expected", [(49_999, 0), (50_000, 5_000), (60_000, 6_000), (500_000, 10_000)])
def test_automatic_holdout_size(n_rows, expected):
    assert SBPClassifier()._holdout_size(n_rows) == expected
    assert SBPClassifier(validation_fraction=0.2)._holdout_size(n_rows) == int(0.2 * n_rows)


def test_reaches_the_svm_optimum_of_the_matching_svc(breast_cancer):
    """With nu read off an SVC, the level of SBP's model approaches that SVC's 1/||w*||
    from below, and the test accuracies agree."""
    X_train, X_test, y_train, y_test = breast_cancer
    svc = SVC(C=1.0, gamma=0.02).fit(X_train, y_train)
    nu = nu_from_svc(svc, X_train, y_train)
    model = SBPClassifier(nu=nu, gamma=0.02, max_iter=30, validation_fraction=0.0, batch_size=4, random_state=0).fit(
        X_train, y_train
    )
    svc_level = nu / (np.maximum(0, 1 - np.where(y_train == 1, 1, -1) * svc.decision_function(X_train)).mean())
    objective = [record["objective"] for record in model.history_]
    assert objective[-1] <= svc_level * (1 + 1e-6)
    assert objective[-1] >= 0.9 * svc_level
    assert abs(model.score(X_test, y_test) - svc.score(X_test, y_test)) <= 0.02
    agreement = (model.predict(X_test) == svc.predict(X_test)).mean()
    assert agreement >= 0.97


def test_multiclass_and_sparse_input(rng):
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    dense = SBPClassifier(random_state=0, max_iter=20).fit(X, y)
    assert dense.score(X, y) >= 0.93
    assert dense.dual_coef_.shape == (3, dense.support_.size)
    assert dense.n_support_.sum() == dense.support_.size
    # iris repeats rows, so responses tie at the level and rounding picks the drawn rows:
    # exact sparse-dense agreement is tested on random data above; here the models agree.
    sparse = SBPClassifier(random_state=0, max_iter=20).fit(sp.csr_matrix(X), y)
    assert sparse.score(X, y) >= 0.93
    assert (sparse.predict(X) == dense.predict(X)).mean() >= 0.95


def test_decision_function_is_the_averaged_model(rng):
    """dual_coef_ and intercept_ are alpha_bar y / level and b / level of the oracle."""
    problem, K, targets = make_problem(rng, "numpy", n_holdout=0)
    X = problem.X
    y = np.where(targets[:, 0] > 0, 1, 0)
    model = SBPClassifier(
        nu=problem.nu,
        gamma=problem.kernel.gamma,
        validation_fraction=0.0,
        max_iter=1,
        batch_size=1,
        kernel_dtype="float64",  # as the oracle's
        random_state=problem.seed,
    ).fit(X, y)
    alpha, c, _ = reference_sbp(K, problem.n_train, targets, problem.nu, 1, True, problem.seed, model.t_)
    from gpusvm.water_level import find_gamma_and_bias_sorted

    level, bias = find_gamma_and_bias_sorted(targets[:, 0], c[0], problem.volume)
    expected = (K[:, : problem.n_train].T @ (alpha[0] * targets[:, 0]) + bias) / level
    np.testing.assert_allclose(model.decision_function(X), expected, rtol=1e-8, atol=1e-10)


def test_last_iterate_and_verbose(breast_cancer, capsys):
    X_train, X_test, y_train, y_test = breast_cancer
    model = SBPClassifier(average=False, max_iter=3, random_state=0, verbose=1).fit(X_train, y_train)
    assert model.score(X_test, y_test) > 0.9
    assert "SBP" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name,value",
    [
        ("nu", -0.1),
        ("kernel", "sigmoid"),
        ("gamma", -1.0),
        ("tol", -1e-3),
        ("batch_size", 0),
        ("validation_fraction", 1.0),
        ("max_iter", 0),
        ("backend", "tpu"),
        ("max_kernel_evals", 0),
        ("multi_class", "crammer_singer"),
        ("decision_function_shape", "ovx"),
        ("kernel_cache", 1.5),
        ("kernel_cache", -1),
        ("kernel_cache", "all"),
        ("kernel_dtype", "float16"),
        ("kernel_dtype", np.float32),
        ("cache_size", "all"),
        ("cache_size", 0),
    ],
)
def test_bad_parameters(name, value, breast_cancer):
    X_train, _, y_train, _ = breast_cancer
    with pytest.raises(ValueError, match=f"'{name}' parameter of SBPClassifier.*Got {value!r}"):
        SBPClassifier(**{name: value}).fit(X_train, y_train)


@pytest.mark.parametrize("kernel_dtype", ["float32", "float64"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@needs_device
def test_numpy_and_cupy_models_agree(breast_cancer, fit_intercept, kernel_dtype):
    X_train, X_test, y_train, _ = breast_cancer
    params = dict(fit_intercept=fit_intercept, batch_size=4, max_iter=3, random_state=3, kernel_dtype=kernel_dtype)
    assert_same_model_on_both_backends(params, X_train, y_train, X_test)


@needs_device
def test_default_models_agree_on_the_device_and_the_host_on_a_few_rows(rng):
    """The defaults (float32 kernel values, cache_size='auto') on a fit small enough for the
    CUDA emulator: the same draws and support on both backends."""
    X = rng.normal(size=(48, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=48) > 0).astype(int)
    assert_same_model_on_both_backends(dict(batch_size=4, max_iter=2, random_state=3), X[:40], y[:40], X[40:])


def assert_same_model_on_both_backends(params, X, y, X_test):
    """SBPClassifier(**params) fitted on each backend: the same support, coefficients,
    scores and holdout errors, up to rounding (of float32 kernel values by default: the
    host sums a step's rows in float32, a device in float64; and of the scores' kernel
    values, in X's dtype on both, summed by BLAS in another order)."""
    host = SBPClassifier(backend="numpy", **params).fit(X, y)
    device = SBPClassifier(backend="cupy", **params).fit(X, y)
    # (rtol, atol) of the coefficients, then of the scores
    coefficients = (1e-7, 1e-10) if params.get("kernel_dtype") == "float64" else (1e-5, 1e-8)
    scores = (1e-6, 1e-8) if params.get("kernel_dtype") == "float64" and X.dtype == np.float64 else (1e-4, 1e-5)
    tolerances = [coefficients, scores]
    np.testing.assert_array_equal(host.support_, device.support_)
    np.testing.assert_allclose(device.dual_coef_, host.dual_coef_, *tolerances[0])
    np.testing.assert_allclose(device.decision_function(X_test), host.decision_function(X_test), *tolerances[1])
    assert [r["holdout_error"] for r in device.history_] == [r["holdout_error"] for r in host.history_]


@needs_device
def test_float32_input_gives_the_same_model_on_both_backends(breast_cancer):
    """float32 X with float64 kernel values, on both backends: the same draws and support."""
    X_train, X_test, y_train, _ = breast_cancer
    X_train, X_test = X_train.astype(np.float32), X_test.astype(np.float32)
    params = dict(batch_size=4, max_iter=3, random_state=3, kernel_dtype="float64")
    assert_same_model_on_both_backends(params, X_train, y_train, X_test)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_one_vs_one_is_a_binary_sbp_per_pair(rng, fit_intercept, monkeypatch):
    """Pair p of a one-vs-one model is the binary SBPClassifier on that pair's rows (its
    first class's, then its second's), with the first class positive, the pair's stream
    seed, and the pair's checkpoint cadence (up to rounding: on the host the pairs step
    together, their levels found and kernel rows combined for all pairs at once)."""
    from gpusvm._estimator.one_vs_one import class_pairs, pair_seed
    from gpusvm.solvers.sbp.pairs import pair_checkpoint_steps

    X, y, X_test, _ = four_classes(rng, n_test=50)
    params = dict(
        nu=0.05,
        gamma=0.2,
        batch_size=4,
        max_iter=4,
        validation_fraction=0.0,
        fit_intercept=fit_intercept,
        tol=0.01,
        n_iter_no_change=3,
        kernel_dtype="float64",  # products of other shapes round alike to 1e-16, not to float32's 1e-7
    )
    model = SBPClassifier(random_state=11, decision_function_shape="ovo", **params).fit(X, y)
    pair_scores = model.decision_function(X_test)
    assert pair_scores.shape == (50, 6) and model.dual_coef_.shape == (6, model.support_.size)
    pair_rows = [np.isin(y, model.classes_[[i, j]]).sum() for i, j in class_pairs(4)]
    checkpoint_every = pair_checkpoint_steps(np.array(pair_rows), params["batch_size"])
    own_every = sbp_solver.checkpoint_interval(-(-np.array(pair_rows) // params["batch_size"]))
    assert (checkpoint_every != own_every).any()  # some pair checkpoints less often than alone
    steps, stopped_at = 0, set()
    for number, (i, j) in enumerate(class_pairs(4)):
        rows = np.concatenate([np.flatnonzero(y == model.classes_[i]), np.flatnonzero(y == model.classes_[j])])
        binary = SBPClassifier(random_state=pair_seed(11, number), **params)
        every = int(checkpoint_every[number])
        monkeypatch.setattr(sbp_estimator, "run_sbp", functools.partial(sbp_solver.run_sbp, checkpoint_every=every))
        binary.fit(X[rows], y[rows] == model.classes_[i])
        np.testing.assert_allclose(pair_scores[:, number], binary.decision_function(X_test), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(model.water_level_[number], binary.water_level_[0], rtol=1e-12)
        records = [record for record in model.history_ if record["pair"] == [i, j]]
        assert [r["steps"] for r in records] == [r["steps"] for r in binary.history_]
        np.testing.assert_allclose(
            [r["objective"] for r in records], [r["objective"] for r in binary.history_], rtol=1e-12
        )
        steps += binary.t_
        stopped_at.add(binary.t_ if binary.n_iter_ < params["max_iter"] else None)
    assert len(stopped_at - {None}) > 1  # the objective's gain stopped pairs, each at its own step
    assert model.t_ == steps and model.n_support_.sum() == model.support_.size
    in_order = [pair for pair, _ in itertools.groupby(tuple(record["pair"]) for record in model.history_)]
    assert in_order == class_pairs(4)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_one_vs_one_pairs_stepping_together_equal_pairs_one_after_another(rng, fit_intercept, monkeypatch):
    """The host's stacked pairs against the pairs trained one after another (the device's
    way, here with NumPy steps): the same models, holdout errors, early stops and budget
    shares, with a holdout and classes of uneven sizes (two stacks: padding and widths)."""
    X, y, X_test, _ = four_classes(rng, n=900, n_test=50)
    keep = (y == "a") | (rng.random(y.size) < 0.2)  # class a large: pairs of very different widths
    X, y = X[keep], y[keep]
    params = dict(
        nu=0.05,
        gamma=0.2,
        batch_size=3,
        max_iter=4,
        validation_fraction=0.3,
        n_iter_no_change=3,
        max_kernel_evals=60_000,
        fit_intercept=fit_intercept,
        decision_function_shape="ovo",
        random_state=5,
        kernel_dtype="float64",  # products of other shapes round alike to 1e-16, not to float32's 1e-7
    )
    together = SBPClassifier(**params).fit(X, y)
    monkeypatch.setattr(pairs_plan, "pairs_step_together", lambda *args: False)
    apart = SBPClassifier(**params).fit(X, y)
    np.testing.assert_array_equal(together.support_, apart.support_)
    np.testing.assert_allclose(together.dual_coef_, apart.dual_coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(together.intercept_, apart.intercept_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        together.decision_function(X_test), apart.decision_function(X_test), rtol=1e-9, atol=1e-12
    )
    assert together.t_ == apart.t_

    def by_pair(model):
        return sorted((tuple(r["pair"]), r["steps"], r["kernel_evals"], r["holdout_error"]) for r in model.history_)

    assert by_pair(together) == by_pair(apart)
    assert any(r["holdout_error"] is not None for r in together.history_)


@pytest.mark.slow  # a fresh process
@needs_numba
def test_a_small_fit_in_a_fresh_process_runs_without_importing_numba(tmp_path):
    """The point of use_compiled_steps: a one-off small one-vs-one fit does not pay for
    Numba's import and cache load (a few tenths of a second), nor, after an install, its
    compilation (seconds); a large one does."""
    script = tmp_path / "fit.py"
    script.write_text(
        "import sys\n"
        "import numpy as np\n"
        "from gpusvm import SBPClassifier\n"
        "rng = np.random.default_rng(0)\n"
        "y = np.repeat([0, 1, 2], int(sys.argv[1]))\n"
        "X = rng.normal(size=(y.size, 4)) + y[:, None]\n"
        "SBPClassifier(max_iter=int(sys.argv[2])).fit(X, y)\n"
        "print('numba' in sys.modules)\n"
    )
    env = {**os.environ, "GPUSVM_BACKEND": "numpy"}
    env.pop("GPUSVM_COMPILED_STEPS", None)

    def numba_imported(rows, epochs):
        run = subprocess.run(
            [sys.executable, str(script), str(rows), str(epochs)], capture_output=True, text=True, env=env
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.split()[-1] == "True"

    assert not numba_imported(100, 5)
    assert numba_imported(100, 1_000)  # 1,000 epochs: over COMPILED_FROM_COLUMNS


def test_one_vs_one_scores_and_votes_are_svcs(rng):
    """The pairs' order and signs, the 'ovr' scores and the votes, as SVC's: SVC's own
    pair scores through ``ovr_scores`` give its 'ovr' scores; the SBP model predicts the
    highest, and about as well as SVC."""
    from gpusvm._estimator.one_vs_one import ovr_scores

    X, y, X_test, y_test = four_classes(rng)
    svc = SVC(gamma=0.2, decision_function_shape="ovo").fit(X, y)
    np.testing.assert_allclose(
        ovr_scores(svc.decision_function(X_test), 4),
        svc.set_params(decision_function_shape="ovr").decision_function(X_test),
    )
    model = SBPClassifier(nu=0.05, gamma=0.2, max_iter=5, random_state=0).fit(X, y)
    scores = model.decision_function(X_test)
    assert scores.shape == (300, 4)
    np.testing.assert_array_equal(model.predict(X_test), model.classes_[scores.argmax(axis=1)])
    assert model.score(X_test, y_test) >= svc.score(X_test, y_test) - 0.03
    ovr = SBPClassifier(nu=0.05, gamma=0.2, max_iter=5, random_state=0, multi_class="ovr").fit(X, y)
    assert ovr.dual_coef_.shape[0] == 4 and ovr.decision_function(X_test).shape == (300, 4)


def test_one_vs_one_shares_the_budgets_and_holds_out_per_pair(rng):
    X, y, _, _ = four_classes(rng, n=1200)
    budget = 400_000
    model = SBPClassifier(
        batch_size=2, max_iter=50, max_kernel_evals=budget, validation_fraction=0.0, random_state=0
    ).fit(X, y)
    last = {tuple(record["pair"]): record for record in model.history_}  # each pair's last record
    assert set(last) == set(itertools.combinations(range(4), 2))
    assert 0.8 * budget <= sum(record["kernel_evals"] for record in last.values()) <= budget
    rows = {pair: np.isin(y, model.classes_[list(pair)]).sum() for pair in last}
    for pair, record in last.items():  # each its share by rows, up to a step of batch_size * rows
        assert (
            budget * rows[pair] / sum(rows.values()) - 2 * rows[pair]
            < record["kernel_evals"]
            <= budget * rows[pair] / sum(rows.values())
        )
    timed = SBPClassifier(batch_size=1, max_iter=1000, time_budget=0.3, random_state=0).fit(X, y)
    assert max(r["seconds"] for r in timed.history_) < 1.5 and len({tuple(r["pair"]) for r in timed.history_}) == 6
    held = SBPClassifier(max_iter=2, validation_fraction=0.25, random_state=0).fit(X, y)
    assert all(record["holdout_error"] is not None for record in held.history_)
    assert np.isin(held.support_, np.arange(X.shape[0])).all() and held.support_.size < 0.75 * X.shape[0] + 1


def test_automatic_holdout_looks_at_the_largest_problem():
    """60,000 rows of 4 classes: one-vs-rest problems have every row (a tenth held out);
    the largest pair has 30,000, under AUTO_HOLDOUT_MIN_ROWS: nothing held out."""
    y = np.repeat(np.arange(4), 15_000)
    classes = np.arange(4)
    assert SBPClassifier(multi_class="ovr")._split(y, classes, 0)[1].size == 6_000
    assert SBPClassifier()._split(y, classes, 0)[1].size == 0
    assert SBPClassifier(validation_fraction=0.1)._split(y, classes, 0)[1].size == 6_000


@needs_device
def test_one_vs_one_models_agree_on_both_backends(rng):
    X, y, X_test, _ = four_classes(rng, n=400, n_test=50)
    params = dict(nu=0.05, gamma=0.2, batch_size=4, max_iter=2, validation_fraction=0.2, random_state=3)
    assert_same_model_on_both_backends(params, X, y, X_test)


def test_one_vs_one_with_a_class_of_one_row(rng):
    """A pair with a one-row class still trains (no holdout: a class cannot be split)."""
    X, y, _, _ = four_classes(rng, n=300)
    y = y.copy()
    y[0] = "e"  # a fifth class of one row
    model = SBPClassifier(max_iter=2, validation_fraction=0.2, random_state=0).fit(X, y)
    assert model.dual_coef_.shape[0] == 10 and model.predict(X[:1]).shape == (1,)
    assert all(record["holdout_error"] is None for record in model.history_)


@pytest.mark.parametrize(("n_train", "batch"), [(40, 1), (300, 5), (4_096, 64), (50_000, 64)])
def test_automatic_batch_gives_small_data_epochs_of_64_steps(n_train, batch):
    assert sbp_estimator.resolve_batch_size("auto", n_train) == batch
    assert sbp_estimator.resolve_batch_size(16, n_train) == 16


def test_automatic_batch_is_the_fits_own_and_counts_its_epochs(rng):
    X, y, _, _ = four_classes(rng, n=300)
    model = SBPClassifier(max_iter=2, multi_class="ovr", validation_fraction=0, random_state=0).fit(X, y)
    assert model.batch_size == "auto" and model.batch_size_ == 5  # ceil(300 / 64)
    assert model.t_ == 2 * 60 and model.n_iter_ == 2  # epochs of 60 steps
    pairs = SBPClassifier(max_iter=2, batch_size=32, random_state=0).fit(X, y)
    assert pairs.batch_size_ == 32 and pairs.n_iter_ <= 2


def test_small_data_at_the_defaults_is_as_accurate_as_svc():
    """284 training rows (scikit-learn's breast cancer data, half of it): five epochs of
    batch 64 are 25 steps, 0.6 points above SVC's test error over five splits; the
    automatic batch (5, 285 steps) is at SVC's error or below."""
    X, y = load_breast_cancer(return_X_y=True)
    errors = {"svc": [], "sbp": []}
    for seed in range(5):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=seed, stratify=y)
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        errors["svc"].append(1 - SVC().fit(X_train, y_train).score(X_test, y_test))
        errors["sbp"].append(1 - SBPClassifier(random_state=seed).fit(X_train, y_train).score(X_test, y_test))
    assert np.mean(errors["sbp"]) <= np.mean(errors["svc"]) + 0.002
