"""Probabilities from the SVMs on Adult: gpusvm's SVMs in scikit-learn's
``CalibratedClassifierCV(..., ensemble=False)`` beside SVC(probability=True).

scikit-learn 1.9 deprecated ``SVC(probability=True)`` for
``CalibratedClassifierCV(SVC(), ensemble=False)``: Platt's sigmoid fitted on 5-fold
held-out decision values, then the model refitted on every row. gpusvm follows that
road rather than adding a ``probability`` parameter; this script measures what it gives,
in one run: test log loss, Brier score, accuracy and the whole fit's seconds (the five
fold fits, the calibration and the final fit). The kernel settings are the SBP paper's
for Adult with a bias (gamma = 1 / (2 * 100), C = 100, SBP's nu read off that SVC:
5.79e-4, see sbp_kernel.py); the linear SVM uses C = 1.

    python -m bench.probability [--backends numpy cupy] [--quick]
"""

from __future__ import annotations

import argparse
import warnings

from sklearn.calibration import CalibratedClassifierCV
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss
from sklearn.svm import SVC

from bench.common import report, timed_fit

from gpusvm import KernelPegasosSVC, PegasosSVC, SBPClassifier
from gpusvm.datasets import load_adult

GAMMA, C, NU = 1.0 / 200.0, 100.0, 5.79e-4


def calibrated(model):
    return CalibratedClassifierCV(model, method="sigmoid", cv=5, ensemble=False)


def entries(backends):
    out = [
        (
            "scikit-learn SVC(probability=True) (LIBSVM)",
            "numpy",
            lambda: SVC(C=C, gamma=GAMMA, probability=True, random_state=0),
        ),
        ("CalibratedClassifierCV(SVC)", "numpy", lambda: calibrated(SVC(C=C, gamma=GAMMA))),
    ]
    for b in backends:
        out += [
            (
                f"CalibratedClassifierCV(SBPClassifier batch 64) ({b})",
                b,
                lambda b=b: calibrated(SBPClassifier(nu=NU, gamma=GAMMA, batch_size=64, random_state=0, backend=b)),
            ),
            (
                f"CalibratedClassifierCV(KernelPegasosSVC batch 64) ({b})",
                b,
                lambda b=b: calibrated(
                    KernelPegasosSVC(
                        C=C, gamma=GAMMA, batch_size=64, max_iter=5, average=False, random_state=0, backend=b
                    )
                ),
            ),
            (
                f"CalibratedClassifierCV(PegasosSVC, linear, C = 1) ({b})",
                b,
                lambda b=b: calibrated(PegasosSVC(C=1.0, random_state=0, backend=b)),
            ),
        ]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--quick", action="store_true", help="2,000 training rows (a smoke run)")
    args = parser.parse_args()
    X, y, X_test, y_test = load_adult()
    if args.quick:
        X, y = X[:2000], y[:2000]
    if "cupy" in args.backends:  # warm-up: compile the kernels outside the timings
        SBPClassifier(max_iter=1, backend="cupy").fit(X[:500], y[:500])
    rows = []
    for name, backend, make in entries(args.backends):
        model = make()
        with warnings.catch_warnings():  # SVC(probability=True)'s deprecation, said in the docstring
            warnings.simplefilter("ignore", FutureWarning)
            seconds = timed_fit(model, X, y, backend)
        probabilities = model.predict_proba(X_test)[:, 1]
        rows.append(
            {
                "solver": name,
                "backend": backend,
                "seconds": seconds,
                "log_loss": float(log_loss(y_test, probabilities)),
                "brier": float(brier_score_loss(y_test, probabilities, pos_label=model.classes_[1])),
                "test_accuracy": float(accuracy_score(y_test, model.predict(X_test))),
            }
        )
        print(rows[-1], flush=True)
    columns = [
        ("model", "solver", "s"),
        ("fit with calibration (s)", "seconds", ".1f"),
        ("test log loss", "log_loss", ".4f"),
        ("Brier score", "brier", ".4f"),
        ("test accuracy", "test_accuracy", ".4f"),
    ]
    report(
        "probability",
        args.backends,
        columns=columns,
        title=f"## Adult, SVM probabilities: Platt scaling on 5-fold held-out scores ({X.shape[0]} training rows, "
        f"{X_test.shape[0]} test rows)",
        payload={
            "dataset": {
                "name": "UCI Adult (a9a encoding)",
                "n_train": X.shape[0],
                "n_test": X_test.shape[0],
                "n_features": X.shape[1],
            },
            "parameters": {"gamma": GAMMA, "C": C, "nu": NU, "cv": 5, "quick": args.quick},
            "results": rows,
        },
    )


if __name__ == "__main__":
    main()
