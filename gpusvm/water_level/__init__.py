"""The "water level" of the Stochastic Batch Perceptron (Cotter et al. 2012, section 3).

``find_gamma(responses, volume)`` solves ``sum_i max(0, gamma - c_i) = volume``: pour
``volume = n * nu`` of water onto heights ``c_i``; ``gamma`` is where the surface settles.
``find_gamma_and_bias(y, responses, volume)`` does the same with an unregularized bias
(section 3.6): positives sit at ``c_i + b``, negatives at ``c_i - b``, one common level,
and at the optimum the water covers the same number of examples in each basin.

Both reduce to one question about sorted values.  With ``u_k`` the k-th smallest height
(for the bias, the sum of the k-th smallest response of each class) and ``U_k`` the sum of
the k smallest, the water covers the ``k*`` lowest, where::

    k* = max { k : k u_k - U_k <= volume }        (the volume needed to reach u_k)

and ``gamma = (volume + U_k*) / k*`` (for the bias: ``2 gamma``).  The criterion is monotone
in ``k``, so ``k*`` can be found

1. by sorting (``*_sorted``: O(n log n), the test oracle, written as docs/algorithms.md does);
2. by a binary search over ranks that partitions the still-open ranks around their
   middle (``np.partition``, the paper's Algorithm 2 with rank pivots): each round halves
   the open part, so O(n) in all;
3. for ``find_gamma`` with a previous level at hand, by Newton steps
   ``g <- (volume + S(g)) / k(g)`` (``k(g)``, ``S(g)``: count and sum of the heights below
   ``g``).  From a start below the level the first step lands at or above it (the
   tangent of a convex function lies below it); from there the steps decrease to the
   level exactly.  A step that leaves the covered set unchanged has found the level, so
   a few steps from the previous iteration's level usually suffice, and the partition
   search bounds the worst case.

SBP's own level machinery, which tracks a level from step to step and solves the levels
of many problems at once from their lowest responses, is beside SBP
(``gpusvm/solvers/sbp/_levels.py``).

CuPy input runs on the GPU: a radix select over the responses' bits for ``find_gamma``
(``water_level/_cuda.py``), and for ``find_gamma_and_bias`` the solvers' search
(``water_level/_sbp_level_cuda.py``: sorted windows around a previous level, placed by a
histogram of the responses when one misses, and a bisection over ranks by radix selects as
the last resort; no sort of the whole array).
"""

from __future__ import annotations

import numpy as np

from .._backend import is_cupy_array, to_numpy

# Newton steps tried from a warm start before the partition search takes over.
MAX_NEWTON_STEPS = 8


