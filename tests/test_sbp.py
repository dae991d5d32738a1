"""SBPClassifier and its solver: against the plain Algorithm 1, against SVC's optimum, and
the row cache against direct computation."""

import functools
import itertools
import os
import subprocess
import sys
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from gpusvm import SBPClassifier, nu_from_svc
from gpusvm import sbp as sbp_estimator  # SBPClassifier reads make_steps and make_pair_steps here
from gpusvm._backend import get_namespace
from gpusvm._validation import one_vs_rest_targets, to_backend
from gpusvm.kernel_functions import kernel_block, squared_row_norms
from gpusvm.solvers import sbp as sbp_solver
from gpusvm.solvers.sbp import _numpy as sbp_numpy  # NumpySBPSteps reads RENORMALIZE_BELOW here
from gpusvm.solvers import row_cache
from gpusvm.solvers.row_cache import KernelRowCache
from gpusvm.solvers.sbp import NumpySBPSteps, SBPProblem
from gpusvm.solvers.sbp._problem import LEVEL_FLOOR, StoppingRules

from .conftest import needs_device, needs_numba, numba_imports
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
        kernel=kernel,
        gamma=0.3,
        degree=2,
        coef0=1.0,
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


def recording_cache(matrix, kept_rows):
    """A cache of ``matrix``'s rows holding ``kept_rows`` of them, and the list of the
    blocks of rows it computes."""
    blocks = []

    n_rows, n_columns = matrix.shape
    return KernelRowCache(
        rows_of(matrix, blocks), n_rows, n_columns, matrix.dtype, max_bytes=kept_rows * n_columns * matrix.itemsize
    ), blocks


def rows_of(matrix, blocks=None):
    """A ``compute_rows`` for KernelRowCache reading ``matrix``, recording the blocks it
    computes in ``blocks``."""

    def compute(rows):
        if blocks is not None:
            blocks.append(rows.copy())
        return matrix[rows]

    return compute


