"""SBPClassifier past the kernel matrix: MNIST8M-like 8-versus-the-rest, generated on the backend.

Issue 61's experiment. The rows are ``gpusvm.datasets.make_deformed_mnist`` (MNIST's
60,000 training digits first, then their deformations; row ``k`` is digit ``k % 60000``),
generated on the backend and timed; the labels are 8 against the rest; the test set is
MNIST's 10,000 untouched test digits. The kernel is the SBP paper's MNIST one (rbf,
sigma^2 = 25: gamma = 0.02) without bias, at the paper's ``nu`` for MNIST 8 (2.21e-4),
batch 64; ``kernel_cache='auto'`` decides where the kernel values come from (past about
130,000 float32 rows on an H200 the matrix does not fit).

At each size SBP is fitted from scratch at growing step budgets (``max_kernel_evals`` of
``steps * batch * n``; the same seed, so a smaller budget's run is a prefix of a larger
one's) until the test error stops improving by 0.05 points or the size's time cap; each
point records the fit's seconds (device events on a GPU), its test error, where its
kernel values came from, and the device memory pool's bytes after the fit (the pool keeps
what it freed: its peak). Then, at the largest budget, ``decision_function`` on the test
digits and on up to a million generated rows (its rate), and the latency of one row
(median and 99th percentile of 200 calls on a warm model).

ThunderSVM's SVC at SVC's parameters (C = 1 / (lambda n) with lambda = 1 / n: C = 1;
the same gamma) runs beside it on the first ``--thundersvm-rows`` rows in a fresh
process with a time cap, as a peer that cannot finish is reported as such
(``bench/peers.py``); the result names the rows it trained on.

    python -m bench.sbp_scale [--backend cupy] [--rows 100000 1000000 8100000]
        [--steps 250 500 1000 2000 4000 8000] [--cap-s 120] [--thundersvm-rows 250000]
        [--thundersvm-cap-s 180] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import (
    PEAK_RSS_SOURCE,
    TimeLimit,
    report,
    sbp_kernel_values_source,
    synchronize_device,
    timed_fit,
)

from gpusvm import SBPClassifier
from gpusvm._backend import get_namespace, to_numpy
from gpusvm.datasets import load_mnist, make_deformed_mnist, one_vs_rest_labels

DIGIT = 8
SIGMA2 = 25.0
NU = 2.21e-4  # the SBP paper's nu for MNIST 8 without bias (bench/sbp_kernel.py)
BATCH = 64
IMPROVEMENT = 0.0005  # a budget that improves the test error by less than this ends a size's sweep
PREDICT_ROWS = 1_000_000
LATENCY_CALLS = 200

_THUNDERSVM = """
import json, sys, time
import numpy as np
from bench.peers import MissingPeer, thundersvm_svc, timed_peer_fit
from gpusvm.datasets import load_mnist, make_deformed_mnist, one_vs_rest_labels
rows, gamma, digit = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
digits = load_mnist(dtype=np.float32)
X, y = make_deformed_mnist(rows, backend="numpy", include_originals=True, digits=digits[:2])
try:
    model = thundersvm_svc(1.0, gamma)
    seconds = timed_peer_fit(model, X, one_vs_rest_labels(y, digit))
    error = float(np.mean(model.predict(digits[2]) != one_vs_rest_labels(digits[3], digit)))
    print(json.dumps({"seconds": seconds, "test_error": error, "peak_rss": peak_rss_bytes()}))
except MissingPeer as missing:
    print(json.dumps({"missing": str(missing)}))
"""


def memory_pool(backend):
    """CuPy's device memory pool, or None (the numpy backend; the CPU emulation of CUDA)."""
    if backend != "cupy":
        return None
    import cupy

    return getattr(cupy, "get_default_memory_pool", lambda: None)()


def pool_bytes(backend):
    """The device memory pool's bytes held (its peak since the last ``free_pool``)."""
    pool = memory_pool(backend)
    return None if pool is None else int(pool.total_bytes())


def free_pool(backend):
    pool = memory_pool(backend)
    if pool is not None:
        pool.free_all_blocks()


def generate(n_rows, backend, digits):
    """``n_rows`` MNIST8M-like rows on ``backend`` with 8-versus-rest labels, and seconds."""
    synchronize_device(backend)
    started = time.perf_counter()
    X, y = make_deformed_mnist(n_rows, backend=backend, include_originals=True, digits=digits)
    synchronize_device(backend)
    return X, one_vs_rest_labels(y, DIGIT), time.perf_counter() - started


def fit_point(X, y, X_test, y_test, steps, backend):
    """One SBP fit at ``steps`` steps' kernel evaluations: a result row and the model."""
    free_pool(backend)
    model = SBPClassifier(
        kernel="rbf",
        gamma=1 / (2 * SIGMA2),
        nu=NU,
        fit_intercept=False,
        batch_size=BATCH,
        max_iter=10**6,
        max_kernel_evals=steps * BATCH * X.shape[0],
        tol=None,
        validation_fraction=0.0,
        random_state=0,
        backend=backend,
        verbose=0,
    )
    seconds = timed_fit(model, X, y, backend)
    error = float(np.mean(to_numpy(model.predict(X_test)) != y_test))
    row = {
        "rows": int(X.shape[0]),
        "steps": int(model.t_),
        "seconds": seconds,
        "test_error": error,
        "support_vectors": int(model.support_.size),
        "kernel_values": sbp_kernel_values_source(model),
        "kernel_dtype": model.kernel_dtype_,
        "pool_bytes": pool_bytes(backend),
    }
    print(row, flush=True)
    return row, model


