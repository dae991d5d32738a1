"""Kernel values on the device for the kernel solvers' steps (kernel_values.cuh, kernel_functions.cu).

What the CUDA steps of kernel Pegasos and SBP share (``kernels/kernel_values.cuh``, and
``dense_rows`` of ``kernels/kernel_functions.cu``).

When the whole kernel matrix fits in ``kernel_cache``, a step reads its drawn rows of the
matrix (a few hundred kilobytes) instead of computing them from X (a pass over X): the
matrix is computed once, in blocks of rows by matrix products, in X's dtype, on a dense
copy of a CSR X that is dense and small enough (:func:`matrix_rows_function`).  Otherwise
SBP keeps the rows it draws in a cache there (:class:`DeviceRowCache`) when it holds
twice a step's rows, or a step computes its drawn rows' inner products with every row,
and its fused kernel turns them into kernel values (:func:`kernel_values_source` decides,
:class:`StepKernelValues` sets up the one chosen).
"""

from __future__ import annotations

import functools

import numpy as np
import nvtx

from .. import _backend
from .._device.cuda_modules import get_cuda_kernel, row_view_arguments
from ..kernel_functions import compute_layout, inner_products
from .row_cache import KernelRowCache

_DENSE_ROW_THREADS = 256

KERNEL_CACHE_AUTO = 0.5  # of the free device memory, for kernel_cache='auto'
# kernel values computed at once while filling the matrix; the most a product of rows for
# the row cache or the drawn rows' products takes, with its temporaries
BLOCK_BYTES = 256 * 2**20
# A product of kernel rows holds at most this many arrays of its result's size at once:
# the result and a copy as large (a sparse X's product is transposed into a copy, see
# kernel_functions.inner_products), besides the drawn rows of X it reads, made dense.
PRODUCT_COPIES = 2


def product_row_bytes(n_columns, n_features, dtype):
    """Device memory one row of a kernel-row product takes while it is computed:
    ``PRODUCT_COPIES`` rows of ``n_columns`` values and the drawn row of X made dense
    (``n_features`` values), in ``dtype``."""
    return (PRODUCT_COPIES * n_columns + n_features) * np.dtype(dtype).itemsize


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
            matrix[start : start + rows.size] = compute_rows(rows)
    return matrix


def matrix_rows_function(X, sq_norms, spec):
    """``compute_rows(rows)``: the kernel rows ``K(X[rows], X)`` (device indices), in X's
    dtype, as the resident matrix and the row cache compute them: their products on
    :func:`~gpusvm.kernel_functions.compute_layout` of X, a dense copy of a CSR X that is
    dense and small enough, made at the first call and kept as long as the function.

    cuSPARSE's products of CSR rows are several times slower than dense GEMMs at these
    densities (the figures: ``docs/user_guide/gpu_internals.md``, "Profiling"). A step
    never reads X when the matrix is resident, so the copy lives only while the matrix is
    filled.
    """

    @functools.cache
    def products_X():
        return compute_layout(X)

    def compute_rows(rows):
        return spec.rows(products_X(), rows, sq_norms)

    return compute_rows


SOURCES = {"products": 0, "matrix": 1, "cache": 2}  # KERNEL_VALUES_FROM_* in kernel_values.cuh


def kernel_value_arguments(source, kind, sq_norms, spec, store_rows=None):
    """The launch arguments of ``KERNEL_VALUE_PARAMETERS`` (``kernels/kernel_values.cuh``).

    Parameters
    ----------
    source : cupy.ndarray
        The kernel values' array, C-contiguous in X's dtype: the resident kernel matrix
        (a row per training row), a row cache's store, or the drawn rows' inner products
        (a row per drawn slot).
    kind : {'matrix', 'cache', 'products'}
        Which of those ``source`` is.
    sq_norms : cupy.ndarray
        X's squared row norms, X's dtype (rbf, from products).
    spec : KernelSpec
        The kernel (:class:`gpusvm.kernel_functions.KernelSpec`).
    store_rows : cupy.ndarray of int64, optional
        For a cache: the store row of each drawn slot.
    """
    import cupy

    if store_rows is None:
        store_rows = cupy.zeros(1, dtype=np.int64)  # not read
    return (
        source,
        np.int64(source.shape[1]),
        np.int64(1),
        np.int32(SOURCES[kind]),
        store_rows,
        sq_norms,
        np.int32(spec.code),
        np.float64(spec.gamma),
        np.float64(spec.coef0),
        np.int32(spec.degree),
    )


