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

    python bench/sbp_one_vs_one.py [--datasets penbased letter] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.svm import SVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402
from sbp_kernel import SETTINGS, load, median_nu  # noqa: E402

from gpusvm import SBPClassifier  # noqa: E402

BATCH = 64


def sbp(nu, gamma, epochs, multi_class):
    return SBPClassifier(nu=nu, gamma=gamma, batch_size=BATCH, max_iter=epochs, validation_fraction=0.0,
                         tol=None, multi_class=multi_class, random_state=0, backend="numpy")


def run(X, y, X_test, y_test, gamma, epochs, multi_class):
    """Fit time and test error of SBPClassifier(multi_class=...) after each epoch count."""
    nu = median_nu(SVC(C=1.0, gamma=gamma), X, y, multi_class)
    rows = []
    for n_epochs in epochs:
        model = sbp(nu, gamma, n_epochs, multi_class)
        started = time.perf_counter()
        model.fit(X, y)
        rows.append({"epochs": n_epochs, "nu": nu, "seconds": time.perf_counter() - started,
                     "test_error": float(np.mean(model.predict(X_test) != y_test)),
                     "support_vectors": int(model.support_.size)})
    return rows


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
                        "test_error": svc_error, "ratio": 1.0, "support_vectors": int(svc.support_.size)})
        for solver, multi_class in (("SBP one-vs-rest", "ovr"), ("SBP one-vs-one", "ovo")):
            for row in run(X, y, X_test, y_test, gamma, epochs, multi_class):
                results.append({"dataset": name, "solver": f"{solver}, batch {BATCH}", **row,
                                "ratio": row["seconds"] / svc_seconds})
                print(results[-1], flush=True)
    columns = [("data", "dataset", "s"), ("solver", "solver", "s"), ("epochs", "epochs", "g"),
               ("nu", "nu", ".2g"), ("fit s", "seconds", ".2f"), ("ratio to SVC's fit", "ratio", ".2f"),
               ("test error", "test_error", ".2%"), ("support vectors", "support_vectors", "g")]
    report("sbp_one_vs_one", ["numpy"], columns=columns,
           title="Multiclass SBP, one-vs-rest against one-vs-one, beside SVC (KEEL, standardized; fit times)",
           payload={"dataset": "KEEL " + ", ".join(args.datasets),
                    "parameters": {"quick": args.quick, "batch_size": BATCH, "epochs": epochs, "C": 1.0},
                    "results": results})


if __name__ == "__main__":
    main()
