"""The Numba functions of :class:`~gpusvm.solvers.sbp.pairs._compiled.CompiledPairSteps`
(imported only where Numba is; compiled once, then read from Numba's cache).

Each function loops over the active pairs ``active[lo:hi]`` and repeats, pair by pair,
what :class:`~gpusvm.solvers.sbp.pairs._numpy.NumpyPairSteps` does row-wise, operation for
operation, so that the models agree bit for bit. A pair's columns are its first class's
block (training columns ``0 .. train_first``, then its holdout), its second class's block
from ``first_width`` (training columns first), then padding.

Numba's cache is a convenience, never a cause of failure (:func:`_compiled`): where it has
no writable directory (a read-only install, no writable home, ``NUMBA_CACHE_DIR`` read-only)
the functions compile in memory at each process's first use, and an entry that cannot be
read (a file cut short, or corrupt) is compiled again and written anew; each with one
warning a process.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from numba import njit

_OPTIONS = dict(nogil=True, boundscheck=False)
# The lowest values of a class are sorted by insertion up to this many (a few dozen, most
# steps), else by NumPy's sort.
INSERTION_SORT_MAX = 64
_WARNED = set()  # the kinds of cache trouble warned about in this process


def _warn_once(kind, message):
    """Warn ``message`` the first time this process meets cache trouble of this ``kind``."""
    if kind not in _WARNED:
        _WARNED.add(kind)
        warnings.warn(message, UserWarning, stacklevel=3)


@functools.cache
def _forgiving_cache_class():
    """Numba's function cache, forgiving (defined once, on first use: it subclasses a class
    of ``numba.core.caching``, whose layout may change between Numba versions, and a change
    then costs the cache, not the import)."""
    from numba.core.caching import FunctionCache

    class ForgivingCache(FunctionCache):
        """Numba's cache of a function's machine code, where an entry that cannot be read
        is compiled again (its index emptied, so that the new entry replaces it) and one
        that cannot be written stays in memory, each with a warning; Numba's own cache
        fails the call (``UnpicklingError`` from a file cut short)."""

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception as error:  # a truncated or corrupt .nbi or .nbc file
                _warn_once(
                    "read",
                    f"Numba's cache of gpusvm's compiled SBP steps in {self.cache_path!r} could not be read "
                    f"({type(error).__name__}: {error}); they are compiled again (a few seconds) and the cache "
                    "written anew.",
                )
                try:
                    self.flush()  # an empty index: the entry compiled now takes the broken one's place
                except Exception:  # not writable either: save_overload warns
                    pass
                return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception as error:  # the directory became read-only, or the disk is full
                _warn_once(
                    "write",
                    f"Numba's cache of gpusvm's compiled SBP steps in {self.cache_path!r} could not be written "
                    f"({type(error).__name__}: {error}); the steps compiled now are kept in memory only.",
                )

    return ForgivingCache


def _compiled(function):
    """``function`` compiled by Numba (without the GIL, without bounds checks) on first call,
    its machine code kept in a forgiving cache (``_forgiving_cache_class``) where Numba finds
    a writable directory for it, else compiled in memory with a warning (where
    ``njit(cache=True)`` raises ``RuntimeError: cannot cache function ...: no locator
    available``). The cache is set as ``Dispatcher.enable_caching`` sets Numba's own."""
    dispatcher = njit(**_OPTIONS)(function)
    try:
        dispatcher._cache = _forgiving_cache_class()(function)
    except Exception as error:  # no locator, or a Numba whose cache is laid out otherwise
        _warn_once(
            "locate",
            f"Numba cannot cache gpusvm's compiled SBP steps here ({type(error).__name__}: {error}); they are "
            "compiled in memory at each process's first use (a few seconds). Set NUMBA_CACHE_DIR to a writable "
            "directory to keep them.",
        )
    return dispatcher


