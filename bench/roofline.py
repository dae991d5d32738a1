"""Linear and online solvers against the memory roofline, by batch size.

For each batch size from 32 to 65,536, the steps of one pass over the data are timed
(the solver's stepper alone: no validation, no objective pass), and reported as rows and
nonzeros per second, and as the fraction of the machine's measured copy bandwidth that
the traffic a step cannot avoid would reach at that speed:

* PegasosSVC (at its defaults: averaged, projected, with an intercept) on the sparse
  synthetic problem of ``linear_objective.py`` (``--rows`` rows, default 1,000,000;
  100,000 columns, 20 nonzeros a row, float64);
* FTRLClassifier (its defaults) on the hashed click stream of ``online_throughput.py``
  (``--stream-rows`` rows, default ``--rows``; 20 fields hashed into 2**20 columns, float32).

The floor a nonzero costs: its value and column index read once, and the weights it
touches read and written once: Pegasos ``v`` (X's dtype) and the average's ``P``
(float64); FTRL ``z`` and ``n`` (float64).  So 44 bytes a nonzero for float64 Pegasos,
40 for float32 FTRL.  The copy bandwidth is that of copying a 512 MiB array (read plus
write), best of 5.  On the GPU each batch size runs with direct launches, where CuPy
can capture with CUDA graphs (``GPUSVM_CUDA_GRAPHS``; :mod:`gpusvm._device.step_blocks`), and
for PegasosSVC at the batch sizes its fused kernel takes (up to 1,024 rows), with fused
steps: a block of steps in one launch (``GPUSVM_FUSED_STEPS``).

    python -m bench.roofline [--backends numpy cupy] [--rows 1000000] [--stream-rows 10000000] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import os

import numpy as np

from bench.common import TimeLimit, copy_bandwidth, report, timed_run
from bench.datasets import HashedStream, make_linear_rule

from gpusvm._backend import get_namespace
from gpusvm._device.step_blocks import FUSED_ENV_VARIABLE, GRAPH_ENV_VARIABLE
from gpusvm._validation import to_backend
from gpusvm.solvers.online_logistic import OnlineProblem, OnlineRule, OnlineState, make_steps as online_steps
from gpusvm.solvers.pegasos import (
    PegasosProblem,
    PegasosState,
    fits_fused_steps,
    make_steps as pegasos_steps,
    steps_per_epoch,
)

BATCH_SIZES = (32, 256, 2048, 16384, 65536)
FTRL = OnlineRule("ftrl", l1=1.0, l2=1.0, alpha=0.1, beta=1.0)  # FTRLClassifier's defaults
INDEX_BYTES = 4


def pegasos_pass(X, y, batch_size, backend):
    """Seconds of one epoch of PegasosSVC's steps at its defaults, and the nonzeros read."""
    xp = get_namespace(backend)
    n = X.shape[0]
    problem = PegasosProblem(
        X=to_backend(X, backend),
        targets=xp.asarray(np.where(y > 0, 1.0, -1.0)[:, None]),
        sample_weight=xp.ones(n),
        lam=1.0 / n,
        batch_size=batch_size,
        fit_intercept=True,
        projection=True,
        average_start=1,
        weight_by_step=True,
        seed=0,
    )
    stepper = pegasos_steps(problem, xp, state=PegasosState.zeros(1, X.shape[1] + 1, X.dtype, xp))
    n_steps = steps_per_epoch(n, batch_size)
    stepper.run_steps(1)  # compiles and warms up; not timed
    seconds = timed_run(lambda: stepper.run_steps(n_steps), backend)
    return seconds, n_steps * batch_size, n_steps * batch_size * X.nnz / n


def ftrl_pass(X, y, batch_size, backend):
    """Seconds of one pass of FTRLClassifier's batches (its defaults), and the nonzeros read."""
    xp = get_namespace(backend)
    n = X.shape[0]
    problem = OnlineProblem(
        X=to_backend(X, backend),
        labels=xp.asarray(y, dtype=np.int32),
        n_classes=2,
        rule=FTRL,
        batch_size=batch_size,
        fit_intercept=True,
    )
    stepper = online_steps(problem, xp, state=OnlineState.zeros(1, X.shape[1], xp))
    stepper.start_epoch(None)
    stepper.run_batches(range(0, min(batch_size, n), batch_size))  # compiles and warms up; not timed
    seconds = timed_run(lambda: stepper.run_batches(range(0, n, batch_size)), backend)
    return seconds, n, X.nnz


def floor_bytes(solver, dtype):
    """Bytes a nonzero must move (see the module docstring)."""
    value = np.dtype(dtype).itemsize
    if solver == "PegasosSVC":
        return value + INDEX_BYTES + 2 * value + 2 * 8
    return value + INDEX_BYTES + 2 * 2 * 8


