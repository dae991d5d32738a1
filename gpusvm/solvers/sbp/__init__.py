"""The kernelized Stochastic Batch Perceptron (Cotter, Shalev-Shwartz and Srebro 2012).

Algorithm 1 of the paper (``docs/algorithms.md``, section 2), one-vs-rest, with mini-batches.
Per binary problem the state is ``w = sum_i alpha_i y_i Phi(x_i)``, kept through the
responses ``c_j = y_j <w, Phi(x_j)>`` of every training row, the squared norm
``r2 = ||w||^2``, and the holdout responses ``h_v = <w, Phi(x_v)>``.  Step ``t``:

1. the water level ``gamma`` of ``c`` (and with an intercept, the bias ``b``): the
   examples below it, ``c_j + y_j b <= gamma``, carry the subgradient ``p*``;
2. draw ``B`` of them uniformly (lane ``k B + b`` of the shared random stream at step
   ``t`` for problem ``k``), so each class draws from its own set;
3. step along the mean ``u = 1/B sum_b y_b Phi(x_b)`` with ``eta_t = eta_0 / sqrt(t)``:
   one combined kernel row ``g = 1/B sum_b y_b K(x_b, .)`` updates every response, and
   ``r2 += 2 eta <w, u> + eta^2 ||u||^2``, read off the old responses and ``g``;
4. project back onto the unit ball when ``r2 > 1``.

The iterates are averaged uniformly (the paper's ``alpha_bar``); the model is the
average divided by the level of the averaged responses.

Cheap bookkeeping, so a step costs one combined kernel row plus O(n):

* ``alpha = s A`` and the responses ``(c, h) = s R`` share a scale ``s``: a projection
  is O(1).  Folded into ``A`` and ``R`` when ``s`` gets tiny (``RENORMALIZE_BELOW``).
  The water level of ``s R`` is ``s`` times that of ``R`` with volume ``n nu / s``, so
  the level search reads ``R`` as it is.
* ``sum_t alpha^(t)`` is ``A S - stamps``, with ``S`` the running sum of ``s`` and
  ``stamps`` each increment of ``A`` times ``S`` before it (``A`` changes in ``B``
  places per step); the responses change everywhere anyway, and their sum ``R_sum`` is
  added up directly.

One-vs-one models step the binary problems of every pair of classes together: the
subpackage :mod:`gpusvm.solvers.sbp.pairs`, with its plan, steps and kernels.

This folder: the problem, the result, the stopping rules and what all steps share
(``_problem.py``), the NumPy steps, the reference (``_numpy.py``), the CUDA steps
(``_cuda.py``: ``kernels/sbp.cu``, with the levels of ``kernels/sbp_level.cu`` from
``gpusvm/water_level/_sbp_level_cuda.py``), the host's level tracking (``_levels.py``), the
driver (``_run.py``), the pairs (``pairs/``), and here :func:`make_steps`, the one place
where the backend is chosen.

References
----------
A. Cotter, S. Shalev-Shwartz, N. Srebro. The kernelized stochastic batch perceptron.
ICML 2012 (arXiv:1204.0566).
"""

from __future__ import annotations

from ..._backend import on_device
from ..._instrumentation import nvtx_range
from ._numpy import NumpySBPSteps
from ._problem import (
    CHECKPOINTS_PER_EPOCH,
    PREFETCH_MAX_COVERED,
    RENORMALIZE_BELOW,
    STEP_PHASES,
    LocalModel,
    SBPProblem,
    SBPResult,
    StoppingRules,
    checkpoint_interval,
    checkpoint_patience,
    holdout_error,
    positive_level,
    predicted_classes,
    step_size_for,
)
from ._run import checkpoint, history_record, run_sbp, run_step_block, separates, step_schedule

__all__ = [
    "CHECKPOINTS_PER_EPOCH",
    "PREFETCH_MAX_COVERED",
    "RENORMALIZE_BELOW",
    "STEP_PHASES",
    "LocalModel",
    "NumpySBPSteps",
    "SBPProblem",
    "SBPResult",
    "StoppingRules",
    "checkpoint",
    "checkpoint_interval",
    "checkpoint_patience",
    "history_record",
    "holdout_error",
    "make_steps",
    "positive_level",
    "predicted_classes",
    "run_sbp",
    "run_step_block",
    "separates",
    "step_schedule",
    "step_size_for",
]


@nvtx_range("sbp.stepper", "yellow")  # the kernel matrix, or the cache, and the state
def make_steps(problem, xp, *, kernel_cache, cache_bytes):
    """The steps of the binary and one-vs-rest ``problem`` on the array module ``xp``:
    :class:`NumpySBPSteps` (the reference; a host row cache of ``cache_bytes``) or
    ``_cuda.CupySBPSteps`` (kernel values as ``kernel_cache`` allows)."""
    if on_device(xp):
        from ._cuda import CupySBPSteps

        return CupySBPSteps(problem, kernel_cache=kernel_cache)
    return NumpySBPSteps(problem, cache_bytes=cache_bytes)