def test_row_cache_returns_the_rows_it_is_asked_for(rng):
    matrix = rng.normal(size=(30, 11))
    cache, calls = recording_cache(matrix, 5)
    for _ in range(200):
        rows = np.unique(rng.integers(0, 30, size=rng.integers(1, 8)))
        np.testing.assert_array_equal(cache.rows(rows), matrix[rows])
    assert cache.rows_computed == sum(c.size for c in calls)
    order = np.array([1, 0, 1, 2])  # repeats, kept or computed apart (more rows than it holds)
    np.testing.assert_array_equal(cache.rows(np.array([7, 2, 9]), order=order), matrix[[2, 7, 2, 9]])
    np.testing.assert_array_equal(cache.rows(np.arange(8), order=order), matrix[[1, 0, 1, 2]])
    recent = np.array([3, 4])
    cache.rows(recent)
    before = cache.rows_computed
    cache.rows(recent)  # the most recently used rows are kept
    assert cache.rows_computed == before


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_cache_combines_the_rows_it_is_asked_for(rng, dtype):
    """``combine`` is ``weights @ rows`` (products with zero weights left out; summed in
    the rows' dtype, returned in float64), from a full cache, from one that evicts, and
    past its capacity."""
    matrix = rng.normal(size=(30, 11)).astype(dtype)
    cache, _ = recording_cache(matrix, 6)
    for _ in range(100):
        rows = np.unique(rng.integers(0, 30, size=rng.integers(1, 10)))
        weights = rng.normal(size=(3, rows.size)) * (rng.random((3, rows.size)) < 0.7)
        combined = cache.combine(weights, rows, prefetch=lambda: rng.permutation(30))
        assert combined.dtype == np.float64
        tolerance = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(combined, weights @ matrix[rows].astype(np.float64), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_weighted_row_sums_add_in_the_order_of_their_entries(rng, monkeypatch, dtype):
    """A few rows summed one by one, a product, and a product split over threads give the
    same sums, bit for bit: the order of the additions is the entries' order."""
    store = rng.normal(size=(50, 301)).astype(dtype)
    for entries in (1, 3, 4, 12):
        row_starts = np.concatenate([[0], np.sort(rng.integers(0, entries + 1, size=2)), [entries]])
        weights, slots = rng.normal(size=entries), rng.integers(0, 50, size=entries)
        expected = np.zeros((row_starts.size - 1, store.shape[1]), dtype=dtype)
        for r in range(row_starts.size - 1):
            for j in range(row_starts[r], row_starts[r + 1]):
                expected[r] += dtype(weights[j]) * store[slots[j]]
        sums = {}
        for by_row, split in ((4, 10**12), (0, 10**12), (0, 1)):
            monkeypatch.setattr(row_cache, "SUMMED_ROW_BY_ROW", by_row)
            monkeypatch.setattr(row_cache, "THREADED_PRODUCT_MIN", split)
            sums[by_row, split] = row_cache.weighted_row_sums(store, weights, slots, row_starts)
        for got in sums.values():
            assert got.dtype == np.float64
            np.testing.assert_array_equal(got, expected)


def test_row_cache_prefetches_in_blocks_without_evicting_the_rows_asked_for(rng):
    matrix = rng.normal(size=(40, 9))
    cache, blocks = recording_cache(matrix, 12)
    assert cache.block_rows == 6  # half the cache
    np.testing.assert_array_equal(
        cache.rows(np.array([3]), prefetch=lambda: np.array([3, 7, 7, 1, 9, 2, 5, 8])), matrix[[3]]
    )
    np.testing.assert_array_equal(blocks[-1], [3, 7, 1, 9, 2, 5])  # one block, most wanted first
    before = len(blocks)
    np.testing.assert_array_equal(cache.rows(np.array([1, 5, 7])), matrix[[1, 5, 7]])
    assert len(blocks) == before  # prefetched rows are served from the cache
    for _ in range(100):  # a full cache: what a call asks for is never evicted by its prefetch
        asked = np.unique(rng.integers(0, 40, size=rng.integers(1, 8)))
        np.testing.assert_array_equal(cache.rows(asked, prefetch=lambda: rng.permutation(40)), matrix[asked])
    assert cache.rows_computed == sum(b.size for b in blocks)
    assert cache.prefetched <= 2 * cache.prefetch_used + row_cache.PREFETCH_START


def test_row_cache_computes_a_large_miss_in_products_of_bounded_memory(rng):
    """A miss of more rows than a block holds (a step's drawn rows, all new) is computed by
    several calls of ``compute_rows`` of at most ``product_rows`` rows each (``block_bytes``
    over the memory a row takes while computed), in the order asked; the rows are those
    one call gives (sparse rows: scipy's product rounds a row alike whatever its size)."""
    X = sp.random(60, 30, density=0.3, format="csr", random_state=0)
    sq_norms = squared_row_norms(X)
    calls = []

    def compute_rows(rows):
        calls.append(rows.copy())
        return kernel_block(X[rows], X, kernel="rbf", gamma=0.1, X_sq_norms=sq_norms[rows], Y_sq_norms=sq_norms)

    row_bytes = 60 * 8
    cache = KernelRowCache(
        compute_rows,
        60,
        60,
        np.float64,
        max_bytes=60 * row_bytes,
        block_bytes=5 * row_bytes,
        product_row_bytes=2 * row_bytes,
    )  # the result and a temporary as large
    assert cache.product_rows == 2 and cache.block_rows == 2
    asked = rng.permutation(60)[:13]
    got = cache.rows(asked)
    assert [rows.size for rows in calls] == [2] * 6 + [1]
    np.testing.assert_array_equal(np.concatenate(calls), asked)
    np.testing.assert_array_equal(got, compute_rows(asked))
    calls.clear()
    cache.rows(rng.permutation(60)[:3], prefetch=lambda: np.arange(60))  # prefetch fills a block, no more
    assert max(rows.size for rows in calls) <= cache.product_rows
    # by default a row takes its own bytes: the result alone within block_bytes
    assert KernelRowCache(compute_rows, 60, 60, np.float64, 60 * row_bytes, block_bytes=5 * row_bytes).product_rows == 5


@needs_device
@pytest.mark.parametrize("sparse", [False, True])
def test_device_row_cache_computes_a_large_miss_in_products_of_bounded_memory(rng, monkeypatch, sparse):
    """The device cache's products, with their temporaries, stay within ``BLOCK_BYTES``
    however many of a step's drawn rows miss (n = 1e6 rows, 26 classes at batch 64 would
    otherwise compute 1,664 rows at once: 6.7 GB in float32, and a temporary as large);
    the rows kept are those of one product (up to the products' rounding)."""
    import cupy

    from gpusvm.solvers import _kernel_values_cuda

    problem, _, _ = make_problem(rng, "cupy", sparse=sparse, n_train=30, n_holdout=5)
    X, n_columns = problem.X, problem.X.shape[0]
    sq_norms = squared_row_norms(X)
    calls = []

    def compute_rows(rows):
        calls.append(int(rows.size))
        return problem.kernel_rows(rows, sq_norms)

    per_row = _kernel_values_cuda.product_row_bytes(n_columns, X.shape[1], X.dtype)
    assert per_row == (2 * n_columns + X.shape[1]) * X.dtype.itemsize
    monkeypatch.setattr(_kernel_values_cuda, "BLOCK_BYTES", 4 * per_row + 1)
    cache = _kernel_values_cuda.DeviceRowCache(
        compute_rows, 30, n_columns, X.dtype, 30 * n_columns * 8, 22, n_features=X.shape[1]
    )
    assert cache.product_rows == 4
    drawn = rng.permutation(30)[:22]
    cache.look_up(cupy.asarray(drawn))
    assert calls == [4] * 5 + [2]
    np.testing.assert_allclose(
        cache.store[cache.store_rows].get(),
        problem.kernel_rows(cupy.asarray(drawn), sq_norms).get(),
        rtol=1e-12,
        atol=1e-14,
    )


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


def test_row_cache_stops_prefetching_rows_that_are_never_asked_for(rng):
    matrix = rng.normal(size=(400, 3))
    cache = KernelRowCache(rows_of(matrix), 400, 3, np.float64, max_bytes=400 * 3 * 8)
    for row in range(200):  # asks for rows 0..199, is offered rows 200..399
        cache.rows(np.array([row]), prefetch=lambda: np.arange(200, 400))
    assert cache.prefetched == row_cache.PREFETCH_START and cache.prefetch_used == 0
    assert cache.rows_computed == 200 + row_cache.PREFETCH_START


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
    """The host steps each fit makes from now on (SBPClassifier's ``make_steps`` and
    ``make_pair_steps``, recorded)."""
    made = []

    def recording(make):
        def make_and_record(*args, **kwargs):
            made.append(make(*args, **kwargs))
            return made[-1]

        return make_and_record

    monkeypatch.setattr(sbp_estimator, "make_steps", recording(sbp_solver.make_steps))
    monkeypatch.setattr(sbp_estimator, "make_pair_steps", recording(sbp_solver.make_pair_steps))
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


def test_auto_cache_size_is_a_quarter_of_the_available_memory_at_most_the_whole_matrix(monkeypatch):
    monkeypatch.setattr(row_cache, "available_memory_bytes", lambda: 4 * 2**30)
    assert row_cache.cache_bytes("auto", 2**40) == 2**30
    assert row_cache.cache_bytes("auto", 5 * 2**20) == 5 * 2**20
    assert row_cache.cache_bytes(200, 5) == 200 * 2**20  # a number is megabytes, whatever the matrix
    assert row_cache.cache_bytes(0.5, 2**40) == 2**19


def test_available_memory_without_psutil_is_linuxs_else_sysconfs_else_a_constant(monkeypatch, tmp_path):
    import os
    import sys

    monkeypatch.setitem(sys.modules, "psutil", None)  # importing it raises ImportError
    assert row_cache.available_memory_bytes() > 0 and row_cache.total_memory_bytes() > 0
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:         1000 kB\nMemAvailable:    8000000 kB\n")
    assert row_cache._meminfo_available_bytes(meminfo) == 8000000 * 1024
    assert row_cache._meminfo_available_bytes(tmp_path / "absent") is None
    monkeypatch.setattr(row_cache, "_meminfo_available_bytes", lambda: None)  # not Linux
    assert row_cache.available_memory_bytes() > 0
    monkeypatch.setattr(os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert row_cache.available_memory_bytes() == row_cache.AVAILABLE_MEMORY_UNKNOWN_MB * 2**20
    assert row_cache.total_memory_bytes() is None and not row_cache.host_memory_low()  # unknown: no floor


def test_the_memory_floor_needs_both_readings(monkeypatch):
    monkeypatch.setattr(row_cache, "total_memory_bytes", lambda: 32 * 2**30)
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: None)  # e.g. no psutil on macOS
    assert not row_cache.host_memory_low()
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: 2**30)
    assert row_cache.host_memory_low()


