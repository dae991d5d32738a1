"""The peers that run beside gpusvm, each optional: on a GPU, and their CPU solvers in the
CPU runs.

A peer that cannot be imported, or fails to start, is reported as missing with the reason,
in the result file and in the table: never silently dropped. On the lent GPU machines
they travel with the checkout (``ci/prepare_gpu_run.sh``). cuML is not among them: its
wheels with their dependencies are about 700 MiB, more than such a run can carry.

- ThunderSVM (LIBSVM's SMO, on the GPU or on every CPU core with OpenMP), built from source
  (``ci/build_thundersvm.sh``, for the device or ``cpu``; ``ci/use_peers.sh`` puts the
  build on the path): kernel SVM. A run uses the build it is labelled with: the GPU label
  refuses a library built without CUDA, the CPU label one built with it.
- torchkm (kernel SVM on PyTorch): its estimator always cross-validates over its ``Cs``;
  given the one C it still fits two folds before the final model, and that is in its time.
- Snap ML (``snapml``, GPU and CPU solvers): linear SVM. Its CPU solver runs in the CPU
  runs too (``pip install snapml``, in the ``bench`` extra).
"""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path

import numpy as np


class MissingPeer(Exception):
    """A peer that cannot run here; the message says why."""


def thundersvm_svc(C, gamma, gpu=True):
    """ThunderSVM's SVC with an rbf kernel, on GPU 0 or (``gpu=False``) on every CPU core."""
    try:
        from thundersvm import SVC
    except Exception as error:  # not installed, or its library fails to load
        raise MissingPeer(f"thundersvm: {type(error).__name__}: {error}") from error
    library = Path(getattr(sys.modules.get("thundersvm.thundersvm"), "lib_path", ""))
    if library.is_file():  # its wrapper loads whichever build sits beside it
        built_with_cuda = any(marker in library.read_bytes() for marker in (b".nv_fatbin", b"__cudaRegisterFatBinary"))
        if built_with_cuda != gpu:
            raise MissingPeer(
                f"thundersvm: {library} is built {'with' if built_with_cuda else 'without'} CUDA; "
                f"this run needs the {'GPU' if gpu else 'CPU'} build (ci/build_thundersvm.sh)"
            )
    where = {"gpu_id": 0} if gpu else {"n_jobs": -1}
    return NumericLabels(SVC(kernel="rbf", C=C, gamma=gamma, **where))


class NumericLabels:
    """A peer whose wrapper takes numbers as labels only (ThunderSVM's converts ``y`` to
    float): fitted on class indices, it predicts the original labels. Other attributes
    (``support_``) are the peer's."""

    def __init__(self, model):
        self.model = model

    def fit(self, X, y):
        from sklearn.preprocessing import LabelEncoder

        self.labels = LabelEncoder()
        self.model.fit(X, self.labels.fit_transform(y).astype(np.float64))
        return self

    def predict(self, X):
        return self.labels.inverse_transform(np.rint(self.model.predict(X)).astype(np.int64))

    def __getattr__(self, name):
        return getattr(self.__dict__["model"], name)


def torchkm_svc(C, gamma):
    """torchkm's kernel SVM on the GPU at SVC's C and rbf gamma (its kernel is
    ``exp(-2 sigma ||x - y||^2)``, so ``sigma = gamma / 2``)."""
    try:
        from torchkm import TorchKMSVC
    except Exception as error:
        raise MissingPeer(f"torchkm: {type(error).__name__}: {error}") from error
    return TorchKMSVC(kernel="rbf", Cs=[C], cv=2, rbf_sigma=gamma / 2, device="cuda", random_state=0)


def kernel_peers(backends, n_classes=2):
    """The kernel SVM peers of a run, by the label the tables give them: the GPU ones beside
    a cupy backend, the CPU ones otherwise. ThunderSVM trains more than two classes one
    against one, as SVC; torchkm runs on two classes only here."""
    if "cupy" in backends:
        return {
            "ThunderSVM SVC (GPU)": thundersvm_svc,
            "torchkm TorchKMSVC (GPU)": torchkm_svc if n_classes == 2 else _two_classes_only,
        }
    return {"ThunderSVM SVC (CPU, all cores)": partial(thundersvm_svc, gpu=False)}


def _two_classes_only(C, gamma):
    raise MissingPeer("torchkm: run on two-class problems only in these benchmarks")


def snapml_svm(C, use_gpu=True, max_iter=1000, tol=1e-3):
    """Snap ML's linear SVM, on the GPU or its CPU solver, at LIBLINEAR's objective for the
    same C (``regularizer = 1/C``; a bias feature of value 1, as ``intercept_scaling=1``)."""
    try:
        from snapml import SupportVectorMachine
    except Exception as error:
        raise MissingPeer(f"snapml: {type(error).__name__}: {error}") from error
    return SupportVectorMachine(
        regularizer=1.0 / C, use_gpu=use_gpu, fit_intercept=True, intercept_scaling=1.0, max_iter=max_iter, tol=tol
    )


def snapml_solvers(backends):
    """``(label, use_gpu)`` of the Snap ML solvers a run times: its CPU solver always, its
    GPU solver beside a cupy backend."""
    gpu = [("snapml SupportVectorMachine (GPU)", True)] if "cupy" in backends else []
    return gpu + [("snapml SupportVectorMachine (CPU)", False)]


WARM_UP_ROWS = 300


def warm_up_rows(y, count=WARM_UP_ROWS):
    """About ``count`` row indices that hold every class (the first rows may not)."""
    labels = np.unique(y)
    per_class = max(1, count // labels.size)
    return np.concatenate([np.flatnonzero(y == label)[:per_class] for label in labels])


def timed_peer_fit(model, X, y):
    """Seconds for ``model.fit(X, y)`` on a host clock (the peers return once the device
    is done), after an untimed fit on a few rows of every class (a peer's first fit loads
    its library, initializes CUDA or compiles); raise MissingPeer when a fit fails."""
    try:
        rows = warm_up_rows(y)
        model.fit(X[rows], y[rows])
        start = time.perf_counter()
        model.fit(X, y)
        return time.perf_counter() - start
    except Exception as error:
        peer = model.model if isinstance(model, NumericLabels) else model
        raise MissingPeer(f"{type(peer).__module__}: fit failed: {type(error).__name__}: {error}") from error