@_compiled
def _select_lowest(values, count):
    """Reorder ``values`` so that its first ``count`` are its lowest (in no order): a
    quickselect with a median-of-three pivot."""
    lo, hi, k = 0, values.size - 1, count - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        x, y, z = values[lo], values[mid], values[hi]
        if x > y:
            x, y = y, x
        if y > z:
            y = z
        if x > y:
            y = x
        i, j = lo, hi
        while i <= j:
            while values[i] < y:
                i += 1
            while values[j] > y:
                j -= 1
            if i <= j:
                values[i], values[j] = values[j], values[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            break


@_compiled
def _heap_sort(values, count, out):
    """``values[:count]`` sorted ascending into ``out[:count]`` (a heapsort: compiled in a
    fraction of the time Numba takes for ``np.sort``; the sorted values are the same)."""
    for i in range(count):
        out[i] = values[i]
    for root in range(count // 2 - 1, -1, -1):
        _sift_down(out, root, count)
    for end in range(count - 1, 0, -1):  # the largest of out[:end + 1] to its place, end
        out[0], out[end] = out[end], out[0]
        _sift_down(out, 0, end)


@_compiled
def _sift_down(heap, root, end):
    """Move ``heap[root]`` down the max-heap ``heap[:end]`` to its place."""
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and heap[child + 1] > heap[child]:
            child += 1
        if heap[root] >= heap[child]:
            return
        heap[root], heap[child] = heap[child], heap[root]
        root = child


@_compiled
def _gather_below(values, cut, room):
    """The values at or below ``cut`` into ``room`` (without a branch); their count and
    the lowest of all the values."""
    n = 0
    low = np.inf
    for x in values:
        room[n] = x
        n += x <= cut
        low = min(low, x)
    return n, low


@_compiled
def _sorted_lowest(values, count, cut, room, out):
    """The ``count`` lowest of ``values`` (at most all of them), sorted, into
    ``out[:count]``, +inf after it, as ``levels_of_rows``'s ``_sorted_lowest`` reads a row
    padded with +inf; returns the cut for the next step's call.

    The lowest values are among those at or below ``cut`` when there are at least
    ``count`` of them: those are gathered, then the cut is widened once (twice its
    distance above the lowest value), then every value is taken. A quickselect leaves
    the lowest ``count`` of them, sorted (by insertion: a few dozen). The cut returned
    is the value of rank ``2 * count + 16``, so that the next step, whose values and
    count move a little, gathers a few dozen values, not all."""
    n, low = _gather_below(values, cut, room)
    if n < count:
        cut = cut + 2 * (cut - low)
        n, low = _gather_below(values, cut, room)
    if n < count:
        for i in range(values.size):
            room[i] = values[i]
        n = values.size
    spare = 2 * count + 16
    if spare < n:
        _select_lowest(room[:n], spare)
        next_cut = room[0]
        for i in range(1, spare):
            next_cut = max(next_cut, room[i])
    elif n == values.size:
        next_cut = np.inf
    else:  # between count and spare gathered: the cut stays
        next_cut = cut
    if count < n:
        _select_lowest(room[: min(n, spare)], count)
    if count > INSERTION_SORT_MAX:  # (the first steps: every response equal, all covered)
        _heap_sort(room, count, out)
    else:
        for i in range(count):
            x = room[i]
            j = i - 1
            while j >= 0 and out[j] > x:
                out[j + 1] = out[j]
                j -= 1
            out[j + 1] = x
    for i in range(count, out.size):
        out[i] = np.inf
    return next_cut


@_compiled
def _gather_train(R, pair, train_first, train_second, first_width, into):
    """Pair ``pair``'s training responses (its first class's, then its second's) into
    ``into``; their count."""
    a, b, start = train_first[pair], train_second[pair], first_width[pair]
    for j in range(a):
        into[j] = R[pair, j]
    for j in range(b):
        into[a + j] = R[pair, start + j]
    return a + b


@_compiled
def pair_levels(
    R, active, train_first, train_second, first_width, volumes, ranks, intercept, edges, counts, cuts, levels, biases
):
    """Each active pair's water level, bias and edges (``levels_of_rows``'s, row by row)
    into ``levels``, ``biases`` (0 without a bias) and ``edges`` (columns: the first
    class's, the second's; without a bias one edge, in column 0), and its covered count
    into ``counts``; ``cuts`` (pairs by classes) are
    :func:`_sorted_lowest`'s, kept from step to step (+inf at first).

    The ranks searched are the pair's own window, its last count and a quarter more and
    4, doubled until the count is inside it, where ``levels_of_rows`` searches one window
    common to all the pairs: the count is the last rank k with ``k h_k - sum_{j <= k} h_j``
    at most the volume, a sum that grows with k, so every window that holds it finds it."""
    room = np.empty(R.shape[1])
    sorted_room = 16
    positive, negative, heights = np.empty(sorted_room), np.empty(sorted_room), np.empty(sorted_room)
    for i in range(active.size):
        pair = active[i]
        volume = volumes[i]
        a, b, start = train_first[pair], train_second[pair], first_width[pair]
        w = counts[pair] + 4 + counts[pair] // 4
        while True:
            w = min(w, ranks[pair])
            if w + 1 > sorted_room:
                sorted_room = 2 * (w + 1)
                positive, negative, heights = np.empty(sorted_room), np.empty(sorted_room), np.empty(sorted_room)
            if intercept:
                cuts[pair, 0] = _sorted_lowest(R[pair, :a], min(w + 1, a), cuts[pair, 0], room, positive[: w + 1])
                cuts[pair, 1] = _sorted_lowest(
                    R[pair, start : start + b], min(w + 1, b), cuts[pair, 1], room, negative[: w + 1]
                )
                for k in range(w):
                    heights[k] = positive[k] + negative[k]
            else:
                n = _gather_train(R, pair, train_first, train_second, first_width, room)
                values = room[:n].copy()
                cuts[pair, 0] = _sorted_lowest(values, min(w + 1, n), cuts[pair, 0], room, positive[: w + 1])
                for k in range(w):
                    heights[k] = positive[k]
            # the last rank k with k * h_k - sum_{j <= k} h_j <= volume (rank 1 always fits);
            # heights[k] becomes the prefix sum (each height is read before it is replaced)
            count, total = w, 0.0
            for k in range(w):
                height = heights[k]
                total += height
                heights[k] = total
                if (k + 1) * height - total <= volume:
                    count = k + 1
            if count < w or w >= ranks[pair]:
                break
            w = 2 * w
        counts[pair] = count
        total = (volume + heights[count - 1]) / count
        if not intercept:
            level = positive[0] if volume == 0 else total
            levels[pair], biases[pair] = level, 0.0
            edges[pair, 0] = max(level, positive[0])
            continue
        p_k, p_next = positive[count - 1], positive[count]
        m_k, m_next = negative[count - 1], negative[count]
        low = max(p_k, total - m_next)
        high = min(p_next, total - m_k)
        g_plus = (low + high) / 2
        levels[pair], biases[pair] = total / 2, (total - 2 * g_plus) / 2
        edges[pair, 0] = min(max(g_plus, p_k), p_next)
        edges[pair, 1] = min(max(total - g_plus, m_k), m_next)


@_compiled
def pair_draws(
    R,
    active,
    train_first,
    train_second,
    first_width,
    edges,
    intercept,
    bits,
    labels,
    columns,
    pairs,
    n_data_rows,
    batch,
    pair_starts,
    draw_pair,
    draw_column,
    draw_multiplicity,
    draw_keys,
    draw_weights,
):
    """Each active pair's ``batch`` draws, uniform over its covered training columns (its
    stream's ``bits``, Lemire's multiply-shift), as distinct columns with multiplicities,
    pair by pair, columns ascending; with each draw's two block keys and its weight
    ``y_j * multiplicity / batch``. ``pair_starts[i]`` is pair i's first draw; returns
    the number of draws."""
    covered = np.empty(R.shape[1], dtype=np.int64)
    times = np.zeros(R.shape[1], dtype=np.int64)  # how often each covered position is drawn
    n = 0
    for i in range(active.size):
        pair = active[i]
        pair_starts[i] = n
        edge_first = edges[pair, 0]
        edge_second = edges[pair, 1] if intercept else edge_first
        count = 0
        for column in range(train_first[pair]):
            covered[count] = column
            count += R[pair, column] <= edge_first
        start = first_width[pair]
        for column in range(start, start + train_second[pair]):
            covered[count] = column
            count += R[pair, column] <= edge_second
        bound = np.uint64(count)
        for lane in range(batch):
            times[np.int64(((bits[pair, lane] >> np.uint64(32)) * bound) >> np.uint64(32))] += 1
        for position in range(count):  # covered columns ascending: the draws' sort, by counting
            multiplicity = times[position]
            if multiplicity == 0:
                continue
            times[position] = 0
            column = covered[position]
            row = columns[pair, column]
            draw_pair[n] = i
            draw_column[n] = column
            draw_multiplicity[n] = multiplicity
            draw_keys[n, 0] = pairs[pair, 0] * n_data_rows + row
            draw_keys[n, 1] = pairs[pair, 1] * n_data_rows + row
            draw_weights[n] = labels[pair, column] * multiplicity / batch
            n += 1
    pair_starts[active.size] = n
    return n


@_compiled
def pair_update(
    store,
    slots,
    weights,
    draw_column,
    draw_multiplicity,
    pair_starts,
    active,
    first_width,
    second_width,
    signs,
    eta,
    batch,
    A,
    stamps,
    R,
    R_sum,
    scale,
    r2,
    scale_sum,
):
    """Each active pair's step: its direction (the weighted sums of its drawn rows'
    class blocks, in the store's dtype, draw by draw), then ``A``, the responses, their
    sums and norms, as ``NumpyPairSteps._update``."""
    for i in range(active.size):
        pair = active[i]
        first, last = pair_starts[i], pair_starts[i + 1]
        wa, wb = first_width[pair], second_width[pair]
        half_first = np.zeros(wa, dtype=store.dtype)
        half_second = np.zeros(wb, dtype=store.dtype)
        d = first
        while d + 3 < last:  # four draws a pass, each added in turn (the same sums as one at a time)
            w1, w2, w3, w4 = weights[d], weights[d + 1], weights[d + 2], weights[d + 3]
            for side in range(2):
                half = half_first if side == 0 else half_second
                row_1, row_2 = store[slots[d, side]], store[slots[d + 1, side]]
                row_3, row_4 = store[slots[d + 2, side]], store[slots[d + 3, side]]
                for j in range(half.size):
                    half[j] = (((half[j] + w1 * row_1[j]) + w2 * row_2[j]) + w3 * row_3[j]) + w4 * row_4[j]
            d += 4
        for d in range(d, last):
            weight = weights[d]
            for side in range(2):
                half = half_first if side == 0 else half_second
                row = store[slots[d, side]]
                for j in range(half.size):
                    half[j] += weight * row[j]
        width = wa + wb
        direction = np.empty(width)
        for j in range(wa):
            direction[j] = np.float64(half_first[j]) * signs[pair, j]
        for j in range(wb):
            direction[wa + j] = np.float64(half_second[j]) * signs[pair, wa + j]
        s = scale[pair]
        old = 0.0
        along = 0.0
        for d in range(first, last):
            column = draw_column[d]
            multiplicity = draw_multiplicity[d]
            old += R[pair, column] * multiplicity
            along += direction[column] * multiplicity
        old = old * s / batch
        along = along / batch
        step_eta = eta[i]
        r2[pair] += 2 * step_eta * old + step_eta * step_eta * along
        increment = step_eta / (batch * s)
        stamp = increment * scale_sum[pair]
        for d in range(first, last):
            column = draw_column[d]
            multiplicity = draw_multiplicity[d]
            A[pair, column] += increment * multiplicity
            stamps[pair, column] += stamp * multiplicity
        step_size = step_eta / s
        if r2[pair] > 1:
            s /= np.sqrt(r2[pair])
            r2[pair] = 1.0
        scale[pair] = s
        scale_sum[pair] += s
        for j in range(width):
            response = R[pair, j] + direction[j] * step_size
            R[pair, j] = response
            R_sum[pair, j] += response * s
