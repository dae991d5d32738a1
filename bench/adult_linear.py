"""Linear SVM on Adult: PegasosSVC beside LinearSVC (LIBLINEAR) and SGDClassifier(hinge).

All at the same C (Pegasos' lam = SGD's alpha = 1 / (C n)), in one run, alternating the
order of the solvers between repeats. Records test accuracy, the primal objective
``lam/2 (||w||^2 + b^2) + mean hinge`` (the bias regularized, as LIBLINEAR and Pegasos
treat it; SGDClassifier's own objective leaves it out) and fit time (median of repeats).
Snap ML's linear SVM (its CPU solver, and its GPU solver with the cupy backend) runs
beside them when it is importable, and is reported as missing otherwise (``bench/peers.py``). Accuracy and
objective are computed here from each model's weights, the same way for every solver.

    python -m bench.adult_linear [--backends numpy cupy] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.svm import LinearSVC

from bench.common import (
    TimeLimit,
    binary_accuracy,
    binary_svm_objective,
    linear_weights,
    median,
    report,
    timed_fit,
)
from bench.peers import MissingPeer, snapml_solvers, snapml_svm, timed_peer_fit

from gpusvm import PegasosSVC
from gpusvm.datasets import load_adult

C = 1.0


def solvers(n, backends):
    out = []
    for b in backends:  # the default tol (SGDClassifier's 1e-3), and a tight one that nears the optimum
        out.append((f"gpusvm PegasosSVC ({b})", b, lambda b=b: PegasosSVC(C=C, random_state=0, backend=b)))
        out.append(
            (f"gpusvm PegasosSVC ({b}, tol=1e-5)", b, lambda b=b: PegasosSVC(C=C, tol=1e-5, random_state=0, backend=b))
        )
    out.append(
        (
            "scikit-learn LinearSVC (hinge, LIBLINEAR)",
            "numpy",
            lambda: LinearSVC(C=C, loss="hinge", dual=True, max_iter=100_000),
        )
    )
    out.append(
        (
            "scikit-learn SGDClassifier (hinge)",
            "numpy",
            lambda: SGDClassifier(loss="hinge", alpha=1.0 / (C * n), max_iter=1000, tol=1e-3, random_state=0),
        )
    )
    # its CPU solver in every run: on an H100 its GPU solver stopped far from the optimum
    out += [(label, "peer", lambda gpu=gpu: snapml_svm(C, use_gpu=gpu)) for label, gpu in snapml_solvers(backends)]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="3,000 training rows, one repeat (a smoke run)")
    args = parser.parse_args()
    X, y, X_test, y_test = load_adult()
    if args.quick:
        X, y, args.repeats = X[:3000], y[:3000], 1
    n = X.shape[0]
    lam = 1.0 / (C * n)
    entries = solvers(n, args.backends)
    if "cupy" in args.backends:  # warm-up: compile the kernels outside the timings
        PegasosSVC(max_iter=1, backend="cupy").fit(X[:500], y[:500])
    times = {name: [] for name, _, _ in entries}
    fitted, missing = {}, {}
    with TimeLimit() as limit:
        for repeat in range(args.repeats):
            shift = repeat % len(entries)
            for name, backend, make in entries[shift:] + entries[:shift]:
                if name in missing:
                    continue
                try:
                    model = make()
                    seconds = timed_peer_fit(model, X, y) if backend == "peer" else timed_fit(model, X, y, backend)
                except MissingPeer as reason:
                    missing[name] = str(reason)
                    continue
                times[name].append(seconds)
                fitted[name] = model
    rows = []
    for name, backend, _ in entries:
        if name in missing:
            rows.append({"solver": f"{name}: missing ({missing[name]})", "backend": backend, "missing": missing[name]})
            continue
        if name not in fitted:  # the time limit came first
            continue
        model = fitted[name]
        weights = linear_weights(model)
        rows.append(
            {
                "solver": name,
                "backend": backend,
                "repeats_seconds": times[name],
                "median_seconds": median(times[name]),
                "test_accuracy": binary_accuracy(weights, X_test, y_test),
                "objective": binary_svm_objective(weights, X, y, lam),
                "epochs": int(np.max(model.n_iter_)) if hasattr(model, "n_iter_") else None,
                "objective_curve": getattr(model, "objective_curve_", None),
            }
        )
    best = min((r["objective"] for r in rows if "objective" in r), default=None)
    for row in rows:
        if best is not None and "objective" in row:
            row["objective_gap"] = row["objective"] / best - 1.0
    columns = [
        ("solver", "solver", "s"),
        ("fit time (s, median)", "median_seconds", ".3f"),
        ("epochs", "epochs", "d"),
        ("test accuracy", "test_accuracy", ".4f"),
        ("primal objective", "objective", ".5f"),
        ("gap to best", "objective_gap", ".2%"),
    ]
    report(
        "adult_linear",
        args.backends,
        columns=columns,
        title=f"## Adult, linear SVM at C = {C} ({n} training rows, {X_test.shape[0]} test rows)",
        payload={
            "dataset": {
                "name": "UCI Adult (a9a encoding)",
                "n_train": n,
                "n_test": X_test.shape[0],
                "n_features": X.shape[1],
            },
            "parameters": {"C": C, "lam": lam, "repeats": args.repeats, "quick": args.quick},
            "results": rows,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
