"""A least-recently-used cache of kernel-matrix rows, on the host.

The Stochastic Batch Perceptron draws its rows from the examples below the water level,
a small set that changes slowly, so the same rows come back again and again: a cache
turns most steps from ``n * d`` work (a kernel row) into ``n`` (a copy).  When every row
fits, the cache is the full kernel matrix, filled only where it is used.
"""

from __future__ import annotations

import numpy as np


class KernelRowCache:
    """Rows ``K(x_i, Z)`` of a fixed kernel matrix, computed on demand and kept.

    Parameters
    ----------
    compute_rows : callable
        ``compute_rows(indices) -> array of shape (len(indices), n_columns)``.
    n_rows, n_columns : int
        Shape of the whole matrix.
    dtype : dtype
        Dtype of the rows.
    max_bytes : int
        Memory for kept rows; at least one row is always kept.
    """

    def __init__(self, compute_rows, n_rows, n_columns, dtype, max_bytes):
        self.compute_rows = compute_rows
        row_bytes = max(1, n_columns * np.dtype(dtype).itemsize)
        self.capacity = int(min(n_rows, max(1, max_bytes // row_bytes)))
        self.store = np.empty((self.capacity, n_columns), dtype=dtype)
        self.slot_of_row = np.full(n_rows, -1, dtype=np.int64)
        self.row_in_slot = np.full(self.capacity, -1, dtype=np.int64)
        self.last_used = np.full(self.capacity, -1, dtype=np.int64)
        self.n_used = 0  # slots filled so far (they fill in order)
        self.clock = 0
        self.rows_computed = 0

    def rows(self, indices):
        """The rows of distinct ``indices`` (int array), shape ``(len(indices), n_columns)``."""
        self.clock += 1
        if indices.size > self.capacity:  # more than the cache holds: no caching this time
            self.rows_computed += indices.size
            return self.compute_rows(indices)
        slots = self.slot_of_row[indices]
        hit = slots >= 0
        self.last_used[slots[hit]] = self.clock  # hits are now the most recent: never evicted below
        missing = indices[~hit]
        if missing.size:
            new_slots = self._free_slots(missing.size)
            evicted = self.row_in_slot[new_slots]
            self.slot_of_row[evicted[evicted >= 0]] = -1
            self.store[new_slots] = self.compute_rows(missing)
            self.rows_computed += missing.size
            self.slot_of_row[missing] = new_slots
            self.row_in_slot[new_slots] = missing
            self.last_used[new_slots] = self.clock
            slots = self.slot_of_row[indices]
        return self.store[slots]

    def _free_slots(self, count):
        """``count`` slots to fill: unused ones first, then the least recently used."""
        filled = self.n_used
        fresh = min(count, self.capacity - filled)
        slots = np.arange(filled, filled + fresh)
        self.n_used += fresh
        if fresh < count:  # rows used at this clock are hits of the current call: keep them
            candidates = np.flatnonzero(self.last_used[:filled] < self.clock)
            oldest = np.argpartition(self.last_used[candidates], count - fresh - 1)[: count - fresh]
            slots = np.concatenate([slots, candidates[oldest]])
        return slots
