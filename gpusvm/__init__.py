"""gpusvm: support vector machines and sparse online classifiers on NVIDIA GPUs.

Every estimator trains on a CUDA device through CuPy when one is present, or on the
CPU through NumPy/SciPy, with the same results (see :func:`config_context`).  Importing
gpusvm never imports CuPy.

The public names below, and the submodules (``gpusvm.datasets``, ``gpusvm.dask``...),
are imported when first used (PEP 562): ``import gpusvm`` itself costs nothing, so that
the ``gpusvm`` command can guard its own start-up (the seconds scikit-learn takes to
import) against a Ctrl-C (``gpusvm._console``).
"""

from importlib import import_module as _import_module
from importlib.util import find_spec as _find_spec

from ._version import __version__ as __version__

# each public name, and the module it comes from
_PUBLIC = {
    "FOBOSClassifier": "linear_model",
    "FTRLClassifier": "linear_model",
    "KernelPegasosSVC": "svm",
    "ModelFileError": "model_io",
    "PegasosSVC": "svm",
    "RDAClassifier": "linear_model",
    "SBPClassifier": "sbp",
    "TruncatedGradientClassifier": "linear_model",
    "config_context": "_backend",
    "find_gamma": "water_level",
    "find_gamma_and_bias": "water_level",
    "get_config": "_backend",
    "load": "model_io",
    "nu_from_svc": "sbp",
    "resolve_backend": "_backend",
    "save": "model_io",
}

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name):
    """A public name from its module, or a submodule, imported at its first use."""
    if name in _PUBLIC:
        value = getattr(_import_module(f".{_PUBLIC[name]}", __name__), name)
    elif name.isidentifier() and not name.startswith("__") and _find_spec(f"{__name__}.{name}") is not None:
        value = _import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later uses find it without this function
    return value


def __dir__():
    """The public names, and the submodules imported so far."""
    return sorted({*__all__, *(name for name in globals() if not name.startswith("_"))})
