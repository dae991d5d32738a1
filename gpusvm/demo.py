"""The main job (``gpusvm demo``): gpusvm's solvers beside scikit-learn's on the embedded Adult data.

Three comparisons, each printed as fit time, test accuracy and the ratio of fit times, at
the settings of the README's headline table:

1. **Kernel SVM**: :class:`SBPClassifier` beside scikit-learn's :class:`~sklearn.svm.SVC`
   (LIBSVM) in the SBP paper's Adult setting without a bias: an rbf kernel with
   ``sigma^2 = 10`` (``gamma = 1/20``), SVC's ``C = 1`` and SBP's ``nu = 1.10e-2``, batches
   of 64 (``bench/sbp_kernel.py`` runs this setting and the paper's other, with a bias and
   ``C = 100``).
2. **Linear SVM**: :class:`PegasosSVC` beside :class:`~sklearn.svm.LinearSVC` (hinge loss,
   ``C = 1``; ``bench/adult_linear.py``).
3. **Logistic regression**: :class:`FTRLClassifier` beside
   :class:`~sklearn.linear_model.LogisticRegression` (``C = 1``).

By default the models train on the first :data:`DEFAULT_ROWS` training rows, so that the
run is short (its time on a CPU: ``docs/user_guide/install.md``); ``full=True`` (``gpusvm demo --full``) trains
on all of them, as the headline table does, and ``--quick`` on :data:`QUICK_ROWS`. Every
model is tested on all 16,281 test rows. Each fit and each prediction is named as it
starts; on a terminal, the elapsed seconds of scikit-learn's fits (which have no progress
bar) count on standard error, and gpusvm's fits show their own bar once they take 5
seconds. On a machine with a CUDA device, ``backend='auto'`` runs gpusvm's models on it,
after a small untimed fit that compiles the CUDA kernels.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC, LinearSVC

from ._backend import is_device_backend, resolve_backend
from .datasets import load_adult
from .linear_model import FTRLClassifier
from .sbp import SBPClassifier
from .svm import PegasosSVC

# The SBP paper's Adult setting without a bias, the README's headline row:
# sigma^2 = 10 in exp(-||x - x'||^2 / (2 sigma^2)), SVC's C = 1, SBP's nu = 1.10e-2.
ADULT_SIGMA2 = 10.0
ADULT_GAMMA = 1.0 / (2 * ADULT_SIGMA2)
ADULT_C = 1.0
ADULT_NU = 1.10e-2
SBP_BATCH_SIZE = 64

QUICK_ROWS = 3_000  # --quick: a smoke run
DEFAULT_ROWS = 20_000  # the default: a short run, most of it SVC's fit and prediction (docs/user_guide/install.md)
WARM_UP_ROWS = 500  # the untimed fit that compiles the CUDA kernels before a timed GPU fit
TICK_SECONDS = 1.0


def demo_pairs(backend, seed=0):
    """(title, gpusvm model, scikit-learn model) triples, gpusvm's on ``backend``."""
    return [
        (
            f"Kernel SVM (rbf, sigma^2 = {ADULT_SIGMA2:g}, C = {ADULT_C:g}; SBP: nu = {ADULT_NU:g}, no bias)",
            (
                "gpusvm SBPClassifier",
                SBPClassifier(
                    nu=ADULT_NU,
                    gamma=ADULT_GAMMA,
                    fit_intercept=False,
                    batch_size=SBP_BATCH_SIZE,
                    random_state=seed,
                    backend=backend,
                ),
            ),
            ("scikit-learn SVC (LIBSVM)", SVC(C=ADULT_C, gamma=ADULT_GAMMA)),
        ),
        (
            "Linear SVM (hinge, C = 1)",
            ("gpusvm PegasosSVC", PegasosSVC(C=1.0, random_state=seed, backend=backend)),
            ("scikit-learn LinearSVC", LinearSVC(C=1.0, loss="hinge", dual=True, max_iter=100_000)),
        ),
        (
            "Logistic regression (C = 1)",
            ("gpusvm FTRLClassifier (online)", FTRLClassifier(random_state=seed, backend=backend)),
            ("scikit-learn LogisticRegression", LogisticRegression(C=1.0, max_iter=1000)),
        ),
    ]


class _Elapsed:
    """Counts the seconds of a step on standard error, in place, while it runs: only on
    a terminal (a log gets the step's named line and no stream of counts), and erased
    when the step ends, so that the table's lines stay as they are."""

    def __init__(self, label, stream=None):
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        isatty = getattr(self.stream, "isatty", None)
        if isatty is not None and isatty():
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _tick(self):
        start = time.perf_counter()
        while not self._stop.wait(TICK_SECONDS):
            self.stream.write(f"\r      {self.label} ... {time.perf_counter() - start:.0f} s")
            self.stream.flush()


