"""The kernel row cache (gpusvm.solvers.row_cache, and the device's cache built on it) against
direct computation: the rows it returns and combines, its prefetch, its bounded products, its
memory budget and floor, and what it says when it thrashed."""

import numpy as np
import pytest
import scipy.sparse as sp

from gpusvm.kernel_functions import kernel_block, squared_row_norms
from gpusvm.solvers import row_cache
from gpusvm.solvers.row_cache import KernelRowCache

from .conftest import low_memory_after, needs_device
from .test_sbp_solver import make_problem


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


def test_row_cache_stops_prefetching_rows_that_are_never_asked_for(rng):
    matrix = rng.normal(size=(400, 3))
    cache = KernelRowCache(rows_of(matrix), 400, 3, np.float64, max_bytes=400 * 3 * 8)
    for row in range(200):  # asks for rows 0..199, is offered rows 200..399
        cache.rows(np.array([row]), prefetch=lambda: np.arange(200, 400))
    assert cache.prefetched == row_cache.PREFETCH_START and cache.prefetch_used == 0
    assert cache.rows_computed == 200 + row_cache.PREFETCH_START


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
