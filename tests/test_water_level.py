"""The water level: the fast versions against the sort-based oracle, and the oracle against
its definition (sum_i max(0, gamma - c_i) = volume; for the bias, the best level over b)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gpusvm import find_gamma, find_gamma_and_bias
from gpusvm.water_level import (
    find_gamma_and_bias_partition,
    find_gamma_and_bias_sorted,
    find_gamma_partition,
    find_gamma_sorted,
)

from .conftest import needs_device

# Small integers make ties and repeated values common; floats cover the rest.
heights = st.one_of(
    arrays(np.float64, st.integers(1, 60), elements=st.integers(-4, 4).map(float)),
    arrays(np.float64, st.integers(1, 60), elements=st.floats(-1e3, 1e3, allow_nan=False, width=64)),
)
volumes = st.one_of(st.just(0.0), st.floats(0, 10), st.floats(0, 1e6))


def close(a, b, scale=1.0):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b), scale)


@settings(max_examples=300, deadline=None)
@given(c=heights, volume=volumes, dtype=st.sampled_from([np.float32, np.float64]))
def test_find_gamma_versions_agree_with_oracle(c, volume, dtype):
    c = c.astype(dtype)
    expected = find_gamma_sorted(c, volume)
    covered = np.maximum(0.0, expected - c.astype(np.float64)).sum()
    assert close(covered, volume, np.abs(c).sum())  # the oracle solves the equation
    assert close(find_gamma_partition(c, volume), expected, np.abs(c).max())
    assert close(find_gamma(c, volume), expected, np.abs(c).max())


@settings(max_examples=300, deadline=None)
@given(c=heights, volume=volumes, offset=st.floats(0, 100))
def test_warm_start_from_any_previous_level(c, volume, offset):
    expected = find_gamma_sorted(c, volume)
    for start in (expected + offset, expected - offset, expected):
        assert close(find_gamma(c, volume, start=start), expected, np.abs(c).max())


def test_special_volumes_and_sizes():
    c = np.array([3.0, -1.0, 2.0, 2.0])
    assert find_gamma(c, 0.0) == -1.0  # nu = 0: the lowest response
    assert find_gamma(np.array([5.0]), 2.5) == 7.5  # n = 1
    flood = 1e6
    assert find_gamma(c, flood) == pytest.approx((flood + c.sum()) / c.size)  # covers everything
    assert find_gamma(np.full(7, 2.0), 0.7) == pytest.approx(2.1)  # all tied


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_responses_raise(bad):
    with pytest.raises(ValueError, match="NaN or infinity"):
        find_gamma(np.array([1.0, bad]), 1.0)
    with pytest.raises(ValueError, match="NaN or infinity"):
        find_gamma_and_bias(np.array([1, -1]), np.array([1.0, bad]), 1.0)


def test_bad_volume_and_empty_raise():
    with pytest.raises(ValueError, match="volume.*-1.0"):
        find_gamma(np.ones(3), -1.0)
    with pytest.raises(ValueError, match="empty"):
        find_gamma(np.ones(0), 1.0)


labelled = heights.flatmap(
    lambda c: st.tuples(st.just(c), arrays(np.int64, c.shape, elements=st.sampled_from([-1, 1])))
)


@settings(max_examples=300, deadline=None)
@given(data=labelled, volume=volumes)
def test_bias_version_agrees_with_oracle_and_definition(data, volume):
    c, y = data
    if not ((y == 1).any() and (y == -1).any()):
        with pytest.raises(ValueError, match="needs both classes"):
            find_gamma_and_bias(y, c, volume)
        return
    gamma, bias = find_gamma_and_bias_sorted(y, c, volume)
    fast_gamma, fast_bias = find_gamma_and_bias_partition(y, c, volume)
    scale = np.abs(c).max() + volume
    assert close(fast_gamma, gamma, scale) and close(fast_bias, bias, scale)
    # gamma is the best level over all biases: attained at `bias`, never beaten
    assert close(find_gamma_sorted(c + y * bias, volume), gamma, scale)
    for b in np.linspace(bias - 10, bias + 10, 41):
        assert find_gamma_sorted(c + y * b, volume) <= gamma + 1e-9 * max(1.0, scale)


def test_bias_with_one_class_raises_clearly():
    with pytest.raises(ValueError, match="needs both classes: y holds only \\+1"):
        find_gamma_and_bias(np.ones(4), np.arange(4.0), 1.0)
    with pytest.raises(ValueError, match="labels in"):
        find_gamma_and_bias(np.array([0, 1]), np.arange(2.0), 1.0)


drifts = st.lists(st.floats(-0.5, 0.5), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(c=heights, volume=volumes, drift=drifts, seed=st.integers(0, 2**16))
def test_tracker_follows_a_changing_sequence(c, volume, drift, seed):
    """The tracker's candidates-only answers equal the oracle's at every step of a sequence
    of responses that move (a little or a lot) between calls."""
    from gpusvm.solvers.sbp._levels import LevelTracker

    rng = np.random.default_rng(seed)
    tracker = LevelTracker(volume)
    for size in drift:
        c = c + size * rng.standard_normal(c.size) * rng.integers(0, 2, c.size)
        assert close(tracker.level(c), find_gamma_sorted(c, volume), np.abs(c).max())


@settings(max_examples=200, deadline=None)
@given(data=labelled, volume=volumes, drift=drifts, seed=st.integers(0, 2**16))
def test_tracker_with_bias_follows_a_changing_sequence(data, volume, drift, seed):
    from gpusvm.solvers.sbp._levels import LevelTracker

    c, y = data
    if not ((y == 1).any() and (y == -1).any()):
        return
    rng = np.random.default_rng(seed)
    tracker = LevelTracker(volume)
    for size in drift:
        c = c + size * rng.standard_normal(c.size) * rng.integers(0, 2, c.size)
        gamma, bias = tracker.level_and_bias(c[y == 1], c[y == -1])
        expected_gamma, expected_bias = find_gamma_and_bias_sorted(y, c, volume)
        scale = np.abs(c).max() + volume
        assert close(gamma, expected_gamma, scale) and close(bias, expected_bias, scale)


@pytest.mark.parametrize("with_bias", [False, True])
def test_tracker_uses_its_candidates_on_small_drifts(with_bias, monkeypatch):
    """With many responses and small moves, the tracker answers from its candidates
    (the partition search runs only at the start) and stays exact."""
    import gpusvm.water_level as wl
    from gpusvm.solvers.sbp._levels import LevelTracker

    searches = []
    original = wl._covered_rank
    monkeypatch.setattr(wl, "_covered_rank", lambda *a: searches.append(1) or original(*a))
    rng = np.random.default_rng(0)
    c, y = rng.normal(size=3000), rng.choice([-1, 1], size=3000)
    tracker = LevelTracker(volume=30.0)
    for _ in range(50):
        c = c + 0.01 * rng.standard_normal(c.size)
        if with_bias:
            got, expected = tracker.level_and_bias(c[y == 1], c[y == -1]), find_gamma_and_bias_sorted(y, c, 30.0)
        else:
            got, expected = tracker.level(c), find_gamma_sorted(c, 30.0)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        assert np.isfinite(tracker.thresholds).all()
    assert len(searches) <= 3


@needs_device
@settings(max_examples=200, deadline=None)
@given(c=heights, volume=volumes, dtype=st.sampled_from([np.float32, np.float64]))
def test_gpu_radix_select_agrees_with_oracle(c, volume, dtype):
    import cupy

    c = c.astype(dtype)
    expected = find_gamma_sorted(c, volume)
    assert close(find_gamma(cupy.asarray(c), volume), expected, np.abs(c).max())


@needs_device
@settings(max_examples=200, deadline=None)
@given(data=labelled, volume=volumes)
def test_gpu_bias_version_agrees_with_oracle(data, volume):
    import cupy

    c, y = data
    if not ((y == 1).any() and (y == -1).any()):
        with pytest.raises(ValueError, match="needs both classes"):
            find_gamma_and_bias(cupy.asarray(y), cupy.asarray(c), volume)
        return
    gamma, bias = find_gamma_and_bias_sorted(y, c, volume)
    got_gamma, got_bias = find_gamma_and_bias(cupy.asarray(y), cupy.asarray(c), volume)
    scale = np.abs(c).max() + volume
    assert close(got_gamma, gamma, scale) and close(got_bias, bias, scale)


@needs_device
@pytest.mark.parametrize("n", [1, 1000, 100_003])
def test_gpu_radix_select_on_spread_and_clustered_values(n):
    """Values spread over many exponents, and values that share all but their last bits."""
    import cupy

    rng = np.random.default_rng(n)
    for c in (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n), 1.0 + rng.integers(0, 5, n) * 2**-50):
        for volume in (0.0, 1e-12, 0.5, float(n)):
            expected = find_gamma_sorted(c, volume)
            assert close(find_gamma(cupy.asarray(c), volume), expected, np.abs(c).max())


@settings(max_examples=200, deadline=None)
@given(data=labelled, volume=volumes, drift=drifts, seed=st.integers(0, 2**16), with_bias=st.booleans())
def test_tracker_covers_the_rows_the_oracle_covers(data, volume, drift, seed, with_bias):
    """covered() gives the level, the bias and exactly the rows at or under the level
    (what SBP draws from) at every step of a changing sequence, with a per-call volume."""
    from gpusvm.solvers.sbp._levels import LevelTracker

    c, y = data
    if with_bias and not ((y == 1).any() and (y == -1).any()):
        return
    rng = np.random.default_rng(seed)
    tracker = LevelTracker(volume)
    for size in drift:
        c = c + size * rng.standard_normal(c.size) * rng.integers(0, 2, c.size)
        call_volume = volume * rng.uniform(0.5, 2.0)  # SBP passes volume / scale
        if with_bias:
            gamma, bias, covered = tracker.covered(c, y == 1, call_volume)
            expected_gamma, expected_bias = find_gamma_and_bias_sorted(y, c, call_volume)
        else:
            gamma, bias, covered = tracker.covered(c, None, call_volume)
            expected_gamma = c.min() if call_volume == 0 else find_gamma_sorted(c, call_volume)
            expected_bias = 0.0
        scale = np.abs(c).max() + call_volume
        assert close(gamma, expected_gamma, scale) and close(bias, expected_bias, scale)
        if not with_bias:
            np.testing.assert_array_equal(covered, np.flatnonzero(c <= max(gamma, c.min())))
            continue
        # with a bias, the rows at or under the level in exact arithmetic: rows within
        # rounding of it may go either way in floating point (the tracker keeps equal
        # responses together, see test_equal_responses_at_the_edge_are_covered_together)
        heights = c + bias * y
        tolerance = 1e-12 * scale
        assert set(np.flatnonzero(heights <= gamma - tolerance)) <= set(covered.tolist())
        assert set(covered.tolist()) <= set(np.flatnonzero(heights <= max(gamma, heights.min()) + tolerance))


def test_tracker_searches_only_a_window_of_candidates(monkeypatch):
    """On many responses moving a little (and a class shifting as a whole, which the bias
    absorbs), the tracker neither searches all responses nor sorts its candidates."""
    import gpusvm.water_level as wl
    from gpusvm.solvers.sbp._levels import LevelTracker

    searches, sorted_sizes = [], []
    original_search, original_sort = wl._covered_rank, np.sort
    monkeypatch.setattr(wl, "_covered_rank", lambda *a: searches.append(1) or original_search(*a))
    monkeypatch.setattr(
        wl.np, "sort", lambda a, *args, **kw: sorted_sizes.append(a.size) or original_sort(a, *args, **kw)
    )
    rng = np.random.default_rng(1)
    c, y = rng.normal(size=20_000), rng.choice([-1, 1], size=20_000)
    tracker = LevelTracker(volume=2000.0)
    levels = []
    for _ in range(40):
        c = c + 0.002 * rng.standard_normal(c.size) + 0.05 * (y == 1)
        levels.append((tracker.covered(c, y == 1)[0], c))
    assert len(searches) == 1  # the first call only
    monkeypatch.undo()
    for level, responses in levels[-3:]:
        assert close(level, find_gamma_and_bias_sorted(y, responses, 2000.0)[0], np.abs(responses).max())
    assert max(sorted_sizes) <= 2 * (tracker.covered_count // 32 + 64), (max(sorted_sizes), tracker.covered_count)


@pytest.mark.parametrize("seed", [624, 888, 1217, 1760, 1922, *range(40)])
def test_equal_responses_at_the_edge_are_covered_together(seed):
    """Many equal responses (duplicate rows): the covered set takes all of a value or
    none, and the same rows whatever order the level's sums ran in (a cluster adds them
    in another order than one node). The first seeds split ties before the edges were
    read off the order statistics."""
    from gpusvm.solvers.sbp._levels import LevelTracker, covered_among_lowest

    rng = np.random.default_rng(seed)
    n = 300
    c = rng.choice(rng.normal(size=rng.integers(5, 60)) * rng.choice([1, 10, 1e3]), n)  # few distinct values
    positive = rng.random(n) < 0.4
    positive[:2], positive[2:4] = True, False
    volume = rng.uniform(0.01, 50)
    _, _, covered = LevelTracker(volume).covered(c, positive)
    mask = np.zeros(n, dtype=bool)
    mask[covered] = True
    for cls in (positive, ~positive):  # all of a class's value, or none of it
        for value in np.unique(c[cls & mask]):
            assert mask[cls & (c == value)].all()
    order = rng.permutation(n)
    sizes = [int(positive.sum()), int((~positive).sum())]
    _, _, _, permuted = covered_among_lowest(c[order], positive[order], [np.inf, np.inf], sizes, volume)
    np.testing.assert_array_equal(np.sort(order[permuted]), covered)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**16), with_bias=st.booleans(), integers=st.booleans(), window=st.sampled_from([1, 2, 64]))
def test_levels_of_rows_agree_with_the_oracle_row_by_row(seed, with_bias, integers, window):
    """Many problems of different sizes in one array (padding and holdout entries in no
    class): each row's level, bias and covered rows are those of the tracker on that
    row's responses alone; a small window is doubled until it holds the covered count."""
    from gpusvm.solvers.sbp._levels import LevelTracker, class_offsets, levels_of_rows

    rng = np.random.default_rng(seed)
    n_problems, width = int(rng.integers(1, 8)), int(rng.integers(2, 40))
    responses = (
        rng.integers(-3, 4, size=(n_problems, width)).astype(float)
        if integers
        else rng.normal(size=(n_problems, width)) * rng.choice([1e-3, 1, 1e3])
    )
    sizes = rng.integers(2, width + 1, size=n_problems)
    used = np.arange(width) < sizes[:, None]
    positive = used & (rng.random((n_problems, width)) < 0.5)
    positive[:, 0], positive[:, 1] = True, False
    responses[~used] = rng.normal(size=(~used).sum()) * 1e6  # padding: must not count
    volumes = rng.choice([0.0, 0.5, 3.0, 100.0], size=n_problems) * rng.uniform(0.5, 2, size=n_problems)
    classes = (positive, used & ~positive) if with_bias else (used,)
    level, bias, edges, covered = levels_of_rows(responses, [class_offsets(c) for c in classes], volumes, window=window)
    for p in range(n_problems):
        c = responses[p, : sizes[p]]
        expected = LevelTracker(volumes[p]).covered(c, positive[p, : sizes[p]] if with_bias else None)
        scale = np.abs(c).max() + volumes[p]
        assert close(level[p], expected[0], scale) and close(bias[p], expected[1], scale)
        threshold = np.where(positive[p], *edges[p]) if with_bias else edges[p, 0]
        np.testing.assert_array_equal(np.flatnonzero((responses[p] <= threshold) & used[p]), expected[2])
        if with_bias:  # k* ranks of the positive class; equal responses at the edge come along
            assert 1 <= covered[p] <= (positive[p] & (responses[p] <= threshold)).sum()


