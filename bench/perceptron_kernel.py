"""The online kernel Perceptron for several epochs: the baseline of the SBP paper's Figure 2.

The Perceptron visits the training rows in a fresh random order each epoch and, on a
mistake (``y_i f(x_i) <= 0``), adds ``y_i K(x_i, .)`` to ``f``. As in the paper (and as
``sbp_kernel.py`` counts SBP), it keeps the responses ``f(x_j)`` of all training rows up to
date, so a mistake costs one kernel row: ``n`` kernel evaluations; checking a row costs none.
Records the test error and the kernel evaluations after each epoch, at the kernel of the
"no bias" setting of ``sbp_kernel.py`` (the Perceptron has no bias), so that
``make_report.py`` draws these curves into the same panels as SBP's and Kernel Pegasos'.

    python -m bench.perceptron_kernel [--datasets adult mnist8] [--epochs 4] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import PAPER_SETTINGS, device_tag, markdown_table, write_results
from bench.datasets import kernel_svm_rows, load

from gpusvm.kernel_functions import kernel_block, squared_row_norms


def test_error(X, support, coefficients, X_test, y_test, gamma, positive):
    if support.size == 0:
        return float(np.mean(y_test != positive))  # f = 0 predicts the negative class
    scores = kernel_block(X_test, X[support], kernel="rbf", gamma=gamma) @ coefficients[support]
    return float(np.mean((scores > 0) != (y_test == positive)))


def perceptron_curve(X, y, X_test, y_test, gamma, epochs, seed=0):
    """Test error and kernel evaluations after each epoch of the kernel Perceptron."""
    n = X.shape[0]
    positive = np.unique(y)[1]
    signs = np.where(y == positive, 1.0, -1.0)
    responses, counts = np.zeros(n), np.zeros(n)
    sq_norms = squared_row_norms(X)
    rng = np.random.default_rng(seed)
    points, evals, seconds = [], 0, 0.0
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        for i in rng.permutation(n):
            if signs[i] * responses[i] <= 0.0:
                row = kernel_block(
                    X[i : i + 1], X, kernel="rbf", gamma=gamma, X_sq_norms=sq_norms[i : i + 1], Y_sq_norms=sq_norms
                )
                responses += signs[i] * np.asarray(row).ravel()
                counts[i] += 1
                evals += n
        seconds += time.perf_counter() - started
        support = np.flatnonzero(counts)
        error = test_error(X, support, counts * signs, X_test, y_test, gamma, positive)
        points.append(
            {
                "epochs": epoch,
                "kernel_evals": evals,
                "seconds": seconds,
                "test_error": error,
                "mistakes": int(counts.sum()),
                "n_support": int(support.size),
            }
        )
        print(f"  Perceptron epoch {epoch}: {points[-1]}", flush=True)
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["adult", "mnist8"], choices=["adult", "mnist8"])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="2,000-3,000 rows, 2 epochs")
    args = parser.parse_args()
    epochs = 2 if args.quick else args.epochs
    curves, rows = [], []
    for name in args.datasets:
        setting = next(s for s in PAPER_SETTINGS[name] if not s["fit_intercept"])
        X, y, X_test, y_test = load(name, **kernel_svm_rows(name, args.quick))
        print(name, X.shape, setting, flush=True)
        points = perceptron_curve(X, y, X_test, y_test, 1 / (2 * setting["sigma2"]), epochs)
        curves.append(
            {
                "dataset": name,
                "sigma2": setting["sigma2"],
                "epochs_label": f"{epochs} epochs",
                "n_train": X.shape[0],
                "points": points,
            }
        )
        rows += [{"dataset": name, **point} for point in points]
    columns = [
        ("data", "dataset", "s"),
        ("epochs", "epochs", "d"),
        ("kernel evaluations", "kernel_evals", ".3g"),
        ("mistakes", "mistakes", "d"),
        ("test error", "test_error", ".2%"),
        ("seconds", "seconds", ".1f"),
    ]
    title = "## The online kernel Perceptron (rbf, the no-bias settings of sbp_kernel.py), epoch by epoch"
    note = "Drawn beside SBP and Kernel Pegasos in the kernel-evaluation figure of question 2."
    payload = {
        "dataset": {"names": args.datasets},
        "parameters": {"epochs": epochs, "quick": args.quick, "repeats": 1},
        "results": rows,
        "curves": curves,
    }
    stem = "perceptron_kernel"
    paths = write_results(stem, ["numpy"], payload, [title, "", *markdown_table(columns, rows), "", note])
    print("wrote", *paths, "on", device_tag(["numpy"]))


if __name__ == "__main__":
    main()
