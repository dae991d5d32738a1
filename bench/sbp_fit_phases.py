"""Where the time of one headline kernel SVM fit goes, phase by phase (issue 45).

``bench/sbp_kernel.py`` times fits whole; this splits the fit that first reached SVC's
test error + 0.1 point there into the nvtx ranges the library opens. SBPClassifier's:

* ``sbp.prepare``: the checks, the copy of X to the backend, gamma and nu;
* ``sbp.stepper``: the solver's state, and with it ``kernel_matrix``, the whole kernel
  matrix computed on the device (blocks of inner products, then the kernel function);
* ``step_blocks.capture``: a block of steps captured as a CUDA graph (once a length);
* ``sbp.steps`` (``sbp.pair_steps`` for one-vs-one pairs on the device): the steps;
  on the host ``sbp.water_level``, ``sbp.draw``, ``sbp.kernel_row`` and ``sbp.update``;
* ``sbp.checkpoint``: the averaged model's level, ten times an epoch;
* ``sbp.model``: the support vectors and coefficients.

KernelPegasosSVC's (on Adult and MNIST 8-vs-rest, where it reached the target):
``kernel_pegasos.prepare``, ``kernel_pegasos.stepper`` (with ``kernel_matrix``),
``step_blocks.capture``, ``kernel_pegasos.steps`` (on the host its margins, update and
kernel rows) and ``kernel_pegasos.model``.

For this, ``nvtx.annotate`` is replaced by a clock that synchronises the device as each
range opens and closes (never inside a graph capture), so a range's seconds are its own
work; each row gives a range's own seconds, without the ranges inside it, and "outside
the ranges" the rest of the fit. The synchronisations cost a little, so the fit is also
timed undisturbed twice: the first fit at this size (which also grows CuPy's memory pool,
as the headline's first point does) and a second one, as the headline's later points.

The kernel matrix is put beside its floors, on the same card in the same run: its
blocks of inner products alone, on the layout the library computes them on (a dense copy
of a CSR X that is dense and small enough; the matrix adds the kernel function and a copy),
the same products as one dense GEMM by cuBLAS in the kernel values' dtype, and the
matrix's bytes written once at the card's peak bandwidth.

Settings: ``bench/sbp_kernel.py``'s first for each data set (Adult and MNIST 8-vs-rest
without bias, letter and MNIST's ten digits with it, one-vs-one), batch 64. SBP stops at
the budget of kernel evaluations of the point that reached the target on the H200
(2026-11-27; letter's from the CPU record; ``--quick``: at most four times the first
budget), KernelPegasosSVC after the epochs that reached it there (``--quick``: one). A
``nu`` that the setting leaves to SVC comes from the CPU record of ``bench/sbp_kernel.py``
(a quick run fits SVC if there is none).

    python -m bench.sbp_fit_phases [--datasets adult mnist8 mnist10 letter]
                                   [--solvers sbp kernel_pegasos]
                                   [--backends cupy] [--quick] [--rows N]
"""

from __future__ import annotations

import argparse
import contextlib
import time
import traceback
from collections import Counter, defaultdict
from types import SimpleNamespace

import numpy as np
import nvtx

from bench.common import (
    PAPER_SETTINGS,
    TimeLimit,
    first_budget,
    gpu_facts,
    kernel_pegasos_model,
    peak_bandwidth,
    report,
    sbp_kernel_values_source,
    sbp_model,
    svc_reference,
    synchronize_device,
    timed_fit,
    timed_run,
)
from bench.datasets import kernel_svm_rows, load

BATCH_SIZE = 64
CACHE_MB = 8000
# Doublings of bench/sbp_kernel.py's first budget to its point that first reached SVC's
# test error + 0.1 point (bench/results/sbp_kernel_*-nvidia-h200.json; letter's from
# sbp_kernel_letter-cpu-amd-epyc.json).
TARGET_DOUBLINGS = {"adult": 5, "mnist8": 6, "mnist10": 4, "letter": 4}
# KernelPegasosSVC's epochs to that target on the H200 (it reached it on the binary sets only).
KERNEL_PEGASOS_EPOCHS = {"adult": 2, "mnist8": 4}
CAPTURE = "step_blocks.capture"
STEP_RANGES = ("sbp.steps", "kernel_pegasos.steps")


