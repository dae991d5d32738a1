"""Does streaming from host memory keep the solver busy? Streamed against in-memory
training speed, beside the host-to-device copy bandwidth.

For each backend and solver, one epoch over the same rows, timed end to end:

* **in memory**: ``fit`` on X already in the backend's memory (a device CSR matrix on
  cupy), ``max_iter=1`` (FTRL with ``shuffle=False``; Pegasos with ``tol=None``, which
  still computes the epoch's objective, one pass over X);
* **streamed**: ``fit_chunks`` on a list of host CSR chunks of ``--chunk-rows`` rows
  (already parsed, so that reading a file does not bound the speed). On cupy each chunk
  is copied from pinned host buffers on a copy stream while the steps of the previous
  chunk run (``gpusvm._device.staging``).

Data: FTRLClassifier (defaults, batch 1,024) on the hashed click stream (``--rows`` rows,
20 fields hashed into 2**20 columns, float32); PegasosSVC (defaults, batch 64, and
``--pegasos-batch`` as well) on the sparse synthetic problem of ``linear_objective.py``
(``--rows`` rows, 100,000 columns, 20 nonzeros a row, float64). Reported: rows per
second of both, their ratio (the issue's target: streamed at 80% of in memory or more
where the copies are not the bottleneck), and the time the copies alone would take at
the measured pinned host-to-device bandwidth (the copy floor).

    python -m bench.streamed_throughput [--backends numpy cupy] [--rows 4000000] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.common import TimeLimit, report, timed_run
from bench.datasets import HashedStream, make_linear_rule

from gpusvm import FTRLClassifier, PegasosSVC
from gpusvm._validation import to_backend


def host_to_device_bandwidth():
    """Bytes a second of copying 256 MiB from pinned host memory to the device, best of 5."""
    import cupy
    import cupyx

    host = cupyx.empty_pinned(2**28, dtype=np.uint8)
    host[...] = 1
    device = cupy.empty(host.shape, dtype=np.uint8)
    best = min(timed_run(lambda: device.set(host), "cupy") for _ in range(5))
    return host.nbytes / best


def chunks_of(X, y, rows):
    return [(X[i : i + rows], y[i : i + rows]) for i in range(0, X.shape[0], rows)]


def copied_bytes(X, n_classes_columns=1):
    """Bytes a streamed epoch copies to the device: X as CSR, and a target and a weight
    (or a label) per row."""
    return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + X.shape[0] * 2 * X.dtype.itemsize * n_classes_columns


def models(backend, pegasos_batches):
    yield "FTRLClassifier", 1024, lambda: FTRLClassifier(max_iter=1, shuffle=False, random_state=0, backend=backend)
    for batch in pegasos_batches:
        yield (
            "PegasosSVC",
            batch,
            lambda batch=batch: PegasosSVC(max_iter=1, tol=None, batch_size=batch, random_state=0, backend=backend),
        )


def measure(solver, batch, make, data, chunk_rows, backend, bandwidth):
    """A result row: one epoch of ``make()`` on ``data`` (name, X, y) in memory and streamed
    in chunks of ``chunk_rows``, each after an untimed warm-up."""
    name, X, y = data
    rows = X.shape[0]
    chunks, classes = chunks_of(X, y, chunk_rows), np.unique(y)
    X_resident = to_backend(X, backend)  # freed on return, before the next solver's
    make().fit(X_resident[:chunk_rows], y[:chunk_rows])  # compiles and warms up; not timed
    make().fit_chunks(chunks[:1], classes=classes)
    in_memory = timed_run(lambda: make().fit(X_resident, y), backend)
    streamed = timed_run(lambda: make().fit_chunks(chunks, classes=classes), backend)
    copy_floor = copied_bytes(X) / bandwidth if bandwidth else None
    return {
        "solver": solver,
        "data": name,
        "backend": backend,
        "batch_size": batch,
        "rows": rows,
        "chunk_rows": chunk_rows,
        "in_memory_s": round(in_memory, 4),
        "streamed_s": round(streamed, 4),
        "in_memory_rows_per_s": round(rows / in_memory),
        "streamed_rows_per_s": round(rows / streamed),
        "streamed_of_in_memory": round(in_memory / streamed, 4),
        "copy_floor_s": None if copy_floor is None else round(copy_floor, 4),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--chunk-rows", type=int, default=500_000)
    parser.add_argument("--pegasos-batch", type=int, default=4096, help="a second, larger Pegasos batch size")
    parser.add_argument("--quick", action="store_true", help="20,000 rows in chunks of 5,000 (a smoke run)")
    args = parser.parse_args()
    rows, chunk_rows = (20_000, 5_000) if args.quick else (args.rows, args.chunk_rows)
    X_hashed, y_hashed = HashedStream(rows, chunk_rows=rows).chunk(0)
    X_sparse, y_sparse = make_linear_rule("linear", rows, 10_000 if args.quick else 100_000, seed=1)
    data = {
        "FTRLClassifier": ("hashed stream", X_hashed, y_hashed),
        "PegasosSVC": ("sparse synthetic", X_sparse, y_sparse),
    }
    results, bandwidths = [], {}
    with TimeLimit() as limit:
        for backend in args.backends:
            bandwidth = host_to_device_bandwidth() if backend == "cupy" else None
            bandwidths[backend] = bandwidth
            for solver, batch, make in models(backend, [64, args.pegasos_batch]):
                results.append(measure(solver, batch, make, data[solver], chunk_rows, backend, bandwidth))
                print(results[-1], flush=True)
    columns = [
        ("solver", "solver", ""),
        ("data", "data", ""),
        ("backend", "backend", ""),
        ("batch", "batch_size", ","),
        ("in memory rows/s", "in_memory_rows_per_s", ",.0f"),
        ("streamed rows/s", "streamed_rows_per_s", ",.0f"),
        ("streamed / in memory", "streamed_of_in_memory", ".0%"),
        ("in memory s", "in_memory_s", ".3f"),
        ("streamed s", "streamed_s", ".3f"),
        ("copies alone s", "copy_floor_s", ".3f"),
    ]
    copy_line = ", ".join(f"{b} {v / 1e9:.1f} GB/s" for b, v in bandwidths.items() if v) or "no device"
    report(
        "streamed_throughput",
        args.backends,
        title=f"# Streamed against in-memory training: one epoch of {rows:,} rows in chunks of {chunk_rows:,} "
        f"(pinned host-to-device bandwidth: {copy_line})",
        columns=columns,
        payload={
            "dataset": {
                "hashed stream": [rows, X_hashed.shape[1], int(X_hashed.nnz)],
                "sparse synthetic": [rows, X_sparse.shape[1], int(X_sparse.nnz)],
            },
            "parameters": {
                "rows": rows,
                "chunk_rows": chunk_rows,
                "quick": args.quick,
                "host_to_device_bytes_per_s": bandwidths,
            },
            "results": results,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