def prediction_facts(model, X_test, generated, backend):
    """Seconds to predict the test digits and the generated rows, and one row's latency."""
    xp = get_namespace(backend)
    facts = {}
    for name, rows in (("test", X_test), ("generated", generated)):
        synchronize_device(backend)
        started = time.perf_counter()
        model.decision_function(rows)
        synchronize_device(backend)
        facts[f"predict_{name}_rows"] = int(rows.shape[0])
        facts[f"predict_{name}_seconds"] = time.perf_counter() - started
    one = xp.asarray(X_test[:1])
    model.decision_function(one)  # warm
    latencies = []
    for _ in range(LATENCY_CALLS):
        started = time.perf_counter()
        to_numpy(model.decision_function(one))
        latencies.append(time.perf_counter() - started)
    facts["one_row_median_ms"] = 1e3 * float(np.median(latencies))
    facts["one_row_p99_ms"] = 1e3 * float(np.percentile(latencies, 99))
    return facts


def thundersvm(rows, cap_seconds):
    """ThunderSVM on the first ``rows`` generated rows, in a fresh process capped at
    ``cap_seconds``: its result, or why it has none. It runs in the checkout, where
    ``bench.peers`` is found."""
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                PEAK_RSS_SOURCE + _THUNDERSVM,
                str(rows),
                str(1 / (2 * SIGMA2)),
                str(DIGIT),
            ],
            capture_output=True,
            text=True,
            timeout=cap_seconds,
            cwd=Path(__file__).resolve().parent.parent,
        )
    except subprocess.TimeoutExpired:
        return {"missing": f"did not finish {rows:,} rows within its cap of {cap_seconds} s"}
    if done.returncode != 0:
        return {"missing": f"exited with {done.returncode}: {done.stderr[-500:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cupy", choices=["numpy", "cupy"])
    parser.add_argument("--rows", nargs="+", type=float, default=[1e5, 1e6, 8.1e6])
    parser.add_argument("--steps", nargs="+", type=int, default=[250, 500, 1000, 2000, 4000, 8000])
    parser.add_argument("--cap-s", type=float, default=120.0, help="time cap of each size's budgets")
    parser.add_argument("--thundersvm-rows", type=int, default=250_000, help="0: no ThunderSVM")
    parser.add_argument("--thundersvm-cap-s", type=float, default=180.0)
    parser.add_argument("--quick", action="store_true", help="3,000 rows on the numpy backend, two budgets")
    args = parser.parse_args()
    backend = "numpy" if args.quick else args.backend
    sizes = [3_000] if args.quick else [int(n) for n in args.rows]
    budgets = [20, 40] if args.quick else args.steps
    X_train, y_digits, X_test, y_test_digits = load_mnist(dtype=np.float32)
    digits, y_test = (X_train, y_digits), one_vs_rest_labels(y_test_digits, DIGIT)
    X_test_backend = get_namespace(backend).asarray(X_test)
    results, predictions, generation = [], [], []
    with TimeLimit() as limit:
        for n_rows in sizes:
            X, y, seconds = generate(n_rows, backend, digits)
            generation.append({"rows": n_rows, "seconds": seconds, "rows_per_s": n_rows / seconds})
            print(generation[-1], flush=True)
            started, best, model = time.perf_counter(), None, None
            for steps in budgets:
                row, model = fit_point(X, y, X_test_backend, y_test, steps, backend)
                results.append(row)
                improved = best is None or row["test_error"] < best - IMPROVEMENT
                best = row["test_error"] if best is None else min(best, row["test_error"])
                if not improved or time.perf_counter() - started > args.cap_s:
                    break
            generated = X[: min(PREDICT_ROWS, X.shape[0])]
            predictions.append({"rows": n_rows, **prediction_facts(model, X_test_backend, generated, backend)})
            print(predictions[-1], flush=True)
            del X, y, model
            free_pool(backend)
        peer = {"rows": args.thundersvm_rows}
        if args.thundersvm_rows and not args.quick:
            peer.update(thundersvm(args.thundersvm_rows, args.thundersvm_cap_s))
            print(peer, flush=True)
    columns = [
        ("training rows", "rows", ",d"),
        ("steps", "steps", ",d"),
        ("fit s", "seconds", ".3f"),
        ("test error", "test_error", ".2%"),
        ("support vectors", "support_vectors", ",d"),
        ("kernel values", "kernel_values", "s"),
        ("kernel dtype", "kernel_dtype", "s"),
        ("device pool GB", "pool_gb", ".2f"),
    ]
    for row in results:
        row["pool_gb"] = None if row["pool_bytes"] is None else row["pool_bytes"] / 1e9
    report(
        "sbp_scale",
        [backend],
        columns=columns,
        title=(
            f"SBPClassifier on MNIST8M-like {DIGIT}-versus-rest (rbf sigma^2 = {SIGMA2:g}, nu = {NU}, no bias, "
            f"batch {BATCH}), generated on the {backend} backend; MNIST's test digits"
        ),
        payload={
            "dataset": "gpusvm.datasets.make_deformed_mnist (originals first), 8 versus the rest; MNIST test digits",
            "parameters": {"quick": args.quick, "sizes": sizes, "budgets": budgets, "cap_s": args.cap_s},
            "generation": generation,
            "prediction": predictions,
            "thundersvm": peer,
            "results": results,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
