"""The main job: train each solver on the embedded Adult data and compare with scikit-learn."""

from __future__ import annotations

import time

import numpy as np
from sklearn.svm import LinearSVC

from ._backend import resolve_backend
from .datasets import load_adult
from .linear_model import FTRLClassifier
from .svm import KernelPegasosSVC, PegasosSVC

# sigma^2 = 10 in exp(-||x - x'||^2 / (2 sigma^2)), the SBP paper's choice for Adult.
ADULT_GAMMA = 1.0 / (2 * 10.0)


def demo_models(backend, seed=0):
    """(name, estimator) pairs of the demo: the SVMs at C = 1, and FTRL's logistic regression."""
    return [
        ("gpusvm PegasosSVC", PegasosSVC(C=1.0, random_state=seed, backend=backend)),
        ("gpusvm KernelPegasosSVC (rbf)", KernelPegasosSVC(C=1.0, gamma=ADULT_GAMMA, batch_size=64,
                                                           max_iter=2, random_state=seed, backend=backend)),
        ("gpusvm FTRLClassifier (logistic)", FTRLClassifier(random_state=seed, backend=backend)),
        ("scikit-learn LinearSVC (hinge)", LinearSVC(C=1.0, loss="hinge", dual=True, max_iter=100_000)),
    ]


def run_demo(backend="auto", n_train=None, out=print):
    """Fit every demo model on Adult and print a table; returns the rows.

    Parameters
    ----------
    backend : {'auto', 'numpy', 'cupy'}
    n_train : int, optional
        Use only the first ``n_train`` training rows (a quick smoke run).
    out : callable
        Where the lines go.
    """
    resolved = resolve_backend(backend)
    X, y, X_test, y_test = load_adult()
    if n_train is not None:
        X, y = X[:n_train], y[:n_train]
    out(f"UCI Adult (a9a encoding): {X.shape[0]} training rows, {X_test.shape[0]} test rows, "
        f"{X.shape[1]} features; gpusvm backend: {resolved}")
    rows = []
    for name, model in demo_models(resolved):
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
        accuracy = float(np.mean(model.predict(X_test) == y_test))
        rows.append({"solver": name, "backend": getattr(model, "backend_", "numpy (LIBLINEAR)"),
                     "fit_seconds": seconds, "test_accuracy": accuracy})
    header = f"{'solver':<32} {'backend':<18} {'fit time (s)':>12} {'test accuracy':>14}"
    out(header)
    out("-" * len(header))
    for row in rows:
        out(f"{row['solver']:<32} {row['backend']:<18} {row['fit_seconds']:>12.2f} {row['test_accuracy']:>14.4f}")
    return rows
