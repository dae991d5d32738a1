"""SBPClassifier as a new user runs it: its defaults apart from ``nu`` and ``gamma``, beside
SVC at its defaults, on data of 6,000 to 20,000 rows (issue 14's "every other data set").

Each data set: scikit-learn's ``SVC()`` (C = 1, gamma = 'scale'), timed; SBP's ``nu`` read
off SVCs at the same parameters (:func:`gpusvm.nu_from_svc`; for more than two classes
the median over the one-vs-one pairs' SVCs, untimed) and SVC's ``gamma``; then
``SBPClassifier`` three ways, each timed:

* ``defaults``: nothing else set (below 50,000 rows no holdout; stops on ``tol``);
* ``a tenth held out``: ``validation_fraction=0.1``, stopping on the holdout error (the
  ``'auto'`` of earlier versions from 10,000 rows);
* ``every epoch``: ``tol=None``, ``max_iter`` (10) epochs on every row.

Data: KEEL magic, penbased and letter (``bench/get_data.sh``, standardized); MNIST's
first 10,000 training rows as digit 8, 3 and 0 against the rest, its first 20,000 as 8
against the rest, and its first 6,000 with all ten digits (pixels in [0, 1], float32).
Test errors on the data sets' test rows (MNIST: all 10,000).

    python bench/sbp_defaults.py [--datasets magic mnist8-10k ...] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np
from sklearn.svm import SVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report, timed_fit  # noqa: E402
from sbp_kernel import median_nu  # noqa: E402

from gpusvm import SBPClassifier, nu_from_svc  # noqa: E402
from gpusvm.datasets import load_keel, load_mnist  # noqa: E402

# MNIST data sets: name -> (training rows, the digit against the rest or None for all ten)
MNIST = {
    "mnist8-10k": (10_000, 8),
    "mnist3-10k": (10_000, 3),
    "mnist0-10k": (10_000, 0),
    "mnist8-20k": (20_000, 8),
    "mnist10-6k": (6_000, None),
}
DATASETS = ["magic", "penbased", "letter", *MNIST]
VARIANTS = {"defaults": {}, "a tenth held out": {"validation_fraction": 0.1}, "every epoch": {"tol": None}}
QUICK_ROWS = 2_000


def load(name, quick):
    if name in MNIST:
        rows, digit = MNIST[name]
        X, y, X_test, y_test = mnist()
        if digit is not None:
            y, y_test = np.where(y == digit, 1, -1), np.where(y_test == digit, 1, -1)
    else:
        X, y, X_test, y_test = load_keel(name)
        rows = X.shape[0]
    rows = min(rows, QUICK_ROWS) if quick else rows
    return X[:rows], y[:rows], X_test, y_test


@functools.cache
def mnist():
    """MNIST, read once for all its subsets (the callers slice it, never write to it)."""
    return load_mnist()


def run(name, quick):
    """SVC's row and SBP's three rows on one data set."""
    X, y, X_test, y_test = load(name, quick)
    svc = SVC()
    svc_seconds = timed_fit(svc, X, y, "numpy")
    svc_error = float(np.mean(svc.predict(X_test) != y_test))
    nu = nu_from_svc(svc, X, y) if np.unique(y).size == 2 else median_nu(svc, X, y, "ovo")
    common = {"dataset": name, "n_train": X.shape[0], "classes": int(np.unique(y).size)}
    rows = [
        {
            **common,
            "solver": "SVC (LIBSVM)",
            "seconds": svc_seconds,
            "ratio": 1.0,
            "test_error": svc_error,
            "above_svc": 0.0,
        }
    ]
    for variant, settings in VARIANTS.items():
        model = SBPClassifier(nu=nu, gamma=svc._gamma, random_state=0, **settings)
        seconds = timed_fit(model, X, y, "numpy")
        error = float(np.mean(model.predict(X_test) != y_test))
        rows.append(
            {
                **common,
                "solver": f"SBP, {variant}",
                "nu": nu,
                "seconds": seconds,
                "ratio": seconds / svc_seconds,
                "test_error": error,
                "above_svc": error - svc_error,
                "epochs": float(np.max(model.n_iter_)),
            }
        )
        print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} training rows: a smoke run")
    args = parser.parse_args()
    results = [row for name in args.datasets for row in run(name, args.quick)]
    columns = [
        ("data", "dataset", "s"),
        ("rows", "n_train", "g"),
        ("classes", "classes", "g"),
        ("solver", "solver", "s"),
        ("nu", "nu", ".3g"),
        ("fit s", "seconds", ".2f"),
        ("ratio to SVC's fit", "ratio", ".2f"),
        ("test error", "test_error", ".2%"),
        ("points above SVC", "above_svc", "+.2%"),
        ("epochs", "epochs", ".2f"),
    ]
    report(
        "sbp_defaults",
        ["numpy"],
        columns=columns,
        title="SBPClassifier at its defaults (nu read off SVC, SVC's gamma) beside SVC() (fit times)",
        payload={
            "dataset": ", ".join(args.datasets),
            "parameters": {"quick": args.quick, "variants": VARIANTS, "svc": "SVC()"},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
