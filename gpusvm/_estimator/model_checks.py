"""What a loaded model must hold before :func:`gpusvm.load` returns it.

A model file's parts are checked one by one (kind, dtype, shape, finiteness, sign) and
against each other (the weights against the solver state they came from, the classes
sorted and unique), so that an edited or damaged file is refused at load time instead
of failing deep inside a later call, or, worse, predicting something wrong.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

from ..solvers.online_logistic import OnlineState
from ..solvers.pegasos import PegasosState
from .kernel_model import KernelModelMixin
from .linear_model import LinearModelMixin

FLOAT_KINDS = (np.dtype(np.float32), np.dtype(np.float64))


class InconsistentModel(ValueError):
    """A fitted attribute of the wrong kind, or parts of a model that disagree."""


def required_attributes(model):
    """The fitted attributes a model of this class cannot predict or continue without."""
    names = ["classes_", "n_features_in_", "backend_", "intercept_"]
    if isinstance(model, LinearModelMixin):
        names += ["coef_", "_state", "_seed", "t_"]
    if isinstance(model, KernelModelMixin):
        names += ["support_", "support_vectors_", "dual_coef_", "gamma_"]
    if hasattr(model, "lam"):
        names.append("lam_")
    return names


def check_model_parts(model, classes, n_features):
    """Raise :class:`InconsistentModel` naming the first attribute that is wrong.

    Parameters
    ----------
    model : estimator with its fitted attributes set from the file
    classes : list
        The classes the file's metadata lists.
    n_features : object
        The feature count the file's metadata gives.
    """
    attributes = model.__dict__
    for name in required_attributes(model):
        if name not in attributes:
            raise InconsistentModel(f"the fitted attribute {name} is missing")
    n_outputs = _check_classes(model.classes_, classes)
    if getattr(model, "multi_class", None) == "ovo" and n_outputs > 1:
        n_outputs = n_outputs * (n_outputs - 1) // 2  # a one-vs-one model: a decision column per pair
    if not _is_int(n_features) or n_features < 1 or model.n_features_in_ != n_features:
        raise InconsistentModel(f"n_features_in_ is {model.n_features_in_!r}, the metadata says {n_features!r}")
    if model.backend_ not in ("numpy", "cupy"):
        raise InconsistentModel(f"backend_ is {model.backend_!r}")
    for name, check in _SCALARS.items():
        if name in attributes and not check(attributes[name]):
            raise InconsistentModel(f"{name} is {attributes[name]!r}, which no fit gives")
    _check_float_array(model, "intercept_", (n_outputs,))
    if "coef_" in attributes:
        _check_float_array(model, "coef_", (n_outputs, n_features))
        if "n_nonzero_" in attributes and attributes["n_nonzero_"] != np.count_nonzero(model.coef_):
            raise InconsistentModel(
                f"n_nonzero_ is {attributes['n_nonzero_']!r}, coef_ has {np.count_nonzero(model.coef_)}"
            )
    if "feature_names_in_" in attributes:
        _check_feature_names(attributes["feature_names_in_"], n_features)
    if "support_vectors_" in attributes:
        _check_kernel_model(model, n_outputs, n_features)
    if "_state" in attributes:
        _check_state(model, n_outputs, n_features)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


_SCALARS = {
    "lam_": lambda value: _is_real(value) and value > 0,
    "gamma_": lambda value: _is_real(value) and value > 0,
    "_seed": lambda value: _is_int(value) and 0 <= value < 2**64,
    "t_": lambda value: _is_int(value) and value >= 0,
    "n_iter_": lambda value: _is_real(value) and value >= 0,
    "n_nonzero_": lambda value: _is_int(value) and value >= 0,
    "batch_size_": lambda value: _is_int(value) and value >= 1,
    "nu_": lambda value: _is_real(value) and value > 0,
    "kernel_values_source_": lambda value: isinstance(value, str),
}


def _check_feature_names(names, n_features):
    """feature_names_in_ as a fit on a DataFrame leaves it: one distinct string a feature."""
    if not isinstance(names, np.ndarray) or names.ndim != 1 or not all(isinstance(name, str) for name in names):
        raise InconsistentModel(f"feature_names_in_ is {_kind(names)}, not an array of strings")
    if names.shape[0] != n_features:
        raise InconsistentModel(f"feature_names_in_ names {names.shape[0]} features, the model has {n_features}")
    if len(set(names.tolist())) != n_features:
        raise InconsistentModel("feature_names_in_ repeats a name")


def _check_classes(classes_, classes):
    """classes_ sorted, unique, real labels, and as the metadata lists them; returns the
    number of decision columns (1 for two classes)."""
    if not isinstance(classes_, np.ndarray) or classes_.ndim != 1 or classes_.tolist() != classes:
        raise InconsistentModel("classes_ differs from the classes listed in its metadata")
    if classes_.shape[0] < 2:
        raise InconsistentModel(f"it has {classes_.shape[0]} class(es)")
    if classes_.dtype.kind == "c":
        raise InconsistentModel(f"classes_ has complex dtype {classes_.dtype}")
    if not np.array_equal(np.unique(classes_), classes_):
        raise InconsistentModel(f"classes_ {classes!r} is not sorted and unique, as a fit leaves it")
    return 1 if classes_.shape[0] == 2 else classes_.shape[0]


def _check_float_array(owner, name, shape, *, at_least=None):
    """``owner.name`` (or the field of a solver state) a finite float32/float64 array of ``shape``."""
    array = getattr(owner, name)
    if sp.issparse(array):
        array = array.data
        shape = None
    if not isinstance(array, np.ndarray) or array.dtype not in FLOAT_KINDS:
        raise InconsistentModel(f"{name} is {_kind(array)}, not a float32 or float64 array")
    if shape is not None and array.shape != tuple(shape):
        raise InconsistentModel(f"{name} has shape {array.shape}, expected {tuple(shape)}")
    if not np.isfinite(array).all():
        raise InconsistentModel(f"{name} holds NaN or infinite values")
    if at_least is not None and array.size and array.min() < at_least:
        raise InconsistentModel(f"{name} holds {array.min()!r}, below {at_least}")


def _check_index_array(model, name, shape):
    array = getattr(model, name)
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "iu" or array.shape != shape:
        raise InconsistentModel(f"{name} is {_kind(array)}, expected integers of shape {shape}")
    if array.size and array.min() < 0:
        raise InconsistentModel(f"{name} holds a negative value")


def _kind(value):
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    return f"a {type(value).__name__}"


def _check_kernel_model(model, n_outputs, n_features):
    support_vectors = model.support_vectors_
    if not (isinstance(support_vectors, np.ndarray) or sp.issparse(support_vectors)):
        raise InconsistentModel(f"support_vectors_ is {_kind(support_vectors)}")
    if support_vectors.ndim != 2 or support_vectors.shape[1] != n_features:
        raise InconsistentModel(f"support_vectors_ has shape {support_vectors.shape} for {n_features} features")
    n_support = support_vectors.shape[0]
    _check_float_array(model, "support_vectors_", (n_support, n_features))
    _check_float_array(model, "dual_coef_", (n_outputs, n_support))
    _check_index_array(model, "support_", (n_support,))
    if "water_level_" in model.__dict__:
        _check_float_array(model, "water_level_", (n_outputs,))
    if "n_support_" in model.__dict__:
        _check_index_array(model, "n_support_", model.classes_.shape)
        if int(model.n_support_.sum()) != n_support:
            raise InconsistentModel(f"n_support_ adds up to {int(model.n_support_.sum())}, not {n_support}")


def _check_state(model, n_outputs, n_features):
    """The solver state that partial_fit continues from: its fields, and the weights it
    gives equal to coef_ and intercept_."""
    state = model._state
    if isinstance(state, PegasosState):
        n_weights = n_features + int(model.fit_intercept)
        _check_float_array(state, "v", (n_outputs, n_weights))
        for name in ("scale_a", "sq_norm_v", "avg_b"):
            _check_float_array(state, name, (n_outputs,), at_least=0.0 if name != "avg_b" else None)
        _check_float_array(state, "avg_p", (n_outputs, n_weights))
        steps, averaging = state.step, state.avg_weight_sum
        weights = state.weights(averaged=model.average is not False) if _is_real(averaging) else None
    elif isinstance(state, OnlineState):
        for name in ("first", "second"):
            _check_float_array(state, name, (n_outputs, n_features + 1))
        steps, averaging = state.t, state.level
        weights = state.coefficients(model._rule()) if _is_real(averaging) else None
    else:
        raise InconsistentModel(f"_state is {_kind(state)}, not the solver state of {type(model).__name__}")
    if not _is_int(steps) or steps != model.t_ or not _is_real(averaging) or averaging < 0:
        raise InconsistentModel(f"the solver state's counters ({steps!r}, {averaging!r}) do not fit t_={model.t_!r}")
    saved = np.column_stack([model.coef_, model.intercept_])
    if isinstance(state, PegasosState) and not model.fit_intercept:
        weights = np.column_stack([weights, np.zeros(n_outputs)])
    if not np.allclose(weights, saved, rtol=1e-6, atol=1e-12):
        raise InconsistentModel("coef_ and intercept_ are not the weights its solver state holds")
