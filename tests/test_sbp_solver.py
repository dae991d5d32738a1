"""The SBP solver (gpusvm.solvers.sbp): its problem and steps, NumPy and CUDA, against the plain
Algorithm 1 (``tests/reference.py``); its stopping rules; the one-vs-one pairs' stacked, compiled
and device steps."""

import sys
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from gpusvm import SBPClassifier
from gpusvm._backend import get_namespace
from gpusvm._validation import one_vs_rest_targets, to_backend
from gpusvm.kernel_functions import KernelSpec, kernel_block
from gpusvm.solvers import sbp as sbp_solver
from gpusvm.solvers.sbp import _numpy as sbp_numpy  # NumpySBPSteps reads RENORMALIZE_BELOW here
from gpusvm.solvers.sbp import NumpySBPSteps, SBPProblem
from gpusvm.solvers.sbp._problem import LEVEL_FLOOR, StoppingRules
from gpusvm.solvers.sbp.pairs import make_pair_steps

from .conftest import low_memory_after, needs_device, needs_numba, numba_imports
from .reference import reference_sbp


def make_problem(
    rng,
    backend,
    *,
    n_train=40,
    n_holdout=7,
    n_classes=2,
    sparse=False,
    kernel="rbf",
    batch_size=1,
    fit_intercept=True,
    nu=0.05,
    dtype=np.float64,
):
    X = rng.normal(size=(n_train + n_holdout, 5)).astype(dtype)
    if sparse:
        X[:, 1:][rng.random((X.shape[0], X.shape[1] - 1)) < 0.5] = 0.0  # column 0 keeps rows distinct:
        # equal rows have equal responses, and ties at the level make the draws depend on rounding
    y = rng.integers(0, n_classes, size=n_train + n_holdout)
    y[:n_classes] = np.arange(n_classes)  # every class in the training rows
    classes = np.arange(n_classes)
    targets = one_vs_rest_targets(y[:n_train], classes)
    X_dev = to_backend(sp.csr_matrix(X) if sparse else X, backend)
    problem = SBPProblem(
        X=X_dev,
        n_train=n_train,
        targets=get_namespace(backend).asarray(targets),
        holdout_labels=y[n_train:],
        nu=nu,
        batch_size=batch_size,
        kernel=KernelSpec(kernel, 0.3, 2, 1.0),
        fit_intercept=fit_intercept,
        seed=int(rng.integers(2**32)),
    )
    K = kernel_block(
        X[:n_train].astype(np.float64), X.astype(np.float64), kernel=kernel, gamma=0.3, degree=2, coef0=1.0
    )
    return problem, K, targets


def solver_steps(problem, backend, cache_bytes=2**30):
    if backend == "cupy":
        from gpusvm.solvers.sbp._cuda import CupySBPSteps

        return CupySBPSteps(problem)
    return NumpySBPSteps(problem, cache_bytes=cache_bytes)


