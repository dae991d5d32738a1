"""The SBP step against its floor: time a step takes, beside the least it could take.

For n training rows, one-vs-rest problems (1: a binary problem; 10; 26), dense or sparse
rows, and the kernel values from the whole kernel matrix kept in memory ("matrix": the
device's ``kernel_cache``, the host's row cache holding every row), computed from X at
each step ("rows"), or, on the device and when asked for, from a row cache of an eighth
of the rows ("cache": ``kernel_cache`` below the matrix's size; at least twice a step's
rows), the steps are timed after a warm-up (the solver's stepper alone:
``CupySBPSteps`` or ``NumpySBPSteps``), and printed beside two floors. Each row also
records where the stepper read its kernel values (``kernel_values_source``: 'matrix',
resident on the device; 'cache', a row cache, the host's always; 'products', computed
each step), which is what the budget asked for gave:

* **bandwidth**: the bytes a step cannot avoid over the card's peak memory bandwidth.
  Per problem and training row, the level's pass over the responses and labels (16
  bytes) and the update's read and write of the response, its sum, alpha and its sum,
  and the label (72 bytes); then the kernel values of the drawn rows, ``k B`` rows of
  ``n`` values in X's dtype from the matrix (or a cache that always hits), or, computed,
  one pass over X plus the ``k B`` rows of inner products written and read. The peak is
  ``--bandwidth`` (bytes a second), else the data sheet's figure for the device's name
  (:data:`bench.common.PEAK_BANDWIDTH`: H100 SXM 3.35e12, H200 4.8e12...), else (the host, or a card
  not in the table) the copy bandwidth measured here (which says so: ``bandwidth_source``).
* **graph node**: the step's kernel launches (counted from the stepper's own launch
  sequence, ``launches``) times the latency of one kernel node of a CUDA graph, taken as
  ``--node-us`` microseconds (2 by default). An assumption, not a measurement: a node of
  a replayed graph that waits on the one before it costs about 2 us from one kernel's end
  to the next one's start on recent cards; the step's launches depend each on the one
  before, so none of them overlap. None on the host. A host callback of the step (the
  row cache's look-up, the drawn rows' products) counts as one node, which it exceeds.

``x floor`` is the step's time over the larger floor. The measured latency of one launch
of a one-node graph is recorded too (``graph_launch_seconds``), to check the assumption.

Data: rows drawn from Gaussian blobs, one per class (dense: 64 float32 features;
sparse: 4,096 float32 columns, about 2% of them nonzero, built from NumPy arrays: see
:func:`bench.datasets.make_blobs`), rbf kernel with ``gamma = 1 / (n_features * var)``,
``batch_size=64``, ``nu=1e-2``, with the bias: SBPClassifier's defaults. ``--data``
picks dense rows, sparse rows or both (the default); a run of one kind writes
``sbp_step_dense`` or ``sbp_step_sparse`` results, beside the full run's.

    python -m bench.sbp_step [--backends numpy cupy] [--rows 10000 100000 1000000]
                             [--kernel-values matrix rows cache] [--data dense sparse]
                             [--bandwidth BYTES_PER_S] [--node-us 2] [--quick]
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from bench.common import (
    CACHE_FRACTION,
    STEP_BATCH_SIZE,
    TimeLimit,
    copy_bandwidth,
    gpu_facts,
    median,
    peak_bandwidth,
    report,
    sbp_step_problem,
    sbp_stepper,
    timed_run,
)
from bench.datasets import DENSE_FEATURES, SPARSE_COLUMNS, SPARSE_DENSITY, make_blobs

from gpusvm.solvers.sbp import run_step_block

GRAPH_NODE_US = 2.0  # assumed latency of one dependent kernel node of a replayed graph
RESPONSE_BYTES = 16 + 72  # per problem and training row: the level's pass, the update's
KERNEL_VALUES = ("matrix", "rows", "cache")
DATA = ("dense", "sparse")


def seconds_per_step(steps, backend, warm_up, timed, repeats=3):
    """Median over ``repeats`` of the mean seconds of ``timed`` steps, after ``warm_up``."""
    run_step_block(steps, 1, warm_up)
    t, times = warm_up + 1, []
    for _ in range(repeats):
        times.append(timed_run(lambda: run_step_block(steps, t, timed), backend) / timed)
        t += timed
    return median(times)


def floor_bytes(problem, kernel_values):
    """Bytes a step cannot avoid (see the module docstring)."""
    k, n, n_total = problem.n_problems, problem.n_train, problem.n_rows
    itemsize = np.dtype(problem.X.dtype).itemsize
    drawn = k * problem.batch_size
    if kernel_values != "rows":
        value_bytes = drawn * n_total * itemsize
    else:
        X = problem.X
        x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if hasattr(X, "indptr") else X.nbytes
        value_bytes = int(x_bytes) + 2 * drawn * n_total * itemsize
    return k * n * RESPONSE_BYTES + value_bytes


def step_bandwidth(backend, given):
    """Bytes a second for the bandwidth floor and where they come from: ``given``
    (``--bandwidth``), the table by the device's name, else the copy measured here."""
    if given is not None:
        return given, "--bandwidth"
    if backend == "cupy":
        name = (gpu_facts() or {}).get("name", "")
        if peak_bandwidth(name) is not None:
            return peak_bandwidth(name), f"peak of {name}"
    return copy_bandwidth(backend), f"measured copy on {backend}"


