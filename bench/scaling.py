"""How cost grows: fit time and peak memory of each solver against n and against d.

Synthetic data from a known linear rule with label noise, one epoch per fit (so the
work per example is fixed and the slope shows how a step's cost grows):

* linear solvers (PegasosSVC, FTRLClassifier) on sparse CSR rows with 20 nonzeros, n from
  1e3 to 1e6 at d = 1,000, and d from 1e2 to 1e6 at n = 1e5;
* kernel solvers (KernelPegasosSVC, SBPClassifier, batch 64, rbf) on dense rows, n from
  1e3 to 2e4 at d = 20, and d from 10 to 1,000 at n = 5,000.

Time is the median of ``--repeats`` fits (CPU clock around the fit; CUDA events on the
GPU). Peak memory is a separate fit: ``tracemalloc``'s peak on the CPU (NumPy reports its
buffers to it), the CuPy memory pool's size after a fit that started from an empty pool
on the GPU. The slope is a least-squares fit of log time on log size over the points at
or above the middle of the range. On a GPU the plot also draws the memory-bandwidth
floor of a linear epoch: reading the CSR arrays once (12 bytes per nonzero) at the
device's peak bandwidth.

    python -m bench.scaling [--backends numpy cupy] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import tracemalloc

import numpy as np
import scipy.sparse as sp

from bench.common import markdown_table, median, result_stem, timed_fit, write_results
from bench.datasets import NNZ_PER_ROW, make_linear_rule

from gpusvm import FTRLClassifier, KernelPegasosSVC, PegasosSVC, SBPClassifier

SOLVERS = {
    "PegasosSVC": ("linear", lambda backend: PegasosSVC(max_iter=1, tol=None, random_state=0, backend=backend)),
    "FTRLClassifier": (  # one batch size at every n ('auto' would shrink it below 16,384 rows)
        "linear",
        lambda backend: FTRLClassifier(max_iter=1, batch_size=1024, random_state=0, backend=backend),
    ),
    "KernelPegasosSVC": (
        "kernel",
        lambda backend: KernelPegasosSVC(
            max_iter=1, batch_size=64, gamma=0.05, average=False, random_state=0, backend=backend
        ),
    ),
    "SBPClassifier": (
        "kernel",
        lambda backend: SBPClassifier(
            max_iter=1, batch_size=64, gamma=0.05, validation_fraction=0.0, random_state=0, backend=backend
        ),
    ),
}
SWEEPS = {  # family: (n values at fixed d, fixed d, d values at fixed n, fixed n)
    "linear": ([1_000, 10_000, 100_000, 1_000_000], 1_000, [100, 1_000, 10_000, 100_000, 1_000_000], 100_000),
    "kernel": ([1_000, 2_000, 5_000, 10_000, 20_000], 20, [10, 30, 100, 300, 1_000], 5_000),
}
QUICK_SWEEPS = {
    "linear": ([1_000, 4_000, 16_000], 1_000, [100, 1_000, 10_000], 4_000),
    "kernel": ([500, 1_000, 2_000], 20, [10, 30, 100], 1_000),
}


def peak_bytes(make_model, X, y, backend):
    """Peak memory of one fit: tracemalloc on the CPU, the CuPy pool on the GPU."""
    if backend == "cupy":
        import cupy

        pool = cupy.get_default_memory_pool()
        pool.free_all_blocks()
        make_model(backend).fit(X, y)
        cupy.cuda.Device().synchronize()
        return pool.total_bytes()
    tracemalloc.start()
    try:
        make_model(backend).fit(X, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bandwidth_bytes_per_second():
    """The device's peak memory bandwidth: 2 transfers per clock on the bus width."""
    import cupy

    properties = cupy.cuda.runtime.getDeviceProperties(0)
    return 2.0 * properties["memoryClockRate"] * 1e3 * properties["memoryBusWidth"] / 8


def slope(points, axis):
    """Least-squares slope of log seconds on log ``axis`` over the upper half of the sizes."""
    sizes = np.array([p[axis] for p in points], dtype=float)
    seconds = np.array([p["seconds"] for p in points])
    upper = sizes >= np.median(sizes)
    if upper.sum() < 2:
        return None
    return float(np.polyfit(np.log(sizes[upper]), np.log(seconds[upper]), 1)[0])


