"""Launcher of ``kernels/kernel_functions.cu``: kernel values from inner products."""

from __future__ import annotations

import cupy
import numpy as np

from .._device.cuda_modules import get_cuda_kernel

_THREADS = 256


def kernel_from_dots_cuda(dots, row_sq_norms, col_sq_norms, spec):
    """Turn a C-contiguous block of inner products into the values of the kernel ``spec``
    (a :class:`~gpusvm.kernel_functions.KernelSpec`), in place."""
    dots = cupy.ascontiguousarray(dots)
    n_rows, n_cols = dots.shape
    if row_sq_norms is None:  # not read unless the kernel is rbf
        row_sq_norms = col_sq_norms = cupy.empty(1, dtype=dots.dtype)
    kernel = get_cuda_kernel("kernel_functions.cu", "kernel_from_dots", dots.dtype)
    blocks = max(1, min(65535, (dots.size + _THREADS - 1) // _THREADS))
    kernel(
        (blocks,),
        (_THREADS,),
        (
            dots,
            cupy.ascontiguousarray(row_sq_norms, dtype=dots.dtype),
            cupy.ascontiguousarray(col_sq_norms, dtype=dots.dtype),
            np.int64(n_rows),
            np.int64(n_cols),
            np.int32(spec.code),
            np.float64(spec.gamma),
            np.float64(spec.coef0),
            np.int32(spec.degree),
        ),
    )
    return dots
