"""SBPClassifier() on small data (a few hundred to a thousand training rows) beside SVC().

What a new user tries first: scikit-learn's breast cancer, wine and digits data, and the
first 600 and 2,000 rows of KEEL magic and 800 of KEEL satimage, each split in halves
(stratified) five times, standardized on the training half. Every solver at its
defaults but the one row that sets ``batch_size=64`` (the default before
``batch_size='auto'``, which below 4,096 training rows draws ``ceil(n / 64)`` a step: an
epoch of about 64 steps). Each row is the mean test error and fit time over the five
splits, timed on the host after an untimed fit on about 300 rows of every class
(``bench/peers.py``), one solver after another.

    python -m bench.sbp_small [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bench.common import report
from bench.datasets import load
from bench.peers import timed_peer_fit

from gpusvm import SBPClassifier

SPLITS = 5
# bench.datasets' names: scikit-learn's small sets whole, KEEL's cut to their first rows (then split in halves)
DATASETS = ["breast_cancer", "wine", "digits", "magic-600", "magic-2000", "satimage-800"]


def solvers(seed):
    return {
        "SVC (LIBSVM)": SVC(),
        "SBPClassifier(batch_size=64)": SBPClassifier(batch_size=64, random_state=seed),
        "SBPClassifier()": SBPClassifier(random_state=seed),
    }


def run(name, splits):
    """One row per solver: its mean test error and fit seconds over the splits."""
    X, y, _, _ = load(name)
    errors, seconds, batches = {}, {}, {}
    for seed in range(splits):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=seed, stratify=y)
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        for solver, model in solvers(seed).items():
            seconds.setdefault(solver, []).append(timed_peer_fit(model, X_train, y_train))
            errors.setdefault(solver, []).append(float(np.mean(model.predict(X_test) != y_test)))
            if isinstance(model, SBPClassifier):
                batches[solver] = model.batch_size_
    svc_error = np.mean(errors["SVC (LIBSVM)"])
    rows = []
    for solver in errors:
        row = {
            "dataset": name,
            "n_train": int(X_train.shape[0]),
            "classes": int(np.unique(y).size),
            "solver": solver,
            "batch": batches.get(solver),
            "seconds": float(np.mean(seconds[solver])),
            "test_error": float(np.mean(errors[solver])),
            "above_svc": float(np.mean(errors[solver]) - svc_error),
            "splits": splits,
        }
        rows.append(row)
        print(row, flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--quick", action="store_true", help="one split of breast_cancer and wine: a smoke run")
    args = parser.parse_args()
    datasets = ["breast_cancer", "wine"] if args.quick else args.datasets
    splits = 1 if args.quick else SPLITS
    results = [row for name in datasets for row in run(name, splits)]
    columns = [
        ("data", "dataset", "s"),
        ("training rows", "n_train", "g"),
        ("classes", "classes", "g"),
        ("solver", "solver", "s"),
        ("batch", "batch", "g"),
        ("fit s", "seconds", ".3f"),
        ("test error", "test_error", ".2%"),
        ("points above SVC", "above_svc", "+.2%"),
    ]
    report(
        "sbp_small",
        ["numpy"],
        columns=columns,
        title=f"SBPClassifier() on small data beside SVC() (means over {splits} stratified half splits)",
        payload={
            "dataset": ", ".join(datasets),
            "parameters": {"quick": args.quick, "splits": splits, "solvers": list(solvers(0))},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
