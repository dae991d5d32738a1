"""Where an SBP step's time goes on the device: each launch of the step timed apart.

``bench/sbp_step.py`` times whole steps; this times each launch of them (the level
search's gather and solve rounds, the draw, the norm step, the update, and a host
callback where the kernel values come from a row cache or products) with a pair of CUDA
events around it, over ``--steps`` steps after ``--warm-up`` steps, and again after
``--later`` steps (the water moves less once the model settles, and the level search's
windows with it). Each phase also records, from the search's own counters, the
histograms of the responses the search counted after a window missed, over its levels
(``levels_with_a_histogram``), and the share of the levels that fell back to the
bisection over ranks (``levels_by_bisection``). Same data and solver
settings as ``bench/sbp_step.py`` (dense Gaussian blobs, rbf, batch 64, nu 1e-2, with the
bias), the whole kernel matrix on the device.

Events around every launch add a little to each one's time (the step total here runs
somewhat above ``sbp_step.py``'s): the shares, not the sum, are what this measures.

    python -m bench.sbp_launches [--rows 10000 100000] [--classes 1 10]
                                 [--warm-up 20] [--steps 50] [--later 400] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
from collections import defaultdict

from bench.common import TimeLimit, median, report, sbp_step_problem, sbp_stepper
from bench.datasets import make_blobs

from gpusvm._device import step_blocks
from gpusvm.solvers.sbp import run_step_block


def launch_name(kernel):
    """A launch's name: the CUDA kernel's (a template's without its mangling:
    ``_Z13sbp_norm_stepIfEv...`` is ``sbp_norm_step``), or the host callback's."""
    name = getattr(kernel, "name", None) or getattr(kernel, "__name__", None) or type(kernel).__name__
    mangled = re.match(r"_Z(\d+)", name)
    return name[mangled.end() : mangled.end() + int(mangled.group(1))] if mangled else name


def time_launches(steps, first, count):
    """Milliseconds a step of each launch name (summed over its launches in a step; the
    median and the mean over the ``count`` steps from ``first``: a search that falls back to
    its bisection in a few steps moves the mean, not the median) and the number of its
    launches a step."""
    import cupy

    timings = []

    def timed_launch(kernel, grid, block, args):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        kernel(grid, block, args)
        end.record()
        timings.append((launch_name(kernel), start, end))

    original = step_blocks._launch
    step_blocks._launch = timed_launch  # StepBlocks' direct launches go through it
    try:
        for t in range(first, first + count):  # one block a step: a step's launches apart
            run_step_block(steps, t, 1)
            timings.append(None)
    finally:
        step_blocks._launch = original
    cupy.cuda.Device().synchronize()
    per_step, counts, current = defaultdict(list), {}, defaultdict(float)
    names_in_step = defaultdict(int)
    for timing in timings:
        if timing is None:
            for name, ms in current.items():
                per_step[name].append(ms)
            counts = dict(names_in_step)
            current, names_in_step = defaultdict(float), defaultdict(int)
            continue
        name, start, end = timing
        current[name] += cupy.cuda.get_elapsed_time(start, end)
        names_in_step[name] += 1
    medians = {name: median(values) for name, values in per_step.items()}
    return medians, {name: statistics.fmean(values) for name, values in per_step.items()}, counts


def profile(n, n_classes, warm_up, count, later):
    """Result rows (one a launch name and phase) for ``n`` dense rows and ``n_classes``:
    ``count`` steps after ``warm_up``, then ``count`` from step ``later`` (if it comes after)."""
    X, labels = make_blobs(n, n_classes, sparse=False)
    steps = sbp_stepper(sbp_step_problem(X, labels, n_classes, "cupy"), "cupy", "matrix")
    if steps is None:
        print(f"n={n} {n_classes} classes: the kernel matrix does not fit", flush=True)
        return []
    run_step_block(steps, 1, warm_up)
    rows, next_step = [], warm_up + 1
    for first in (warm_up + 1, later):
        if first < next_step:
            continue
        if first > next_step:
            run_step_block(steps, next_step, first - next_step)
        settled_before = steps.step_levels.settled_by.get()
        histograms_before = steps.step_levels.histograms.get()
        times, means, counts = time_launches(steps, first, count)
        settled = steps.step_levels.settled_by.get() - settled_before  # (k, 2): windows, bisection
        histograms = float((steps.step_levels.histograms.get() - histograms_before).sum() / max(1, settled.sum()))
        next_step = first + count
        total = sum(times.values())
        by_bisection = float(settled[:, 1].sum() / max(1, settled.sum()))
        for name, ms in sorted(times.items(), key=lambda item: -item[1]):
            rows.append(
                {
                    "rows": n,
                    "classes": n_classes,
                    "steps_from": first,
                    "launch": name,
                    "launches_a_step": counts.get(name, 0),
                    "ms_a_step": ms,
                    "share": ms / total if total else None,
                    "step_ms": total,
                    "mean_ms_a_step": means[name],
                    "mean_step_ms": sum(means.values()),
                    "levels_with_a_histogram": histograms,
                    "levels_by_bisection": by_bisection,
                }
            )
            print(rows[-1], flush=True)
    return rows


def main():
    os.environ[step_blocks.GRAPH_ENV_VARIABLE] = "0"  # launches issued one by one, each timed (no capture)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--classes", nargs="+", type=int, default=[1, 10])
    parser.add_argument("--warm-up", type=int, default=20)
    parser.add_argument("--steps", type=int, default=50, help="steps timed in each phase")
    parser.add_argument("--later", type=int, default=400, help="first step of the later phase (0: none)")
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 1 and 10 classes, 5 steps (a smoke run)")
    args = parser.parse_args()
    rows, classes = ([2_000], [1, 10]) if args.quick else (args.rows, args.classes)
    count, later = (5, 12) if args.quick else (args.steps, args.later)
    warm_up = 3 if args.quick else args.warm_up
    results = []
    with TimeLimit() as limit:
        for n, n_classes in itertools.product(rows, classes):
            results.extend(profile(n, n_classes, warm_up, count, later))
    columns = [
        ("rows", "rows", ","),
        ("classes", "classes", ""),
        ("steps from", "steps_from", ""),
        ("launch", "launch", ""),
        ("launches a step", "launches_a_step", ""),
        ("ms a step (median)", "ms_a_step", ".4f"),
        ("share", "share", ".1%"),
        ("step ms (sum)", "step_ms", ".3f"),
        ("ms a step (mean)", "mean_ms_a_step", ".4f"),
        ("step ms (mean, sum)", "mean_step_ms", ".3f"),
        ("histograms a level", "levels_with_a_histogram", ".2f"),
        ("levels by bisection", "levels_by_bisection", ".0%"),
    ]
    report(
        "sbp_launches",
        ["cupy"],
        title="## The SBP step's launches, each timed apart (CUDA events; batch 64, rbf, the kernel matrix resident)",
        columns=columns,
        payload={
            "dataset": "dense Gaussian blobs (bench/sbp_step.py)",
            "parameters": {"warm_up": warm_up, "steps": count, "later": later, "quick": args.quick},
            "stopped_at_time_limit": limit.reached,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