def oracle_levels(responses, labels, volume, two_basins):
    """Level, bias and each basin's edge per row, by the NumPy solvers' search."""
    from gpusvm.water_level import _level_bias_edges

    answers = []
    for c, y in zip(responses, labels, strict=True):
        if two_basins:
            level, bias, edges = _level_bias_edges(np.sort(c[y > 0]), np.sort(c[y < 0]), volume)
        else:
            level = c.min() if volume == 0 else find_gamma_sorted(c, volume)
            bias, edges = 0.0, (max(level, c.min()), 0.0)
        answers.append((level, bias, *edges))
    return np.array(answers)


def assert_search_as_oracle(levels, responses, labels, volume, two_basins, atol, err_msg):
    """A device search of ``responses`` (k, n) gives each problem's level, bias and edges as
    the oracle's (without the bias, the second edge is not compared)."""
    import cupy

    levels.search(cupy.asarray(responses))
    got = np.column_stack([levels.level.get(), levels.bias.get(), levels.edges.get()])
    expected = oracle_levels(responses, labels, volume, two_basins)
    if not two_basins:
        got[:, 3], expected[:, 3] = 0.0, 0.0
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=atol, err_msg=err_msg)


@needs_device
@pytest.mark.parametrize("two_basins", [True, False])
@pytest.mark.parametrize("volume", [0.0, 3.0])
def test_device_levels_of_many_problems_follow_drifting_responses(two_basins, volume):
    """Three problems over steps of small moves (the windows settle them), a jump (a
    histogram, then its window), ties at the start (all zero) and of integer values."""
    import cupy

    from gpusvm.water_level._sbp_level_cuda import DeviceLevels

    rng = np.random.default_rng(7)
    n, k = 300, 3
    labels = np.where(rng.random((k, n)) < 0.4, 1.0, -1.0)
    sizes = [(int((row > 0).sum()), int((row < 0).sum())) for row in labels]
    levels = DeviceLevels(cupy.asarray(labels), sizes, two_basins, volume)
    c = np.zeros((k, n))
    moves = [0.0] + [0.01] * 6 + [5.0] + [0.01] * 4
    for step, move in enumerate(moves):
        c = c + move * rng.standard_normal((k, n))
        if step == len(moves) - 1:
            c = np.round(c)  # ties
        assert_search_as_oracle(levels, c, labels, volume, two_basins, atol=1e-9, err_msg=f"step {step}")
    by_windows, by_bisection = levels.settled_by.get().sum(axis=0)
    assert by_windows + by_bisection == k * len(moves)
    assert by_windows >= k * 5  # the small moves
    assert levels.histograms.get().sum() >= k  # the jump at least
    assert by_bisection == 0


