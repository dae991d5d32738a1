"""The whole kernel matrix on the device, for the kernel solvers' ``kernel_cache``.

When it fits, a step reads its drawn rows of the matrix (a few hundred kilobytes)
instead of computing them from X (a pass over X): the matrix is computed once, in
blocks of rows by matrix products, in X's dtype.
"""

from __future__ import annotations

import numpy as np
import nvtx

from . import _backend

KERNEL_CACHE_AUTO = 0.5  # of the free device memory, for kernel_cache='auto'
BLOCK_BYTES = 256 * 2**20  # kernel values computed at once while filling the matrix


def kernel_cache_bytes(kernel_cache, free=None):
    """Bytes the kernel matrix may take on the device: ``kernel_cache`` is 'auto' (half the
    free memory), a float in [0, 1] (a fraction of it) or an int (bytes)."""
    if isinstance(kernel_cache, str):
        kernel_cache = KERNEL_CACHE_AUTO
    if isinstance(kernel_cache, (int, np.integer)) and not isinstance(kernel_cache, bool):
        return int(kernel_cache)
    return int(float(kernel_cache) * (_backend.free_device_bytes() if free is None else free))


def resident_kernel_matrix(compute_rows, n_rows, n_columns, dtype, budget):
    """The matrix of ``compute_rows(rows)`` (CuPy, shape (len(rows), n_columns)) for all
    ``n_rows`` rows when it fits in ``budget`` bytes; else None."""
    import cupy

    itemsize = np.dtype(dtype).itemsize
    if n_rows * n_columns * itemsize > budget:
        return None
    with nvtx.annotate("kernel_matrix", color="orange"):
        matrix = cupy.empty((n_rows, n_columns), dtype=dtype)
        rows_at_once = max(1, BLOCK_BYTES // max(1, n_columns * itemsize))
        for start in range(0, n_rows, rows_at_once):
            rows = cupy.arange(start, min(n_rows, start + rows_at_once))
            matrix[start:start + rows.size] = compute_rows(rows)
    return matrix