def low_memory_after(monkeypatch, rows_read, row_bytes):
    """The host's memory reads low once a cache has filled ``rows_read`` slots (memory
    read every slot), and plenty before."""
    monkeypatch.setattr(row_cache, "MEMORY_CHECK_BYTES", row_bytes)
    monkeypatch.setattr(row_cache, "total_memory_bytes", lambda: 100)
    reads = iter([50] * (rows_read - 1) + [5] * 10**6)  # below the floor of 10 from the rows_read-th read
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: next(reads))


def test_row_cache_stops_growing_when_the_hosts_memory_runs_low_and_evicts_instead(rng, monkeypatch):
    matrix = rng.normal(size=(40, 7))
    low_memory_after(monkeypatch, 6, matrix.shape[1] * 8)
    cache, _ = recording_cache(matrix, kept_rows=40)
    for _ in range(300):
        rows = np.unique(rng.integers(0, 40, size=rng.integers(1, 4)))
        np.testing.assert_array_equal(cache.rows(rows), matrix[rows])
    assert cache.memory_bound and cache.n_used < 20 and cache.rows_computed > 40  # 5 reads, at most 3 rows each
    use = cache.use()
    assert use.memory_bound and use.capacity == cache.grow_limit and use.thrashed
    assert "stopped growing at" in use.warning("cache_size", "auto", "MB") and "fewer fits" in use.warning(
        "cache_size", "auto", "MB"
    )
    # a call that needs more rows than it may evict: the rest take fresh slots
    np.testing.assert_array_equal(cache.rows(np.arange(30)), matrix[:30])
    assert 30 <= cache.n_used <= cache.capacity


