"""One-vs-one SBP steps on the host, compiled: :class:`~gpusvm.solvers.sbp.pairs._numpy.NumpyPairSteps`'s
step as three calls to Numba functions (``_numba.py``).

On small multiclass data a step of the NumPy pairs is mostly the overhead of some sixty
NumPy calls and the partitions and copies they make of whole ``(P, W)`` arrays; the
arithmetic is a small part.
Here a step is three loops over the pairs in compiled code: each pair's water level from
the lowest few dozen responses of its classes (a gather under a cut kept from the last
step, then a short sort), its draws, and its direction and update in one pass over its
columns. The kernel blocks are still looked up, and computed by BLAS, in
:class:`~gpusvm.solvers.sbp.pairs._numpy.ClassBlockCache` between the draws and the update.
The steps run on one thread: the update is bound by reading the drawn blocks, and a second
thread saved little or nothing (the figures: ``docs/benchmarks.md``, "Figures behind the
code").

Every operation is the NumPy step's, in the same order and precision, so both give the same
model bit for bit (``tests/test_sbp_solver.py``); the NumPy step stays the reference.

Costs outside the steps (``bench/sbp_first_fit.py``; the figures: ``docs/benchmarks.md``,
"Figures behind the code"): the first use in a process imports Numba and loads the compiled
functions from Numba's cache (a fraction of a second); the first use after an install
compiles them into that cache (seconds), and so does every process's first use where Numba
can keep no cache, or cannot read it (``_numba._compiled``: compiled in memory, with a
warning, never a failed fit).
Those would make a one-off small fit, which takes a few tenths of a second on the NumPy
steps, several times slower, so :func:`use_compiled_steps` decides, fit by fit: a
process's fits run on the NumPy steps until their work adds up to about what the first
use costs, and on the compiled steps from then on (the rule of renting until the rent
paid would have bought: never much more than twice the better choice in hindsight). Where
Numba is missing or fails to import the NumPy steps run; ``GPUSVM_COMPILED_STEPS=0``
always runs them, ``=1`` always the compiled steps (read at a process's first decision).
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np

from ._numpy import NumpyPairSteps
from .._problem import RENORMALIZE_BELOW

# The environment switch: unset, the rule of use_compiled_steps; "0" the NumPy steps; "1"
# the compiled steps (where Numba imports).
SWITCH = "GPUSVM_COMPILED_STEPS"
# Unset, a process's one-vs-one fits on the host run on the NumPy steps until their work, in
# pair columns stepped (_plan.host_pair_work), would reach this: the work at which the compiled
# steps' first use in a process, then their faster steps, begin to gain (docs/benchmarks.md,
# "Figures behind the code").
COMPILED_FROM_COLUMNS = 30_000_000
_COMPILED_MODULE = f"{__package__}._numba"
_numpy_columns = 0  # the work of this process's fits on the NumPy steps so far


@functools.cache
def compiled_steps_switch():
    """``GPUSVM_COMPILED_STEPS`` (``None``, ``"0"`` or ``"1"``), read once a process.

    Raises
    ------
    ValueError
        When it is set to anything else.
    """
    value = os.environ.get(SWITCH) or None  # set empty (export VAR=): unset
    if value not in (None, "0", "1"):
        raise ValueError(f"The environment variable {SWITCH} must be 0, 1 or unset (or empty); got {value!r}.")
    return value


@functools.cache
def compiled_steps_available():
    """Whether the compiled steps can run: ``GPUSVM_COMPILED_STEPS`` is not ``0`` and Numba
    imports (both found once a process)."""
    if compiled_steps_switch() == "0":
        return False
    try:
        import numba  # noqa: F401
    except Exception:  # not installed, or built for another NumPy: the NumPy steps run
        return False
    return True


def use_compiled_steps(columns):
    """Whether a one-vs-one fit on the host whose steps are about ``columns`` pair columns
    of work runs on the compiled steps (``True``) or the NumPy steps (``False``; their work
    then counts toward the next decision).

    Compiled when ``GPUSVM_COMPILED_STEPS=1``, when the compiled steps have been used in
    this process already (their first use is paid), or when this fit's work and that of the
    process's fits on the NumPy steps reach ``COMPILED_FROM_COLUMNS``; never where Numba
    does not import. Numba is not imported for a fit on the NumPy steps."""
    global _numpy_columns
    switch = compiled_steps_switch()
    if switch == "0":
        return False
    if switch is None and _COMPILED_MODULE not in sys.modules and _numpy_columns + columns < COMPILED_FROM_COLUMNS:
        _numpy_columns += columns
        return False
    return compiled_steps_available()


class CompiledPairSteps(NumpyPairSteps):
    """:class:`~gpusvm.solvers.sbp.pairs._numpy.NumpyPairSteps` with each step's level, draws,
    direction and update compiled; the same model bit for bit."""

    def __init__(self, stack, cache_bytes):
        super().__init__(stack, cache_bytes)
        from . import _numba  # Numba compiles, or loads from its cache, on the first step

        self.kernels = _numba
        n_pairs, batch = stack.n_pairs, stack.batch_size
        self.first_width, self.second_width = (np.ascontiguousarray(stack.block_widths[:, side]) for side in (0, 1))
        self.train_first, self.train_second = (stack.class_train[stack.pairs[:, side]] for side in (0, 1))
        # each pair's water edges (its first class's, its second's) at its last step; pair_levels
        # also writes the level and bias, which the steps do not read (the checkpoints' are _levels')
        self.levels, self.biases, self.edges = np.zeros(n_pairs), np.zeros(n_pairs), np.zeros((n_pairs, 2))
        self.counts = np.zeros(n_pairs, dtype=np.int64)  # each pair's covered count at its last step
        self.cuts = np.full((n_pairs, 2), np.inf)  # its classes' gather cuts (_numba._sorted_lowest)
        # the same at the last checkpoint (the averaged or last responses)
        self.checkpoint_counts = np.zeros(n_pairs, dtype=np.int64)
        self.checkpoint_cuts = np.full((n_pairs, 2), np.inf)
        # a step's distinct draws, at most B a pair: pair (position in active), column,
        # multiplicity, block keys, weight in the store's dtype; pair i's from pair_starts[i]
        self.draw_pair = np.empty(n_pairs * batch, dtype=np.int64)
        self.draw_column = np.empty(n_pairs * batch, dtype=np.int64)
        self.draw_multiplicity = np.empty(n_pairs * batch, dtype=np.int64)
        self.draw_keys = np.empty((n_pairs * batch, 2), dtype=np.int64)
        self.draw_weights = np.empty(n_pairs * batch, dtype=self.cache.store.dtype)
        self.pair_starts = np.empty(n_pairs + 1, dtype=np.int64)

    def step(self, step, eta, active):
        """Step ``step`` (from 1) of the ``active`` pairs (int array) with step sizes ``eta``."""
        stack, kernels = self.stack, self.kernels
        with self.phases.phase("level", "sbp.water_level", "purple"):
            volumes = stack.nu * self.n_train[active] / self.scale[active]
            kernels.pair_levels(
                *(self.R, active, self.train_first, self.train_second, self.first_width, volumes),
                *(self.class_ranks, stack.fit_intercept, self.edges, self.counts, self.cuts, self.levels, self.biases),
            )
        with self.phases.phase("draw", "sbp.draw", "yellow"):
            n_draws = kernels.pair_draws(
                *(self.R, active, self.train_first, self.train_second, self.first_width, self.edges),
                *(stack.fit_intercept, self._stream_bits(step), self.labels, self.columns, stack.pairs),
                *(self.cache.n_data_rows, stack.batch_size, self.pair_starts, self.draw_pair, self.draw_column),
                *(self.draw_multiplicity, self.draw_keys, self.draw_weights),
            )
        with self.phases.phase("rows", "sbp.kernel_row", "orange"):
            slots = self.cache.block_slots(self.draw_keys[:n_draws])
        with self.phases.phase("update", "sbp.update", "green"):
            kernels.pair_update(
                *(self.cache.store, slots, self.draw_weights, self.draw_column, self.draw_multiplicity),
                *(self.pair_starts, active, self.first_width, self.second_width, self.signs, eta, stack.batch_size),
                *(self.A, self.stamps, self.R, self.R_sum, self.scale, self.r2, self.scale_sum),
            )
            tiny = active[self.scale[active] < RENORMALIZE_BELOW]
            if tiny.size:
                self._renormalize(tiny)
        self.n_steps[active] = step

    def _levels(self, responses, pairs):
        """Level and bias of these pairs' models from their ``responses`` (a checkpoint's),
        compiled (as the steps' levels, on a pair's own window of ranks)."""
        rows = np.arange(pairs.size)
        counts, cuts = self.checkpoint_counts[pairs], self.checkpoint_cuts[pairs]
        level, bias = np.empty(pairs.size), np.empty(pairs.size)
        self.kernels.pair_levels(
            *(responses, rows, self.train_first[pairs], self.train_second[pairs], self.first_width[pairs]),
            *(self.stack.nu * self.n_train[pairs], self.class_ranks[pairs], self.stack.fit_intercept),
            *(np.empty((pairs.size, 2)), counts, cuts, level, bias),
        )
        self.checkpoint_counts[pairs], self.checkpoint_cuts[pairs] = counts, cuts
        return level, bias
