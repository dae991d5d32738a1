"""Where an SBP step's time goes on the CPU: water level, draw, kernel rows, update.

SBPClassifier (numpy backend, no holdout) runs a fixed number of kernel evaluations on
each data set at batch 1 and 64; the table gives microseconds per step in each phase,
and the step's time in units of one pass over the ``n`` training responses (``c = a + b``
on float64 arrays of length ``n``: the least a step that touches every response costs).

Each run is labelled (``--label``) and added to ``results/sbp_steps-<device>.json``, so the
same script run on an older checkout's gpusvm records the breakdown before a change beside
the one after it (from this checkout's root, ``PYTHONPATH=<old checkout>:. python -P -m
bench.sbp_steps --label before``: ``-P`` keeps the current folder from coming first on the
path, where it would give this checkout's gpusvm). A version of SBP without per-phase
clocks (``history_[-1]['phase_seconds']``) is timed by wrapping its ``levels``, ``draw``
and row-cache calls; the update is the rest of the step.

    python -m bench.sbp_steps --label after [--datasets magic adult mnist10k letter] [--float32] [--quick]

``--float32`` runs on float32 copies of the data (float32 kernel values; empty dtype
cells are float64, except MNIST's, which is float32 as loaded).

With ``--one-vs-one [letter | penbased]``, the runs are instead whole one-vs-one fits
(batch 64, nu the median over the pairs' SVCs as in ``bench/sbp_one_vs_one.py``; letter,
26 classes and 325 pairs, 4 epochs; penbased, 10 classes and 45 pairs, 1 epoch, where
each first comes within 0.1 points of SVC's test error in that table), timed by phase over
every pair, with the test error; they go to a second table of the same results, by label
and data set.
"""

from __future__ import annotations

import argparse
import json
import time
import timeit
from pathlib import Path

import numpy as np

from bench.common import RESULTS, markdown_table, result_stem, write_results
from bench.datasets import load

import gpusvm
from gpusvm import SBPClassifier
from gpusvm.solvers import row_cache, sbp

# (gamma, nu), all with a bias: magic and letter as bench/sbp_kernel.py (nu read off SVC
# there); Adult the paper's setting with a bias; MNIST 8-vs-rest on its first 10,000 rows
# at the paper's gamma and no-bias nu (the breakdown, not the accuracy, is measured).
LETTER_NU = 9.78e-4  # the median nu_from_svc over letter's one-vs-rest SVCs (bench/sbp_kernel.py)
SETTINGS = {
    "magic": (0.1, 0.0130),
    "adult": (0.005, 5.79e-4),
    "letter": (1 / 16, LETTER_NU),
    "mnist10k": (0.02, 2.21e-4),
}
DATA = {"mnist10k": "mnist8-10k"}  # bench.datasets' names where this script's differ
PHASES = ("level", "draw", "rows", "update")
# Every step the budget or the epochs allow: no stop on the objective's gain (a checkout
# run as "before" may predate ``tol``, and never stopped on it).
EVERY_STEP = {"tol": None} if "tol" in SBPClassifier().get_params() else {}
ONE_VS_ONE = {
    "letter": {"dataset": "letter", "gamma": 1 / 16, "nu": 0.0017, "batch": 64, "epochs": 4},
    "penbased": {"dataset": "penbased", "gamma": 1 / 16, "nu": 4.13e-4, "batch": 64, "epochs": 1},
}


class WrappedPhases:
    """Clocks on methods (for an SBP without its own per-phase clocks): each wrapped
    method's time inside a step counts to its phase, and whole steps to ``'step'``."""

    def __init__(self):
        self.seconds = dict.fromkeys((*PHASES, "step"), 0.0)
        self.originals = []
        self.in_step = False

    def wrap(self, owner, name, phase):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            if not self.in_step and phase != "step":  # e.g. the level of a checkpoint
                return original(*args, **kwargs)
            self.in_step = True
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - started
                self.in_step = phase != "step"

        self.originals.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self):
        for owner, name, original in self.originals:
            setattr(owner, name, original)