def test_the_memory_floor_is_read_at_the_first_slot_blames_no_full_cache_and_bounds_prefetch(rng, monkeypatch):
    matrix = rng.normal(size=(40, 7))
    monkeypatch.setattr(row_cache, "total_memory_bytes", lambda: 100)
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: 5)  # low from the start
    small, _ = recording_cache(matrix, kept_rows=40)  # far below MEMORY_CHECK_BYTES: read all the same
    small.rows(np.array([0, 1]))
    assert small.memory_bound and small.grow_limit == 2
    for row in range(2, 40):  # a prefetch hint at every miss: no fresh slot for it past the floor
        np.testing.assert_array_equal(small.rows(np.array([row]), prefetch=lambda: np.arange(40)), matrix[[row]])
    assert small.n_used == 2 and small.prefetched == 0
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: 50)
    full, _ = recording_cache(matrix, kept_rows=4)
    full.rows(np.arange(4))
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: 5)
    for row in range(4, 40):  # a cache full at its size: bounded by cache_size, not by memory
        full.rows(np.array([row]))
    assert not full.memory_bound and "Set cache_size" in full.use().warning("cache_size", 0.1, "MB")


def test_a_fit_whose_cache_stops_growing_gives_the_same_model(rng, monkeypatch):
    problem, _, _ = make_problem(rng, "numpy", batch_size=3, n_classes=3)
    full = run_steps(NumpySBPSteps(problem, cache_bytes=2**30), 80)
    low_memory_after(monkeypatch, 5, problem.X.shape[0] * 8)
    steps = NumpySBPSteps(problem, cache_bytes=2**30)
    bound = run_steps(steps, 80)
    assert steps.cache.memory_bound and steps.cache.rows_computed > NumpySBPSteps(problem, 2**30).cache.rows_computed
    for a, b in zip(full, bound, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


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


def test_row_cache_counts_the_distinct_rows_it_computed_and_says_when_it_thrashed(rng):
    matrix = rng.normal(size=(6, 5))
    cache, _ = recording_cache(matrix, kept_rows=2)
    for _ in range(4):  # three rows in turn through two slots: every ask misses
        for row in range(3):
            cache.rows(np.array([row]))
    use = cache.use()
    assert (use.rows_computed, use.rows_distinct, use.capacity, use.row_bytes) == (12, 3, 2, 40) and use.thrashed
    assert use.warning("cache_size", 1e-4, "MB") == (
        "The kernel row cache thrashed: cache_size=0.0001 kept 2 rows (7.63e-05 MB) of the 3 distinct rows the fit "
        "needed, so it computed rows 4.0 times over on average (12 rows). Set cache_size to at least 1 (MB) to keep "
        "them all."
    )
    cache.rows(np.arange(6))  # more than it holds: computed, not kept, counted
    assert (cache.rows_computed, cache.rows_distinct) == (18, 6)
    large, _ = recording_cache(matrix, kept_rows=3)
    for _ in range(4):
        for row in range(3):
            large.rows(np.array([row]))
    assert (large.rows_computed, large.rows_distinct) == (3, 3) and not large.use().thrashed


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


@pytest.fixture(scope="module")
def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


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
        gamma=problem.gamma,
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


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_one_vs_one_is_a_binary_sbp_per_pair(rng, fit_intercept, monkeypatch):
    """Pair p of a one-vs-one model is the binary SBPClassifier on that pair's rows (its
    first class's, then its second's), with the first class positive, the pair's stream
    seed, and the pair's checkpoint cadence (up to rounding: on the host the pairs step
    together, their levels found and kernel rows combined for all pairs at once)."""
    from gpusvm._estimator.one_vs_one import class_pairs, pair_seed
    from gpusvm.solvers.sbp import pair_checkpoint_steps

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
        monkeypatch.setattr(
            binary, "_solve", functools.partial(binary._solve, checkpoint_every=int(checkpoint_every[number]))
        )
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
    monkeypatch.setattr(SBPClassifier, "_pairs_step_together", lambda *args: False)
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


def pair_stack(X, labels, n_train, backend, *, fit_intercept, batch_size=3, seed=5, nu=0.05):
    """The PairStack of every pair of classes of X's rows (training rows first, as
    SBPClassifier lays them out), with X on ``backend``."""
    from gpusvm._estimator.one_vs_one import class_pairs, pair_seed
    from gpusvm.solvers.sbp import PairStack

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
        kernel="rbf",
        gamma=0.2,
        degree=3,
        coef0=0.0,
        fit_intercept=fit_intercept,
    )


