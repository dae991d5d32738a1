"""SBPClassifier's test error as its nu moves away from SVC's, and where nu='auto' lands.

The question behind ``nu='auto'`` (issue 47): which side of SVC's ``nu`` is safe to miss
on. Each data set: ``SVC()`` (C = 1, gamma = 'scale'); its ``nu`` (:func:`gpusvm.nu_from_svc`,
the median over one-vs-one pairs for more than two classes: ``bench.common.median_nu``);
then ``SBPClassifier(nu=factor * that)`` for factors 1/4 to 4, and ``SBPClassifier()`` (its
pilot's ``nu``), all with ``max_iter=10`` and SVC's gamma rule.

Data: KEEL magic, satimage, penbased and letter, MNIST's first 10,000 training rows as 8
against the rest (``bench/get_data.sh``).

    python -m bench.sbp_nu [--datasets magic letter ...] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.svm import SVC

from bench.common import median_nu, report
from bench.datasets import load

from gpusvm import SBPClassifier, nu_from_svc

DATASETS = ["magic", "satimage", "penbased", "letter", "mnist8-10k"]
FACTORS = [0.25, 0.5, 1.0, 2.0, 4.0]
QUICK_ROWS = 2_000  # training rows of a smoke run, as bench.sbp_defaults'


def run(name, quick):
    """SVC's row, one row per factor of its nu, and the row of nu='auto'."""
    X, y, X_test, y_test = load(name, train_rows=QUICK_ROWS if quick else None)
    svc = SVC().fit(X, y)
    svc_error = float(np.mean(svc.predict(X_test) != y_test))
    svc_nu = nu_from_svc(svc, X, y) if np.unique(y).size == 2 else median_nu(svc, X, y, "ovo")
    common = {"dataset": name, "n_train": X.shape[0], "svc_nu": svc_nu, "svc_error": svc_error}
    rows = []
    for factor in [*FACTORS, "auto"]:
        nu = "auto" if factor == "auto" else factor * svc_nu
        model = SBPClassifier(nu=nu, max_iter=10, random_state=0).fit(X, y)
        error = float(np.mean(model.predict(X_test) != y_test))
        rows.append(
            {
                **common,
                "nu_setting": "nu='auto'" if factor == "auto" else f"{factor:g} x SVC's",
                "nu": model.nu_,
                "ratio_to_svc_nu": model.nu_ / svc_nu,
                "test_error": error,
                "above_svc": error - svc_error,
            }
        )
        print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--quick", action="store_true", help="2,000 training rows: a smoke run")
    args = parser.parse_args()
    results = [row for name in args.datasets for row in run(name, args.quick)]
    columns = [
        ("data", "dataset", "s"),
        ("rows", "n_train", "g"),
        ("SVC's nu", "svc_nu", ".3g"),
        ("SVC's error", "svc_error", ".2%"),
        ("SBP's nu", "nu_setting", "s"),
        ("nu", "nu", ".3g"),
        ("over SVC's nu", "ratio_to_svc_nu", ".2f"),
        ("test error", "test_error", ".2%"),
        ("points above SVC", "above_svc", "+.2%"),
    ]
    report(
        "sbp_nu",
        ["numpy"],
        columns=columns,
        title="SBPClassifier's test error by nu, as a multiple of SVC()'s, and at nu='auto' (max_iter=10)",
        payload={
            "dataset": ", ".join(args.datasets),
            "parameters": {"quick": args.quick, "factors": FACTORS, "max_iter": 10},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