def _fit_and_score(name, model, X, y, X_test, y_test, say, count_fit):
    """Fit and test one model, naming each step as it starts; (fit seconds, test accuracy).

    ``count_fit``: count the fit's seconds (a model without a progress bar of its own;
    gpusvm's draw theirs on the same stream)."""
    say(f"  {name}: fitting on {X.shape[0]:,} rows ...")
    start = time.perf_counter()
    with _Elapsed("fitting") if count_fit else contextlib.nullcontext():
        model.fit(X, y)
    seconds = time.perf_counter() - start
    say(f"  {name}: fitted in {seconds:.1f} s; predicting the {X_test.shape[0]:,} test rows ...")
    with _Elapsed("predicting"):
        accuracy = float(np.mean(model.predict(X_test) == y_test))
    return seconds, accuracy


def run_demo(backend="auto", n_train=None, out=print, *, full=False):
    """Fit each pair on Adult, naming each step as it starts, and print a table a pair;
    returns the rows.

    Parameters
    ----------
    backend : {'auto', 'numpy', 'cupy'}
    n_train : int, optional
        Train on the first ``n_train`` training rows; by default :data:`DEFAULT_ROWS`,
        or all 32,561 with ``full``.
    out : callable
        Where the lines go; each is flushed as it is written.
    full : bool, default=False
        Train on all the training rows, as the README's headline table does (most of
        the time SVC's).

    Returns
    -------
    list of dict
        One per model: ``task``, ``solver``, ``backend``, ``fit_seconds``,
        ``test_accuracy`` and, for gpusvm's, ``time_ratio`` (its fit time over
        scikit-learn's).
    """
    if full and n_train is not None:
        raise ValueError(f"run_demo takes n_train or full=True, not both; got n_train={n_train!r} and full=True.")

    def say(line=""):
        out(line)
        sys.stdout.flush()

    started = time.perf_counter()
    resolved = resolve_backend(backend)
    say(f"gpusvm demo: gpusvm's solvers beside scikit-learn's on the UCI Adult data (gpusvm backend: {resolved})")
    say("Loading the Adult data shipped with gpusvm ...")
    X, y, X_test, y_test = load_adult()
    n_all = X.shape[0]
    if not full:
        n_rows = DEFAULT_ROWS if n_train is None else n_train
        X, y = X[:n_rows], y[:n_rows]
    scope = "all" if X.shape[0] == n_all else f"the first {X.shape[0]:,} of the"
    say(
        f"UCI Adult (a9a encoding): {scope} {n_all:,} training rows, all {X_test.shape[0]:,} test rows, "
        f"{X.shape[1]} features."
    )
    if not full and n_train is None:
        say(
            f"About a minute on two CPU cores. With --full: all {n_all:,} rows, as in the README's "
            f"headline table (about two minutes); with --quick: {QUICK_ROWS:,} rows (seconds)."
        )
    header = f"{'solver':<34} {'backend':<8} {'fit time (s)':>12} {'test accuracy':>14} {'time ratio':>11}"
    rows = []
    for task, (ours_name, ours), (theirs_name, theirs) in demo_pairs(resolved):
        say("")
        say(task)
        their_seconds, their_accuracy = _fit_and_score(theirs_name, theirs, X, y, X_test, y_test, say, True)
        if is_device_backend(resolved):
            say(f"  {ours_name}: an untimed fit on {WARM_UP_ROWS} rows (compiles the CUDA kernels once) ...")
            clone(ours).fit(X[:WARM_UP_ROWS], y[:WARM_UP_ROWS])
        our_seconds, our_accuracy = _fit_and_score(ours_name, ours, X, y, X_test, y_test, say, False)
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
        say(header)
        say("-" * len(header))
        for row in pair:
            ratio = "" if row["time_ratio"] is None else f"{row['time_ratio']:.2f}x"
            say(
                f"{row['solver']:<34} {row['backend']:<8} {row['fit_seconds']:>12.2f} "
                f"{row['test_accuracy']:>14.4f} {ratio:>11}"
            )
        rows += pair
    say("")
    say("time ratio: gpusvm's fit time over scikit-learn's (below 1: gpusvm is faster).")
    say(f"The demo took {time.perf_counter() - started:.0f} s.")
    return rows
