"""Model files: ``save(model, path)`` and ``load(path)``, without pickle.

A model file is a zip archive that ``numpy.load`` also reads as ``.npz``: one ``.npy``
member per array (written and read with ``allow_pickle=False``) and ``gpusvm.json``,
which holds everything else::

    {"format": "gpusvm-model", "format_version": 1, "gpusvm_version": "0.1.0",
     "solver": "pegasos", "estimator": "PegasosSVC", "params": {...},
     "classes": [...], "n_features_in": 123, "dtype": "float64",
     "attributes": {...}, "user": {...}}

``attributes`` is every fitted attribute, also the solver state that ``partial_fit``
continues from, so a loaded model is the saved one: same predictions, same next step.
Arrays appear in it as ``{"$array": member, "dtype": ..., "shape": [...]}``; the
other ``$`` tags mark CSR matrices, non-finite floats, tuples, dicts with non-string
keys, string arrays of dtype object and the solver-state dataclasses.  Loading builds
only those types, so it never runs code from the file.

Saving writes a temporary file beside the target and renames it, so an interrupted
save leaves the previous file (or none), never half a model. A save killed outright
(SIGKILL, power loss) can also leave its temporary file, ``.NAME.PID.XXXXXXXX.tmp``
(``NAME`` shortened where the folder's limit on a name's length requires), beside the
target; the next save to the same path removes those whose process has ended. Process
ids are this machine's: in a folder shared with other machines, a save there can remove
a remote writer's temporary file, and that writer's save then fails with an error (its
target file stays whole). ``gpusvm._output_files`` does this for every file gpusvm
writes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._backend import cupy_device_count, is_cupy_array, is_device_backend, resolve_backend, to_numpy
from ._estimator.base import checked_rows
from ._estimator.model_checks import InconsistentModel, check_model_parts
from ._output_files import check_output_path, write_atomically, write_target
from ._registry import SOLVERS, solver_name
from .sbp import kernel_dtype_before_the_parameter
from .solvers.online_logistic import OnlineState
from .solvers.pegasos import PegasosState

FORMAT = "gpusvm-model"
FORMAT_VERSION = 1
# Parameters added after files were written without them, with the value that gives the
# behaviour those files' models were trained with (or a function of the file's fitted
# attributes that gives it).
PARAMETERS_ADDED = {
    "SBPClassifier": {"multi_class": "ovr", "kernel_dtype": kernel_dtype_before_the_parameter, "C": 1.0}
}
METADATA_MEMBER = "gpusvm.json"
_STATE_CLASSES = {cls.__name__: cls for cls in (PegasosState, OnlineState)}
_SAFE_MEMBER = re.compile(r"^[A-Za-z0-9_.]+$")
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class ModelFileError(ValueError):
    """A file that is not a readable gpusvm model: corrupt, truncated, foreign, or
    written in a format version this gpusvm does not read."""


def save(model, path, *, metadata=None, overwrite=False):
    """Write a fitted gpusvm estimator to ``path``, atomically.

    Parameters
    ----------
    model : fitted gpusvm estimator
        A :mod:`gpusvm.dask` estimator is saved as its ``to_local()`` (the single-node
        estimator, which :func:`load` returns).
    path : str or os.PathLike
        The file to write (any extension; ``.npz`` lets NumPy list its arrays). An
        existing gpusvm model file (or an empty file) is replaced only once the new one
        is complete; a symbolic link is written through (the file it points to is
        replaced). A read-only file is never replaced.
    metadata : dict, optional
        Extra facts to keep with the model: numbers, strings, lists, dicts and NumPy
        arrays (the command line records how it read the training data); :func:`load`
        returns them as ``model.metadata_``.
    overwrite : bool, default=False
        Also replace an existing file that is not a gpusvm model file (by default such
        a file, e.g. a data file given by mistake, is left as it is).

    Raises
    ------
    TypeError
        For an object that is not a gpusvm estimator, or a parameter, attribute or
        metadata value that has no safe file form (e.g. ``random_state`` given as a
        ``RandomState``).
    sklearn.exceptions.NotFittedError
        For a model that has not been fitted.
    ValueError
        For a parameter the estimator rejects (set by ``set_params`` after the fit),
        named: :func:`load` would refuse the file.
    FileExistsError, PermissionError, IsADirectoryError, FileNotFoundError
        For a path it must not or cannot write (see :func:`check_model_path`).
    """
    from ._validation import check_is_fitted

    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict or None, got a {type(metadata).__name__}.")
    if not isinstance(overwrite, (bool, np.bool_)):
        raise TypeError(f"overwrite must be True or False, got {overwrite!r}.")
    if _is_dask_estimator(model):
        check_is_fitted(model)
        model = model.to_local()
    solver = solver_name(model)
    check_is_fitted(model)
    model._validate_params()  # a parameter set after the fit that load would refuse
    path = check_model_path(path, overwrite=overwrite)
    arrays = {}
    try:
        params = {
            name: _encode(value, f"params.{name}", arrays) for name, value in model.get_params(deep=False).items()
        }
        attributes = {
            name: _encode(value, name, arrays)
            for name, value in sorted(model.__dict__.items())
            if name not in params and name != "metadata_"
        }
        user = _encode(dict(metadata or {}), "user", arrays)
    except RecursionError:
        raise TypeError(
            "The model or its metadata holds a list or dict that contains itself (or nests "
            "thousands deep), which has no file form."
        ) from None
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "gpusvm_version": _gpusvm_version(),
        "solver": solver,
        "estimator": type(model).__name__,
        "params": params,
        "classes": _encode(model.classes_.tolist(), "classes", {}),
        "n_features_in": int(model.n_features_in_),
        "dtype": str(_main_array(model).dtype),
        "attributes": attributes,
        "user": user,
    }
    text = json.dumps(document, indent=1, allow_nan=False)
    write_atomically(write_target(path), lambda handle: _write_archive(handle, text, arrays))


def _is_dask_estimator(model):
    """A gpusvm.dask estimator: its single-node twin is the one a file holds."""
    local = getattr(type(model), "local_class", None)
    return local in SOLVERS.values() and callable(getattr(model, "to_local", None))


def check_model_path(path, *, overwrite=False, inputs=(), overwrite_hint="overwrite=True"):
    """``path`` as a :class:`~pathlib.Path` that :func:`~gpusvm.model_io.save` can and may write: not a
    folder, in a folder that exists and is writable, not one of ``inputs``, and, when
    it exists, a writable gpusvm model file or empty (or any writable file, with
    ``overwrite``). Called before training by the command line, so that a long fit
    does not end in a path it cannot write.

    Parameters
    ----------
    path : str or os.PathLike
    overwrite : bool, default=False
        Allow replacing an existing file that is not a gpusvm model file.
    inputs : sequence of (name, path)
        Files that must not be replaced (the command line's training data).
    overwrite_hint : str
        How the caller asks to overwrite, for the message.

    Raises
    ------
    IsADirectoryError, FileNotFoundError, PermissionError, FileExistsError
        Each naming the path and what to give instead; ``ValueError`` for an input.
    """
    return check_output_path(
        path,
        what="the model",
        kind="a gpusvm model file",
        replaceable=is_model_file,
        overwrite=overwrite,
        inputs=inputs,
        overwrite_hint=overwrite_hint,
    )


def is_model_file(path):
    """Whether ``path`` starts as :func:`~gpusvm.model_io.save` writes a file (a zip archive whose first
    member is ``gpusvm.json``): also true of a damaged or truncated model file, which a
    new save may replace."""
    with open(path, "rb") as handle:
        head = handle.read(30 + len(METADATA_MEMBER))
    return head.startswith(b"PK\x03\x04") and head[30:] == METADATA_MEMBER.encode()


def load(path, *, backend=None):
    """Read a model written by :func:`~gpusvm.model_io.save`.

    Parameters
    ----------
    path : str or os.PathLike
    backend : {'auto', 'numpy', 'cupy'}, optional
        Where the loaded model predicts and continues training.  By default, where it
        was trained when that backend is available here, else NumPy: a model trained on
        a GPU loads and predicts on a CPU machine.

    Returns
    -------
    estimator
        The fitted estimator, with ``metadata_`` holding the ``metadata`` given to
        :func:`~gpusvm.model_io.save` (an empty dict when there was none).

    Raises
    ------
    ModelFileError
        For a file that is not a zip archive, lacks or garbles ``gpusvm.json``, is of
        another format or a newer format version, names an unknown solver, misses or
        mangles an array, or whose parts do not make a working model.
    FileNotFoundError, PermissionError
        As for any file.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"The model path {str(path)!r} is a folder; give a model file.")
    try:
        with zipfile.ZipFile(path) as archive:
            document = _read_metadata(archive, path)
            reader = _ArrayReader(archive, path)
            cls = SOLVERS[document["solver"]]
            params = _decode(document["params"], reader)
            attributes = _decode(document["attributes"], reader)
            classes = _decode(document["classes"], reader)
            user = _decode(document["user"], reader)
    except (ModelFileError, FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except zipfile.BadZipFile as error:  # not a zip, truncated, or a CRC mismatch
        raise ModelFileError(f"{path} is not a gpusvm model file, or it is damaged: {error}.") from None
    except Exception as error:  # whatever else damaged bytes make the zip or JSON readers raise
        raise ModelFileError(f"{path} is a damaged gpusvm model file: {error!r}.") from None
    model = cls()
    try:
        added = {
            name: value(attributes) if callable(value) else value
            for name, value in PARAMETERS_ADDED.get(cls.__name__, {}).items()
        }
        model.set_params(**{**added, **params})
        model._validate_params()
    except ValueError as error:
        raise ModelFileError(f"{path} holds parameters {type(model).__name__} rejects: {error}") from None
    parameters = model.get_params(deep=False)  # set above, from the checked "params" only
    unfit = [
        name
        for name in attributes
        if not name.isidentifier() or name.startswith("__") or hasattr(cls, name) or name in parameters
    ]
    if unfit:
        raise ModelFileError(f"{path} sets {unfit[0]!r}, which is not a fitted attribute of {cls.__name__}.")
    model.__setstate__({**model.__dict__, **attributes})  # as a pickle's: attributes added since filled in
    model.metadata_ = user
    _check_model(model, path, classes, document["n_features_in"])
    model.backend_ = _loaded_backend(model, backend)
    return model


def _loaded_backend(model, backend):
    if backend is not None:
        model.backend = backend
        return resolve_backend(backend)
    if is_device_backend(model.backend_) and cupy_device_count() == 0:
        return "numpy"
    return model.backend_


def _gpusvm_version():
    from ._version import __version__

    return __version__


def _main_array(model):
    """The array whose dtype the model file records: the weights or the support vectors."""
    return model.coef_ if hasattr(model, "coef_") else model.support_vectors_


# --- encoding to JSON plus arrays --------------------------------------------------


def _encode(value, name, arrays):
    """A JSON form of ``value``; arrays go into ``arrays`` under a member name."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):  # a NumPy bool (numbers.Integral does not take it)
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, np.ndarray) or is_cupy_array(value) or sp.issparse(value):
        return _encode_array(to_numpy(value), name, arrays)
    if type(value).__name__ in _STATE_CLASSES and type(value) is _STATE_CLASSES[type(value).__name__]:
        fields = {
            field.name: _encode(getattr(value, field.name), f"{name}.{field.name}", arrays)
            for field in dataclasses.fields(value)
        }
        return {"$dataclass": type(value).__name__, "fields": fields}
    if isinstance(value, list):
        return [_encode(item, f"{name}.{i}", arrays) for i, item in enumerate(value)]
    if isinstance(value, tuple):
        return {"$tuple": [_encode(item, f"{name}.{i}", arrays) for i, item in enumerate(value)]}
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("$") for key in value):
            return {key: _encode(item, f"{name}.{key}", arrays) for key, item in value.items()}
        return {
            "$dict": [
                [_encode(key, name, arrays), _encode(item, f"{name}.{i}", arrays)]
                for i, (key, item) in enumerate(value.items())
            ]
        }
    article = "an" if type(value).__name__[:1].lower() in "aeiou" else "a"
    raise TypeError(
        f"{_described(name)} cannot be saved: {article} {type(value).__name__} has no safe file form "
        f"(NumPy arrays, numbers, strings, None, lists and dicts do).{_advice(name)}"
    )


def _described(name):
    """What an encoded value is, for a message: ``params.C`` is parameter C, ``user.a.b``
    is metadata value a.b, anything else a fitted attribute."""
    if name.startswith("params."):
        return f"The parameter {name[len('params.') :]}"
    if name == "user" or name.startswith("user."):
        return f"The metadata value {name[len('user.') :]!r}"
    return f"The fitted attribute {name}"


def _advice(name):
    parameter = name[len("params.") :].split(".", 1)[0] if name.startswith("params.") else None
    if parameter == "random_state":
        return " For random_state, pass an int or None."
    if parameter is not None:
        return f" Set {parameter} to one of those (model.set_params) before saving."
    if name.startswith("user"):
        return " Convert it to one of those, or leave it out of metadata."
    return ""


def _encode_array(array, name, arrays):
    if sp.issparse(array):
        array = array.tocsr()
        return {
            "$csr": {
                "shape": list(array.shape),
                "data": _encode_array(array.data, f"{name}.data", arrays),
                "indices": _encode_array(array.indices, f"{name}.indices", arrays),
                "indptr": _encode_array(array.indptr, f"{name}.indptr", arrays),
            }
        }
    if array.dtype == object:
        if array.ndim == 1 and all(isinstance(item, str) for item in array):
            return {"$strings": array.tolist()}  # e.g. feature_names_in_
        raise TypeError(
            f"{_described(name)} cannot be saved: an object array other than a list of strings.{_advice(name)}"
        )
    member = name if _SAFE_MEMBER.match(name) and name not in arrays else f"array{len(arrays)}"
    arrays[member] = np.ascontiguousarray(array)
    return {"$array": member, "dtype": array.dtype.str, "shape": list(array.shape)}


def _write_archive(handle, text, arrays):
    """The model file's bytes, written to ``handle``: ``gpusvm.json``, then the arrays."""
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(METADATA_MEMBER, text)
        for member, array in arrays.items():
            with archive.open(f"{member}.npy", "w", force_zip64=True) as stream:
                np.lib.format.write_array(stream, array, allow_pickle=False)


# --- decoding --------------------------------------------------------------------


def _read_metadata(archive, path):
    try:
        text = archive.read(METADATA_MEMBER)
    except KeyError:
        raise ModelFileError(
            f"{path} is a zip/.npz archive but not a gpusvm model file (it has no {METADATA_MEMBER})."
        ) from None
    try:
        document = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFileError(f"{path}: {METADATA_MEMBER} is not valid JSON ({error}).") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ModelFileError(f"{path} is not a gpusvm model file (its {METADATA_MEMBER} has no format {FORMAT!r}).")
    version = document.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(f"{path} has an invalid model format version {version!r}.")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path} was written by gpusvm {document.get('gpusvm_version', '?')} in model format version "
            f"{version}; this gpusvm ({_gpusvm_version()}) reads versions up to {FORMAT_VERSION}. "
            "Upgrade gpusvm to load it."
        )
    missing = [
        key for key in ("solver", "params", "attributes", "classes", "n_features_in", "user") if key not in document
    ]
    if missing:
        raise ModelFileError(f"{path}: {METADATA_MEMBER} lacks {', '.join(missing)}.")
    shapes = {"params": dict, "attributes": dict, "user": dict, "classes": list, "solver": str}
    for key, kind in shapes.items():
        if not isinstance(document[key], kind):
            raise ModelFileError(
                f"{path}: in {METADATA_MEMBER}, {key} is a {type(document[key]).__name__}, "
                f"not a {'JSON object' if kind is dict else kind.__name__}."
            )
    if document["solver"] not in SOLVERS:
        raise ModelFileError(
            f"{path} names solver {document['solver']!r}, which this gpusvm does not have "
            f"(it has {', '.join(SOLVERS)})."
        )
    return document


