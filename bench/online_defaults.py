"""The online learners at their defaults, as a new user meets them, beside SGDClassifier.

Fit time and test log loss of FTRLClassifier, TruncatedGradientClassifier,
FOBOSClassifier and RDAClassifier at batch sizes 32, 256, 1024 and 'auto' (everything
else at its default, five epochs), and of SGDClassifier(loss='log_loss') at its defaults
(it stops on its own tol) and for one epoch, on four data sets: Adult; a hashed
census-like stream (200,000 training rows of 40 categorical fields hashed into 2^18
columns, ``bench/datasets.py``'s ``HashedStream``; 200,000 fresh rows to test); and two small ones, Adult's
first 2,000 rows (tested on Adult's test set) and half of scikit-learn's breast cancer
data, standardized (284 rows, tested on the other half). It chose the batch-size
defaults: 'auto' is the stream batch (1024 for FTRL, 256 for the others) on the two large
sets and an epoch of 16 steps on the small ones; the ``batch`` column gives the batch
each fit ran at. NumPy backend, the order of the learners alternating between repeats,
median fit time.

    python -m bench.online_defaults [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from bench.common import median, report, timed_fit
from bench.datasets import HashedStream

from gpusvm import FOBOSClassifier, FTRLClassifier, RDAClassifier, TruncatedGradientClassifier
from gpusvm.datasets import load_adult

RULES = (FTRLClassifier, TruncatedGradientClassifier, FOBOSClassifier, RDAClassifier)
BATCH_SIZES = (32, 256, 1024, "auto")


def learners():
    out = []
    for rule in RULES:
        default = rule().batch_size
        for batch in BATCH_SIZES:
            mark = " (default)" if batch == default else ""
            out.append(
                (
                    f"{rule.__name__} batch {batch!r}{mark}",
                    lambda rule=rule, batch=batch: rule(batch_size=batch, random_state=0, backend="numpy"),
                )
            )
    out.append(("SGDClassifier(loss='log_loss') defaults", lambda: SGDClassifier(loss="log_loss", random_state=0)))
    out.append(
        (
            "SGDClassifier(loss='log_loss') one epoch",
            lambda: SGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0),
        )
    )
    return out


def data_sets(quick):
    X, y, X_test, y_test = load_adult()
    rows = 20_000 if quick else 200_000
    stream = HashedStream(rows, chunk_rows=rows, n_features=2**18, n_fields=40, seed=0)
    X_hashed, y_hashed = stream.chunk(0)
    X_fresh, y_fresh = stream.chunk(1)
    cancer, cancer_labels = load_breast_cancer(return_X_y=True)
    cancer_train, cancer_test, cancer_y, cancer_y_test = train_test_split(
        StandardScaler().fit_transform(cancer), cancer_labels, test_size=0.5, random_state=0, stratify=cancer_labels
    )
    return {
        "adult": (X, y, X_test, y_test),
        "hashed": (X_hashed.astype(np.float64), y_hashed, X_fresh.astype(np.float64), y_fresh),
        "adult-2k": (X[:2000], y[:2000], X_test, y_test),
        "breast-cancer": (cancer_train, cancer_y, cancer_test, cancer_y_test),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20,000 hashed rows, one repeat (a smoke run)")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    entries = learners()
    rows = []
    for name, (X, y, X_test, y_test) in data_sets(args.quick).items():
        times = {label: [] for label, _ in entries}
        fitted = {}
        for repeat in range(repeats):
            shift = repeat % len(entries)
            for label, make in entries[shift:] + entries[:shift]:
                model = make()
                with warnings.catch_warnings():  # SGD's one epoch does not converge, by design
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    times[label].append(timed_fit(model, X, y, "numpy"))
                fitted[label] = model
        sgd_seconds = median(times["SGDClassifier(loss='log_loss') defaults"])
        for label, _ in entries:
            model = fitted[label]
            seconds = median(times[label])
            rows.append(
                {
                    "data": name,
                    "learner": label,
                    "batch": getattr(model, "batch_size_", None),
                    "median_seconds": seconds,
                    "repeats_seconds": times[label],
                    "ratio_to_sgd_defaults": seconds / sgd_seconds,
                    "test_log_loss": float(log_loss(y_test, model.predict_proba(X_test)[:, 1])),
                    "epochs": int(np.max(model.n_iter_)),
                }
            )
            print(rows[-1]["data"], label, f"{seconds:.3f} s", f"{rows[-1]['test_log_loss']:.4f}", flush=True)
    columns = [
        ("data", "data", "s"),
        ("learner", "learner", "s"),
        ("batch", "batch", "d"),
        ("fit (s, median)", "median_seconds", ".3f"),
        ("time / SGD defaults", "ratio_to_sgd_defaults", ".2f"),
        ("epochs", "epochs", "d"),
        ("test log loss", "test_log_loss", ".4f"),
    ]
    report(
        "online_defaults",
        ["numpy"],
        columns=columns,
        title="## Online learners at their defaults, by batch size, beside SGDClassifier(loss='log_loss')",
        payload={
            "dataset": {
                "adult": "UCI Adult (a9a encoding)",
                "hashed": "HashedStream: 40 fields, 2^18 columns, seed 0 (chunk 0 train, 1 test)",
                "adult-2k": "UCI Adult's first 2,000 training rows, its whole test set",
                "breast-cancer": "scikit-learn's breast cancer, standardized, a stratified half (seed 0) to train",
            },
            "parameters": {"batch_sizes": list(BATCH_SIZES), "repeats": repeats, "quick": args.quick},
            "results": rows,
        },
    )


if __name__ == "__main__":
    main()
