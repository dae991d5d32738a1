"""The solvers by the names the command line and model files use."""

from __future__ import annotations

from .linear_model import FOBOSClassifier, FTRLClassifier, RDAClassifier, TruncatedGradientClassifier
from .sbp import SBPClassifier
from .svm import KernelPegasosSVC, PegasosSVC

SOLVERS = {
    "pegasos": PegasosSVC,
    "kernel-pegasos": KernelPegasosSVC,
    "sbp": SBPClassifier,
    "ftrl": FTRLClassifier,
    "truncated-gradient": TruncatedGradientClassifier,
    "fobos": FOBOSClassifier,
    "rda": RDAClassifier,
}


def solver_name(estimator):
    """The solver name of a gpusvm estimator (``'pegasos'`` for a PegasosSVC, ...).

    Raises
    ------
    TypeError
        For anything that is not one of gpusvm's estimators.
    """
    for name, cls in SOLVERS.items():
        if type(estimator) is cls:
            return name
    got = type(estimator)
    raise TypeError(
        f"Only gpusvm's estimators ({', '.join('gpusvm.' + cls.__name__ for cls in SOLVERS.values())}) can be "
        f"saved, got a {got.__module__}.{got.__qualname__}."
    )
