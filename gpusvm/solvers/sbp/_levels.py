"""SBP's water levels step after step, on the host: the level of one problem tracked from
its previous step (:class:`LevelTracker`), and the levels of many problems at once, one per
row (:func:`levels_of_rows`, the one-vs-one pairs').

Both answer :func:`~gpusvm.water_level.find_gamma_and_bias`'s question (``docs/algorithms.md``,
section 3) from the lowest responses only, and fall back on its O(n) partition search.
"""

from __future__ import annotations

import numpy as np

from ...water_level import _check_both_classes, _level_bias_edges, _partition_level, _bias_and_edges


# --- the lowest heights only, for a sequence of slowly changing responses -------------

# Ranks examined on each side of the previous covered count (at least; a 32nd of it for
# large counts), and the candidates kept past the window for the drift of the next call.
WINDOW_MIN = 16
TRACKER_SLACK = 32


class LevelTracker:
    """Water levels (and biases) of one SBP problem, step after step.

    Between two SBP steps the responses move, but their order changes little: a step
    shifts a whole class by about the same amount (the bias absorbs it), and only the
    lowest responses decide the level.  The tracker keeps each class's candidates of the
    previous call (the rows of the lowest ranks, up to a little past the covered count
    ``k*``).  A call takes as threshold the value of rank ``k* + 2 w + slack`` among the
    candidates' new values, gathers every response below it (one pass: a prefix of the
    sorted order, since the old candidates alone reach that rank), partitions them
    around a window of ``w`` ranks on each side of the previous ``k*`` and sorts only
    the window.  The criterion ``k u_k - U_k <= volume`` is monotone in ``k``, so when
    it holds at the window's first rank and fails inside it, ``k*`` is exact.
    Otherwise (and at the first call) the O(n) partition search over all responses
    runs.  A call costs about three passes over the responses plus selections among
    the candidates.

    Parameters
    ----------
    volume : float
        ``n * nu``; a call may pass its own (SBP keeps its responses up to a scale).
    """

    def __init__(self, volume):
        self.volume = float(volume)
        self.candidates = None  # per class: row indices of the previous call's candidates
        self.thresholds = None  # per class: the last call's candidates were the responses below it
        self.covered_count = None  # k* of the previous call

    def level(self, values):
        """:func:`find_gamma` of checked float64 ``values``."""
        return self.covered(values)[0]

    def level_and_bias(self, positive, negative):
        """:func:`find_gamma_and_bias` of checked float64 responses of each class."""
        labels = np.concatenate([np.ones(positive.size, bool), np.zeros(negative.size, bool)])
        level, bias, _ = self.covered(np.concatenate([positive, negative]), labels)
        return level, bias

    def covered(self, responses, positive=None, volume=None):
        """Level, bias and the rows the water covers.

        Parameters
        ----------
        responses : float64 ndarray of shape (n,)
        positive : bool ndarray of shape (n,), optional
            The positive class, for a level with an unregularized bias; None for none.
            The same classes at every call.
        volume : float, optional
            This call's volume; the tracker's by default.

        Returns
        -------
        level, bias : float
            As :func:`find_gamma_and_bias` (bias 0 without ``positive``).
        covered : int64 ndarray
            Ascending indices of the rows SBP draws from: without a bias, the responses
            at or below ``max(level, min(responses))``; with one, those at or below
            their class's edge (``_bias_and_edges``: ``response + bias * y <=
            level`` in exact arithmetic, with equal responses at the edge kept together).
        """
        volume = self.volume if volume is None else float(volume)
        if positive is None and volume == 0:  # exactly the lowest, not a sum over a count
            level = float(responses.min())
            return level, 0.0, np.flatnonzero(responses <= level)
        if self.candidates is not None:
            answer = self._from_candidates(responses, positive, volume)
            if answer is not None:
                return answer
        return self._search_all(responses, positive, volume)

    def _from_candidates(self, responses, positive, volume):
        """The answer from the responses below new thresholds, or None if they do not settle it."""
        rank = _window_width(self.covered_count)[1]
        thresholds = [
            _rank_value(responses[rows], rank, size)
            for rows, size in zip(self.candidates, self.class_sizes, strict=True)
        ]
        if positive is None:
            candidates = np.flatnonzero(responses < thresholds[0])
            is_positive = None
        else:
            candidates = np.flatnonzero(responses < np.where(positive, *thresholds))
            is_positive = positive[candidates]
        answer = covered_among_lowest(
            responses[candidates], is_positive, thresholds, self.class_sizes, volume, previous=self.covered_count
        )
        if answer is None:
            return None
        covered, level, bias, is_covered = answer
        self.covered_count, self.thresholds = covered, tuple(thresholds)
        self.candidates = [candidates] if positive is None else [candidates[is_positive], candidates[~is_positive]]
        return level, bias, candidates[is_covered]

    def _search_all(self, responses, positive, volume):
        """The O(n) partition search over every response; sets the candidates."""
        if positive is None:
            level, bias = _partition_level(responses, volume), 0.0
            heights, classes = responses, [np.arange(responses.size)]
            covered = int(np.count_nonzero(responses < level)) or 1
        else:
            classes = [np.flatnonzero(positive), np.flatnonzero(~positive)]
            _check_both_classes(classes[0].size, classes[1].size)
            level, bias, edges = _level_bias_edges(responses[classes[0]], responses[classes[1]], volume)
            covered = max(1, int(np.count_nonzero(responses[classes[0]] < edges[0])))
        rank = _window_width(covered)[1]
        self.class_sizes = [rows.size for rows in classes]
        self.thresholds = tuple(_rank_value(responses[rows], rank, rows.size) for rows in classes)
        self.candidates = [rows[responses[rows] < t] for rows, t in zip(classes, self.thresholds, strict=True)]
        self.covered_count = covered
        if positive is None:
            return level, bias, np.flatnonzero(heights <= max(level, float(heights.min())))
        return level, bias, np.flatnonzero(responses <= np.where(positive, *edges))


