"""Multiclass SBP: one-vs-rest (what SBPClassifier does) against one-vs-one (as SVC),
beside SVC, on KEEL penbased (10 classes) and letter (26): the measurement issue 14
asks for before choosing how the kernel solvers train multiclass problems.

* SVC: one-vs-one, timed as users run it (C = 1, gamma = 1 / (2 sigma^2) of
  ``bench/sbp_kernel.py``'s KEEL settings).
* SBP one-vs-rest: one SBPClassifier over every class (its problems share rows and
  steps), ``nu`` the median over one-vs-rest SVCs (as ``bench/sbp_kernel.py``).
* SBP one-vs-one: one binary SBPClassifier per pair of classes on that pair's rows,
  ``nu`` read off that pair's SVC (:func:`gpusvm.nu_from_svc`), votes counted as SVC
  counts them (ties to the lower class).

Both SBP variants run batch 64 with no holdout, for 1, 2 and 4 epochs; the ``nu`` fits
are untimed. Times are of ``fit`` alone.

    python bench/sbp_one_vs_one.py [--datasets penbased letter] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import SVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402
from sbp_kernel import SETTINGS, load  # noqa: E402

from gpusvm import SBPClassifier, nu_from_svc  # noqa: E402

BATCH = 64


def sbp(nu, gamma, epochs):
    return SBPClassifier(nu=nu, gamma=gamma, batch_size=BATCH, max_iter=epochs, validation_fraction=0.0,
                         random_state=0, backend="numpy")


def one_vs_rest(X, y, X_test, y_test, gamma, epochs):
    """SBPClassifier itself, at the median of the one-vs-rest SVCs' nu."""
    svcs = OneVsRestClassifier(SVC(C=1.0, gamma=gamma)).fit(X, y)
    nu = float(np.median([nu_from_svc(svc, X, (y == label).astype(int))
                          for svc, label in zip(svcs.estimators_, svcs.classes_, strict=True)]))
    rows = []
    for n_epochs in epochs:
        model = sbp(nu, gamma, n_epochs)
        started = time.perf_counter()
        model.fit(X, y)
        rows.append({"epochs": n_epochs, "seconds": time.perf_counter() - started,
                     "test_error": float(np.mean(model.predict(X_test) != y_test))})
    return rows


def one_vs_one(X, y, X_test, y_test, gamma, epochs):
    """A binary SBP per pair of classes, nu read off each pair's SVC, SVC's voting."""
    classes = np.unique(y)
    pairs = []
    for i, j in itertools.combinations(range(classes.size), 2):
        rows = np.isin(y, classes[[i, j]])
        labels = (y[rows] == classes[j]).astype(int)
        pairs.append((i, j, rows, labels, nu_from_svc(SVC(C=1.0, gamma=gamma).fit(X[rows], labels), X[rows], labels)))
    results = []
    for n_epochs in epochs:
        seconds, votes = 0.0, np.zeros((X_test.shape[0], classes.size))
        for i, j, rows, labels, nu in pairs:
            model = sbp(nu, gamma, n_epochs)
            started = time.perf_counter()
            model.fit(X[rows], labels)
            seconds += time.perf_counter() - started
            wins_j = model.decision_function(X_test) > 0
            votes[:, j] += wins_j
            votes[:, i] += ~wins_j
        results.append({"epochs": n_epochs, "seconds": seconds,
                        "test_error": float(np.mean(classes[votes.argmax(axis=1)] != y_test))})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["penbased", "letter"], choices=["penbased", "letter"])
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 1 epoch: a smoke run")
    args = parser.parse_args()
    epochs = [1] if args.quick else [1, 2, 4]
    results = []
    for name in args.datasets:
        X, y, X_test, y_test = load(name, args.quick)
        gamma = 1 / (2 * SETTINGS[name][0]["sigma2"])
        svc = SVC(C=1.0, gamma=gamma)
        started = time.perf_counter()
        svc.fit(X, y)
        svc_seconds = time.perf_counter() - started
        svc_error = float(np.mean(svc.predict(X_test) != y_test))
        results.append({"dataset": name, "solver": "SVC (LIBSVM, one-vs-one)", "seconds": svc_seconds,
                        "test_error": svc_error, "ratio": 1.0})
        for solver, run in (("SBP one-vs-rest", one_vs_rest), ("SBP one-vs-one", one_vs_one)):
            for row in run(X, y, X_test, y_test, gamma, epochs):
                results.append({"dataset": name, "solver": f"{solver}, batch {BATCH}", **row,
                                "ratio": row["seconds"] / svc_seconds})
                print(results[-1], flush=True)
    columns = [("data", "dataset", "s"), ("solver", "solver", "s"), ("epochs", "epochs", "g"),
               ("fit s", "seconds", ".2f"), ("ratio to SVC's fit", "ratio", ".2f"),
               ("test error", "test_error", ".2%")]
    report("sbp_one_vs_one", ["numpy"], columns=columns,
           title="Multiclass SBP, one-vs-rest against one-vs-one, beside SVC (KEEL, standardized; fit times)",
           payload={"dataset": "KEEL " + ", ".join(args.datasets),
                    "parameters": {"quick": args.quick, "batch_size": BATCH, "epochs": epochs, "C": 1.0},
                    "results": results})


if __name__ == "__main__":
    main()
