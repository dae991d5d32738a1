"""Multiclass SBP: one-vs-rest against one-vs-one (``SBPClassifier(multi_class=...)``),
beside SVC, on KEEL penbased (10 classes) and letter (26): the measurement behind
SBPClassifier's default ``multi_class='ovo'`` (issue 14).

* SVC: one-vs-one, timed as users run it (C = 1, gamma = 1 / (2 sigma^2) of
  ``bench/sbp_kernel.py``'s KEEL settings).
* SBP one-vs-rest: its problems share rows and steps; ``nu`` is the median over the
  one-vs-rest SVCs (:func:`gpusvm.nu_from_svc`).
* SBP one-vs-one: a binary problem per pair of classes on the pair's rows; ``nu`` is
  the median over the pairs' SVCs.

Both run batch 64 with no holdout, for 1, 2 and 4 epochs; the SVC fits that give ``nu``
are untimed. Times are of ``fit`` alone.

On cupy (``--backends cupy``; SVC still on the CPU) one-vs-one runs once for each place
its pairs read kernel values from (``--kernel-values``): ``matrix``, the fit's kernel
matrix resident; ``cache``, a device cache of a quarter of its rows (as when the matrix
does not fit; at least twice the rows all pairs draw in a step, so not on letter, whose
325 pairs draw more rows a step than it has); ``none``, a
``kernel_cache`` of 0, with which the pairs train one after another, each step computing
its drawn rows' kernel values. Each is timed after an untimed epoch of it on 200 rows,
which compiles its device kernels. Every SBP row records where it read its kernel values
(``kernel_values_source``, from ``history_``: 'matrix', 'cache' or 'products', the
pairs' sources joined by '+' when they trained in turn and differed).

    python -m bench.sbp_one_vs_one [--datasets penbased letter] [--backends numpy cupy]
        [--kernel-values matrix cache none] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.svm import SVC

from bench.common import PAPER_SETTINGS, TimeLimit, median_nu, report, sbp_kernel_values_source, synchronize_device
from bench.datasets import kernel_svm_rows, load

from gpusvm import SBPClassifier

BATCH = 64


def sbp(nu, gamma, epochs, multi_class, backend, kernel_cache):
    return SBPClassifier(
        nu=nu,
        gamma=gamma,
        batch_size=BATCH,
        max_iter=epochs,
        validation_fraction=0.0,
        tol=None,
        multi_class=multi_class,
        random_state=0,
        backend=backend,
        kernel_cache=kernel_cache,
    )


def pair_cache_bytes(X, y, kernel_values, batch_size=BATCH):
    """``kernel_cache`` that puts one-vs-one's kernel values where ``kernel_values`` says
    (None: a cache that would hold every row)."""
    if kernel_values == "matrix":
        return "auto"
    if kernel_values == "none":
        return 0
    n_classes = np.unique(y).size
    slots = n_classes * (n_classes - 1) // 2 * batch_size  # rows all the pairs draw in a step
    rows = max(X.shape[0] // 4, 2 * slots)
    return rows * X.shape[0] * X.dtype.itemsize if rows < X.shape[0] else None


def run(X, y, X_test, y_test, gamma, epochs, nu, multi_class, backend="numpy", kernel_cache="auto"):
    """Fit time and test error of SBPClassifier(multi_class=...) after each epoch count,
    a row as each fit ends."""
    for n_epochs in epochs:
        model = sbp(nu, gamma, n_epochs, multi_class, backend, kernel_cache)
        started = time.perf_counter()
        model.fit(X, y)
        synchronize_device(backend)
        yield {
            "epochs": n_epochs,
            "nu": nu,
            "seconds": time.perf_counter() - started,
            "test_error": float(np.mean(model.predict(X_test) != y_test)),
            "support_vectors": int(model.support_.size),
            "kernel_values_source": sbp_kernel_values_source(model),
        }


def warm_up(X, y, gamma, kernel_values, rows=200, batch_size=2):
    """Compile the device kernels of every cupy run outside the timings: one epoch of each
    on a few rows, at a batch small enough for a row cache of them."""
    X, y = X[:rows], y[:rows]
    for multi_class, values in [("ovr", "matrix"), *(("ovo", values) for values in kernel_values)]:
        kernel_cache = pair_cache_bytes(X, y, values, batch_size)
        if kernel_cache is not None:
            model = SBPClassifier(
                gamma=gamma,
                batch_size=batch_size,
                max_iter=1,
                validation_fraction=0.0,
                tol=None,
                multi_class=multi_class,
                backend="cupy",
                kernel_cache=kernel_cache,
            )
            model.fit(X, y)


def solver_runs(backends, kernel_values):
    """(label, multi_class, backend, kernel values) of every SBP run."""
    for backend in backends:
        on = "" if backend == "numpy" else f", {backend}"
        yield f"SBP one-vs-rest{on}", "ovr", backend, "matrix"
        for values in kernel_values if backend == "cupy" else ["matrix"]:
            where = (
                ""
                if backend == "numpy"
                else {"matrix": ", kernel matrix", "cache": ", row cache", "none": ", pairs in turn"}[values]
            )
            yield f"SBP one-vs-one{on}{where}", "ovo", backend, values


def measure(name, backends, kernel_values, epochs, quick, results):
    """SVC, then every SBP run on data set ``name``, appended to ``results`` as each ends."""
    X, y, X_test, y_test = load(name, **kernel_svm_rows(name, quick))
    gamma = 1 / (2 * PAPER_SETTINGS[name][0]["sigma2"])
    svc = SVC(C=1.0, gamma=gamma)
    started = time.perf_counter()
    svc.fit(X, y)
    svc_seconds = time.perf_counter() - started
    results.append(
        {
            "dataset": name,
            "solver": "SVC (LIBSVM, one-vs-one)",
            "seconds": svc_seconds,
            "test_error": float(np.mean(svc.predict(X_test) != y_test)),
            "ratio": 1.0,
            "support_vectors": int(svc.support_.size),
        }
    )
    nus = {multi_class: median_nu(SVC(C=1.0, gamma=gamma), X, y, multi_class) for multi_class in ("ovr", "ovo")}
    if "cupy" in backends:
        warm_up(X, y, gamma, kernel_values)
    for solver, multi_class, backend, values in solver_runs(backends, kernel_values):
        kernel_cache = pair_cache_bytes(X, y, values)
        if kernel_cache is None:
            print(f"{name}: no {solver}: a cache of twice a step's rows would hold every row")
            continue
        for row in run(X, y, X_test, y_test, gamma, epochs, nus[multi_class], multi_class, backend, kernel_cache):
            results.append(
                {
                    "dataset": name,
                    "solver": f"{solver}, batch {BATCH}",
                    **row,
                    "kernel_cache": kernel_cache,
                    "ratio": row["seconds"] / svc_seconds,
                }
            )
            print(results[-1], flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["penbased", "letter"], choices=["penbased", "letter"])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument(
        "--kernel-values",
        nargs="+",
        default=["matrix", "cache", "none"],
        choices=["matrix", "cache", "none"],
        help="on cupy: where one-vs-one reads them",
    )
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 1 epoch: a smoke run")
    args = parser.parse_args()
    epochs = [1] if args.quick else [1, 2, 4]
    results = []
    with TimeLimit() as limit:
        for name in args.datasets:
            measure(name, args.backends, args.kernel_values, epochs, args.quick, results)
    columns = [
        ("data", "dataset", "s"),
        ("solver", "solver", "s"),
        ("epochs", "epochs", "g"),
        ("nu", "nu", ".2g"),
        ("fit s", "seconds", ".2f"),
        ("ratio to SVC's fit", "ratio", ".2f"),
        ("test error", "test_error", ".2%"),
        ("support vectors", "support_vectors", "g"),
        ("kernel values", "kernel_values_source", "s"),
    ]
    report(
        "sbp_one_vs_one",
        args.backends,
        columns=columns,
        title="Multiclass SBP, one-vs-rest against one-vs-one, beside SVC (KEEL, standardized; fit times)",
        payload={
            "dataset": "KEEL " + ", ".join(args.datasets),
            "parameters": {
                "quick": args.quick,
                "batch_size": BATCH,
                "epochs": epochs,
                "C": 1.0,
                "kernel_values": args.kernel_values,
            },
            "results": results,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