def launches_per_step(steps):
    """Kernel launches of one step of a device stepper (host callbacks count one each),
    counted from its launch sequence without running it; None on the host."""
    if not hasattr(steps, "_launch_steps"):
        return None
    launches = []
    steps._launch_steps(1, lambda kernel, grid, block, args: launches.append(kernel))
    return len(launches)


def graph_launch_seconds():
    """Seconds of one launch of a captured CUDA graph of one small kernel, or None."""
    import cupy

    if not hasattr(getattr(cupy.cuda, "Stream", None), "begin_capture"):
        return None
    from gpusvm._device.cuda_modules import get_cuda_kernel

    position = cupy.zeros(1, dtype=np.int64)
    advance = get_cuda_kernel("step_blocks.cu", "advance_position")
    advance((1,), (1,), (position, np.int64(1)))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        advance((1,), (1,), (position, np.int64(1)))
        graph = stream.end_capture()
    launches = 1000

    def launch_all():
        for _ in range(launches):
            graph.launch()

    return timed_run(launch_all, "cupy") / launches


def measure_step(X, labels, n_classes, kernel_values, backend, bandwidth, node_seconds, timed):
    """A result row: the step's time on ``X`` beside its floors; None (and a line saying
    so) where ``kernel_values`` cannot be had (:func:`bench.common.sbp_stepper`)."""
    n = X.shape[0]
    problem = sbp_step_problem(X, labels, n_classes, backend)
    steps = sbp_stepper(problem, backend, kernel_values)
    if steps is None:
        print(f"n={n} {n_classes} classes: no {kernel_values} on {backend}", flush=True)
        return None
    seconds = seconds_per_step(steps, backend, warm_up=max(3, timed // 10), timed=timed)
    bandwidth_floor = floor_bytes(problem, kernel_values) / bandwidth
    launches = launches_per_step(steps)
    node_floor = None if launches is None else launches * node_seconds
    return {
        "backend": backend,
        "rows": n,
        "classes": n_classes,
        "problems": problem.n_problems,
        "data": "sparse" if hasattr(X, "indptr") else "dense",
        "kernel_values": kernel_values,
        "kernel_values_source": steps.kernel_values_source,
        "rows_computed": int(steps.kernel_rows_computed),
        "step_ms": seconds * 1e3,
        "bandwidth_floor_ms": bandwidth_floor * 1e3,
        "launches": launches,
        "graph_node_floor_ms": None if node_floor is None else node_floor * 1e3,
        "times_floor": seconds / max(bandwidth_floor, node_floor or 0.0),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--rows", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--classes", nargs="+", type=int, default=[1, 10, 26])
    parser.add_argument("--kernel-values", nargs="+", default=["matrix", "rows"], choices=KERNEL_VALUES)
    parser.add_argument(
        "--data",
        nargs="+",
        default=list(DATA),
        choices=DATA,
        help="dense rows, sparse rows or both (sparse rows take seconds to build at 1e6)",
    )
    parser.add_argument("--steps", type=int, default=None, help="steps timed (default: 200 on cupy, 10 on numpy)")
    parser.add_argument(
        "--bandwidth",
        type=float,
        default=None,
        help="peak memory bandwidth in bytes a second (default: the card's from a table by its name, "
        "else the copy bandwidth measured here)",
    )
    parser.add_argument(
        "--node-us", type=float, default=GRAPH_NODE_US, help="assumed microseconds of one dependent graph node"
    )
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 1 and 10 classes (a smoke run)")
    args = parser.parse_args()
    rows = [2_000] if args.quick else args.rows
    class_counts = [1, 10] if args.quick else args.classes
    results, bandwidths, sources, latencies = [], {}, {}, {}
    with TimeLimit() as limit:
        for backend in args.backends:
            bandwidths[backend], sources[backend] = step_bandwidth(backend, args.bandwidth)
            latencies[backend] = graph_launch_seconds() if backend == "cupy" else None
            print(f"{backend}: bandwidth {bandwidths[backend] / 1e9:.1f} GB/s ({sources[backend]})", flush=True)
            kinds = [kind == "sparse" for kind in DATA if kind in args.data]
            for n, sparse, n_classes in itertools.product(rows, kinds, class_counts):
                X, labels = make_blobs(n, n_classes, sparse)
                for kernel_values in args.kernel_values:
                    row = measure_step(
                        X,
                        labels,
                        n_classes,
                        kernel_values,
                        backend,
                        bandwidths[backend],
                        args.node_us * 1e-6,
                        args.steps or (200 if backend == "cupy" else 10),
                    )
                    if row is not None:
                        results.append(row)
                        print(row, flush=True)
    columns = [
        ("backend", "backend", ""),
        ("rows", "rows", ","),
        ("classes", "classes", ""),
        ("data", "data", ""),
        ("kernel values", "kernel_values", ""),
        ("source", "kernel_values_source", ""),
        ("rows computed", "rows_computed", ","),
        ("step ms", "step_ms", ".3f"),
        ("bandwidth floor ms", "bandwidth_floor_ms", ".4f"),
        ("launches", "launches", ""),
        ("graph node floor ms", "graph_node_floor_ms", ".4f"),
        ("x floor", "times_floor", ".1f"),
    ]
    bandwidth_line = ", ".join(f"{b} {v / 1e9:.1f} GB/s ({sources[b]})" for b, v in bandwidths.items())
    extra = [values for values in args.kernel_values if values not in ("matrix", "rows")]
    extra += [kind for kind in DATA if set(args.data) == {kind}]  # one kind of rows: not the full run's file
    report(
        "_".join(["sbp_step", *extra]),
        args.backends,
        title=f"# The SBP step against its floors (batch {STEP_BATCH_SIZE}, rbf, with the bias; bandwidth: "
        f"{bandwidth_line}; {args.node_us:g} us a graph node, assumed)",
        columns=columns,
        payload={
            "dataset": {
                "dense": ["Gaussian blobs", DENSE_FEATURES, "float32"],
                "sparse": ["Gaussian blobs", SPARSE_COLUMNS, SPARSE_DENSITY, "float32"],
            },
            "parameters": {
                "rows": rows,
                "classes": class_counts,
                "data": args.data,
                "batch_size": STEP_BATCH_SIZE,
                "kernel_values": args.kernel_values,
                "cache_fraction": 1 / CACHE_FRACTION,
                "quick": args.quick,
                "bandwidth_bytes_per_s": bandwidths,
                "bandwidth_source": sources,
                "graph_node_seconds_assumed": args.node_us * 1e-6,
                "graph_launch_seconds": latencies,
            },
            "results": results,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
