"""The driver of SBP steps of any kind: steps in blocks, checkpoints, stopping rules."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import nvtx

from ..._instrumentation import progress_bar
from ._problem import SBPResult, checkpoint_interval, checkpoint_patience


def run_sbp(problem, steps, rules, *, checkpoint_every=None, average=True, verbose=0):
    """Run SBP steps until a stopping rule fires; checkpoint ten times per epoch.

    ``steps`` is a ``NumpySBPSteps``, a ``CupySBPSteps`` or gpusvm.dask's steps: it has
    ``eta0``, ``step`` (or ``run_steps`` and ``block_steps``: blocks of steps between
    which the clock is read), ``synchronize``, ``evaluate``, ``coefficients``,
    ``kernel_rows_computed``, ``kernel_rows_distinct``, ``kernel_values_source``
    ('matrix', 'cache' or 'products', as
    :func:`gpusvm.solvers._kernel_values_cuda.kernel_values_source` names them) and,
    when it keeps its kernel rows in a cache, ``kernel_row_cache`` (a
    :class:`~gpusvm.solvers.row_cache.KernelRowCache`); ``average`` picks the model
    that checkpoints evaluate and that is returned.
    ``checkpoint_every`` (None: :func:`checkpoint_interval`) sets
    other steps between checkpoints, as a one-vs-one pair's
    (:func:`~gpusvm.solvers.sbp.pairs.pair_checkpoint_steps`); the stopping rules then
    look back over the same span of steps (:func:`checkpoint_patience`). The ``tol``
    rule waits until every problem's model separates (:func:`separates`).  Returns an
    :class:`SBPResult`.
    """
    n_train, batch = problem.n_train, problem.batch_size
    steps_per_epoch = max(1, math.ceil(n_train / batch))
    own_every = int(checkpoint_interval(steps_per_epoch))
    if checkpoint_every is not None and checkpoint_every != own_every:
        patience = int(checkpoint_patience(rules.n_iter_no_change, own_every, checkpoint_every))
        rules = dataclasses.replace(rules, n_iter_no_change=patience)
    checkpoint_every = own_every if checkpoint_every is None else int(checkpoint_every)
    evals_per_step = problem.n_problems * batch * problem.n_rows
    max_steps = rules.max_epochs * steps_per_epoch
    if rules.max_kernel_evals is not None:
        max_steps = min(max_steps, max(1, rules.max_kernel_evals // evals_per_step))
    history, best_error, checkpoints_since_best = [], math.inf, 0
    started = time.perf_counter()

    def elapsed():
        steps.synchronize()  # launches are asynchronous: count the work queued so far
        return time.perf_counter() - started

    with progress_bar(max_steps, "SBP", verbose) as bar:  # closed however the loop ends
        block_steps = getattr(steps, "block_steps", 1)  # steps issued together; the clock is read between
        t = 0
        while t < max_steps:
            count = min(block_steps, checkpoint_every - t % checkpoint_every, max_steps - t)
            run_step_block(steps, t + 1, count)
            t += count
            bar.update(count)
            out_of_time = rules.time_budget is not None and elapsed() >= rules.time_budget
            if t % checkpoint_every and t < max_steps and not out_of_time:
                continue
            record, level, bias = checkpoint(steps, average, t, evals_per_step * t, elapsed())
            history.append(record)
            if record["holdout_error"] is None:
                stalled = separates(level) and rules.objective_stalled(history, 1 / steps.eta0)
            else:
                stalled = False
                bar.set_postfix(holdout_error=f"{record['holdout_error']:.4f}", refresh=False)
                if record["holdout_error"] < best_error:
                    best_error, checkpoints_since_best = record["holdout_error"], 0
                else:
                    checkpoints_since_best += 1
            if out_of_time or stalled or checkpoints_since_best >= rules.n_iter_no_change:
                break
    alpha, support = steps.coefficients(average)
    return SBPResult(
        alpha=alpha, level=level, bias=bias, n_steps=t, history=history, support=support, row_cache=row_cache_use(steps)
    )


def separates(level):
    """Whether every problem's water level (scalar or array) is above 0: a model whose
    level is at or below 0 is not yet a separator of its training rows (with ``nu > 0``
    the optimum's level is at least ``nu``, the zero predictor's), so a small gain of
    its level is no sign that it has settled. The ``tol`` rule waits for it: on features
    far from 0 it stopped otherwise after about an epoch, below 0 (``docs/benchmarks.md``,
    "Figures behind the code")."""
    return bool(np.all(np.asarray(level) > 0))


def row_cache_use(steps):
    """How ``steps``' kernel row cache was used (a ``RowCacheUse``), or None without one."""
    cache = getattr(steps, "kernel_row_cache", None)
    return None if cache is None else cache.use()


def step_schedule(first, count, eta0):
    """Rows ``(t, eta_0 / sqrt(t))`` for ``t = first .. first + count - 1``."""
    t = np.arange(first, first + count, dtype=np.float64)
    return np.column_stack([t, eta0 / np.sqrt(t)])


def run_step_block(steps, first, count):
    """Steps ``first .. first + count - 1``: one block of a schedule when ``steps`` takes
    one (``run_steps``, the GPU's), else one ``step`` after another."""
    if hasattr(steps, "run_steps"):
        steps.run_steps(step_schedule(first, count, steps.eta0))
        return
    for t in range(first, first + count):
        steps.step(t, steps.eta0 / math.sqrt(t))


def checkpoint(steps, average, n_steps, kernel_evals, seconds):
    """A history record (the model's level, the objective, and its holdout error), and the
    model's level and bias per problem."""
    with nvtx.annotate("sbp.checkpoint", color="cyan"):
        level, bias, error = steps.evaluate(average)
    return history_record(steps, n_steps, kernel_evals, seconds, np.mean(level), error), level, bias


def history_record(steps, n_steps, kernel_evals, seconds, objective, holdout_error):
    """One ``history_`` record: the counts so far, where the steps read their kernel
    values (``steps.kernel_values_source``), the objective (the level of the averaged
    model) and the holdout error (None: no holdout)."""
    return {
        "steps": int(n_steps),
        "kernel_evals": int(kernel_evals),
        "kernel_rows_computed": int(steps.kernel_rows_computed),
        "kernel_rows_distinct": int(steps.kernel_rows_distinct),
        "kernel_values_source": steps.kernel_values_source,
        "seconds": seconds,
        "objective": float(objective),
        "holdout_error": holdout_error,
        "phase_seconds": dict(steps.phases.seconds) if hasattr(steps, "phases") else None,
    }