def run(name, X, y, batch, evals_per_row):
    """One fit of a tenth of an epoch (``evals_per_row``) at ``batch``, timed by phase."""
    gamma, nu = SETTINGS[name]
    problems = 1 if np.unique(y).size == 2 else np.unique(y).size
    budget = int(evals_per_row * problems * X.shape[0] * X.shape[0])
    # multi_class='ovr': letter's 26 problems step together in NumpySBPSteps (see --one-vs-one for 'ovo')
    model = SBPClassifier(
        nu=nu,
        gamma=gamma,
        batch_size=batch,
        validation_fraction=0.0,
        max_iter=1000,
        max_kernel_evals=budget,
        **EVERY_STEP,
        multi_class="ovr",
        random_state=0,
        backend="numpy",
    )
    clocks = WrappedPhases()
    clocks.wrap(sbp.NumpySBPSteps, "step", "step")
    own_clocks = hasattr(sbp, "PhaseClock")
    if not own_clocks:
        clocks.wrap(sbp.NumpySBPSteps, "levels", "level")
        clocks.wrap(sbp.NumpySBPSteps, "draw", "draw")
        clocks.wrap(row_cache.KernelRowCache, "rows", "rows")
    try:
        model.fit(X, y)
    finally:
        clocks.restore()
    total = clocks.seconds["step"]
    if own_clocks:
        phases = model.history_[-1]["phase_seconds"]
    else:
        phases = dict(clocks.seconds)
        phases["update"] = total - phases["level"] - phases["draw"] - phases["rows"]
    n = X.shape[0]
    a, b, c = np.random.default_rng(0).random((3, n))
    one_pass = min(timeit.repeat(lambda: np.add(a, b, out=c), number=200, repeat=5)) / 200
    steps = model.t_
    row = {
        "dataset": name,
        "dtype": str(X.dtype),
        "n": n,
        "batch": batch,
        "problems": problems,
        "steps": steps,
        "step_us": 1e6 * total / steps,
        "passes_per_step": total / steps / one_pass,
        "one_pass_us": 1e6 * one_pass,
        "rows_computed": model.history_[-1]["kernel_rows_computed"],
        "fit_seconds": total,
    }
    row.update({f"{phase}_us": 1e6 * phases[phase] / steps for phase in PHASES})
    print(row, flush=True)
    return row


def run_one_vs_one(name, dtype):
    """A one-vs-one fit on ``name``, its seconds in each phase summed over every clock the
    fit made (one per pair when pairs train one after another, one per stack of pairs
    stepping together), and the rest of the fit (checkpoints, setup) as 'other'."""
    from gpusvm import _instrumentation

    settings = ONE_VS_ONE[name]
    X, y, X_test, y_test = load(settings["dataset"])  # as bench/sbp_one_vs_one.py
    if dtype is not None:
        X, X_test = X.astype(dtype), X_test.astype(dtype)
    clocks, original = [], _instrumentation.PhaseClock.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        clocks.append(self)

    _instrumentation.PhaseClock.__init__ = record
    try:
        model = SBPClassifier(
            nu=settings["nu"],
            gamma=settings["gamma"],
            batch_size=settings["batch"],
            max_iter=settings["epochs"],
            validation_fraction=0.0,
            random_state=0,
            backend="numpy",
            **EVERY_STEP,
        )
        started = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - started
    finally:
        _instrumentation.PhaseClock.__init__ = original
    phases = {phase: sum(clock.seconds[phase] for clock in clocks) for phase in PHASES}
    row = {
        "dataset": settings["dataset"],
        "dtype": str(X.dtype),
        "n": X.shape[0],
        "pairs": model.dual_coef_.shape[0],
        "epochs": settings["epochs"],
        "batch": settings["batch"],
        "nu": settings["nu"],
        "fit_seconds": seconds,
        **{f"{phase}_s": value for phase, value in phases.items()},
        "other_s": seconds - sum(phases.values()),
        "pair_steps": model.t_,
        "test_error": float((model.predict(X_test) != y_test).mean()),
    }
    print(row, flush=True)
    return row