@needs_device
@pytest.mark.parametrize(("two_basins", "rounds"), [(True, 4), (False, 4), (True, 3)])
def test_device_levels_bracket_a_dense_cluster_by_a_second_histogram(two_basins, rounds):
    """Most responses in a cluster half a unit wide among values spread over [-100, 100]:
    the first histogram's buckets that may hold the level hold more than a window, so
    (with four rounds) a histogram of those buckets brackets it and its window settles it,
    the bisection never running; with three, the last round's window is a guess around
    the bracket's middle. Each level as the oracle's, at every step of a drift."""
    import cupy

    from gpusvm.water_level._sbp_level_cuda import DeviceLevels

    rng = np.random.default_rng(13)
    k, n, spread = 2, 6000, 500
    labels = np.where(rng.random((k, n)) < 0.5, 1.0, -1.0)
    labels[:, :2] = [1.0, -1.0]
    c = rng.uniform(0.0, 0.5, size=(k, n))
    c[:, :spread] = rng.uniform(-100.0, 100.0, size=spread)  # the same for both problems
    volume = float(np.maximum(0.0, -c[0, :spread]).sum()) + 100.0  # k* inside the cluster
    sizes = [(int((row > 0).sum()), int((row < 0).sum())) for row in labels]
    levels = DeviceLevels(cupy.asarray(labels), sizes, two_basins, volume, rounds=rounds)
    for step in range(3):
        c[:, spread:] += 1.5 * step  # the cluster moves by thrice its width
        assert_search_as_oracle(levels, c, labels, volume, two_basins, atol=1e-10, err_msg=f"step {step}")
        if step == 0 and rounds == 4:  # from no window: a histogram of all, then of the cluster's buckets
            assert (levels.histograms.get() == 2).all()
    if rounds == 4:
        assert levels.settled_by.get()[:, 1].sum() == 0


