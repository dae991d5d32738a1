"""What every gpusvm classifier shares: backend choice, target encoding, rollback."""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import check_classification_targets

from .._backend import (
    BACKENDS,
    cupy_device_count,
    get_namespace,
    is_cupy_array,
    is_device_backend,
    namespace_of,
    resolve_backend,
    to_numpy,
)
from .._validation import (
    check_classes,
    check_is_fitted,
    check_some_weight,
    check_weights,
    check_X,
    class_weight_per_sample,
    largest_absolute_value,
    one_vs_rest_targets,
    to_backend,
)


# Set (in this thread) while gpusvm scores rows it has checked itself: see checked_rows.
_ROWS_CHECKED = contextvars.ContextVar("gpusvm_rows_checked", default=False)


@contextlib.contextmanager
def checked_rows():
    """Score rows gpusvm has validated (a fit's X) or made (a loaded file's probe row)
    without validating them again: the check would warn a model fitted on a DataFrame
    that they have no feature names, which a user reads as a mistake of their own. (A
    context variable, not a warnings filter: filters are the whole process's, and two
    fits in threads would leave one behind.)"""
    token = _ROWS_CHECKED.set(True)
    try:
        yield
    finally:
        _ROWS_CHECKED.reset(token)


def scores_like_input(scores, X):
    """Decision scores as the caller expects them: one column becomes a 1-D array, and
    the result is on the device only when X was."""
    scores = scores.ravel() if scores.shape[1] == 1 else scores
    if is_cupy_array(scores) and not is_cupy_array(X):
        return scores.get()
    return scores


_FINITE_CHECK_ROWS = 64  # training rows whose decision values must be finite after a fit
_OWN = object()  # _targets_and_weights: the estimator's own class_weight


@contextlib.contextmanager
def restore_on_error(estimator):
    """Put every attribute of ``estimator`` back as it was if the block raises.

    Fitting code replaces arrays rather than mutating them, so a shallow snapshot is
    enough for "a failed fit or partial_fit leaves the model as it was".
    """
    snapshot = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(snapshot)
        raise


class GPUClassifierMixin(ClassifierMixin, BaseEstimator):
    """Backend handling and one-vs-rest targets for the classifiers.

    Fitted attributes are NumPy arrays on the host, so that a model pickles and
    predicts anywhere; prediction runs on the training backend when it is still
    available (results come back as NumPy unless the input was a CuPy array).
    """

    _backend_constraint = [StrOptions(set(BACKENDS))]
    _verbose_constraint = ["verbose", StrOptions({"auto"})]  # 'auto': a bar on long work only

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __getstate__(self):
        # A solver state kept for partial_fit travels on the host, so that a model
        # pickled on a GPU machine resumes anywhere.
        state = super().__getstate__()
        if "_state" in state:
            state["_state"] = state["_state"].to(np)
        return state

    def _partial_fit_classes(self, classes):
        """The ``classes`` of a ``partial_fit`` call: required (two or more) on the first
        call; later None or the same set as ``classes_``."""
        if not hasattr(self, "classes_"):
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            return self._classes_for_fit(np.asarray(classes))
        if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(
                f"classes={np.asarray(classes).tolist()!r} is not the same as on the first call "
                f"to partial_fit, which was {self.classes_.tolist()!r}."
            )
        return self.classes_

    # What a fit from scratch drops first: the state a partial_fit would continue from.
    _training_state = ("backend_", "classes_", "_state", "_seed")

    def _forget_training_state(self):
        """Drop the attributes in ``_training_state`` (a fit starts from scratch)."""
        for name in self._training_state:
            self.__dict__.pop(name, None)

    def _fit_backend(self):
        """The resolved backend for this fit (``backend_`` once a model exists)."""
        return getattr(self, "backend_", None) or resolve_backend(self.backend)

    def _fit_namespace(self, *, each_call=False):
        """The resolved backend's name for this fit, and its array module: decided once a
        fit, and passed down from there. ``each_call``: from the ``backend`` setting at
        every call, not ``backend_`` (a model whose state moves where each call trains)."""
        backend = resolve_backend(self.backend) if each_call else self._fit_backend()
        return backend, get_namespace(backend)

    def _targets_and_weights(self, y, sample_weight, classes, class_weight=_OWN):
        """One-vs-rest targets in {-1, +1} and per-sample weights (times class weights:
        the estimator's ``class_weight``, or the one given)."""
        class_weight = self.class_weight if class_weight is _OWN else class_weight
        targets = one_vs_rest_targets(y, classes)
        weights = check_weights(sample_weight, y.shape[0])
        if class_weight is not None:
            weights = weights * class_weight_per_sample(class_weight, y)
            check_some_weight(weights, class_weight)
        return targets, weights

    def _classes_for_fit(self, y):
        """Sorted classes of y; rejects continuous targets and a single class."""
        check_classification_targets(y)
        return check_classes(y, type(self).__name__)

    def _check_finite_model(self, X):
        """Refuse a fitted model with NaN or infinite coefficients or decision values (on
        a few training rows), naming the likely cause; raised inside ``restore_on_error``,
        it leaves the estimator as it was before the call."""
        arrays = [getattr(self, name) for name in ("coef_", "dual_coef_", "intercept_") if hasattr(self, name)]
        finite = all(np.isfinite(array).all() for array in arrays)
        if finite:
            with checked_rows():  # X is validated: its column names are gone
                finite = bool(np.isfinite(to_numpy(self.decision_function(X[:_FINITE_CHECK_ROWS]))).all())
        if not finite:
            settings = ""
            if hasattr(self, "kernel"):
                settings = (
                    f" and the kernel settings (kernel={self.kernel!r}, gamma={self.gamma!r}, "
                    f"coef0={self.coef0!r}, degree={self.degree!r})"
                )
            raise ValueError(
                f"{type(self).__name__} learned a model with NaN or infinite values: its arithmetic overflowed. "
                f"The likely cause is the feature scale (X's largest absolute value here is "
                f"{largest_absolute_value(X):.3g}){settings}. Scale the features, e.g. with "
                "sklearn.preprocessing.StandardScaler."
            )

    def _predict_namespace(self, X):
        """Where to compute predictions: the input's device, else the training backend."""
        if is_cupy_array(X):
            return namespace_of(X)
        if is_device_backend(self.backend_) and cupy_device_count() > 0:
            return get_namespace(self.backend_)
        return np

    def _prediction_input(self, X):
        """Check a fitted model's input; return the namespace to predict in and X there."""
        check_is_fitted(self)
        if not _ROWS_CHECKED.get():
            X = check_X(self, X, reset=False)
        xp = self._predict_namespace(X)
        return xp, to_backend(X, xp), X

    def predict(self, X):
        """Class labels for the rows of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._labels_from_scores(self.decision_function(X))

    def _labels_from_scores(self, scores):
        """The class labels that :meth:`decision_function` scores stand for (the positive
        class above 0 for two classes, else the highest score)."""
        scores = to_numpy(scores)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[scores.argmax(axis=1)]
