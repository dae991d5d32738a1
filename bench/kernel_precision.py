"""float32 kernel values against float64 on rows far from the origin and on tiny values.

Where ``kernel_dtype='auto'`` takes float32 and where float64: for each kernel, a
standardized binary set (``make_classification``, 20 features, 1,500 training and 1,000
test rows, two seeds) shifted by a constant or scaled down, SBPClassifier trained with
float32 and with float64 kernel values at the same ``nu``, ``tol=None`` and a fixed
number of epochs (the same steps), beside the float32 error bound of
``gpusvm.kernel_functions.float32_kernel_error``, the dtype 'auto' picks, and SVC's
test accuracy (a float32 accuracy left empty: forced float32 refused, as its values
overflow). The per-kernel tolerances in ``gpusvm/kernel_functions/_precision.py`` are
read off this table: where float32's accuracy leaves float64's, the bound must be
above the tolerance.

    python -m bench.kernel_precision [--quick]
"""

from __future__ import annotations

import argparse
import warnings

from sklearn.datasets import make_classification
from sklearn.svm import SVC

from bench.common import report

from gpusvm import SBPClassifier
from gpusvm.kernel_functions import FLOAT32_KERNEL_TOLERANCE, float32_kernel_error, row_statistics

SHIFTS = [0.0, 2.0, 5.0, 10.0, 20.0, 100.0, 1e4]
SCALES = [1e-20, 1e-30]
KERNELS = {"linear": {}, "poly": {"coef0": 1.0}, "rbf": {}}
EPOCHS = 10
NU = 0.01


def data(seed):
    X, y = make_classification(n_samples=2500, n_features=20, n_informative=10, random_state=seed)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X[:1500], y[:1500], X[1500:], y[1500:]


def run(kernel, seed, changes):
    """One row per change of the data (``('shift', c)`` or ``('scale', s)``)."""
    X, y, X_test, y_test = data(seed)
    rows = []
    for change, amount in changes:
        move = (lambda A: A + amount) if change == "shift" else (lambda A: A * amount)
        X_train, X_held = move(X), move(X_test)
        settings = dict(kernel=kernel, nu=NU, tol=None, max_iter=EPOCHS, random_state=0, **KERNELS[kernel])
        accuracy = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # float32 forced where it warns, levels <= 0: the table shows them
            for dtype in ("float32", "float64", "auto"):
                try:
                    model = SBPClassifier(kernel_dtype=dtype, **settings).fit(X_train, y)
                except ValueError as refused:  # float32 forced where it cannot hold the kernel's values
                    print(f"kernel_dtype={dtype!r} refused: {refused}", flush=True)
                    accuracy[dtype] = None
                    continue
                accuracy[dtype] = float(model.score(X_held, y_test))
            picked = model.kernel_dtype_
            gamma = model.gamma_
        bound = float32_kernel_error(
            row_statistics(X_train, centred=kernel == "rbf"),
            kernel=kernel,
            gamma=gamma,
            **KERNELS[kernel],
        )
        svc = SVC(kernel=kernel, **KERNELS[kernel]).fit(X_train, y).score(X_held, y_test)
        row = {
            "kernel": kernel,
            "seed": seed,
            "change": f"{change} {amount:g}",
            "bound": bound,
            "tolerance": FLOAT32_KERNEL_TOLERANCE[kernel],
            "auto": picked,
            "float32": accuracy["float32"],
            "float64": accuracy["float64"],
            "float32_minus_float64": None if accuracy["float32"] is None else accuracy["float32"] - accuracy["float64"],
            "svc": float(svc),
        }
        rows.append(row)
        print(row, flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed, two shifts: a smoke run")
    args = parser.parse_args()
    seeds = [0] if args.quick else [0, 1]
    changes = [("shift", 0.0), ("shift", 100.0)] if args.quick else [("shift", c) for c in SHIFTS]
    changes += [] if args.quick else [("scale", s) for s in SCALES]
    results = [row for kernel in KERNELS for seed in seeds for row in run(kernel, seed, changes)]
    columns = [
        ("kernel", "kernel", "s"),
        ("seed", "seed", "d"),
        ("data", "change", "s"),
        ("float32 bound", "bound", ".2g"),
        ("tolerance", "tolerance", ".0e"),
        ("'auto' takes", "auto", "s"),
        ("float32 accuracy", "float32", ".3f"),
        ("float64 accuracy", "float64", ".3f"),
        ("float32 - float64", "float32_minus_float64", "+.3f"),
        ("SVC", "svc", ".3f"),
    ]
    report(
        "kernel_precision",
        ["numpy"],
        columns=columns,
        title=(
            f"SBPClassifier's float32 and float64 kernel values on shifted and scaled rows (nu={NU}, "
            f"{EPOCHS} epochs, tol=None; 1,500 training rows, 20 features)"
        ),
        payload={
            "dataset": "make_classification(2500, 20 features, 10 informative), standardized, then shifted or scaled",
            "parameters": {"quick": args.quick, "seeds": seeds, "nu": NU, "epochs": EPOCHS},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