def run_steps(steps, n_steps):
    for t in range(1, n_steps + 1):
        steps.step(t, steps.eta0 / np.sqrt(t))
    return [np.asarray(a.get() if hasattr(a, "get") else a) for a in steps.model(average=True)]


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_steps_match_plain_algorithm(backend, rng, fit_intercept, batch_size, n_classes, sparse, kernel):
    problem, K, targets = make_problem(
        rng,
        backend,
        n_classes=n_classes,
        sparse=sparse,
        kernel=kernel,
        batch_size=batch_size,
        fit_intercept=fit_intercept,
    )
    got = run_steps(solver_steps(problem, backend), 60)
    expected = reference_sbp(K, problem.n_train, targets, problem.nu, batch_size, fit_intercept, problem.seed, 60)
    for name, a, b in zip(("alpha", "responses", "holdout"), got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_steps_of_a_batch_past_the_staged_rows_match_plain_algorithm(backend, rng, fit_intercept):
    """A batch over SBP_STAGED_ROWS (256, kernels/sbp.cu): the device's norm step and update
    read the drawn rows from global memory instead of shared memory."""
    problem, K, targets = make_problem(rng, backend, n_classes=3, batch_size=300, fit_intercept=fit_intercept)
    got = run_steps(solver_steps(problem, backend), 6)
    expected = reference_sbp(K, problem.n_train, targets, problem.nu, 300, fit_intercept, problem.seed, 6)
    for name, a, b in zip(("alpha", "responses", "holdout"), got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kernel_values", ["matrix", "cache", "products"])
@pytest.mark.parametrize("sparse", [False, True])
def test_device_steps_in_blocks_match_the_plain_algorithm(rng, step_block_mode, kernel_values, sparse):
    """Blocks of steps replayed (or CUDA graphs) read each step's number and size from the
    schedule; with the whole kernel matrix resident, a cache of 26 of its 30 rows (rows
    evicted, prefetched), or the drawn rows' products each step."""
    from gpusvm.solvers.sbp._cuda import CupySBPSteps

    problem, K, targets = make_problem(
        rng, "cupy", n_classes=3, sparse=sparse, batch_size=4, n_train=30, n_holdout=5, nu=0.01
    )  # few rows under the level: they are prefetched
    row_bytes = problem.n_rows * problem.X.dtype.itemsize
    kernel_cache = {"matrix": "auto", "cache": 26 * row_bytes, "products": 0}[kernel_values]
    steps = CupySBPSteps(problem, kernel_cache=kernel_cache)
    assert (steps.kernel_matrix is not None, steps.row_cache is not None) == (
        kernel_values == "matrix",
        kernel_values == "cache",
    )
    assert steps.kernel_values_source == kernel_values
    schedule = sbp_solver.step_schedule(1, 14, steps.eta0)
    steps.run_steps(schedule[:8])  # two full blocks and a partial one, then one of each
    steps.run_steps(schedule[8:])
    got = [a.get() for a in steps.model(average=True)]
    expected = reference_sbp(K, problem.n_train, targets, problem.nu, 4, True, problem.seed, 14)
    for name, a, b in zip(("alpha", "responses", "holdout"), got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)
    if kernel_values == "cache":  # 14 steps of 12 drawn rows through 26 slots: rows evicted, and prefetched
        assert steps.row_cache.capacity == 26 and steps.kernel_rows_computed > 26
        assert steps.row_cache.prefetched > 0


@needs_device
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_device_draws_in_one_block_and_by_tiles_are_the_same_rows(rng, monkeypatch, fit_intercept):
    """A step's draws in one launch (a block a problem, up to ONE_BLOCK_DRAW_ROWS rows:
    chunks of 32 rows, a scan, a binary search) and by a count per tile of 2,048 rows then
    the draws: the same rows at every step, from every tile of 4,500 rows, and the plain
    algorithm's model."""
    from gpusvm.solvers.sbp import _cuda

    n_train, batch, n_steps = 4500, 16, 4
    problem, K, targets = make_problem(
        rng, "cupy", n_train=n_train, n_holdout=3, batch_size=batch, nu=0.3, fit_intercept=fit_intercept
    )
    drawn, models = {}, {}
    for one_block_rows in (_cuda.ONE_BLOCK_DRAW_ROWS, 0):
        monkeypatch.setattr(_cuda, "ONE_BLOCK_DRAW_ROWS", one_block_rows)
        steps = _cuda.CupySBPSteps(problem, kernel_cache=0)  # the drawn rows' products: no n x n matrix
        draws = []
        for t in range(1, n_steps + 1):
            steps.step(t, steps.eta0 / np.sqrt(t))
            draws.append(steps.drawn.get())
        drawn[one_block_rows > 0], models[one_block_rows > 0] = np.array(draws), steps.model(average=True)
    np.testing.assert_array_equal(drawn[True], drawn[False])
    assert {row // 2048 for row in drawn[True].ravel()} == {0, 1, 2}  # every tile
    expected = reference_sbp(K, n_train, targets, problem.nu, batch, fit_intercept, problem.seed, n_steps)
    for name, a, b, c in zip(("alpha", "responses", "holdout"), models[True], models[False], expected, strict=True):
        np.testing.assert_array_equal(a.get(), b.get(), err_msg=name)
        np.testing.assert_allclose(a.get(), c, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("nu", [0.0, 1e3])
def test_extreme_nu_matches_plain_algorithm(rng, nu):
    """nu = 0 draws only the lowest responses; a huge nu floods every example."""
    problem, K, targets = make_problem(rng, "numpy", nu=nu, fit_intercept=False)
    got = run_steps(NumpySBPSteps(problem, 2**30), 30)
    expected = reference_sbp(K, problem.n_train, targets, nu, 1, False, problem.seed, 30)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-9, atol=1e-12)


def test_small_cache_and_renormalization_change_nothing(rng, monkeypatch):
    problem, _, _ = make_problem(rng, "numpy", batch_size=3, n_classes=3)
    full = run_steps(NumpySBPSteps(problem, cache_bytes=2**30), 80)
    row_bytes = problem.X.shape[0] * 8
    small_cache = NumpySBPSteps(problem, cache_bytes=4 * row_bytes)
    assert small_cache.cache.capacity == 4
    monkeypatch.setattr(sbp_numpy, "RENORMALIZE_BELOW", 0.9)  # fold the scale in almost every step
    tiny = run_steps(small_cache, 80)
    for a, b in zip(full, tiny, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    assert small_cache.cache.rows_computed > NumpySBPSteps(problem, 2**30).cache.rows_computed


@needs_device
@pytest.mark.parametrize("sparse", [False, True])
def test_device_drawn_row_products_in_blocks_of_bounded_memory(rng, monkeypatch, sparse):
    """A step's drawn rows' inner products are computed ``rows_at_once`` rows at a time
    (each product, with its temporaries, within ``BLOCK_BYTES`` beside the buffer), into
    the rows of one product (up to the products' rounding), drawn rows repeated or not."""
    import cupy

    from gpusvm.solvers import _kernel_values_cuda

    problem, _, _ = make_problem(rng, "cupy", sparse=sparse, n_train=30, n_holdout=5)
    X = problem.X
    per_row = _kernel_values_cuda.product_row_bytes(X.shape[0], X.shape[1], X.dtype)
    monkeypatch.setattr(_kernel_values_cuda, "BLOCK_BYTES", 3 * per_row)
    inner_products, calls = _kernel_values_cuda.inner_products, []

    def recorded(drawn, Y):
        calls.append(drawn.shape[0])
        return inner_products(drawn, Y)

    monkeypatch.setattr(_kernel_values_cuda, "inner_products", recorded)
    products = _kernel_values_cuda.DrawnRowProducts(X, 10)
    assert products.rows_at_once == 3
    rows = cupy.asarray(rng.integers(0, X.shape[0], size=10))
    products.compute(rows)
    assert calls == [3, 3, 3, 1]
    dense = X.toarray() if sparse else X
    np.testing.assert_allclose(products.dots.get(), inner_products(dense[rows], dense).get(), rtol=1e-12, atol=1e-12)


def test_a_fit_whose_cache_stops_growing_gives_the_same_model(rng, monkeypatch):
    problem, _, _ = make_problem(rng, "numpy", batch_size=3, n_classes=3)
    full = run_steps(NumpySBPSteps(problem, cache_bytes=2**30), 80)
    low_memory_after(monkeypatch, 5, problem.X.shape[0] * 8)
    steps = NumpySBPSteps(problem, cache_bytes=2**30)
    bound = run_steps(steps, 80)
    assert steps.cache.memory_bound and steps.cache.rows_computed > NumpySBPSteps(problem, 2**30).cache.rows_computed
    for a, b in zip(full, bound, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_stopping_rules(breast_cancer):
    X_train, _, y_train, _ = breast_cancer
    n_train = X_train.shape[0]
    budget = 25 * n_train
    model = SBPClassifier(max_kernel_evals=budget, validation_fraction=0.0, batch_size=1, random_state=0).fit(
        X_train, y_train
    )
    assert model.t_ == 25 and model.history_[-1]["kernel_evals"] == budget
    early = SBPClassifier(n_iter_no_change=2, max_iter=50, validation_fraction=0.1, batch_size=1, random_state=0).fit(
        X_train, y_train
    )
    assert early.n_iter_ < 50
    errors = [record["holdout_error"] for record in early.history_]
    assert min(errors[:-2]) <= min(errors[-2:])  # stopped after two checkpoints without improvement
    timed = SBPClassifier(time_budget=1e-3, max_iter=1000, random_state=0).fit(X_train, y_train)
    assert timed.history_[-1]["seconds"] < 1.0 and timed.n_iter_ < 1000


def gain_below(objectives, tol, window):
    """Checkpoints (0-based) where the objective gained less than tol of its size (at
    least LEVEL_FLOOR: the rbf kernel's largest response is 1) over the last ``window``
    checkpoints."""
    return [
        i
        for i in range(window, len(objectives))
        if objectives[i] - objectives[i - window] < tol * max(abs(objectives[i - window]), LEVEL_FLOOR)
    ]


def test_tol_measures_a_level_near_zero_against_the_floor():
    """A level near zero (or crossing it) gains little in absolute terms yet much relative
    to its size: the rule sizes it at least LEVEL_FLOOR times the largest response."""
    rules = StoppingRules(max_epochs=1, tol=1e-2)
    tiny_gain = 0.5 * rules.tol * LEVEL_FLOOR
    assert rules.gained_too_little(-1e-5, -1e-5 + tiny_gain)
    assert rules.gained_too_little(np.array([-1e-5, 0.5]), np.array([-1e-5 + tiny_gain, 0.5 + tiny_gain])).all()
    assert not rules.gained_too_little(0.5, 0.5 + 2 * rules.tol * 0.5)  # above the floor: relative, as before
    assert not rules.gained_too_little(-1e-5, -1e-5 + tiny_gain, largest_response=0.25)  # linear, poly: 1 / eta_0


def test_without_a_holdout_tol_stops_when_the_objective_stalls(breast_cancer):
    """No holdout: the fit stops at the first checkpoint whose objective gained less than
    tol over the last n_iter_no_change checkpoints; the model is the one tol=None reaches
    at that step."""
    X_train, _, y_train, _ = breast_cancer
    params = dict(max_iter=60, validation_fraction=0.0, batch_size=4, n_iter_no_change=5, random_state=0)
    stopped = SBPClassifier(tol=1e-2, **params).fit(X_train, y_train)
    objectives = [record["objective"] for record in stopped.history_]
    assert stopped.n_iter_ < 60 and gain_below(objectives, 1e-2, 5) == [len(objectives) - 1]
    full = SBPClassifier(tol=None, **params).fit(X_train, y_train)
    assert full.n_iter_ == 60
    assert [r["objective"] for r in full.history_[: len(objectives)]] == objectives
    budget = SBPClassifier(tol=None, max_kernel_evals=stopped.history_[-1]["kernel_evals"], **params)
    budget.fit(X_train, y_train)
    assert budget.t_ == stopped.t_
    np.testing.assert_array_equal(budget.dual_coef_, stopped.dual_coef_)


def test_with_a_holdout_tol_is_not_used(breast_cancer):
    """With a holdout the holdout error decides: even a tol no gain can reach does not stop."""
    X_train, _, y_train, _ = breast_cancer
    params = dict(max_iter=3, batch_size=4, n_iter_no_change=5, tol=1e9, random_state=0)
    unheld = SBPClassifier(validation_fraction=0.0, **params).fit(X_train, y_train)
    assert len(unheld.history_) == 6  # stops at the first checkpoint that can compare: the 6th
    held = SBPClassifier(validation_fraction=0.2, **params).fit(X_train, y_train)
    errors = [record["holdout_error"] for record in held.history_]
    since_best = [i - int(np.argmin(errors[: i + 1])) for i in range(len(errors))]
    assert len(errors) > 6 and all(since < 5 for since in since_best[:-1])
    assert held.n_iter_ == 3 or since_best[-1] == 5


def test_the_clock_is_read_after_the_queued_steps(monkeypatch, breast_cancer):
    """time_budget and history_'s seconds wait for the device: steps synchronize before
    every read of the host clock (a no-op on the CPU)."""
    X_train, _, y_train, _ = breast_cancer
    calls = []
    monkeypatch.setattr(NumpySBPSteps, "synchronize", lambda self: calls.append(1))
    model = SBPClassifier(
        time_budget=1e6, max_iter=1, batch_size=8, validation_fraction=0.0, random_state=0, backend="numpy"
    ).fit(X_train, y_train)
    steps = model.history_[-1]["steps"]
    assert len(calls) >= steps  # once per step for the budget, once per checkpoint for history_


def four_classes(rng, n=800, n_test=300, d=5):
    """Training and test rows of four Gaussian classes labelled 'a' to 'd'."""
    centers = 2.0 * rng.normal(size=(4, d))
    y = rng.integers(0, 4, size=n + n_test)
    X, labels = centers[y] + rng.normal(size=(n + n_test, d)), np.array(["a", "b", "c", "d"])[y]
    return X[:n], labels[:n], X[n:], labels[n:]


def pair_stack(X, labels, n_train, backend, *, fit_intercept, batch_size=3, seed=5, nu=0.05):
    """The PairStack of every pair of classes of X's rows (training rows first, as
    SBPClassifier lays them out), with X on ``backend``."""
    from gpusvm._estimator.one_vs_one import class_pairs, pair_seed
    from gpusvm.solvers.sbp.pairs import PairStack

    n_classes = int(labels.max()) + 1
    class_rows = tuple(np.flatnonzero(labels == c) for c in range(n_classes))
    pairs = class_pairs(n_classes)
    return PairStack(
        X=to_backend(X, backend),
        class_rows=class_rows,
        class_train=np.array([np.searchsorted(rows, n_train) for rows in class_rows]),
        pairs=np.array(pairs),
        seeds=np.array([pair_seed(seed, p) for p in range(len(pairs))], dtype=np.uint64),
        nu=nu,
        batch_size=batch_size,
        kernel=KernelSpec("rbf", 0.2),
        fit_intercept=fit_intercept,
    )


def run_host_pairs(stack, steps_class, rules, kernel_evals, cache_bytes=2**20):
    """``run_pair_stack`` of ``stack`` on the host steps ``steps_class``: the results and the steps."""
    from gpusvm.solvers.sbp.pairs import run_pair_stack

    steps = steps_class(stack, cache_bytes=cache_bytes)
    return run_pair_stack(stack, steps, rules, kernel_evals=kernel_evals), steps


def assert_same_pairs(a_results, b_results):
    """Two runs of a pair stack gave the same pairs bit for bit: steps, checkpoints, holdout
    errors, levels, biases and coefficients."""
    for p, (a, b) in enumerate(zip(a_results, b_results, strict=True)):
        assert a.n_steps == b.n_steps, p
        assert [r["steps"] for r in a.history] == [r["steps"] for r in b.history], p
        assert [r["holdout_error"] for r in a.history] == [r["holdout_error"] for r in b.history], p
        assert [r["objective"] for r in a.history] == [r["objective"] for r in b.history], p
        for name in ("level", "bias", "alpha"):
            np.testing.assert_array_equal(getattr(b, name), getattr(a, name), err_msg=f"pair {p}: {name}")


@needs_numba
@pytest.mark.parametrize(
    "fit_intercept, dtype, sparse, batch_size",
    [
        (True, np.float32, False, 3),
        (False, np.float32, False, 5),
        (True, np.float64, False, 1),
        (True, np.float32, True, 4),
    ],
)
def test_compiled_pair_steps_are_the_numpy_pairs_bit_for_bit(rng, fit_intercept, dtype, sparse, batch_size):
    """The Numba steps of the pairs against the NumPy steps, the reference: the same draws,
    levels and updates in the same order and precision, so the same pairs bit for bit;
    classes of uneven sizes (padding), a holdout, pairs stopping at different steps by
    their budgets of kernel evaluations (inactive pairs left as they are), a cache of
    blocks that evicts, float32 and float64 kernel values, dense and sparse X."""
    from gpusvm.solvers.sbp.pairs import NumpyPairSteps
    from gpusvm.solvers.sbp.pairs._compiled import CompiledPairSteps

    X, y, _, _ = four_classes(rng, n=200, n_test=0)
    y = y.copy()
    y[rng.random(y.size) < 0.3] = "a"  # class a larger: pairs of different widths
    labels = np.searchsorted(np.unique(y), y)
    X = X.astype(dtype)
    X = sp.csr_matrix(X) if sparse else X
    n_train = 160  # the rest held out
    rules = sbp_solver.StoppingRules(max_epochs=6, n_iter_no_change=10)
    kernel_evals = rng.integers(20_000, 120_000, size=6)
    stack = pair_stack(X, labels, n_train, "numpy", fit_intercept=fit_intercept, batch_size=batch_size, nu=0.1)
    cache_bytes = 60 * 200 * X.dtype.itemsize  # a few dozen blocks: evicted as the steps go
    reference, _ = run_host_pairs(stack, NumpyPairSteps, rules, kernel_evals, cache_bytes)
    compiled, steps = run_host_pairs(stack, CompiledPairSteps, rules, kernel_evals, cache_bytes)
    assert len({result.n_steps for result in reference}) > 1  # pairs stopped at different steps
    assert steps.cache.rows_computed > steps.cache.capacity  # blocks evicted and computed again
    assert_same_pairs(reference, compiled)


@needs_numba
def test_compiled_pair_steps_renormalize_as_the_numpy_pairs(rng, monkeypatch):
    """With scales folded into A and R at almost every step (RENORMALIZE_BELOW near 1),
    the compiled steps still give the NumPy steps' pairs bit for bit."""
    from gpusvm.solvers.sbp.pairs import _compiled as _pairs_compiled
    from gpusvm.solvers.sbp.pairs import _numpy as sbp_pairs

    for module in (sbp_pairs, _pairs_compiled):
        monkeypatch.setattr(module, "RENORMALIZE_BELOW", 0.999)
    X, y, _, _ = four_classes(rng, n=120, n_test=0)
    labels = np.searchsorted(np.unique(y), y)
    stack = pair_stack(X, labels, 120, "numpy", fit_intercept=True, batch_size=2, nu=0.2)
    rules = sbp_solver.StoppingRules(max_epochs=3)
    renormalized = []
    fold = sbp_pairs.NumpyPairSteps._renormalize
    monkeypatch.setattr(
        sbp_pairs.NumpyPairSteps, "_renormalize", lambda self, pairs: renormalized.append(1) or fold(self, pairs)
    )
    reference, _ = run_host_pairs(stack, sbp_pairs.NumpyPairSteps, rules, None)
    calls = len(renormalized)
    compiled, _ = run_host_pairs(stack, _pairs_compiled.CompiledPairSteps, rules, None)
    assert calls > 10 and len(renormalized) == 2 * calls
    assert_same_pairs(reference, compiled)


@needs_numba
@pytest.mark.parametrize("cut", ["inf", "below every value", "at the 30th value", "at the 200th value"])
def test_compiled_sorted_lowest_is_a_sort_whatever_the_cut(rng, cut):
    """The compiled level's lowest values of a class, sorted and padded with +inf, are
    NumPy's sort's whatever the cut it gathers under (too low, tight, loose, none), ties
    included; the cut it returns gathers at least the count asked for again."""
    from gpusvm.solvers.sbp.pairs import _numba as _pairs_numba

    values = np.round(rng.normal(size=500), 2)  # many ties
    ordered = np.sort(values)
    cut_value = {
        "inf": np.inf,
        "below every value": ordered[0] - 1,
        "at the 30th value": ordered[29],
        "at the 200th value": ordered[199],
    }[cut]
    room = np.empty(values.size)
    for count in (1, 17, 40, 64, 65, 200, 499, 500):  # by insertion up to 64, then a heapsort
        out = np.full(count + 3, np.nan)
        next_cut = _pairs_numba._sorted_lowest(values, count, cut_value, room, out[: count + 1 if count < 500 else 500])
        np.testing.assert_array_equal(out[:count], ordered[:count])
        if count < 500:
            assert out[count] == np.inf
            assert (values <= next_cut).sum() >= count
        else:
            assert next_cut == np.inf


def test_make_pair_steps_gives_the_compiled_steps_when_asked_and_numba_is_there():
    from gpusvm.solvers.sbp.pairs import NumpyPairSteps
    from gpusvm.solvers.sbp.pairs import _compiled as _pairs_compiled

    X, y, _, _ = four_classes(np.random.default_rng(0), n=40, n_test=0)
    stack = pair_stack(X, np.searchsorted(np.unique(y), y), 40, "numpy", fit_intercept=True)

    def made(compiled):
        return type(make_pair_steps(stack, np, kernel_cache="auto", cache_bytes=2**20, compiled=compiled))

    assert made(False) is NumpyPairSteps
    if numba_imports():
        assert made(True) is _pairs_compiled.CompiledPairSteps


@pytest.fixture
def fresh_compiled_steps_rule(monkeypatch):
    """use_compiled_steps as at a process's start: the switch unset and not read yet, no
    work on the NumPy steps, the Numba functions not imported; ``setenv`` sets the switch
    (read again), ``work_so_far`` reads the NumPy steps' work counted."""
    from gpusvm.solvers.sbp.pairs import _compiled as _pairs_compiled

    def clear():
        _pairs_compiled.compiled_steps_switch.cache_clear()
        _pairs_compiled.compiled_steps_available.cache_clear()

    def setenv(value):
        monkeypatch.setenv("GPUSVM_COMPILED_STEPS", value)
        clear()

    monkeypatch.delenv("GPUSVM_COMPILED_STEPS", raising=False)
    monkeypatch.setattr(_pairs_compiled, "_numpy_columns", 0)
    monkeypatch.delitem(sys.modules, _pairs_compiled._COMPILED_MODULE, raising=False)
    clear()
    yield SimpleNamespace(
        rule=_pairs_compiled,
        setenv=setenv,
        clear=clear,
        work_so_far=lambda: _pairs_compiled._numpy_columns,
    )
    monkeypatch.undo()
    clear()


def test_fits_run_on_the_numpy_steps_until_their_work_would_pay_for_the_compiled_ones(
    fresh_compiled_steps_rule, monkeypatch
):
    """Unset switch: a process's fits take the NumPy steps while their work, with this
    fit's, stays under COMPILED_FROM_COLUMNS, then the compiled steps (where Numba imports),
    and every fit after the compiled steps' first use takes them."""
    rule = fresh_compiled_steps_rule.rule
    third = rule.COMPILED_FROM_COLUMNS // 3
    assert not rule.use_compiled_steps(third)
    assert not rule.use_compiled_steps(third)
    assert fresh_compiled_steps_rule.work_so_far() == 2 * third
    assert rule.use_compiled_steps(third + 3) is numba_imports()  # the work would reach it
    assert not rule.use_compiled_steps(10)  # small again, the compiled steps not used yet
    # their first use is paid; through monkeypatch, which removes it after the test: left in
    # sys.modules, a later fit's import of the Numba functions got this module
    monkeypatch.setitem(sys.modules, rule._COMPILED_MODULE, rule)
    assert rule.use_compiled_steps(10) is numba_imports()
    assert fresh_compiled_steps_rule.work_so_far() == 2 * third + 10


def test_the_compiled_steps_switch_forces_either_steps_and_is_checked(fresh_compiled_steps_rule, monkeypatch):
    rule = fresh_compiled_steps_rule.rule
    fresh_compiled_steps_rule.setenv("0")
    assert not rule.use_compiled_steps(10 * rule.COMPILED_FROM_COLUMNS)
    fresh_compiled_steps_rule.setenv("1")
    assert rule.use_compiled_steps(1) is numba_imports()
    assert fresh_compiled_steps_rule.work_so_far() == 0
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    fresh_compiled_steps_rule.clear()
    assert not rule.use_compiled_steps(1)
    fresh_compiled_steps_rule.setenv("yes")
    with pytest.raises(ValueError, match="environment variable GPUSVM_COMPILED_STEPS must be 0, 1 or unset"):
        rule.use_compiled_steps(1)
    fresh_compiled_steps_rule.setenv("")  # export GPUSVM_COMPILED_STEPS= : as unset
    assert not rule.use_compiled_steps(1) and fresh_compiled_steps_rule.work_so_far() == 1


@pytest.mark.parametrize("kernel_values", ["matrix", "cache"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_device_pair_steps_match_the_host_pairs(rng, step_block_mode, fit_intercept, kernel_values, monkeypatch):
    """Every pair in each launch on the device (classes of uneven sizes: rows of padding;
    pairs stopping at different steps by their budgets of kernel evaluations: inactive
    pairs left as they are) against the host's stacked pairs: the same steps, holdout
    errors, levels and coefficients; kernel values from the resident matrix, or from a
    cache of 24 of its 46 rows, twice a step's draws (rows evicted; stopped pairs' draws
    not looked up). A checkpoint's evaluation is one copy to the host."""
    from gpusvm.solvers.sbp.pairs import NumpyPairSteps, run_pair_stack
    from gpusvm.solvers.sbp.pairs import _cuda as _sbp_pairs_cuda
    from gpusvm.solvers.sbp.pairs._cuda import CupyPairSteps

    X, y, _, _ = four_classes(rng, n=60, n_test=0)
    y = y.copy()
    y[:3] = ["a", "b", "c"]  # every class in the training rows
    y[rng.random(y.size) < 0.3] = "a"  # class a larger: pairs of different widths
    labels = np.searchsorted(np.unique(y), y)
    n_train = 46  # the rest held out
    rules = sbp_solver.StoppingRules(max_epochs=3, n_iter_no_change=10)  # 8 steps a checkpoint: 2 or 3 of them
    kernel_evals = rng.integers(600, 3_000, size=6)
    results = {}
    for backend in ("numpy", "cupy"):
        stack = pair_stack(X, labels, n_train, backend, fit_intercept=fit_intercept, batch_size=2, nu=0.2)
        if backend == "cupy":
            kernel_cache = "auto" if kernel_values == "matrix" else 24 * X.shape[0] * X.dtype.itemsize
            steps = device_steps = CupyPairSteps(stack, kernel_cache=kernel_cache)
        else:
            steps = NumpyPairSteps(stack, cache_bytes=2**20)
        results[backend] = run_pair_stack(stack, steps, rules, kernel_evals=kernel_evals)
    assert (device_steps.row_cache is not None) == (kernel_values == "cache")
    assert device_steps.kernel_values_source == kernel_values
    if kernel_values == "cache":
        assert device_steps.row_cache.capacity == 24 and device_steps.kernel_rows_computed > 24
    host, device = results["numpy"], results["cupy"]
    assert len({result.n_steps for result in host}) > 1  # pairs stopped at different steps
    for p, (a, b) in enumerate(zip(host, device, strict=True)):
        assert a.n_steps == b.n_steps, p
        assert [r["steps"] for r in a.history] == [r["steps"] for r in b.history]
        assert [r["holdout_error"] for r in a.history] == [r["holdout_error"] for r in b.history]
        np.testing.assert_allclose(b.level, a.level, rtol=1e-9, err_msg=f"pair {p}")
        np.testing.assert_allclose(b.bias, a.bias, rtol=1e-9, atol=1e-12, err_msg=f"pair {p}")
        np.testing.assert_allclose(b.alpha, a.alpha, rtol=1e-9, atol=1e-12, err_msg=f"pair {p}")
    copies, asnumpy = [], _sbp_pairs_cuda.cupy.asnumpy
    monkeypatch.setattr(
        _sbp_pairs_cuda.cupy, "asnumpy", lambda *args, **kwargs: copies.append(1) or asnumpy(*args, **kwargs)
    )
    device_steps.evaluate(True, np.arange(len(device)))
    assert len(copies) == 1


def test_stacked_pairs_run_on_one_blas_thread_but_for_large_fills(rng, monkeypatch):
    """While a stack's steps run, BLAS has one thread (small fills, spinning threads),
    a fill of at least THREADED_FILL_MIN multiply-adds gets the threads BLAS had before,
    and afterwards BLAS has them again; the model is the same either way."""
    from threadpoolctl import threadpool_info

    from gpusvm.solvers.sbp import pairs as sbp_pairs
    from gpusvm.solvers.sbp.pairs import _numpy as pairs_numpy

    def blas_threads():
        return max((info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"), default=1)

    before = blas_threads()
    X, y, _, _ = four_classes(rng, n=60, n_test=0)
    labels = np.searchsorted(np.unique(y), y)
    rules = sbp_solver.StoppingRules(max_epochs=2)
    seen, kernel_block_of = [], pairs_numpy.kernel_block
    monkeypatch.setattr(
        pairs_numpy, "kernel_block", lambda *a, **k: seen.append(blas_threads()) or kernel_block_of(*a, **k)
    )
    alphas = {}
    for fill_min in (2**62, 1):  # no fill large, then every fill large
        monkeypatch.setattr(pairs_numpy, "THREADED_FILL_MIN", fill_min)
        seen.clear()
        stack = pair_stack(X, labels, 60, "numpy", fit_intercept=True, batch_size=4)
        steps = sbp_pairs.NumpyPairSteps(stack, cache_bytes=2**20)
        alphas[fill_min] = [r.alpha for r in sbp_pairs.run_pair_stack(stack, steps, rules)]
        assert seen and set(seen) == {1 if fill_min > 1 else before}
        assert blas_threads() == before and steps.cache.blas_threads is None
    for a, b in zip(*alphas.values(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_stacked_pairs_of_different_sizes_checkpoint_together_in_long_blocks(rng, monkeypatch):
    """Pairs whose epochs run from about 10 to 150 steps: every pair checkpoints at multiples of
    one cadence common to the stack, of at least MIN_CHECKPOINT_STEPS, and at most ten
    times an epoch; a checkpoint evaluates every pair due there in one call, so blocks
    of steps end only at the common cadence's multiples or at a pair's last step (which
    its budget of kernel evaluations may put between checkpoints)."""
    from gpusvm.solvers.sbp import pairs as sbp_pairs
    from gpusvm.solvers.sbp.pairs import _run as pairs_run  # run_pair_stack reads run_pair_block here

    sizes = [250, 90, 40, 12, 8]
    labels = rng.permutation(np.repeat(np.arange(5), sizes))
    labels[:5] = np.arange(5)  # every class among the training rows
    X = 2.0 * rng.normal(size=(5, 4))[labels] + rng.normal(size=(labels.size, 4))
    stack = pair_stack(X, labels, 340, "numpy", fit_intercept=True, batch_size=2)
    steps = sbp_pairs.NumpyPairSteps(stack, cache_bytes=2**22)
    steps.block_steps = 64  # plan blocks as a device's steps are issued
    blocks, evaluated = [], []
    run_block, evaluate = pairs_run.run_pair_block, steps.evaluate
    monkeypatch.setattr(
        pairs_run,
        "run_pair_block",
        lambda stepper, first, count, active: (
            blocks.append(first + count - 1) or run_block(stepper, first, count, active)
        ),
    )
    monkeypatch.setattr(
        steps,
        "evaluate",
        lambda average, pairs: (
            evaluated.append((int(steps.n_steps[pairs].max()), set(pairs.tolist()))) or evaluate(average, pairs)
        ),
    )
    rules = sbp_solver.StoppingRules(max_epochs=2, n_iter_no_change=4)
    last = np.full(stack.n_pairs, 10**6)
    last[[0, -1]] = 37, 13  # budgets of kernel evaluations that end these pairs between checkpoints
    results = sbp_pairs.run_pair_stack(stack, steps, rules, kernel_evals=last * 2 * stack.n_rows)
    assert results[0].n_steps == 37 and results[-1].n_steps == 13  # each stops at its last step exactly
    every = sbp_pairs.pair_checkpoint_steps(stack.n_train, 2)
    steps_per_epoch = -(-stack.n_train // 2)
    assert steps_per_epoch.min() < 16 and steps_per_epoch.max() > 100
    common = np.gcd.reduce(every)
    assert common >= sbp_pairs.MIN_CHECKPOINT_STEPS and len(set(every.tolist())) > 1
    assert (every >= sbp_solver.checkpoint_interval(steps_per_epoch)).all()  # at most ten an epoch
    last_steps = {result.n_steps for result in results}
    assert set(blocks) <= set(range(common, max(last_steps) + 1, common)) | last_steps
    assert len(blocks) <= max(last_steps) // common + len(last_steps)
    for p, result in enumerate(results):  # each pair at its own multiples, and at its last step
        due = list(range(every[p], result.n_steps + 1, every[p]))
        assert [r["steps"] for r in result.history] == due + ([result.n_steps] if result.n_steps not in due else [])
    # one evaluation a checkpoint step, of the pairs due there
    at_steps = [t for t, _ in evaluated]
    assert at_steps == sorted(set(at_steps)) == sorted({r["steps"] for result in results for r in result.history})
    for t, pairs in evaluated:
        assert pairs == {p for p, result in enumerate(results) if any(r["steps"] == t for r in result.history)}


def test_host_pair_work_counts_each_stacks_steps_times_its_padded_columns():
    from gpusvm.solvers.sbp.pairs import STACK_STEP_COLUMNS, host_pair_work

    widths, train = np.array([100, 90, 40, 30]), np.array([80, 70, 33, 24])
    work = host_pair_work([[0, 1], [2, 3]], widths, train, batch_size=8, max_epochs=5)
    assert work == 5 * 10 * (STACK_STEP_COLUMNS + 2 * 100) + 5 * 5 * (STACK_STEP_COLUMNS + 2 * 40)


@pytest.mark.parametrize(
    ("class_sizes", "stack_widths"),
    [
        ([6000, 500, 500, 500, 500, 500], [[6500], [1000]]),  # ten narrow pairs padded sixfold: apart
        ([4000, 800, 800, 800, 800, 800, 800], [[4800], [1600]]),  # fifteen pairs padded threefold: apart
        ([2000, 2000, 700, 700, 700, 700], [[1400, 2700, 4000]]),  # six pairs padded threefold: together
        ([3000, 3000, 600, 600, 600, 600], [[1200, 3600, 6000]]),
        ([1000, 1000, 1000], [[2000]]),
    ],
)
def test_host_pairs_step_apart_only_when_padding_costs_more_than_a_stack(class_sizes, stack_widths):
    from gpusvm.solvers.sbp.pairs import stacks_by_width

    n_classes = len(class_sizes)
    widths = [class_sizes[a] + class_sizes[b] for a in range(n_classes) for b in range(a + 1, n_classes)]
    stacks = stacks_by_width(widths)
    assert sorted(p for stack in stacks for p in stack) == list(range(len(widths)))
    assert [sorted({widths[p] for p in stack}) for stack in stacks] == stack_widths
