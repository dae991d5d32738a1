"""The driver of one-vs-one SBP: a stack of pairs stepped together until each pair's
stopping rules fire (:func:`run_pair_stack`), on the host's steps or the device's."""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
import nvtx

from ...._instrumentation import progress_bar
from .._problem import SBPResult, checkpoint_interval, checkpoint_patience
from .._run import history_record, row_cache_use, step_schedule
from ._problem import pair_checkpoint_steps


def run_pair_stack(stack, steps, rules, *, checkpoint_every=None, kernel_evals=None, average=True, verbose=0):
    """Run the pairs' SBP steps together, each pair until one of its stopping rules fires.

    Each pair keeps the schedule of :func:`~gpusvm.solvers.sbp.run_sbp` on its own rows
    with ``checkpoint_every[p]`` steps between checkpoints (None:
    :func:`pair_checkpoint_steps` of the stack's pairs): its epochs, its holdout's early
    stopping, and ``kernel_evals[p]``, its budget of kernel evaluations (None: none); a
    pair stops at its last step exactly. ``rules.time_budget`` is the whole stack's:
    when it runs out, every pair still stepping checkpoints and stops. Steps that take a
    schedule (the device's ``run_steps``) run in blocks of up to their ``block_steps`` up
    to the next step at which some pair checkpoints or stops; the clock is read between
    blocks (on the host, after every step). A checkpoint evaluates the pairs due in one
    call to ``steps.evaluate``; the history records are made at the end.

    Returns
    -------
    list of :class:`~gpusvm.solvers.sbp.SBPResult`, one per pair, in the stack's order;
    each history record has the pair's own steps and kernel evaluations, the class blocks
    the whole stack has computed, and the seconds since the stack started.
    """
    batch, n_pairs = stack.batch_size, stack.n_pairs
    steps_per_epoch = np.maximum(1, -(-stack.n_train // batch))
    if checkpoint_every is None:
        checkpoint_every = pair_checkpoint_steps(stack.n_train, batch)
    checkpoint_every = np.asarray(checkpoint_every, dtype=np.int64)
    patience = checkpoint_patience(rules.n_iter_no_change, checkpoint_interval(steps_per_epoch), checkpoint_every)
    evals_per_step = batch * stack.n_rows
    max_steps = rules.max_epochs * steps_per_epoch
    if kernel_evals is not None:
        max_steps = np.minimum(max_steps, np.maximum(1, np.asarray(kernel_evals) // evals_per_step))
    level, bias = np.zeros(n_pairs), np.zeros(n_pairs)
    best_error, since_best = np.full(n_pairs, np.inf), np.zeros(n_pairs, dtype=np.int64)
    objectives = _PairRecords(n_pairs)  # each pair's objectives so far, for the tol rule
    checkpoints = []  # (step, due pairs, their levels, their errors, the stack's record)
    active = np.arange(n_pairs)
    started = time.perf_counter()

    def elapsed():
        if hasattr(steps, "synchronize"):
            steps.synchronize()  # a device's launches are asynchronous: count the work queued so far
        return time.perf_counter() - started

    with progress_bar(int(max_steps.max()), "SBP pairs", verbose) as bar:  # closed however the loop ends
        block_steps = getattr(steps, "block_steps", 1)  # steps issued together; the clock is read between
        t = 0
        with getattr(steps, "host_threads", contextlib.nullcontext)():
            while active.size:
                every = checkpoint_every[active]
                next_due = int(np.minimum(t + every - t % every, max_steps[active]).min())
                count = min(block_steps, next_due - t)
                run_pair_block(steps, t + 1, count, active)
                t += count
                bar.update(count)
                out_of_time = rules.time_budget is not None and elapsed() >= rules.time_budget
                due = active[(t % checkpoint_every[active] == 0) | (t >= max_steps[active]) | out_of_time]
                if due.size == 0:
                    continue
                with nvtx.annotate("sbp.checkpoint", color="cyan"):
                    level[due], bias[due], errors = steps.evaluate(average, due)
                # the stack's part of the due pairs' records; their own values are filled in at the end
                checkpoints.append((t, due, level[due], errors, history_record(steps, t, 0, elapsed(), 0.0, None)))
                objectives.append(due, level[due])
                held_out = ~np.isnan(errors)
                improved = held_out & (errors < best_error[due])
                best_error[due[improved]] = errors[improved]
                since_best[due] = np.where(improved, 0, since_best[due] + held_out)
                back = patience[due]
                stop = (t >= max_steps[due]) | out_of_time | (since_best[due] >= back)
                if rules.tol is not None:
                    looked = ~held_out & (objectives.counts[due] > back)
                    before = objectives.values[due, np.where(looked, objectives.counts[due] - 1 - back, 0)]
                    stop |= looked & (level[due] > 0) & rules.gained_too_little(before, level[due], 1 / steps.eta0[due])
                active = np.setdiff1d(active, due[stop])
    histories = [[] for _ in range(n_pairs)]
    cache_use = row_cache_use(steps)  # the stack's, shared by its pairs
    for t, due, levels, errors, record in checkpoints:
        for p, objective, error in zip(due.tolist(), levels.tolist(), errors.tolist(), strict=True):
            histories[p].append(
                {
                    **record,
                    "kernel_evals": int(evals_per_step[p]) * t,
                    "objective": objective,
                    "holdout_error": None if math.isnan(error) else error,
                    "phase_seconds": None if record["phase_seconds"] is None else dict(record["phase_seconds"]),
                }
            )
    return [
        SBPResult(
            alpha=steps.coefficients(average, p),
            level=level[p : p + 1],
            bias=bias[p : p + 1],
            n_steps=int(steps.n_steps[p]),
            history=histories[p],
            row_cache=cache_use,
        )
        for p in range(n_pairs)
    ]


class _PairRecords:
    """Values appended per pair at checkpoints: ``values[p, :counts[p]]``, oldest first."""

    def __init__(self, n_pairs):
        self.values, self.counts = np.zeros((n_pairs, 16)), np.zeros(n_pairs, dtype=np.int64)

    def append(self, pairs, values):
        if self.counts[pairs].max() == self.values.shape[1]:
            self.values = np.concatenate([self.values, np.zeros_like(self.values)], axis=1)
        self.values[pairs, self.counts[pairs]] = values
        self.counts[pairs] += 1


def run_pair_block(steps, first, count, active):
    """Steps ``first .. first + count - 1`` of the ``active`` pairs: one schedule of
    ``(t, 1 / sqrt(t))`` rows when ``steps`` takes one (``run_steps``, the device's; each
    pair scales it by its ``eta0``), else one ``step`` after another."""
    if hasattr(steps, "run_steps"):
        steps.run_steps(step_schedule(first, count, 1.0), active)
        return
    for t in range(first, first + count):
        steps.step(t, steps.eta0[active] / math.sqrt(t), active)