def _check_responses(responses, volume, name="responses"):
    values = np.asarray(to_numpy(responses), dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError(f"{name} is empty; the water level needs at least one response.")
    if not np.isfinite(values).all():
        raise ValueError(f"{name} contains NaN or infinity.")
    volume = float(volume)
    if not volume >= 0 or not np.isfinite(volume):
        raise ValueError(f"volume must be a finite number >= 0 (n * nu), got {volume!r}.")
    return values, volume


def _split_by_label(y, responses, volume):
    values, volume = _check_responses(responses, volume)
    labels = np.asarray(to_numpy(y)).ravel()
    if labels.shape != values.shape:
        raise ValueError(f"y has shape {labels.shape} but responses has shape {values.shape}.")
    if not np.isin(labels, (-1, 1)).all():
        raise ValueError(f"y must hold labels in {{-1, +1}}, got {np.unique(labels)[:5].tolist()!r}.")
    positive, negative = values[labels == 1], values[labels == -1]
    _check_both_classes(positive.size, negative.size)
    return positive, negative, volume


def _check_both_classes(n_positive, n_negative):
    if n_positive == 0 or n_negative == 0:
        raise ValueError(
            "find_gamma_and_bias needs both classes: y holds only "
            f"{'+1' if n_negative == 0 else '-1'} ({n_positive + n_negative} labels)."
        )


# --- 1. the sort-based oracles -------------------------------------------------------


def find_gamma_sorted(responses, volume):
    """The water level by sorting: O(n log n), the reference for the fast versions."""
    values, volume = _check_responses(responses, volume)
    s = np.sort(values)
    prefix = np.cumsum(s)
    k = np.arange(1, s.size + 1)
    covered = np.flatnonzero(k * s - prefix <= volume)[-1] + 1  # k*; k = 1 always qualifies
    return (volume + prefix[covered - 1]) / covered


def find_gamma_and_bias_sorted(y, responses, volume):
    """Water level and unregularized bias by sorting both basins (docs/algorithms.md, section 2)."""
    positive, negative, volume = _split_by_label(y, responses, volume)
    p, m = np.sort(positive), np.sort(negative)
    n_pairs = min(p.size, m.size)
    u = p[:n_pairs] + m[:n_pairs]
    prefix = np.cumsum(u)
    k = np.arange(1, n_pairs + 1)
    covered = np.flatnonzero(k * u - prefix <= volume)[-1] + 1
    two_gamma = (volume + prefix[covered - 1]) / covered
    nxt = lambda a: a[covered] if covered < a.size else np.inf  # noqa: E731
    return two_gamma / 2, _bias(two_gamma, p[covered - 1], nxt(p), m[covered - 1], nxt(m))


def _bias(two_gamma, p_k, p_next, m_k, m_next):
    """``b = (g- - g+) / 2`` at the midpoint of the feasible levels ``g+`` of the positives.

    ``g+`` must lie in ``[p_k, p_next]`` and ``g- = 2 gamma - g+`` in ``[m_k, m_next]``; any
    such pair is optimal (the bias is not unique), the midpoint is a deterministic choice.
    """
    return _bias_and_edges(two_gamma, p_k, p_next, m_k, m_next)[0]


def _bias_and_edges(two_gamma, p_k, p_next, m_k, m_next):
    """The bias, and the water's edge in each class's responses: ``(g+, g-)`` held to
    ``[p_k, p_next]`` and ``[m_k, m_next]``.

    The rows the water covers are the responses at or below their class's edge. Read
    off the data's own order statistics, the edges make that set independent of how the
    level's sums were rounded: equal responses at the k*-th rank (duplicate rows) are
    covered together, rather than split by ``c + b <= gamma`` rounding either way.
    Scalars or arrays (one problem per entry, SBP's
    :func:`~gpusvm.solvers.sbp._levels.levels_of_rows`).
    """
    low = np.maximum(p_k, two_gamma - m_next)
    high = np.minimum(p_next, two_gamma - m_k)
    g_plus = (low + high) / 2
    edges = (np.minimum(np.maximum(g_plus, p_k), p_next), np.minimum(np.maximum(two_gamma - g_plus, m_k), m_next))
    return (two_gamma - 2 * g_plus) / 2, edges


# --- 2. the O(n) partition search ----------------------------------------------------


def _covered_rank(arrays, volume, max_rank):
    """``(k*, U_k*)`` for heights ``u_k`` = sum over ``arrays`` of each one's k-th smallest.

    Binary search over ranks; the values of the open ranks ``lo+1 .. hi`` of each array
    are kept unordered and partitioned around the middle rank, so each round costs the
    open part's size and halves it.
    """
    open_parts = [np.partition(a, max_rank - 1)[:max_rank] if max_rank < a.size else a for a in arrays]
    lo, hi, covered_sum = 0, max_rank, 0.0  # k = 1 always qualifies: k* in [1, max_rank]
    while lo < hi:
        rank = (lo + hi + 1) // 2
        j = rank - lo - 1  # position of `rank` among the open ranks
        parts = [np.partition(a, j) for a in open_parts]
        height = sum(float(p[j]) for p in parts)
        below = covered_sum + sum(float(p[: j + 1].sum()) for p in parts)
        if rank * height - below <= volume:
            lo, covered_sum = rank, below
            open_parts = [p[j + 1 :] for p in parts]
        else:
            hi = rank - 1
            open_parts = [p[:j] for p in parts]
    return lo, covered_sum


def _kth_and_next(values, k):
    """The k-th smallest value and the (k+1)-th (inf when there is none), in O(n)."""
    if k >= values.size:
        return float(values.max()), np.inf
    part = np.partition(values, [k - 1, k])
    return float(part[k - 1]), float(part[k])


def find_gamma_partition(responses, volume):
    """The water level in O(n) by the rank-partition search."""
    return _partition_level(*_check_responses(responses, volume))


def _partition_level(values, volume):
    covered, covered_sum = _covered_rank([values], volume, values.size)
    return (volume + covered_sum) / covered


def find_gamma_and_bias_partition(y, responses, volume):
    """Water level and bias in O(n): one rank search over both basins at once."""
    return level_and_bias_of(*_split_by_label(y, responses, volume))


# --- 3. warm-started Newton ----------------------------------------------------------


def _newton(values, volume, start):
    """Newton steps to the level from ``start``; None if no height lies below ``start``
    or the steps do not settle within ``MAX_NEWTON_STEPS``."""
    level = float(start)
    below = values < level
    count = int(below.sum())
    if count == 0:
        return None  # no slope to step along
    for _ in range(MAX_NEWTON_STEPS):
        level = (volume + float(values[below].sum())) / count
        below = values < level
        new_count = int(below.sum())
        if new_count == count:  # the covered set is stable: level is exact for it
            return level
        if new_count == 0:  # landed on min(values) (volume 0): let the partition search say it
            return None
        count = new_count
    return None


def find_gamma(responses, volume, *, start=None):
    """The water level ``gamma`` with ``sum_i max(0, gamma - responses_i) = volume``.

    Parameters
    ----------
    responses : array of shape (n,), NumPy or CuPy
    volume : float
        ``n * nu``, at least 0; 0 gives ``min(responses)``.
    start : float, optional
        A previous level (NumPy only). Newton steps from it usually land on the new
        level exactly within a few passes; when they do not, the O(n) partition search
        runs. On CuPy input the radix select needs no start.

    Returns
    -------
    float
    """
    if is_cupy_array(responses):
        from ._cuda import check_device_responses, find_gamma_cuda

        return float(find_gamma_cuda(*check_device_responses(responses, volume)))
    return level_of(*_check_responses(responses, volume), start=start)


def level_of(values, volume, start=None):
    """:func:`find_gamma` on checked float64 NumPy values (the solvers' entry point)."""
    if volume == 0:
        return float(values.min())  # exactly, not through a sum divided by a count
    if start is not None:
        level = _newton(values, volume, start)
        if level is not None:
            return level
    return _partition_level(values, volume)


def find_gamma_and_bias(y, responses, volume):
    """The water level and unregularized bias ``(gamma, b)`` of section 3.6, in O(n).

    Parameters
    ----------
    y : array of shape (n,) in {-1, +1}, both present
    responses : array of shape (n,)
    volume : float
        ``n * nu``, at least 0.

    Returns
    -------
    (float, float)
        The level (unique) and a bias (the midpoint of the optimal interval).
    """
    if is_cupy_array(responses):
        from ._cuda import check_device_labels, check_device_responses
        from ._sbp_level_cuda import find_gamma_and_bias_cuda

        values, volume = check_device_responses(responses, volume)
        labels, n_positive, n_negative = check_device_labels(y, values)
        _check_both_classes(n_positive, n_negative)
        gamma, bias = find_gamma_and_bias_cuda(labels, values, volume, n_positive, n_negative)
        return float(gamma), float(bias)
    return find_gamma_and_bias_partition(y, responses, volume)


def level_and_bias_of(positive, negative, volume):
    """:func:`find_gamma_and_bias` on the checked float64 responses of each class."""
    return _level_bias_edges(positive, negative, volume)[:2]


def _level_bias_edges(positive, negative, volume):
    """Level, bias and each class's edge (``_bias_and_edges``)."""
    covered, covered_sum = _covered_rank([positive, negative], volume, min(positive.size, negative.size))
    two_gamma = (volume + covered_sum) / covered
    p_k, p_next = _kth_and_next(positive, covered)
    m_k, m_next = _kth_and_next(negative, covered)
    return two_gamma / 2, *_bias_and_edges(two_gamma, p_k, p_next, m_k, m_next)


__all__ = [
    "find_gamma",
    "find_gamma_and_bias",
    "find_gamma_and_bias_partition",
    "find_gamma_and_bias_sorted",
    "find_gamma_partition",
    "find_gamma_sorted",
]
