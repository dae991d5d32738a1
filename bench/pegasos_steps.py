"""PegasosSVC's progress per step, by batch size: the half of the batch-size choice that
does not depend on the machine.

Pegasos' step size ``1/(lam t)`` counts steps, so what a batch size buys is progress per
step, and what it costs is the time of a step. The first half is a property of the
algorithm and the random stream, the same on every backend (the CuPy path draws the
same batches and computes the same model to rounding); only the second half needs the
machine, and ``bench/roofline.py`` measures it (seconds an epoch, at the same batch
sizes). So the time to a gap at batch ``b`` on any machine is this script's steps to
that gap times the roofline's seconds a step, and the best batch size there is the one
that makes that product smallest.

For each data set and batch size, one fit (``tol=None``, C = 1, ``random_state=0``, the
other settings PegasosSVC's defaults) runs until a cap of steps or of rows visited (the
caps keep a CPU run to about an hour); its ``objective_curve_`` holds the exact primal
objective of the returned (averaged) weights after each epoch, which is the objective a
fit stopped there would have (the average's weights do not depend on the number of
epochs asked for). The gap is relative to ``linear_objective.py``'s optimum (LIBLINEAR
run to convergence, cached in ``results/optima/linear.json``). Reported: the steps to
a 1% and a 0.1% gap (the first epoch end at or under it: to within one epoch's steps),
and the gap after 2^14, 2^16 and 2^18 steps (at the first epoch end at or past them).
Data: Adult and the 1M-row sparse synthetic problem of ``linear_objective.py``.
``--update`` runs only the data sets and batch sizes given and keeps the recorded
result's other rows (each row keeps the caps it ran under).

    python -m bench.pegasos_steps [--datasets adult synthetic] [--batch-sizes 32 64 256 1024 2048]
                                  [--backends numpy] [--update] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from bench.common import (
    GAPS,
    LINEAR_C,
    RESULTS,
    TimeLimit,
    cached_reference,
    markdown_table,
    result_stem,
    timed_fit,
    write_results,
)
from bench.datasets import linear_svm_rows, load

from gpusvm import PegasosSVC
from gpusvm.solvers.pegasos import steps_per_epoch

# 32, 256, 1,024 and 2,048 are batch sizes the roofline times on a GPU (ci/gpu.sh graphs); 64 is the default
BATCH_SIZES = (32, 64, 256, 1024, 2048)
MAX_STEPS = {"adult": 2**17, "synthetic": 2**20}
MAX_ROWS_VISITED = {"adult": 2**27, "synthetic": 5 * 2**27}  # 4,122 and 671 epochs
STEP_MARKS = (2**14, 2**16, 2**18)


def run_steps(X, y, batch_size, max_steps, max_rows, backend):
    """One fit to ``min(max_steps, max_rows / batch_size)`` steps (whole epochs, at least
    one); returns the steps and the objective at each epoch end, and the fit seconds."""
    per_epoch = steps_per_epoch(X.shape[0], batch_size)
    epochs = max(1, math.ceil(min(max_steps, max_rows // batch_size) / per_epoch))
    model = PegasosSVC(C=LINEAR_C, batch_size=batch_size, max_iter=epochs, tol=None, random_state=0, backend=backend)
    seconds = timed_fit(model, X, y, backend)
    return per_epoch * np.arange(1, epochs + 1), np.asarray(model.objective_curve_), seconds


def first_at_or_past(steps, values, mark):
    """``values`` at the first epoch end whose step count is at least ``mark`` (None: none)."""
    index = int(np.searchsorted(steps, mark))
    return float(values[index]) if index < len(steps) else None


def thinned(steps, gaps, per_doubling=8):
    """The curve at about ``per_doubling`` points per doubling of steps (and its last point)."""
    keep = np.unique(
        np.concatenate(
            [np.searchsorted(steps, 2 ** (np.arange(0, 64 * per_doubling) / per_doubling)), [len(steps) - 1]]
        )
    )
    keep = keep[keep < len(steps)]
    return [{"steps": int(steps[i]), "gap": float(gaps[i])} for i in keep]


def summary_row(dataset, batch_size, n, steps, gaps, seconds, caps):
    """A table row: steps to each gap, the gap at each mark, the smallest gap and where,
    with the caps (``(max steps, max rows visited)``) the fit ran under."""
    row = {
        "dataset": dataset,
        "batch_size": batch_size,
        "steps_per_epoch": steps_per_epoch(n, batch_size),
        "steps_run": int(steps[-1]),
        "rows_visited": int(steps[-1]) * batch_size,
        "seconds": seconds,
        "max_steps": caps[0],
        "max_rows_visited": caps[1],
    }
    for gap in GAPS:
        reached = np.flatnonzero(gaps <= gap)
        row[f"steps_to_{gap}"] = int(steps[reached[0]]) if reached.size else None
    for mark in STEP_MARKS:
        row[f"gap_at_{mark}"] = first_at_or_past(steps, gaps, mark)
    best = int(np.argmin(gaps))
    row.update(best_gap=float(gaps[best]), best_gap_steps=int(steps[best]))
    return row


def recorded_runs(backend):
    """The rows and curves of this machine's recorded result, keyed by (data set, batch
    size), for ``--update`` ({} and {} where there is none)."""
    path = RESULTS / f"{result_stem('pegasos_steps', [backend])}.json"
    if not path.exists():
        return {}, {}
    recorded = json.loads(path.read_text())
    return (
        {(r["dataset"], r["batch_size"]): r for r in recorded["results"]},
        {(c["dataset"], c["batch_size"]): c["points"] for c in recorded["curves"]},
    )


def plot(curves, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({dataset for dataset, _ in curves})
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 3.8), squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for (name, batch_size), points in curves.items():
            if name == dataset:
                ax.plot(
                    [p["steps"] for p in points], [max(p["gap"], 1e-7) for p in points], label=f"batch {batch_size}"
                )
        ax.axhline(GAPS[0], color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("steps")
        ax.set_ylabel("objective / optimum - 1")
        ax.set_title(f"PegasosSVC on {dataset}: gap against steps", fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["adult", "synthetic"], choices=["adult", "synthetic"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=list(BATCH_SIZES))
    parser.add_argument(
        "--backends",
        nargs="+",
        default=["numpy"],
        choices=["numpy", "cupy"],
        help="one backend is enough: the steps do not depend on it",
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="synthetic training rows")
    parser.add_argument(
        "--update",
        action="store_true",
        help="run only the data sets and batch sizes given, keeping the recorded result's other rows",
    )
    parser.add_argument("--quick", action="store_true", help="3,000 Adult rows, 20,000 synthetic, 2,048 steps")
    args = parser.parse_args()
    backend = args.backends[0]
    caps = {dataset: 2**11 if args.quick else MAX_STEPS[dataset] for dataset in args.datasets}
    rows, curves = recorded_runs(backend) if args.update and not args.quick else ({}, {})
    with TimeLimit() as limit:
        for dataset in args.datasets:
            X, y, _, _ = load(dataset, **linear_svm_rows(dataset, args.rows, args.quick))
            key = f"{dataset} n={X.shape[0]} d={X.shape[1]} nnz={X.nnz} C={LINEAR_C}"
            optimum = cached_reference(key, X, y, 512, args.quick)["objective"]
            for batch_size in args.batch_sizes:
                run_caps = caps[dataset], MAX_ROWS_VISITED[dataset]
                steps, objectives, seconds = run_steps(X, y, batch_size, *run_caps, backend)
                gaps = objectives / optimum - 1.0
                rows[dataset, batch_size] = summary_row(dataset, batch_size, X.shape[0], steps, gaps, seconds, run_caps)
                curves[dataset, batch_size] = thinned(steps, gaps)
                print(rows[dataset, batch_size], flush=True)
    rows = [rows[key] for key in sorted(rows)]
    columns = [
        ("data", "dataset", "s"),
        ("batch", "batch_size", ","),
        ("steps an epoch", "steps_per_epoch", ","),
        ("steps to 1%", f"steps_to_{GAPS[0]}", ","),
        ("steps to 0.1%", f"steps_to_{GAPS[1]}", ","),
        *[(f"gap at {mark:,} steps", f"gap_at_{mark}", ".3%") for mark in STEP_MARKS],
        ("smallest gap", "best_gap", ".3%"),
        ("at steps", "best_gap_steps", ","),
        ("steps run", "steps_run", ","),
        ("fit s", "seconds", ".1f"),
    ]
    table = [
        "## PegasosSVC: steps to reach the primal objective within 1% and 0.1% of the optimum, by batch size",
        "",
        *markdown_table(columns, rows),
        "",
        f"C = {LINEAR_C}, tol=None, random_state=0, PegasosSVC's other defaults (averaged, projected, with an "
        "intercept); one fit per row, to the cap of steps or of rows visited that the JSON keeps with it. Steps "
        "to a gap: the first epoch end at or under it (so to within one epoch's steps); empty: not reached "
        "within the steps run. The steps are the same on every backend; the time a step takes at each batch "
        "size is bench/roofline.py's.",
    ]
    payload = {
        "dataset": {"names": sorted({row["dataset"] for row in rows}), "synthetic_rows": args.rows},
        "parameters": {"C": LINEAR_C, "quick": args.quick, "random_state": 0},
        "results": rows,
        "curves": [{"dataset": d, "batch_size": b, "points": curves[d, b]} for d, b in sorted(curves)],
        "stopped_at_time_limit": limit.reached,
    }
    paths = write_results("pegasos_steps", [backend], payload, table)
    if curves:
        plot(curves, paths[0].with_suffix(".png"))
    print("\n".join(table))
    print("wrote", *paths)


if __name__ == "__main__":
    main()