def launch_modes(backend):
    """How the GPU's steps are issued: direct launches, CUDA graphs where CuPy can capture,
    and fused steps (direct launches of the fused kernel)."""
    if backend != "cupy":
        return ["-"]
    import cupy

    capture = hasattr(getattr(cupy.cuda, "Stream", None), "begin_capture")
    return ["direct", "graph", "fused"] if capture else ["direct", "fused"]


def runs_in_mode(solver, batch_size, mode):
    """Fused steps exist for PegasosSVC (one class here) at the batch sizes its kernel takes."""
    return mode != "fused" or (solver == "PegasosSVC" and fits_fused_steps(batch_size, 1))


def set_launch_mode(mode):
    """Set the switches a user sets for ``mode`` (``GPUSVM_CUDA_GRAPHS``, ``GPUSVM_FUSED_STEPS``);
    the steppers read them when they are made."""
    os.environ[GRAPH_ENV_VARIABLE] = "1" if mode == "graph" else "0"
    os.environ[FUSED_ENV_VARIABLE] = "1" if mode == "fused" else "0"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the sparse synthetic problem")
    parser.add_argument("--stream-rows", type=int, help="rows of the hashed stream (default: --rows)")
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=list(BATCH_SIZES))
    parser.add_argument("--quick", action="store_true", help="20,000 rows, two batch sizes (a smoke run)")
    args = parser.parse_args()
    rows = 20_000 if args.quick else args.rows
    stream_rows = rows if args.quick or args.stream_rows is None else args.stream_rows
    batch_sizes = [32, 2048] if args.quick else args.batch_sizes
    X_sparse, y_sparse = make_linear_rule("linear", rows, 10_000 if args.quick else 100_000, seed=1)
    stream = HashedStream(stream_rows, chunk_rows=stream_rows)
    X_hashed, y_hashed = stream.chunk(0)
    data = {
        "PegasosSVC": ("sparse synthetic", X_sparse, y_sparse, pegasos_pass),
        "FTRLClassifier": ("hashed stream", X_hashed, y_hashed, ftrl_pass),
    }
    results, bandwidths = [], {}
    with TimeLimit() as limit:
        for backend in args.backends:
            bandwidths[backend] = copy_bandwidth(backend)
            print(f"{backend}: copy bandwidth {bandwidths[backend] / 1e9:.1f} GB/s", flush=True)
            for mode in launch_modes(backend):
                if mode != "-":
                    set_launch_mode(mode)
                for (solver, (name, X, y, one_pass)), batch_size in itertools.product(data.items(), batch_sizes):
                    if not runs_in_mode(solver, batch_size, mode):
                        continue
                    seconds, rows_done, nonzeros = one_pass(X, y, batch_size, backend)
                    traffic = nonzeros * floor_bytes(solver, X.dtype) / seconds
                    results.append(
                        {
                            "solver": solver,
                            "data": name,
                            "backend": backend,
                            "launches": mode,
                            "batch_size": batch_size,
                            "dtype": str(X.dtype),
                            "seconds": round(seconds, 4),
                            "rows_per_s": round(rows_done / seconds),
                            "nonzeros_per_s": round(nonzeros / seconds),
                            "floor_GB_per_s": round(traffic / 1e9, 3),
                            "of_copy_bandwidth": round(traffic / bandwidths[backend], 5),
                        }
                    )
                    print(results[-1], flush=True)
    columns = [
        ("solver", "solver", ""),
        ("data", "data", ""),
        ("backend", "backend", ""),
        ("launches", "launches", ""),
        ("batch", "batch_size", ","),
        ("dtype", "dtype", ""),
        ("s", "seconds", ".3f"),
        ("rows/s", "rows_per_s", ",.0f"),
        ("nonzeros/s", "nonzeros_per_s", ",.0f"),
        ("floor traffic GB/s", "floor_GB_per_s", ".3f"),
        ("of copy bandwidth", "of_copy_bandwidth", ".2%"),
    ]
    copy_line = ", ".join(f"{b} {v / 1e9:.1f} GB/s" for b, v in bandwidths.items())
    report(
        "roofline",
        args.backends,
        title=f"# Roofline: one pass at each batch size, {rows:,} sparse synthetic rows, {stream_rows:,} hashed "
        f"stream rows (copy bandwidth: {copy_line})",
        columns=columns,
        payload={
            "dataset": {
                "sparse synthetic": [rows, X_sparse.shape[1], int(X_sparse.nnz)],
                "hashed stream": [stream_rows, X_hashed.shape[1], int(X_hashed.nnz)],
            },
            "parameters": {
                "rows": rows,
                "stream_rows": stream_rows,
                "batch_sizes": batch_sizes,
                "quick": args.quick,
                "copy_bandwidth_bytes_per_s": bandwidths,
            },
            "results": results,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