def run_host_pairs(stack, steps_class, rules, kernel_evals, cache_bytes=2**20):
    """``run_pair_stack`` of ``stack`` on the host steps ``steps_class``: the results and the steps."""
    from gpusvm.solvers.sbp import run_pair_stack

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
    from gpusvm.solvers.sbp import NumpyPairSteps
    from gpusvm.solvers.sbp._pairs_compiled import CompiledPairSteps

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
    from gpusvm.solvers.sbp import _pairs as sbp_pairs
    from gpusvm.solvers.sbp import _pairs_compiled

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
    from gpusvm.solvers.sbp import _pairs_numba

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
    from gpusvm.solvers.sbp import NumpyPairSteps, _pairs_compiled

    X, y, _, _ = four_classes(np.random.default_rng(0), n=40, n_test=0)
    stack = pair_stack(X, np.searchsorted(np.unique(y), y), 40, "numpy", fit_intercept=True)

    def made(compiled):
        return type(sbp_solver.make_pair_steps(stack, np, kernel_cache="auto", cache_bytes=2**20, compiled=compiled))

    assert made(False) is NumpyPairSteps
    if numba_imports():
        assert made(True) is _pairs_compiled.CompiledPairSteps


@pytest.fixture
def fresh_compiled_steps_rule(monkeypatch):
    """use_compiled_steps as at a process's start: the switch unset and not read yet, no
    work on the NumPy steps, the Numba functions not imported; ``setenv`` sets the switch
    (read again), ``work_so_far`` reads the NumPy steps' work counted."""
    from gpusvm.solvers.sbp import _pairs_compiled

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