@needs_device
@pytest.mark.parametrize("two_basins", [True, False])
def test_device_levels_sort_windows_of_every_width(two_basins):
    """Problems of a few to a few thousand rows in one search, so that their windows hold
    from a handful of values to near the most one block sorts (the solve sorts only the
    power of two above the fuller basin's count): each level as the oracle's."""
    import cupy

    from gpusvm.water_level._sbp_level_cuda import DeviceLevels, problem_table

    rng = np.random.default_rng(5)
    n_train = np.array([3000, 700, 90, 9])
    k, width = n_train.size, int(n_train.max())
    volumes = 0.05 * n_train
    labels = np.where(rng.random((k, width)) < 0.5, 1.0, -1.0)
    labels[:, :2] = [1.0, -1.0]
    used = np.arange(width) < n_train[:, None]
    sizes = [(int((row[:m] > 0).sum()), int((row[:m] < 0).sum())) for row, m in zip(labels, n_train, strict=True)]
    levels = DeviceLevels(cupy.asarray(labels), sizes, two_basins, problems=problem_table(n_train, 0, volumes))
    c = rng.normal(size=(k, width))
    for step in range(4):
        c = c + 0.01 * rng.standard_normal((k, width))
        c[~used] = -1e9  # padding: would flood the level if it were read
        levels.search(cupy.asarray(c))
        got = np.column_stack([levels.level.get(), levels.bias.get(), levels.edges.get()])
        for p in range(k):
            m = n_train[p]
            expected = oracle_levels(c[p : p + 1, :m], labels[p : p + 1, :m], volumes[p], two_basins)[0]
            if not two_basins:
                got[p, 3], expected[3] = 0.0, 0.0
            np.testing.assert_allclose(got[p], expected, rtol=1e-9, atol=1e-9, err_msg=f"step {step}, problem {p}")
    assert (levels.settled_by.get()[:, 0] >= 2).all()  # the small moves: by the windows


