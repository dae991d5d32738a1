"""The peers that run on a GPU beside gpusvm, each optional.

A peer that cannot be imported, or fails to start, is reported as missing with the reason,
in the result file and in the table: never silently dropped. On the lent GPU machines
they travel with the checkout (``ci/prepare_gpu_run.sh``). cuML is not among them: its
wheels with their dependencies are about 700 MiB, more than such a run can carry.

- ThunderSVM (LIBSVM's SMO on the GPU), built from source for the device
  (``ci/build_thundersvm.sh``): kernel SVM.
- Snap ML (``snapml``, ``use_gpu=True``): linear SVM.
"""

from __future__ import annotations

import time


class MissingPeer(Exception):
    """A peer that cannot run here; the message says why."""


def thundersvm_svc(C, gamma):
    """ThunderSVM's SVC with an rbf kernel on GPU 0."""
    try:
        from thundersvm import SVC
    except Exception as error:  # not installed, or its library fails to load
        raise MissingPeer(f"thundersvm: {type(error).__name__}: {error}") from error
    return SVC(kernel="rbf", C=C, gamma=gamma, gpu_id=0)


def snapml_svm(C, use_gpu=True, max_iter=1000, tol=1e-3):
    """Snap ML's linear SVM, on the GPU or its CPU solver, at LIBLINEAR's objective for the
    same C (``regularizer = 1/C``; a bias feature of value 1, as ``intercept_scaling=1``)."""
    try:
        from snapml import SupportVectorMachine
    except Exception as error:
        raise MissingPeer(f"snapml: {type(error).__name__}: {error}") from error
    return SupportVectorMachine(regularizer=1.0 / C, use_gpu=use_gpu, fit_intercept=True, intercept_scaling=1.0,
                                max_iter=max_iter, tol=tol)


def timed_peer_fit(model, X, y):
    """Seconds for ``model.fit(X, y)`` on a host clock (the peers return once the device
    is done), or raise MissingPeer when the fit itself fails to start on the device."""
    start = time.perf_counter()
    try:
        model.fit(X, y)
    except Exception as error:
        raise MissingPeer(f"{type(model).__module__}: fit failed: {type(error).__name__}: {error}") from error
    return time.perf_counter() - start
