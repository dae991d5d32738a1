"""Launchers of ``kernels/water_level.cu``: ``find_gamma_cuda`` runs its radix select,
14 launches, no host synchronisation, the answer a device scalar.  The level with the
bias, and the levels of many problems at once, are ``_sbp_level_cuda.py``'s (``kernels/sbp_level.cu``).
"""

from __future__ import annotations

import cupy
import numpy as np

from .._device.cuda_modules import get_cuda_kernel, multiprocessor_count

_SOURCE = "water_level.cu"
_ROUNDS = 6
_BUCKETS = 2048
_THREADS = 256
_STATE_WORDS = 8  # sizeof(WaterLevelState) / 8; scratch counts are words 6 and 7


class DeviceWaterLevel:
    """State and scratch for repeated level searches over arrays of at most ``n`` values."""

    def __init__(self, n):
        self.n = int(n)
        self.state = cupy.zeros(_STATE_WORDS, dtype=np.int64)
        self.hist_count = cupy.zeros(_BUCKETS, dtype=np.int64)
        self.hist_sum = cupy.zeros(_BUCKETS, dtype=np.float64)
        self.scratch = cupy.empty((2, max(1, self.n)), dtype=np.float64)
        self.level = cupy.empty(1, dtype=np.float64)
        self.blocks = int(max(1, min(4 * multiprocessor_count(), -(-self.n // (_THREADS * 8)))))

    def __call__(self, values, volume):
        """The level of float64 device ``values`` (contiguous, ``size <= n``) as a 0-d device array."""
        if volume == 0:
            return values.min()
        start = get_cuda_kernel(_SOURCE, "water_level_start")
        histogram = get_cuda_kernel(_SOURCE, "water_level_histogram")
        select = get_cuda_kernel(_SOURCE, "water_level_select")
        start((1,), (_THREADS,), (self.state, np.float64(volume), self.hist_count, self.hist_sum))
        counts = [self.state[6:], self.state[7:]]
        null = np.uint64(0)
        for r in range(_ROUNDS):
            if r == 0:
                source, source_count, target, target_count = values, null, null, null
            else:
                target, target_count = self.scratch[(r - 1) % 2], counts[(r - 1) % 2]
                if r == 1:
                    source, source_count = values, null
                else:
                    source, source_count = self.scratch[r % 2], counts[r % 2]
            histogram(
                (self.blocks,),
                (_THREADS,),
                (
                    source,
                    np.int64(values.size),
                    source_count,
                    self.state,
                    np.int32(r),
                    self.hist_count,
                    self.hist_sum,
                    target,
                    target_count,
                ),
            )
            select((1,), (1024,), (self.state, np.int32(r), self.hist_count, self.hist_sum))
        get_cuda_kernel(_SOURCE, "water_level_result")((1,), (1,), (self.state, self.level))
        return self.level[0]


def find_gamma_cuda(values, volume):
    """The water level of a float64 CuPy array, as a 0-d device array."""
    values = cupy.ascontiguousarray(values, dtype=np.float64)
    return DeviceWaterLevel(values.size)(values, volume)


# --- checks of device input (one synchronisation each, for the public functions) -----


def check_device_responses(responses, volume):
    """Float64 device values of ``responses`` and ``volume`` as a float, checked as
    ``water_level``'s host input is (one synchronisation)."""
    values = cupy.asarray(responses, dtype=cupy.float64).ravel()
    if values.size == 0:
        raise ValueError("responses is empty; the water level needs at least one response.")
    if not bool(cupy.isfinite(values).all()):
        raise ValueError("responses contains NaN or infinity.")
    volume = float(volume)
    if not volume >= 0 or not np.isfinite(volume):
        raise ValueError(f"volume must be a finite number >= 0 (n * nu), got {volume!r}.")
    return values, volume


def check_device_labels(y, values):
    """``y`` on the device with its counts of +1 and -1 labels, checked against ``values``
    (one synchronisation; the caller checks that both classes are present)."""
    labels = cupy.asarray(y).ravel()
    if labels.shape != values.shape:
        raise ValueError(f"y has shape {labels.shape} but responses has shape {values.shape}.")
    n_positive, n_negative = int((labels == 1).sum()), int((labels == -1).sum())
    if n_positive + n_negative != labels.size:
        raise ValueError(f"y must hold labels in {{-1, +1}}, got {cupy.unique(labels)[:5].tolist()!r}.")
    return labels, n_positive, n_negative
