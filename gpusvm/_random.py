"""One counter-based random stream with the same output on NumPy and on the GPU.

A draw is a pure function of ``(seed, step, lane)``::

    key  = splitmix64(seed)
    h    = splitmix64(splitmix64(key ^ step) ^ lane)
    index in [0, n) = ((h >> 32) * n) >> 32          (Lemire's multiply-shift, n < 2**32)

so a solver step ``t`` that needs ``k`` example indices asks for lanes ``0..k-1`` at
step ``t``, on whichever backend it runs.  ``kernels/common.cuh`` implements the same
function for use inside CUDA kernels; ``tests/test_random.py`` checks that all three
(NumPy, CuPy, and the CUDA header compiled for the host) agree bit for bit.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_MAX_N = 2**32


def splitmix64(z, xp=np):
    """The splitmix64 finalizer on an array of ``uint64`` (wrapping arithmetic)."""
    z = xp.asarray(z, dtype=xp.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def random_bits(seed, step, lanes, xp=np):
    """64 random bits for each lane of one step.

    Parameters
    ----------
    seed : int
        Stream seed, ``0 <= seed < 2**64``.
    step : int
        Step counter, ``0 <= step < 2**64``.
    lanes : int or array of uint64
        Number of lanes (draws ``0..lanes-1``) or the lane numbers themselves.
    xp : module
        :mod:`numpy` or :mod:`cupy`.
    """
    if np.isscalar(lanes):
        lanes = xp.arange(int(lanes), dtype=xp.uint64)
    return _stream_bits(xp.asarray([seed], dtype=xp.uint64), step, xp.asarray(lanes, dtype=xp.uint64), xp)


def _stream_bits(seeds, step, lanes, xp):
    """``splitmix64(splitmix64(splitmix64(seed) ^ step) ^ lane)``, broadcast over the
    uint64 arrays ``seeds`` and ``lanes``."""
    stepped = splitmix64(splitmix64(seeds, xp) ^ xp.asarray(step, dtype=xp.uint64), xp)
    return splitmix64(stepped ^ lanes, xp)


def _below(bits, bounds):
    """Lemire's multiply-shift: the high 32 bits of ``bits`` as an index in ``[0, bounds)``."""
    return ((bits >> np.uint64(32)) * bounds) >> np.uint64(32)


def check_draw_range(n):
    """Refuse a row count the stream cannot draw from: its multiply-shift draws indices
    below 2**32 (on both backends, the CUDA kernels included)."""
    if not 0 < n < _MAX_N:
        raise ValueError(
            f"The random stream draws row indices in [0, n) for 0 < n < 2**32; got n={n!r} rows. "
            "Train on parts of fewer than 2**32 rows."
        )


def random_indices(seed, step, count, n, xp=np):
    """``count`` indices drawn uniformly from ``[0, n)`` with replacement at ``step``."""
    check_draw_range(n)
    return _below(random_bits(seed, step, count, xp), np.uint64(n)).astype(xp.int64)


def random_positions(seed, step, lanes, bounds, xp=np):
    """One index per lane, drawn uniformly from ``[0, bounds[lane])``.

    ``lanes`` are the lane numbers (uint64); each lane has its own bound, as when
    several classes each draw from their own set at the same step.  Lane ``l`` with
    bound ``n`` gives the same index as lane ``l`` of ``random_indices(..., n)``.
    """
    bits = random_bits(seed, step, xp.asarray(lanes, dtype=xp.uint64), xp)
    return _below(bits, xp.asarray(bounds, dtype=xp.uint64)).astype(xp.int64)


def random_positions_of_streams(seeds, step, n_lanes, bounds, xp=np):
    """Lanes ``0..n_lanes-1`` of many streams at one step, shape ``(len(seeds), n_lanes)``:
    row ``i`` draws uniformly from ``[0, bounds[i])`` on the stream seeded ``seeds[i]``.

    Row ``i`` equals ``random_positions(seeds[i], step, range(n_lanes), bounds[i])``
    (one-vs-one SBP steps every pair, each on its own stream, at once).
    """
    bits = _stream_bits(xp.asarray(seeds, dtype=xp.uint64)[:, None], step, xp.arange(n_lanes, dtype=xp.uint64), xp)
    return positions_below(bits, bounds, xp)


def stream_bits_block(seeds, first_step, n_steps, n_lanes, xp=np):
    """The bits of lanes ``0..n_lanes-1`` of many streams at steps ``first_step ..
    first_step + n_steps - 1``, shape ``(len(seeds), n_steps, n_lanes)``: one call for a
    block of steps (:func:`positions_below` turns a step's into positions, as
    :func:`random_positions_of_streams` draws them)."""
    steps = xp.arange(first_step, first_step + n_steps, dtype=xp.uint64)[None, :, None]
    seeds = xp.asarray(seeds, dtype=xp.uint64)[:, None, None]
    return _stream_bits(seeds, steps, xp.arange(n_lanes, dtype=xp.uint64)[None, None, :], xp)


def positions_below(bits, bounds, xp=np):
    """Positions in ``[0, bounds[i])`` from row ``i`` of ``bits`` (shape (len(bounds), lanes))."""
    return _below(bits, xp.asarray(bounds, dtype=xp.uint64)[:, None]).astype(xp.int64)


def random_index_block(seed, first_step, n_steps, count, n, xp=np):
    """Indices of steps ``first_step .. first_step + n_steps - 1`` at once, shape (n_steps, count).

    Row ``s`` equals ``random_indices(seed, first_step + s, count, n)``; drawing a block
    saves the per-call overhead of many small steps.
    """
    check_draw_range(n)
    steps = xp.arange(first_step, first_step + n_steps, dtype=xp.uint64)[:, None]
    bits = _stream_bits(xp.asarray([seed], dtype=xp.uint64), steps, xp.arange(count, dtype=xp.uint64), xp)
    return _below(bits, np.uint64(n)).astype(xp.int64)


def seed_from_random_state(random_state):
    """A 64-bit stream seed from scikit-learn's ``random_state`` convention.

    An int is used as it is (mod 2**64), so the same int gives the same stream on
    every backend; ``None`` or a ``RandomState`` draws a seed from it.
    """
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state) % 2**64
    rng = check_random_state(random_state)
    return int(rng.randint(0, 2**62, dtype=np.int64))
