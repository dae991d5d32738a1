"""gpusvm: support vector machines and sparse online classifiers on NVIDIA GPUs.

Every estimator trains on a CUDA device through CuPy when one is present, or on the
CPU through NumPy/SciPy, with the same results (see :func:`config_context`).  Importing
gpusvm never imports CuPy.
"""

from ._backend import config_context, get_config, resolve_backend
from ._version import __version__
from .linear_model import FOBOSClassifier, FTRLClassifier, RDAClassifier, TruncatedGradientClassifier
from .model_io import ModelFileError, load, save
from .sbp import SBPClassifier, nu_from_svc
from .svm import KernelPegasosSVC, PegasosSVC
from .water_level import find_gamma, find_gamma_and_bias

__all__ = [
    "FOBOSClassifier",
    "FTRLClassifier",
    "KernelPegasosSVC",
    "ModelFileError",
    "PegasosSVC",
    "RDAClassifier",
    "SBPClassifier",
    "TruncatedGradientClassifier",
    "__version__",
    "config_context",
    "find_gamma",
    "find_gamma_and_bias",
    "get_config",
    "load",
    "nu_from_svc",
    "resolve_backend",
    "save",
]