class RangeClock:
    """A stand-in for ``nvtx.annotate`` that times each range, the device synchronised
    at its edges: ``own`` seconds (without the ranges opened inside it), ``calls``."""

    def __init__(self, backend):
        self.backend = backend
        self.own, self.calls = defaultdict(float), Counter()
        self._open = []  # [name, started, seconds of the ranges inside]

    @contextlib.contextmanager
    def annotate(self, message=None, **kwargs):
        # Inside a capture the launches are recorded, not run, and a synchronisation
        # would end the capture: the capture's range counts them.
        capturing = any(name == CAPTURE for name, _, _ in self._open)
        if not capturing:
            synchronize_device(self.backend)
        entry = [message, time.perf_counter(), 0.0]
        self._open.append(entry)
        try:
            yield
        finally:
            if not capturing:
                synchronize_device(self.backend)
            self._open.pop()
            seconds = time.perf_counter() - entry[1]
            self.own[message] += seconds - entry[2]
            self.calls[message] += 1
            if self._open:
                self._open[-1][2] += seconds


def recorded_fit(model, X, y, backend):
    """The fit's seconds and its :class:`RangeClock`, each nvtx range timed apart."""
    clock = RangeClock(backend)
    plain = nvtx.annotate
    nvtx.annotate = clock.annotate
    try:
        seconds = timed_run(lambda: model.fit(X, y), backend)
    finally:
        nvtx.annotate = plain
    return seconds, clock