def test_host_pair_work_counts_each_stacks_steps_times_its_padded_columns():
    from gpusvm.sbp import STACK_STEP_COLUMNS, _host_pair_work

    widths, train = np.array([100, 90, 40, 30]), np.array([80, 70, 33, 24])
    work = _host_pair_work([[0, 1], [2, 3]], widths, train, batch_size=8, max_epochs=5)
    assert work == 5 * 10 * (STACK_STEP_COLUMNS + 2 * 100) + 5 * 5 * (STACK_STEP_COLUMNS + 2 * 40)


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


@pytest.mark.parametrize("kernel_values", ["matrix", "cache"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_device_pair_steps_match_the_host_pairs(rng, step_block_mode, fit_intercept, kernel_values, monkeypatch):
    """Every pair in each launch on the device (classes of uneven sizes: rows of padding;
    pairs stopping at different steps by their budgets of kernel evaluations: inactive
    pairs left as they are) against the host's stacked pairs: the same steps, holdout
    errors, levels and coefficients; kernel values from the resident matrix, or from a
    cache of 24 of its 46 rows, twice a step's draws (rows evicted; stopped pairs' draws
    not looked up). A checkpoint's evaluation is one copy to the host."""
    from gpusvm.solvers.sbp import _pairs_cuda as _sbp_pairs_cuda
    from gpusvm.solvers.sbp._pairs_cuda import CupyPairSteps
    from gpusvm.solvers.sbp import NumpyPairSteps, run_pair_stack

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

    from gpusvm.solvers.sbp import _pairs as sbp_pairs

    def blas_threads():
        return max((info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"), default=1)

    before = blas_threads()
    X, y, _, _ = four_classes(rng, n=60, n_test=0)
    labels = np.searchsorted(np.unique(y), y)
    rules = sbp_solver.StoppingRules(max_epochs=2)
    seen, kernel_block_of = [], sbp_pairs.kernel_block
    monkeypatch.setattr(
        sbp_pairs, "kernel_block", lambda *a, **k: seen.append(blas_threads()) or kernel_block_of(*a, **k)
    )
    alphas = {}
    for fill_min in (2**62, 1):  # no fill large, then every fill large
        monkeypatch.setattr(sbp_pairs, "THREADED_FILL_MIN", fill_min)
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
    from gpusvm.solvers.sbp import _pairs as sbp_pairs

    sizes = [250, 90, 40, 12, 8]
    labels = rng.permutation(np.repeat(np.arange(5), sizes))
    labels[:5] = np.arange(5)  # every class among the training rows
    X = 2.0 * rng.normal(size=(5, 4))[labels] + rng.normal(size=(labels.size, 4))
    stack = pair_stack(X, labels, 340, "numpy", fit_intercept=True, batch_size=2)
    steps = sbp_pairs.NumpyPairSteps(stack, cache_bytes=2**22)
    steps.block_steps = 64  # plan blocks as a device's steps are issued
    blocks, evaluated = [], []
    run_block, evaluate = sbp_pairs.run_pair_block, steps.evaluate
    monkeypatch.setattr(
        sbp_pairs,
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
    n_classes = len(class_sizes)
    widths = [class_sizes[a] + class_sizes[b] for a in range(n_classes) for b in range(a + 1, n_classes)]
    stacks = sbp_estimator._stacks_by_width(widths)
    assert sorted(p for stack in stacks for p in stack) == list(range(len(widths)))
    assert [sorted({widths[p] for p in stack}) for stack in stacks] == stack_widths