def one_vs_one_table(rows):
    columns = [
        ("version", "label", "s"),
        ("data", "dataset", "s"),
        ("dtype", "dtype", "s"),
        ("pairs", "pairs", "d"),
        ("epochs", "epochs", "d"),
        ("pair steps", "pair_steps", "d"),
        ("fit (s)", "fit_seconds", ".2f"),
        ("level", "level_s", ".2f"),
        ("draw", "draw_s", ".2f"),
        ("rows", "rows_s", ".2f"),
        ("update", "update_s", ".2f"),
        ("other", "other_s", ".2f"),
        ("test error", "test_error", ".2%"),
    ]
    return [
        "",
        "## One-vs-one SBP, by phase (seconds over the whole fit)",
        "",
        *markdown_table(columns, rows),
        "",
        "Other: checkpoints (the averaged model's levels) and setup. Before: the pairs trained one after "
        "another; after: every pair stepping together (gpusvm/solvers/sbp/pairs/_numpy.py); sums in the cache: a "
        "step's drawn rows summed where they lie in the row cache (KernelRowCache.combine).",
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="e.g. before / after")
    parser.add_argument(
        "--datasets", nargs="+", default=["magic", "adult", "mnist10k", "letter"], choices=sorted(SETTINGS)
    )
    parser.add_argument(
        "--evals-per-row",
        type=float,
        default=0.1,
        help="kernel evaluations per (problem, row pair): 0.1 is a tenth of an epoch at any batch",
    )
    parser.add_argument("--quick", action="store_true", help="3,000 rows")
    parser.add_argument(
        "--one-vs-one",
        nargs="?",
        const="letter",
        choices=sorted(ONE_VS_ONE),
        help="time a one-vs-one fit (on letter when no data set is named) instead",
    )
    parser.add_argument("--float32", action="store_true", help="on float32 copies of the data")
    args = parser.parse_args()
    stem = "sbp_steps"
    previous = RESULTS / f"{result_stem(stem, ['numpy'], args.quick)}.json"
    recorded = json.loads(previous.read_text()) if previous.exists() else {}
    rows, pair_rows = recorded.get("results", []), recorded.get("one_vs_one", [])
    label = {"label": args.label, "gpusvm": str(Path(gpusvm.__file__).parent)}
    dtype = np.float32 if args.float32 else None
    if args.one_vs_one:  # keep the other labels' runs
        pair_rows = [r for r in pair_rows if (r["label"], r["dataset"]) != (args.label, args.one_vs_one)]
        pair_rows.append({**label, **run_one_vs_one(args.one_vs_one, dtype)})
    else:
        rows = [r for r in rows if r["label"] != args.label]
        for name in args.datasets:
            X, y, _, _ = load(DATA.get(name, name), train_rows=3_000 if args.quick else None)
            X = X if dtype is None else X.astype(dtype)
            for batch in (1, 64):
                rows.append({**label, **run(name, X, y, batch, args.evals_per_row)})
    columns = [
        ("version", "label", "s"),
        ("data", "dataset", "s"),
        ("dtype", "dtype", "s"),
        ("n", "n", "d"),
        ("batch", "batch", "d"),
        ("problems", "problems", "d"),
        ("steps", "steps", "d"),
        ("step (us)", "step_us", ".0f"),
        ("level", "level_us", ".0f"),
        ("draw", "draw_us", ".0f"),
        ("rows", "rows_us", ".0f"),
        ("update", "update_us", ".0f"),
        ("passes of n per step", "passes_per_step", ".1f"),
        ("rows computed", "rows_computed", "d"),
    ]
    table = [
        "## SBP step time on the CPU, by phase (microseconds per step, the first tenth of an epoch)",
        "",
        *markdown_table(columns, rows),
        "",
        "A pass: `c = a + b` over n float64 values (one_pass_us in the JSON). The first steps pay for "
        "computing kernel rows that later steps read from the cache.",
    ]
    if pair_rows:
        table += one_vs_one_table(pair_rows)
    payload = {
        "parameters": {
            "settings": SETTINGS,
            "evals_per_row": args.evals_per_row,
            "quick": args.quick,
            "one_vs_one": ONE_VS_ONE,
        },
        "results": rows,
        "one_vs_one": pair_rows,
    }
    paths = write_results(stem, ["numpy"], payload, table)
    print("\n".join(table))
    print("wrote", *paths)


if __name__ == "__main__":
    main()