def matrix_floors(X, dtype):
    """Seconds of the kernel matrix's inner products in its blocks (on
    ``compute_layout(X)``, as the library's matrix), of the same products as dense GEMMs
    by cuBLAS, and the bytes the matrix holds (the device, after one
    untimed block of each)."""
    import cupy

    from gpusvm._validation import to_backend
    from gpusvm.kernel_functions import compute_layout, inner_products
    from gpusvm.solvers._kernel_values_cuda import BLOCK_BYTES

    X_dev = compute_layout(to_backend(X.astype(dtype), "cupy"))
    dense = X_dev.toarray() if hasattr(X_dev, "toarray") else X_dev
    n, itemsize = X.shape[0], np.dtype(dtype).itemsize
    step = max(1, BLOCK_BYTES // (n * itemsize))
    out = cupy.empty((min(step, n), n), dtype=dtype)

    def products():
        for start in range(0, n, step):
            inner_products(X_dev[start : start + step], X_dev)

    def gemm():
        for start in range(0, n, step):
            rows = dense[start : start + step]
            cupy.matmul(rows, dense.T, out=out[: rows.shape[0]])

    inner_products(X_dev[:step], X_dev)
    cupy.matmul(dense[:step], dense.T, out=out[: min(step, n)])
    return timed_run(products, "cupy"), timed_run(gemm, "cupy"), n * n * itemsize


def measure(args, name, rows):
    """Each solver's fit on data set ``name`` (those with a target there), into ``rows``."""
    X, y, X_test, y_test = load(name, **kernel_svm_rows(name, args.quick))
    X, y = X[: args.rows], y[: args.rows]
    setting = PAPER_SETTINGS[name][0]
    for backend in args.backends:
        if "sbp" in args.solvers:
            if setting["nu"] is None:
                svc = svc_reference(
                    SimpleNamespace(no_svc=True, quick=args.quick, cache_mb=CACHE_MB),
                    name,
                    setting,
                    X,
                    y,
                    X_test,
                    y_test,
                )
                setting = {**setting, "nu": svc["nu_from_svc"]}
            doublings = min(2, TARGET_DOUBLINGS[name]) if args.quick else TARGET_DOUBLINGS[name]
            budget = first_budget(y, X.shape[0], BATCH_SIZE) * 2**doublings

            def make_sbp(budget=budget):  # None: the warm-up's, an epoch
                return sbp_model(setting, BATCH_SIZE, backend, 1000 if budget else 1, budget, CACHE_MB, X.dtype)

            common = {"dataset": name, "solver": "SBPClassifier", "backend": backend, "rows": X.shape[0]}
            measure_fit(make_sbp, make_sbp(None), X, y, backend, common, rows)
        if "kernel_pegasos" in args.solvers and name in KERNEL_PEGASOS_EPOCHS:
            epochs = 1 if args.quick else KERNEL_PEGASOS_EPOCHS[name]
            common = {"dataset": name, "solver": "KernelPegasosSVC", "backend": backend, "rows": X.shape[0]}
            measure_fit(
                lambda: kernel_pegasos_model(setting, backend, epochs),
                kernel_pegasos_model(setting, backend, 1),
                X,
                y,
                backend,
                common,
                rows,
            )


def measure_fit(make, warm_up, X, y, backend, common, rows):
    """One solver's fit (``make()``, a new model), timed undisturbed twice and with its
    ranges timed, after ``warm_up`` fitted on a few rows (the same kernels loaded)."""
    warm_up.fit(X[:300], y[:300])
    first = timed_fit(make(), X, y, backend)
    again = timed_fit(make(), X, y, backend)
    model = make()
    seconds, clock = recorded_fit(model, X, y, backend)
    rows.append({**common, "phase": "fit, undisturbed (first at this size)", "calls": 1, "seconds": first})
    rows.append({**common, "phase": "fit, undisturbed", "calls": 1, "seconds": again})
    rows.append({**common, "phase": "fit, ranges timed", "calls": 1, "seconds": seconds, "share": 1.0})
    for phase, own in sorted(clock.own.items(), key=lambda item: -item[1]):
        note = None
        if phase == "sbp.pair_steps":  # the pairs step together: t_ sums their steps
            note = f"{model.t_} steps summed over the pairs"
        elif phase in STEP_RANGES:
            note = f"{model.t_} steps, {1e3 * own / max(1, model.t_):.3f} ms a step"
        rows.append(
            {
                **common,
                "phase": phase,
                "calls": clock.calls[phase],
                "seconds": own,
                "share": own / seconds,
                "note": note,
            }
        )
    outside = seconds - sum(clock.own.values())
    rows.append(
        {**common, "phase": "outside the ranges", "calls": None, "seconds": outside, "share": outside / seconds}
    )
    # KernelPegasosSVC says where it read its kernel values; SBP's history does
    source = getattr(model, "kernel_values_source_", None) or sbp_kernel_values_source(model)
    if backend == "cupy" and source == "matrix":
        products, gemm, matrix_bytes = matrix_floors(X, getattr(model, "kernel_dtype", X.dtype))
        bandwidth = peak_bandwidth((gpu_facts() or {}).get("name", ""))
        floors = [("inner products alone", products, None), ("same products as dense GEMMs (cuBLAS)", gemm, None)]
        if bandwidth:
            floors.append(("bytes written at peak bandwidth", matrix_bytes / bandwidth, f"{matrix_bytes / 1e9:.2f} GB"))
        for what, floor, note in floors:
            rows.append(
                {**common, "phase": f"floor: the matrix's {what}", "calls": None, "seconds": floor, "note": note}
            )
    print(common, f"{seconds:.3f} s with the ranges timed, {again:.3f} s undisturbed", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets", nargs="+", default=["adult", "mnist8", "mnist10", "letter"], choices=sorted(TARGET_DOUBLINGS)
    )
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--solvers", nargs="+", default=["sbp", "kernel_pegasos"], choices=["sbp", "kernel_pegasos"])
    parser.add_argument("--quick", action="store_true", help="2,000-3,000 rows, a quarter of the budget at most")
    parser.add_argument("--rows", type=int, default=None, help="at most this many training rows (a dry run's)")
    args = parser.parse_args()
    rows, failed = [], []
    with TimeLimit() as limit:
        for name in args.datasets:
            try:
                measure(args, name, rows)
            except Exception:  # the other data sets still run; the step fails at the end
                traceback.print_exc()
                failed.append(name)
            write_report(args, rows, stopped=False)
    write_report(args, rows, stopped=limit.reached)
    if failed:
        raise SystemExit(f"sbp_fit_phases: failed on {', '.join(failed)} (tracebacks above)")


def write_report(args, rows, stopped):
    """The results so far (``rows``), as :func:`bench.common.report` writes them."""
    for row in rows:
        row.setdefault("share", None)
        row.setdefault("note", None)
    report(
        "sbp_fit_phases",
        args.backends,
        title="## Where a headline kernel SVM fit's time goes: its nvtx ranges, the device synchronised at their edges",
        columns=[
            ("data", "dataset", ""),
            ("solver", "solver", ""),
            ("backend", "backend", ""),
            ("rows", "rows", ","),
            ("phase", "phase", ""),
            ("calls", "calls", ","),
            ("seconds", "seconds", ".4f"),
            ("share of the timed fit", "share", ".1%"),
            ("note", "note", ""),
        ],
        payload={
            "dataset": args.datasets,
            "parameters": {
                "batch_size": BATCH_SIZE,
                "target_doublings": {name: TARGET_DOUBLINGS[name] for name in args.datasets},
                "quick": args.quick,
                "rows": args.rows,
            },
            "results": rows,
            "stopped_at_time_limit": stopped,
        },
    )


if __name__ == "__main__":
    main()