class _ArrayReader:
    """Reads ``.npy`` members without pickle and checks them against their description."""

    def __init__(self, archive, path):
        self.archive, self.path = archive, path

    def __call__(self, description):
        member = description["$array"]
        try:
            with self.archive.open(f"{member}.npy") as stream:
                array = np.lib.format.read_array(stream, allow_pickle=False)
        except KeyError:
            raise ModelFileError(f"{self.path} lacks the array {member!r}.") from None
        except ValueError as error:  # a bad header, an object array, or too few bytes
            raise ModelFileError(f"{self.path}: the array {member!r} cannot be read ({error}).") from None
        if array.dtype.str != description["dtype"] or list(array.shape) != description["shape"]:
            raise ModelFileError(
                f"{self.path}: the array {member!r} has dtype {array.dtype.str} and shape {list(array.shape)}, "
                f"but the model's description says {description['dtype']} and {description['shape']}."
            )
        return array


def _decode(value, read_array):
    """The Python value of a JSON form written by :func:`_encode`."""
    if isinstance(value, list):
        return [_decode(item, read_array) for item in value]
    if not isinstance(value, dict):
        return value
    if "$array" in value:
        return read_array(value)
    if "$float" in value:
        return _NON_FINITE[value["$float"]]
    if "$csr" in value:
        parts = value["$csr"]
        matrix = sp.csr_matrix(
            (read_array(parts["data"]), read_array(parts["indices"]), read_array(parts["indptr"])),
            shape=tuple(parts["shape"]),
        )
        matrix.check_format(full_check=True)
        return matrix
    if "$strings" in value:
        return np.array(value["$strings"], dtype=object)
    if "$tuple" in value:
        return tuple(_decode(item, read_array) for item in value["$tuple"])
    if "$dict" in value:
        return {_decode(key, read_array): _decode(item, read_array) for key, item in value["$dict"]}
    if "$dataclass" in value:
        cls = _STATE_CLASSES.get(value["$dataclass"])
        if cls is None:
            raise ValueError(f"unknown solver state {value['$dataclass']!r}")
        fields = {name: _decode(item, read_array) for name, item in value["fields"].items()}
        if set(fields) != {field.name for field in dataclasses.fields(cls)}:
            raise ValueError(f"the fields of {cls.__name__} are {sorted(fields)}")
        return cls(**fields)
    tags = [key for key in value if key.startswith("$")]
    if tags:
        raise ValueError(f"unknown tag {tags[0]!r}")
    return {key: _decode(item, read_array) for key, item in value.items()}


def _check_model(model, path, classes, n_features):
    """Reject a model whose parts are wrong or disagree, before it can predict something wrong."""

    def fail(problem):
        raise ModelFileError(f"{path} does not hold a consistent {type(model).__name__}: {problem}.") from None

    try:
        check_model_parts(model, classes, n_features)
    except InconsistentModel as error:
        fail(error)
    n_outputs = 1 if len(classes) == 2 else len(classes)
    try:
        with checked_rows():
            scores = np.asarray(model.decision_function(np.zeros((1, n_features))))
    except Exception as error:  # shapes that do not fit together
        fail(f"predicting one row fails ({error})")
    if scores.shape not in ((1,), (1, n_outputs)) or not np.all(np.isfinite(scores)):
        fail(f"predicting one row gives {scores!r}")
