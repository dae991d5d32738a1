"""Kernelized mini-batch Pegasos, one-vs-rest, on NumPy or CuPy (a step of each:
``_numpy.NumpyKernelPegasosSteps``, ``_cuda.CupyKernelPegasosSteps``; :func:`make_steps` picks one).

The model never forms ``w``: it keeps per class the weighted counts ``alpha[c, j]``,
the number of times example ``j`` was drawn while violating the margin (times its
sample weight).  With ``k`` rows per step, after step ``t``::

    w_{t+1} = 1 / (lam t k) * sum_j alpha[c, j] y_cj Phi(x_j)

which is exactly the linear algorithm of ``solvers/pegasos`` without projection, written in
the kernel's feature space (the margin test at step ``t`` therefore divides by
``lam (t - 1) k``; the paper's ``lam t`` is off by one step).  ``fit_intercept`` adds a
constant 1 to the kernel: a regularized bias, like the linear solver's.

The average of the iterates weighted by step number (as the linear solver's
``average=True``) costs one more counter: with ``stamps[c, j]`` the sum of each increment
of ``alpha[c, j]`` times the step it happened at,
``sum_{t=1..T} alpha^(t) = (T + 1) alpha^(T) - stamps``, so::

    sum_t t w_{t+1} / sum_t t = sum_j ((T + 1) alpha_j - stamps_j) y_j Phi(x_j) / (lam k T (T + 1) / 2)

Instead of evaluating ``K(x_i, support)`` for every drawn row, the solver keeps the
unscaled responses ``r[c, j] = sum_l alpha[c, l] y_cl K(x_l, x_j)`` for all training rows
and adds one kernel row per drawn row when it violates: ``K(X_batch, X)`` is one dense
matrix product, with no gather of the growing support set.  On the GPU a step is two
launches for every class (``kernels/kernel_pegasos.cu``): the draw, margin test and count
updates, then the responses' update from the violators' kernel rows (read from the
resident kernel matrix, or computed for every drawn row), with no host synchronisation
and, issued in blocks of steps, no Python per step.

The linear algorithm's math: ``docs/algorithms.md``, section 1.  This folder: the problem,
its schedule and the model's coefficients (``_problem.py``), the NumPy steps, the
reference (``_numpy.py``), the CUDA steps (``_cuda.py``, ``kernels/kernel_pegasos.cu``),
and here :func:`make_steps` and the driver :func:`run_kernel_pegasos`.

References
----------
S. Shalev-Shwartz, Y. Singer, N. Srebro, A. Cotter. Pegasos: primal estimated
sub-gradient solver for SVM. Mathematical Programming 127(1), 2011 (section 4, kernels).
"""

from __future__ import annotations

import math

from ..._backend import on_device
from ..._instrumentation import nvtx_range, progress_bar
from ...kernel_functions import squared_row_norms
from ..row_cache import cache_bytes
from ._numpy import NumpyKernelPegasosSteps
from ._problem import DRAW_BLOCK_STEPS, SCHEDULE_STEPS, KernelPegasosProblem, dual_coefficients, step_schedule

__all__ = [
    "DRAW_BLOCK_STEPS",
    "SCHEDULE_STEPS",
    "NumpyKernelPegasosSteps",
    "KernelPegasosProblem",
    "dual_coefficients",
    "make_steps",
    "run_kernel_pegasos",
    "step_schedule",
]


@nvtx_range("kernel_pegasos.stepper", "yellow")  # the kernel matrix and the state
def make_steps(problem, xp, *, sq_norms, n_steps, kernel_cache="auto", cache_size="auto"):
    """The steps of ``problem`` on the array module ``xp``, which own the state they
    update: :class:`NumpyKernelPegasosSteps` (the reference, which reads ``cache_size``) or
    ``_cuda.CupyKernelPegasosSteps`` (which reads ``kernel_cache``); the one place where the backend
    is chosen."""
    if on_device(xp):
        from ._cuda import CupyKernelPegasosSteps

        return CupyKernelPegasosSteps(problem, sq_norms, kernel_cache)
    n = problem.X.shape[0]
    return NumpyKernelPegasosSteps(
        problem, sq_norms, n_steps, cache_bytes(cache_size, n * n * problem.X.dtype.itemsize)
    )


def run_kernel_pegasos(problem, *, n_epochs, xp, verbose=0, kernel_cache="auto", cache_size="auto"):
    """Train from scratch for ``n_epochs`` epochs of ``ceil(n / k)`` steps each.

    On CuPy, ``kernel_cache`` (as KernelPegasosSVC's) decides whether the whole kernel
    matrix is kept on the device, so that a step reads its rows instead of computing them;
    on NumPy, ``cache_size`` (as KernelPegasosSVC's) sizes the cache of kernel rows.

    Returns
    -------
    counts : array of shape (n_classes, n_samples), float64
        The weighted violation counts ``alpha``.
    stamps : array of shape (n_classes, n_samples), float64
        Each increment of ``counts`` times the step it happened at.
    n_steps : int
        The number of steps ``T``; the last iterate is ``counts * y / (lam T k)``.
    kernel_values_source : {'matrix', 'products'}
        Where the steps read their kernel values: the whole kernel matrix resident on the
        device, or rows computed from X (always, on the host).
    row_cache : RowCacheUse or None
        How the host's cache of kernel rows was used (None on the device).
    """
    sq_norms = squared_row_norms(problem.X)
    n_steps = n_epochs * max(1, math.ceil(problem.X.shape[0] / problem.batch_size))
    steps = make_steps(
        problem, xp, sq_norms=sq_norms, n_steps=n_steps, kernel_cache=kernel_cache, cache_size=cache_size
    )
    with progress_bar(n_steps, "Kernel Pegasos", verbose) as bar:  # closed however the loop ends
        for first in range(1, n_steps + 1, SCHEDULE_STEPS):
            schedule = step_schedule(first, min(n_steps, first + SCHEDULE_STEPS - 1), problem.lam, problem.batch_size)
            steps.run(schedule)
            bar.update(len(schedule))
    row_cache = None if steps.row_cache is None else steps.row_cache.use()
    return steps.counts, steps.stamps, n_steps, steps.kernel_values_source, row_cache
