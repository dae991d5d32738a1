"""Sparse online logistic regression on Adult: FTRL, TG, FOBOS and RDA beside LogisticRegression.

At each per-example L1 weight ``lambda`` (the objective ``mean log loss + lambda ||w||_1``):

* LogisticRegression with ``penalty='l1'`` (liblinear) and ``penalty='l2'`` at
  ``C = 1 / (lambda n)``, the batch optima;
* TG, FOBOS and RDA with ``l1 = lambda``; FTRL with ``l1 = lambda * t`` (its ``l1`` acts on
  the gradients summed over the ``t = epochs * n`` examples it sees) and ``l2 = 0``.

The online solvers run ``--epochs`` shuffled epochs at ``--batch-size``. TG truncates every
10 examples (Langford et al.'s K = 10, theta = inf). Records test log loss, accuracy, the
number of nonzero weights and fit time, a table at ``--table-lambda``, and the survey's
comparison as a plot: accuracy and log loss against the number of nonzero weights.

    python -m bench.online_adult [--backends numpy cupy] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from bench.common import TimeLimit, markdown_table, timed_fit, write_results

from gpusvm import FOBOSClassifier, FTRLClassifier, RDAClassifier, TruncatedGradientClassifier
from gpusvm.datasets import load_adult

LAMBDAS = [0.0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2]


def online_solvers(lam, n, epochs, batch_size, backend):
    """(name, estimator) pairs at per-example L1 weight ``lam``."""
    common = dict(max_iter=epochs, batch_size=batch_size, random_state=0, backend=backend)
    return [
        (f"FTRL ({backend})", FTRLClassifier(alpha=0.1, beta=1.0, l1=lam * epochs * n, l2=0.0, **common)),
        (f"TG ({backend})", TruncatedGradientClassifier(eta0=0.5, l1=lam, truncate_every=10, **common)),
        (f"FOBOS ({backend})", FOBOSClassifier(eta0=0.5, l1=lam, **common)),
        (f"RDA ({backend})", RDAClassifier(gamma=1.0, l1=lam, **common)),
    ]


def batch_solvers(lam, n):
    if lam == 0.0:
        return [("LogisticRegression L1 (lambda = 0: no penalty)", LogisticRegression(penalty=None, max_iter=5000))]
    C = 1.0 / (lam * n)
    return [
        ("LogisticRegression L1 (liblinear)", LogisticRegression(penalty="l1", C=C, solver="liblinear", max_iter=5000)),
        ("LogisticRegression L2 (lbfgs)", LogisticRegression(penalty="l2", C=C, max_iter=5000)),
    ]


def evaluate(name, model, backend, lam, X, y, X_test, y_test):
    seconds = timed_fit(model, X, y, "numpy" if "LogisticRegression" in name else backend)
    coef = np.asarray(model.coef_)
    return {
        "solver": name,
        "family": name.split(" (")[0],
        "lambda": lam,
        "seconds": seconds,
        "test_log_loss": float(log_loss(y_test, model.predict_proba(X_test))),
        "test_accuracy": float(np.mean(model.predict(X_test) == y_test)),
        "nonzero_weights": int(np.count_nonzero(coef)),
    }


def plot(rows, n_features, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    families = sorted({r["family"] for r in rows if r["family"] != "LogisticRegression L2"})
    for family in families:
        points = sorted((r for r in rows if r["family"] == family), key=lambda r: r["nonzero_weights"])
        style = "k--" if family.startswith("LogisticRegression") else "o-"
        for axis, key in zip(axes, ("test_accuracy", "test_log_loss"), strict=True):
            axis.plot(
                [p["nonzero_weights"] for p in points], [p[key] for p in points], style, label=family, markersize=4
            )
    for axis, label in zip(axes, ("test accuracy", "test log loss"), strict=True):
        axis.set_xlabel(f"nonzero weights (of {n_features})")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Adult: accuracy and log loss against sparsity, L1 weight swept from 0 to 1e-2")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--table-lambda", type=float, default=1e-3)
    parser.add_argument("--quick", action="store_true", help="3,000 training rows, three lambdas (a smoke run)")
    args = parser.parse_args()
    X, y, X_test, y_test = load_adult()
    lambdas = LAMBDAS
    if args.quick:
        X, y, lambdas = X[:3000], y[:3000], [0.0, args.table_lambda, 1e-2]
    n = X.shape[0]
    if "cupy" in args.backends:  # warm-up: compile the kernels outside the timings
        for _, model in online_solvers(1e-3, 500, 1, args.batch_size, "cupy"):
            model.fit(X[:500], y[:500])
    rows = []
    with TimeLimit() as limit:
        for lam in lambdas:
            for name, model in batch_solvers(lam, n):
                rows.append(evaluate(name, model, "numpy", lam, X, y, X_test, y_test))
            for backend in args.backends:
                for name, model in online_solvers(lam, n, args.epochs, args.batch_size, backend):
                    rows.append(evaluate(name, model, backend, lam, X, y, X_test, y_test))
    columns = [
        ("solver", "solver", "s"),
        ("test log loss", "test_log_loss", ".4f"),
        ("test accuracy", "test_accuracy", ".4f"),
        ("nonzero weights", "nonzero_weights", "d"),
        ("fit time (s)", "seconds", ".3f"),
    ]
    at_table = [r for r in rows if r["lambda"] == args.table_lambda]
    sweep_columns = [("lambda", "lambda", ".0e")] + columns
    table = [
        f"## Adult, sparse logistic regression at lambda = {args.table_lambda:g} per example "
        f"({n} training rows, {X.shape[1]} features, {args.epochs} epochs, batch {args.batch_size})",
        "",
        *markdown_table(columns, at_table),
        "",
        "### The whole sweep (plotted in the .png beside this file)",
        "",
        *markdown_table(sweep_columns, rows),
    ]
    payload = {
        "dataset": {
            "name": "UCI Adult (a9a encoding)",
            "n_train": n,
            "n_test": X_test.shape[0],
            "n_features": X.shape[1],
        },
        "parameters": {
            "lambdas": lambdas,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "table_lambda": args.table_lambda,
            "quick": args.quick,
            "ftrl": "alpha=0.1, beta=1, l1=lambda*epochs*n, l2=0",
            "tg": "eta0=0.5, K=10, theta=inf",
            "fobos": "eta0=0.5",
            "rda": "gamma=1",
        },
        "results": rows,
        "stopped_at_time_limit": limit.reached,
    }
    paths = write_results("online_adult", args.backends, payload, table)
    plot_path = paths[0].with_suffix(".png")
    plot(rows, X.shape[1], plot_path)
    print("\n".join(table))
    print("wrote", *paths, plot_path)


if __name__ == "__main__":
    main()