def measure(solver, backend, family, sizes, fixed, axis, repeats):
    points = []
    for size in sizes:
        n, d = (size, fixed) if axis == "n" else (fixed, size)
        X, y = make_linear_rule(family, n, d)
        make_model = SOLVERS[solver][1]
        timed_fit(make_model(backend), X[: min(n, 500)], y[: min(n, 500)], backend)  # warm-up (kernels compile)
        runs = [timed_fit(make_model(backend), X, y, backend) for _ in range(repeats)]
        point = {
            "n": n,
            "d": d,
            "nnz": int(X.nnz) if sp.issparse(X) else n * d,
            "seconds": median(runs),
            "repeats": runs,
            "peak_bytes": int(peak_bytes(make_model, X, y, backend)),
        }
        points.append(point)
        print(
            f"  {solver} {backend} n={n} d={d}: {point['seconds']:.3f} s, {point['peak_bytes'] / 2**20:.1f} MiB",
            flush=True,
        )
    return points


def plot(series, path, floor):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for column, axis in enumerate(("n", "d")):
        for entry in (e for e in series if e["axis"] == axis):
            label = (
                f"{entry['solver']} ({entry['backend']}), slope {entry['slope']:.2f}"
                if entry["slope"]
                else (f"{entry['solver']} ({entry['backend']})")
            )
            sizes = [p[axis] for p in entry["points"]]
            (line,) = axes[0, column].plot(
                sizes, [p["seconds"] for p in entry["points"]], marker="o", ms=3, label=label
            )
            axes[1, column].plot(
                sizes,
                [p["peak_bytes"] / 2**20 for p in entry["points"]],
                marker="o",
                ms=3,
                color=line.get_color(),
                label=f"{entry['solver']} ({entry['backend']})",
            )
            if floor and entry["family"] == "linear" and entry["backend"] == "cupy":
                axes[0, column].plot(
                    sizes,
                    [12 * p["nnz"] / floor for p in entry["points"]],
                    ls=":",
                    color=line.get_color(),
                    label=f"{entry['solver']}: bandwidth floor",
                )
        for row, unit in enumerate(("fit seconds (one epoch)", "peak memory (MiB)")):
            ax = axes[row, column]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(f"{axis} (the other fixed; see the table)")
            ax.set_ylabel(unit)
            ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=list(SOLVERS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (a smoke run)")
    args = parser.parse_args()
    sweeps = QUICK_SWEEPS if args.quick else SWEEPS
    repeats = 1 if args.quick else args.repeats
    series = []
    for solver in args.solvers:
        family = SOLVERS[solver][0]
        n_values, fixed_d, d_values, fixed_n = sweeps[family]
        for backend in args.backends:
            for axis, sizes, fixed in (("n", n_values, fixed_d), ("d", d_values, fixed_n)):
                points = measure(solver, backend, family, sizes, fixed, axis, repeats)
                series.append(
                    {
                        "solver": solver,
                        "family": family,
                        "backend": backend,
                        "axis": axis,
                        "fixed": fixed,
                        "points": points,
                        "slope": slope(points, axis),
                    }
                )
    floor = bandwidth_bytes_per_second() if "cupy" in args.backends else None
    rows = [
        {
            "solver": e["solver"],
            "backend": e["backend"],
            "axis": e["axis"],
            "range": f"{e['points'][0][e['axis']]:,} to {e['points'][-1][e['axis']]:,}",
            "fixed": f"{'d' if e['axis'] == 'n' else 'n'} = {e['fixed']:,}",
            "slope": e["slope"],
            "largest_seconds": e["points"][-1]["seconds"],
            "largest_mib": e["points"][-1]["peak_bytes"] / 2**20,
        }
        for e in series
    ]
    columns = [
        ("solver", "solver", "s"),
        ("backend", "backend", "s"),
        ("grows with", "axis", "s"),
        ("range", "range", "s"),
        ("held", "fixed", "s"),
        ("time slope (log-log)", "slope", ".2f"),
        ("largest: seconds", "largest_seconds", ".3f"),
        ("largest: peak MiB", "largest_mib", ".1f"),
    ]
    stem = "scaling"
    png = f"{result_stem(stem, args.backends, args.quick)}.png"
    table = [
        "## How fit time and peak memory grow (one epoch; linear: CSR, 20 nonzeros per row; "
        "kernel: dense, rbf, batch 64)",
        "",
        *markdown_table(columns, rows),
        "",
        "Slope 1: cost linear in the size; 2: quadratic. Every point (time, each repeat, peak memory) "
        f"is in the JSON. Plot: {png}",
    ]
    payload = {
        "dataset": {"name": "synthetic", "nnz_per_row": NNZ_PER_ROW, "sweeps": sweeps},
        "parameters": {"repeats": repeats, "quick": args.quick, "epochs": 1, "bandwidth_bytes_per_second": floor},
        "results": rows,
        "series": series,
    }
    paths = write_results(stem, args.backends, payload, table)
    plot(series, paths[0].with_suffix(".png"), floor)
    print("\n".join(table))
    print("wrote", *paths, paths[0].with_suffix(".png"))


if __name__ == "__main__":
    main()
