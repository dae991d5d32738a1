"""The main job: gpusvm's solvers beside scikit-learn's on the embedded Adult data.

Two comparisons, each printed as time, test accuracy and the ratio of fit times:

1. **Kernel SVM**: :class:`SBPClassifier` beside scikit-learn's :class:`~sklearn.svm.SVC`
   (LIBSVM) on the SBP paper's Adult setting with a bias: an rbf kernel with
   ``sigma^2 = 100`` (``gamma = 1/200``), SVC's ``C = 100`` and SBP's ``nu = 5.79e-4``,
   the paper's pair (:func:`nu_from_svc` reads 1.55e-3 off scikit-learn's SVC there;
   ``bench/sbp_kernel.py`` runs both at the paper's values and records each).
2. **Linear and online**: :class:`PegasosSVC` beside :class:`~sklearn.svm.LinearSVC`
   (hinge loss, ``C = 1``), and :class:`FTRLClassifier` beside
   :class:`~sklearn.linear_model.LogisticRegression` (``C = 1``).

On a machine with a CUDA device, ``backend='auto'`` runs gpusvm's models on it.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC, LinearSVC

from ._backend import resolve_backend
from .datasets import load_adult
from .linear_model import FTRLClassifier
from .sbp import SBPClassifier
from .svm import PegasosSVC

# The SBP paper's Adult setting with a bias: sigma^2 = 100 in exp(-||x - x'||^2 / (2 sigma^2)).
ADULT_GAMMA = 1.0 / (2 * 100.0)
ADULT_C = 100.0
ADULT_NU = 5.79e-4  # the SBP paper's nu for this setting


def demo_pairs(backend, seed=0):
    """(title, gpusvm model, scikit-learn model) triples, gpusvm's on ``backend``."""
    return [
        (
            "Kernel SVM (rbf, the SBP paper's setting)",
            ("gpusvm SBPClassifier", SBPClassifier(nu=ADULT_NU, gamma=ADULT_GAMMA, random_state=seed, backend=backend)),
            ("scikit-learn SVC (LIBSVM)", SVC(C=ADULT_C, gamma=ADULT_GAMMA)),
        ),
        (
            "Linear SVM (hinge, C = 1)",
            ("gpusvm PegasosSVC", PegasosSVC(C=1.0, random_state=seed, backend=backend)),
            ("scikit-learn LinearSVC", LinearSVC(C=1.0, loss="hinge", dual=True, max_iter=100_000)),
        ),
        (
            "Logistic regression",
            ("gpusvm FTRLClassifier (online)", FTRLClassifier(random_state=seed, backend=backend)),
            ("scikit-learn LogisticRegression", LogisticRegression(C=1.0, max_iter=1000)),
        ),
    ]


def _fit_and_score(model, X, y, X_test, y_test):
    start = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - start
    return seconds, float(np.mean(model.predict(X_test) == y_test))


def run_demo(backend="auto", n_train=None, out=print):
    """Fit each pair on Adult and print a table; returns the rows.

    Parameters
    ----------
    backend : {'auto', 'numpy', 'cupy'}
    n_train : int, optional
        Use only the first ``n_train`` training rows (a quick run).
    out : callable
        Where the lines go.

    Returns
    -------
    list of dict
        One per model: ``task``, ``solver``, ``backend``, ``fit_seconds``,
        ``test_accuracy`` and, for gpusvm's, ``time_ratio`` (its fit time over
        scikit-learn's).
    """
    resolved = resolve_backend(backend)
    X, y, X_test, y_test = load_adult()
    if n_train is not None:
        X, y = X[:n_train], y[:n_train]
    out(
        f"UCI Adult (a9a encoding): {X.shape[0]} training rows, {X_test.shape[0]} test rows, "
        f"{X.shape[1]} features; gpusvm backend: {resolved}"
    )
    header = f"{'solver':<34} {'backend':<8} {'fit time (s)':>12} {'test accuracy':>14} {'time ratio':>11}"
    rows = []
    for task, (ours_name, ours), (theirs_name, theirs) in demo_pairs(resolved):
        out("")
        out(task)
        out(header)
        out("-" * len(header))
        their_seconds, their_accuracy = _fit_and_score(theirs, X, y, X_test, y_test)
        our_seconds, our_accuracy = _fit_and_score(ours, X, y, X_test, y_test)
        pair = [
            {
                "task": task,
                "solver": ours_name,
                "backend": ours.backend_,
                "fit_seconds": our_seconds,
                "test_accuracy": our_accuracy,
                "time_ratio": our_seconds / their_seconds,
            },
            {
                "task": task,
                "solver": theirs_name,
                "backend": "numpy",
                "fit_seconds": their_seconds,
                "test_accuracy": their_accuracy,
                "time_ratio": None,
            },
        ]
        for row in pair:
            ratio = "" if row["time_ratio"] is None else f"{row['time_ratio']:.2f}x"
            out(
                f"{row['solver']:<34} {row['backend']:<8} {row['fit_seconds']:>12.2f} "
                f"{row['test_accuracy']:>14.4f} {ratio:>11}"
            )
        rows += pair
    out("")
    out("time ratio: gpusvm's fit time over scikit-learn's (below 1: gpusvm is faster).")
    return rows