class DeviceRowCache(KernelRowCache):
    """Kernel rows kept on the device, for steps whose drawn rows are read through it.

    The host's :class:`~gpusvm.solvers.row_cache.KernelRowCache` (least recently used
    rows out, rows computed in blocks with the rows the caller expects next) with its
    store in device memory: the bookkeeping stays on the host, which reads each step's
    drawn rows (one synchronisation a step), computes the missing rows into the store by
    products of at most ``BLOCK_BYTES`` with their temporaries (one product, unless more
    rows miss than that holds), and writes the store row of every drawn slot to
    ``store_rows``.

    Parameters
    ----------
    compute_rows : callable
        ``compute_rows(rows)``: the kernel rows of device indices, shape (len(rows),
        n_columns), X's dtype.
    n_rows, n_columns : int
        The shape of the whole matrix.
    dtype : dtype
    budget : int
        Bytes for the store.
    slots : int
        Drawn slots a step reads (the length of ``store_rows``).
    n_features : int, default=0
        Columns of X, whose drawn rows a product reads (made dense: a temporary).
    """

    def __init__(self, compute_rows, n_rows, n_columns, dtype, budget, slots, n_features=0):
        import cupy

        # a product of rows computed on a miss as large as a block of the matrix's (one
        # product fills the GPU), its temporaries included
        super().__init__(
            compute_rows,
            n_rows,
            n_columns,
            dtype,
            budget,
            empty=cupy.empty,
            block_bytes=BLOCK_BYTES,
            product_row_bytes=product_row_bytes(n_columns, n_features, dtype),
            on_host=False,
        )
        self.store_rows = cupy.zeros(slots, dtype=np.int64)

    @staticmethod
    def holds(n_columns, dtype, budget, slots):
        """Whether ``budget`` bytes keep twice the rows a step draws (fewer would be
        evicted as fast as they are computed)."""
        return budget >= 2 * slots * n_columns * np.dtype(dtype).itemsize

    def look_up(self, drawn, prefetch=None, where=None):
        """Make the rows of ``drawn`` (indices, one per slot, on the device or the host)
        kept, and write their store rows to ``store_rows``; ``prefetch`` as
        :meth:`KernelRowCache.rows`'. ``where``: a host mask of the slots to look up (the
        others get store row 0: a stopped problem's, which no launch reads); None: every
        slot."""
        import cupy

        drawn = cupy.asnumpy(drawn).ravel()
        where = np.ones(drawn.size, dtype=bool) if where is None else where
        distinct, position = np.unique(drawn[where], return_inverse=True)
        store_rows = np.zeros(drawn.size, dtype=np.int64)
        store_rows[where] = self.slots(distinct, prefetch)[position.ravel()]
        self.store_rows.set(store_rows)

    def _fill_block(self, indices, slots):
        import cupy

        self.store[cupy.asarray(slots)] = self.compute_rows(cupy.asarray(indices))


def kernel_values_source(n_rows, n_columns, dtype, budget, slots):
    """Where steps that draw ``slots`` rows a step of the ``(n_rows, n_columns)`` kernel
    matrix (``dtype``) read their kernel values, with ``budget`` bytes of device memory:
    ``'matrix'`` when the whole matrix fits, else ``'cache'`` when a
    :class:`DeviceRowCache` of it there holds twice ``slots`` rows, else ``'products'``
    (the drawn rows' inner products, computed every step)."""
    if n_rows * n_columns * np.dtype(dtype).itemsize <= budget:
        return "matrix"
    return "cache" if DeviceRowCache.holds(n_columns, dtype, budget, slots) else "products"