def lowest_needed(covered):
    """How many of each class's lowest responses to gather when the previous call covered
    ``covered`` rows: the previous count plus a window on each side and some slack."""
    return _window_width(covered)[1]


def _window_width(covered):
    """Ranks examined on each side of ``covered``, and the rank of the candidates' threshold."""
    width = max(WINDOW_MIN, covered // 32)
    return width, covered + 2 * width + TRACKER_SLACK


def covered_among_lowest(values, positive, thresholds, sizes, volume, previous=None):
    """The level, the bias and which of ``values`` the water covers, from the lowest
    responses of each class only.

    Parameters
    ----------
    values : float64 ndarray
        Every response of each class below that class's threshold (in any order).
    positive : bool ndarray like ``values``, or None
        The class of each value, for a level with a bias; None for none.
    thresholds : sequence of float
        Per class (positive, then negative; one without a bias): every response of the
        class below it is in ``values``.
    sizes : sequence of int
        The full size of each class.
    volume : float
    previous : int, optional
        The covered count of a previous call: its window of ranks is searched first.

    Returns
    -------
    (covered count, level, bias, covered mask over ``values``), or None when these
    values do not settle it (more of each class's lowest are needed).
    """
    if values.size == 0:
        return None
    if positive is None and volume == 0:  # exactly the lowest, as LevelTracker.covered
        level = float(values.min())
        return (None, level, 0.0, values <= level) if level < thresholds[0] else None
    parts = [values] if positive is None else [values[positive], values[~positive]]
    window = None if previous is None else _window_search(parts, sizes, volume, previous)
    if window is None:  # k* moved out of the window (or no window): search every candidate rank
        window = _window_search(parts, sizes, volume, 1 if previous is None else previous, whole=True)
    if window is None:
        return None
    covered, level, bias, edges = window
    if positive is None:
        edges = (max(level, float(values.min())),)
        is_covered = values <= edges[0]
    else:
        is_covered = values <= np.where(positive, *edges)
    # every row at or under its class's edge must be among the values
    if any(edge >= t for edge, t in zip(edges, thresholds, strict=True)):
        return None
    return covered, level, bias, is_covered


def _window_search(parts, sizes, volume, previous, whole=False):
    """``(k*, level, bias, edges)`` (edges: see ``_bias_and_edges``; None without a
    bias) from candidate values (one array per class, each the lowest
    values of its class: ``sizes`` are the classes' full sizes), searching the ranks
    about ``previous`` (or, if ``whole``, every rank the candidates hold); None when
    ``k*`` is not provably inside the window."""
    available = min(part.size for part in parts)
    if available == 0:
        return None
    width = available if whole else _window_width(previous)[0]
    low = max(0, min(previous - width, available - 1))  # window: ranks low+1 .. high
    high = min(available, previous + width)
    split = [np.partition(part, [low, high - 1] if high - 1 > low else low) for part in parts]
    windows = [np.sort(part[low:high]) for part in split]
    heights = windows[0] if len(parts) == 1 else windows[0] + windows[1]
    below_window = sum(float(part[:low].sum()) for part in split)
    prefix = below_window + np.cumsum(heights)
    fits = np.arange(low + 1, high + 1) * heights - prefix <= volume
    if not fits[0]:  # k* < low + 1 (rank 1 always qualifies, so low > 0 here)
        return None
    offset = int(np.flatnonzero(fits)[-1])
    covered = low + offset + 1
    if covered == high and high < min(sizes):
        return None  # rank k*+1 was not tested
    next_values = []  # rank k*+1 of each class (+inf past its end)
    for part, window, size in zip(split, windows, sizes, strict=True):
        if covered < high:
            next_values.append(float(window[offset + 1]))
        elif covered < part.size:
            next_values.append(float(part[covered:].min()))
        elif part.size == size:
            next_values.append(np.inf)
        else:
            return None  # the class's rank k*+1 is not among the candidates
    total = (volume + float(prefix[offset])) / covered
    if len(parts) == 1:
        return covered, total, 0.0, None
    p_k, m_k = float(windows[0][offset]), float(windows[1][offset])
    return covered, total / 2, *_bias_and_edges(total, p_k, next_values[0], m_k, next_values[1])


def _rank_value(values, rank, class_size):
    """A threshold with at least ``rank`` of ``values`` below it: the value of that rank
    (O(n) partition); when there are not that many, +inf if ``values`` are the whole
    class, else just above their largest."""
    if rank < values.size:
        return float(np.partition(values, rank)[rank])
    if values.size == class_size:
        return np.inf
    return float(np.nextafter(values.max(), np.inf)) if values.size else -np.inf


# --- many problems at once, one per row ------------------------------------------------


def levels_of_rows(responses, classes, volumes, window=64, work=None, ranks=None):
    """Water levels (and biases) of many problems at once, one per row of ``responses``:
    the sorted search of ``find_gamma*_sorted`` over each class's lowest ``window``
    responses, the window doubled for the rows whose covered count reaches it. A few
    calls over the whole array, however many rows (one-vs-one SBP steps its pairs
    together).

    Parameters
    ----------
    responses : float64 ndarray of shape (P, W)
    classes : sequence of float64 ndarrays of shape (P, W)
        Where each class's responses are, as :func:`class_offsets` gives them (0 on the
        class, +inf elsewhere): (positive, negative) for a level with an unregularized
        bias, one for none. Entries in no class (padding, holdout columns) are ignored;
        every row of every class has at least one entry.
    volumes : float64 ndarray of shape (P,)
        ``n * nu`` of each row's problem.
    window : int
        The lowest responses of each class sorted first.
    work : sequence of float64 ndarrays like ``responses``, optional
        One per class, overwritten: room for the class's responses, so that a caller
        calling step after step does not have fresh memory mapped each time.
    ranks : int ndarray of shape (P,), optional
        The entries of each row's smallest class (:func:`class_ranks` of ``classes``),
        for a caller calling step after step with the same classes: computed when None.

    Returns
    -------
    level, bias : float64 ndarrays of shape (P,)
        As :func:`find_gamma` and :func:`find_gamma_and_bias` (bias 0 without a bias).
    edges : float64 ndarray of shape (P, len(classes))
        The covered rows are the responses at or below their class's edge (with a bias,
        ``_bias_and_edges``; without, ``max(level, min)``).
    covered : int ndarray of shape (P,)
        ``k*``, the covered count of each class (without a bias, of the row).
    """
    n_rows, width = responses.shape
    lowest = [np.empty_like(responses) for _ in classes] if work is None else work
    for values, offsets in zip(lowest, classes, strict=True):
        np.add(responses, offsets, out=values)
    ranks = class_ranks(classes) if ranks is None else ranks
    level, bias, covered = np.empty(n_rows), np.zeros(n_rows), np.empty(n_rows, dtype=np.int64)
    edges = np.empty((n_rows, len(classes)))
    todo = np.arange(n_rows)
    while todo.size:
        window = min(window, width)
        parts = [
            _sorted_lowest(values if todo.size == n_rows else values[todo], window) for values in lowest
        ]  # (rows, window + 1)
        heights = parts[0][:, :window] if len(parts) == 1 else parts[0][:, :window] + parts[1][:, :window]
        volume = volumes[todo]
        with np.errstate(invalid="ignore"):  # past a class's end: inf - inf, which does not fit
            prefix = np.cumsum(heights, axis=1)
            fits = np.arange(1, window + 1) * heights - prefix <= volume[:, None]
        count = window - np.argmax(fits[:, ::-1], axis=1)  # the last rank that fits (rank 1 always does)
        settled = (count < window) | (window >= ranks[todo])
        rows, count, volume = todo[settled], count[settled], volume[settled]
        parts = [part[settled] for part in parts]
        at = (np.arange(rows.size), count - 1)
        total = (volume + prefix[settled][at]) / count
        covered[rows] = count
        if len(parts) == 1:
            lowest_value = parts[0][:, 0]
            level[rows] = np.where(volume == 0, lowest_value, total)  # volume 0: exactly the lowest
            edges[rows, 0] = np.maximum(level[rows], lowest_value)
        else:
            level[rows] = total / 2
            (p_k, m_k), (p_next, m_next) = [[part[(at[0], at[1] + shift)] for part in parts] for shift in (0, 1)]
            bias[rows], (edges[rows, 0], edges[rows, 1]) = _bias_and_edges(total, p_k, p_next, m_k, m_next)
        todo, window = todo[~settled], 2 * window
    return level, bias, edges, covered


def class_ranks(classes):
    """The ranks every class of each row of :func:`levels_of_rows` has: the entries of
    its smallest class, shape (P,)."""
    return np.min([np.count_nonzero(offsets == 0, axis=1) for offsets in classes], axis=0)


def class_offsets(mask):
    """A class of :func:`levels_of_rows` from its bool mask: 0 on it, +inf elsewhere
    (added to the responses, one fast pass instead of a masked copy)."""
    return np.where(mask, 0.0, np.inf)


def _sorted_lowest(values, count):
    """The ``count + 1`` lowest of each row, sorted (+inf past the row's end); partitions
    ``values`` in place."""
    if count < values.shape[1]:
        values.partition(count, axis=1)
        values = values[:, : count + 1]
    else:
        values = np.concatenate([values, np.full((values.shape[0], 1), np.inf)], axis=1)
    return np.sort(values, axis=1)
