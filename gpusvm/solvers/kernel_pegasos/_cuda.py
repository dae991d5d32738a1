"""Kernel Pegasos' steps on the GPU: the launches of ``kernels/kernel_pegasos.cu``.

A step is two launches for every class together: the draw, margin test and count
updates, then the responses' update from the violating rows' kernel values, read from
the whole kernel matrix when it fits in ``kernel_cache`` (computed once, in X's dtype),
else from the drawn rows' inner products with every row (one product a step, or
several of a bounded size for a large batch, between the two launches).  The step
number and scale are a schedule on the device (:mod:`gpusvm._device.step_blocks`), so a block
of steps is the same launches every time: with the resident matrix it can be replayed
as a CUDA graph (the default; ``GPUSVM_CUDA_GRAPHS=0``: direct); with a product each step, which runs cuBLAS
or cuSPARSE and allocates, the launches stay direct. No value comes back to the host
until the fit ends.
"""

from __future__ import annotations

import cupy
import numpy as np
import nvtx

from ..._device import step_blocks
from ..._device.cuda_modules import get_cuda_kernel
from .._kernel_values_cuda import (
    DrawnRowProducts,
    kernel_cache_bytes,
    kernel_value_arguments,
    matrix_rows_function,
    resident_kernel_matrix,
)

_THREADS = 256


class CupyKernelPegasosSteps:
    """Kernel Pegasos' steps on a CUDA device; the model ``NumpyKernelPegasosSteps`` gives, up to rounding.

    Owns the state the steps update: ``responses``, ``counts`` and ``stamps``, each of
    shape (n_classes, n_samples).

    Parameters
    ----------
    problem : KernelPegasosProblem
    sq_norms : cupy.ndarray
        X's squared row norms.
    kernel_cache : 'auto', float or int
        Device memory for the whole kernel matrix
        (:func:`~gpusvm.solvers._kernel_values_cuda.kernel_cache_bytes`).
    mode : {'direct', 'graph', 'replay'} or None
        How blocks of steps are issued (:class:`~gpusvm._device.step_blocks.StepBlocks`); None:
        the default. 'graph' runs direct without the resident matrix.
    """

    row_cache = None  # the host's cache of kernel rows; the device keeps the matrix or computes

    def __init__(self, problem, sq_norms, kernel_cache, mode=None):
        self.problem = problem
        X = problem.X
        n, n_classes, batch = X.shape[0], problem.targets.shape[1], problem.batch_size
        self.responses, self.counts, self.stamps = (cupy.zeros((n_classes, n)) for _ in range(3))
        self.rows = cupy.zeros(batch, dtype=np.int64)
        self.weights = cupy.zeros((n_classes, batch))  # y * coef, (classes, batch)
        self.targets = cupy.ascontiguousarray(problem.targets, dtype=np.float64)
        self.sample_weight = cupy.ascontiguousarray(problem.sample_weight, dtype=np.float64)
        sq_norms = cupy.ascontiguousarray(sq_norms, dtype=X.dtype)
        compute_rows = matrix_rows_function(X, sq_norms, problem.kernel)
        self.matrix = resident_kernel_matrix(compute_rows, n, n, X.dtype, kernel_cache_bytes(kernel_cache))
        self.products = None if self.matrix is not None else DrawnRowProducts(X, batch)
        source, self.kernel_values_source = (
            (self.matrix, "matrix") if self.products is None else (self.products.dots, "products")
        )
        self.kernel_values = kernel_value_arguments(source, self.kernel_values_source, sq_norms, problem.kernel)
        self.violations = get_cuda_kernel("kernel_pegasos.cu", "kernel_pegasos_violations")
        self.update = get_cuda_kernel("kernel_pegasos.cu", "kernel_pegasos_update", X.dtype)
        # cuBLAS / cuSPARSE products and their allocations are not captured
        self.blocks = step_blocks.StepBlocks(self._launch_steps, mode=mode, capturable=self.products is None)

    def run(self, schedule):
        """One step per row ``(t, scale)`` of ``schedule`` (a host array), asynchronously."""
        with nvtx.annotate("kernel_pegasos.steps", color="green"):
            self.blocks.run(schedule)

    def _launch_steps(self, length, launch):
        """The launches of ``length`` steps (StepBlocks' ``launch_steps``)."""
        problem = self.problem
        n_classes, n = self.responses.shape
        batch = problem.batch_size
        violation_blocks = max(1, -(-batch * n_classes // _THREADS))
        update_blocks = max(1, min(65535, -(-n // _THREADS)))
        intercept = np.float64(1.0 if problem.fit_intercept else 0.0)
        for offset in range(length):
            at = self.blocks.at(offset)
            launch(
                self.violations,
                (violation_blocks,),
                (_THREADS,),
                (
                    self.responses,
                    self.targets,
                    self.sample_weight,
                    np.uint64(problem.seed),
                    np.int64(n),
                    np.int32(batch),
                    np.int32(n_classes),
                    *at,
                    self.counts,
                    self.stamps,
                    self.rows,
                    self.weights,
                ),
            )
            if self.products is not None:
                launch(self._inner_products_of_drawn, None, None, ())
            launch(
                self.update,
                (update_blocks, n_classes),
                (_THREADS,),
                (*self.kernel_values, self.rows, self.weights, np.int32(batch), np.int64(n), intercept, self.responses),
            )

    def _inner_products_of_drawn(self, grid, block, args):
        """The drawn rows' inner products with every row (a launch of StepBlocks: its
        arguments are unused)."""
        with nvtx.annotate("kernel_pegasos.kernel_rows", color="orange"):
            self.products.compute(self.rows)