@needs_device
@pytest.mark.parametrize("two_basins", [True, False])
def test_device_levels_read_each_problems_own_rows_and_skip_stopped_ones(two_basins):
    """Problems of different widths (one-vs-one pairs) in one search: each its own rows
    (padding of huge values never counts) and volume; a problem marked inactive keeps
    its state from the search before."""
    import cupy

    from gpusvm.water_level._sbp_level_cuda import ACTIVE_WORD, DeviceLevels, problem_table

    rng = np.random.default_rng(11)
    k, width = 4, 200
    n_train = np.array([200, 37, 120, 2])
    volumes = np.array([3.0, 0.5, 0.0, 1.0])
    labels = np.where(rng.random((k, width)) < 0.5, 1.0, -1.0)
    labels[:, :2] = [1.0, -1.0]  # both classes in every problem
    used = np.arange(width) < n_train[:, None]
    sizes = [(int((row[:m] > 0).sum()), int((row[:m] < 0).sum())) for row, m in zip(labels, n_train, strict=True)]
    problems = problem_table(n_train, 0, volumes)
    levels = DeviceLevels(cupy.asarray(labels), sizes, two_basins, problems=problems)
    for step in range(3):
        c = rng.normal(size=(k, width))
        c[~used] = -1e9 * (step + 1)  # padding: would flood the level if it were read
        if step == 2:
            problems[1, ACTIVE_WORD] = 0  # stopped: its answer stays the last search's
        before = cupy.asnumpy(levels.state[1])
        levels.search(cupy.asarray(c))
        got = np.column_stack([levels.level.get(), levels.bias.get(), levels.edges.get()])
        for p in range(k):
            if step == 2 and p == 1:
                np.testing.assert_array_equal(cupy.asnumpy(levels.state[1]), before)
                continue
            m = n_train[p]
            expected = oracle_levels(c[p : p + 1, :m], labels[p : p + 1, :m], volumes[p], two_basins)[0]
            if not two_basins:
                got[p, 3], expected[3] = 0.0, 0.0
            np.testing.assert_allclose(got[p], expected, rtol=1e-9, atol=1e-9, err_msg=f"step {step}, problem {p}")
