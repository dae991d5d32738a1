"""One-vs-one SBP: the binary problems of every pair of classes, stepped together.

A one-vs-one model has one binary SBP problem per pair of classes, each on its pair's
rows (KEEL letter: 325 pairs of about 1,200 rows). Stepped one pair after another, a step
costs some fifty NumPy calls on arrays of a thousand values, so the calls, not the
arithmetic, bound the fit. Here each pair's state is a row of a
``(P, W)`` array (its first class's rows, its second's, then padding up to the widest
pair), and one step of every pair costs the same few calls:

* the water levels of all rows at once (:func:`~gpusvm.solvers.sbp._levels.levels_of_rows`);
* the draws of every pair's own stream at once
  (:func:`~gpusvm._random.stream_bits_block`, a block of steps at once);
* kernel rows cut by class (:class:`~gpusvm.solvers.sbp.pairs._numpy.ClassBlockCache`): the part of row g over its own
  class's rows is computed once for all the pairs of that class, which about halves the
  kernel evaluations; one sparse product of the pairs' weights with the cached blocks,
  read where they lie;
* the updates of :class:`~gpusvm.solvers.sbp.NumpySBPSteps`, row-wise.

Pair ``p`` is the binary SBP of :mod:`gpusvm.solvers.sbp` on its rows with its own
stream and stopping rules, up to rounding, except that it checkpoints at its multiple of
a cadence common to the pairs (:func:`pair_checkpoint_steps`), so that every pair
checkpoints at the same steps and the steps between run as long blocks
(the tests fit each pair alone at that cadence, and train the pairs one after another
at it, as on a device whose kernel matrix does not fit). :func:`run_pair_stack` also
drives the device's twin, :class:`~gpusvm.solvers.sbp.pairs._cuda.CupyPairSteps`, in
blocks of steps.

This folder: the problem of a stack of pairs and its checkpoint cadence (``_problem.py``),
the NumPy steps, the reference (``_numpy.py``), the same steps compiled by Numba where it
is installed (``_compiled.py`` with ``_numba.py``), the CUDA steps (``_cuda.py``:
``kernels/sbp.cu``), the driver (``_run.py``), and the plan of a fit's pairs, the one place
where the backend is chosen (``_plan.py``: :func:`plan_pairs`, :func:`train_pairs`). The
estimator asks for a plan and runs it.
"""

from __future__ import annotations

from ._compiled import use_compiled_steps
from ._numpy import ClassBlockCache, NumpyPairSteps
from ._plan import (
    STACK_STEP_COLUMNS,
    PairPlan,
    host_pair_work,
    make_pair_steps,
    pairs_step_together,
    plan_pairs,
    stacks_by_width,
    train_pairs,
)
from ._problem import MIN_CHECKPOINT_STEPS, PairStack, pair_checkpoint_steps
from ._run import run_pair_block, run_pair_stack

__all__ = [
    "MIN_CHECKPOINT_STEPS",
    "STACK_STEP_COLUMNS",
    "ClassBlockCache",
    "NumpyPairSteps",
    "PairPlan",
    "PairStack",
    "host_pair_work",
    "make_pair_steps",
    "pair_checkpoint_steps",
    "pairs_step_together",
    "plan_pairs",
    "run_pair_block",
    "run_pair_stack",
    "stacks_by_width",
    "train_pairs",
    "use_compiled_steps",
]