class StepKernelValues:
    """The kernel values of a solver's steps, from where :func:`kernel_values_source`
    puts them: the resident matrix, a row cache of it, or the drawn rows' products.

    Parameters
    ----------
    X : cupy.ndarray or cupyx.scipy.sparse.csr_matrix
        Every row: the kernel matrix's columns.
    n_rows : int
        Rows of the kernel matrix (the first rows of X: the training rows).
    sq_norms : cupy.ndarray
        X's squared row norms, in X's dtype.
    spec : KernelSpec
        The kernel.
    budget : int
        Bytes of device memory (:func:`kernel_cache_bytes`).
    slots : int
        Rows drawn a step.

    Attributes
    ----------
    source : {'matrix', 'cache', 'products'}
    matrix, row_cache, products
        The resident matrix, :class:`DeviceRowCache` or :class:`DrawnRowProducts`; None
        but for ``source``'s.
    arguments : tuple
        The launch arguments of ``KERNEL_VALUE_PARAMETERS``.
    """

    def __init__(self, X, n_rows, sq_norms, spec, budget, slots):
        n_columns, dtype = X.shape[0], X.dtype
        self.source = kernel_values_source(n_rows, n_columns, dtype, budget, slots)
        self.matrix = self.row_cache = self.products = None
        store_rows = None
        if self.source != "products":
            compute_rows = matrix_rows_function(X, sq_norms, spec)
        if self.source == "matrix":
            self.matrix = values = resident_kernel_matrix(compute_rows, n_rows, n_columns, dtype, budget)
        elif self.source == "cache":
            self.row_cache = DeviceRowCache(compute_rows, n_rows, n_columns, dtype, budget, slots, X.shape[1])
            values, store_rows = self.row_cache.store, self.row_cache.store_rows
        else:
            self.products = DrawnRowProducts(X, slots)
            values = self.products.dots
        self.arguments = kernel_value_arguments(values, self.source, sq_norms, spec, store_rows=store_rows)


class DrawnRowProducts:
    """The inner products of a step's drawn rows with every row of X, into one buffer,
    with no host synchronisation: the rows of a CSR X are first made dense on the device
    (indexing a CSR matrix by device indices reads the result's size).  The products are
    computed ``rows_at_once`` rows at a time, so that besides the buffer they take at
    most ``BLOCK_BYTES`` with their temporaries, however many rows a step draws.

    Parameters
    ----------
    X : cupy.ndarray or cupyx.scipy.sparse.csr_matrix
    slots : int
        Rows drawn a step.
    """

    def __init__(self, X, slots):
        import cupy

        self.X = X
        self.dots = cupy.zeros((slots, X.shape[0]), dtype=X.dtype)  # a row per drawn slot
        self.dense_rows = cupy.empty((slots, X.shape[1]), dtype=X.dtype) if hasattr(X, "indptr") else None
        self.csr_parts = row_view_arguments(X)[:3] if self.dense_rows is not None else None  # int32 indices
        self.rows_at_once = int(max(1, BLOCK_BYTES // product_row_bytes(X.shape[0], X.shape[1], X.dtype)))

    def compute(self, rows):
        """``X[rows] X^T`` into ``dots`` (``rows``: device indices, one per slot)."""
        X = self.X
        if self.dense_rows is not None:
            get_cuda_kernel("kernel_functions.cu", "dense_rows", X.dtype)(
                (rows.size,),
                (_DENSE_ROW_THREADS,),
                (*self.csr_parts, rows, np.int32(X.shape[1]), self.dense_rows),
            )
        for start in range(0, rows.size, self.rows_at_once):
            stop = min(rows.size, start + self.rows_at_once)
            drawn = self.dense_rows[start:stop] if self.dense_rows is not None else X[rows[start:stop]]
            self.dots[start:stop] = inner_products(drawn, X)
