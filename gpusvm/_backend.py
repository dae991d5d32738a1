"""The backend switch: NumPy on any machine, CuPy where a CUDA device is present.

Precedence, highest first:

1. an estimator's ``backend='numpy' | 'cupy'``;
2. :func:`config_context` (``with gpusvm.config_context(backend='numpy'): ...``);
3. the ``GPUSVM_BACKEND`` environment variable;
4. ``'auto'``: CuPy when it imports and sees a CUDA device, else NumPy.

An estimator's ``backend='auto'`` (its default) defers to 2-4.  This module never
imports CuPy at import time, so ``import gpusvm`` stays light on a CPU machine.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys

import numpy as np
import scipy.sparse

BACKENDS = ("auto", "numpy", "cupy")
ENV_VARIABLE = "GPUSVM_BACKEND"
MIN_COMPUTE_CAPABILITY = 60  # the kernels' float64 atomicAdd needs compute capability 6.0

_context_backend: contextvars.ContextVar[str | None] = contextvars.ContextVar("gpusvm_backend", default=None)


def _check_backend_name(backend, source):
    if backend not in BACKENDS:
        raise ValueError(f"{source} must be one of {BACKENDS}, got {backend!r}.")
    return backend


@functools.lru_cache(maxsize=1)
def cupy_device_count():
    """Number of CUDA devices CuPy sees; 0 when CuPy is missing or broken."""
    try:
        import cupy
    except Exception:  # ImportError, or a CUDA library that fails to load
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no driver, no device
        return 0


def current_device_problem():
    """Why the current CUDA device cannot run gpusvm's kernels, or None when it can."""
    import cupy

    device = cupy.cuda.Device()
    return _device_problem(int(device.id), int(device.compute_capability), oldest_compute_capability())


@functools.lru_cache(maxsize=None)
def oldest_compute_capability():
    """The oldest compute capability (as CuPy gives it: 75 for 7.5) that gpusvm's kernels
    run on with the installed CuPy: ``MIN_COMPUTE_CAPABILITY``, or the oldest that CuPy's
    NVRTC compiles for when that is newer (7.5 from CUDA 13 on)."""
    try:
        from cupy.cuda import nvrtc

        return max(MIN_COMPUTE_CAPABILITY, min(int(arch) for arch in nvrtc.getSupportedArchs()))
    except Exception:  # no CuPy, or an NVRTC that does not list its architectures
        return MIN_COMPUTE_CAPABILITY


@functools.lru_cache(maxsize=None)
def _device_problem(device_id, capability, oldest=MIN_COMPUTE_CAPABILITY):
    if capability < oldest:
        why = (
            "they add float64 values atomically"
            if oldest == MIN_COMPUTE_CAPABILITY
            else "the oldest that this CuPy's NVRTC compiles for"
        )
        return (
            f"CUDA device {device_id} has compute capability {capability // 10}.{capability % 10}, and "
            f"gpusvm's kernels need {oldest // 10}.{oldest % 10} or newer ({why})"
        )
    return None


def get_config():
    """The backend that ``backend='auto'`` resolves through, before detection.

    Returns
    -------
    dict
        ``{'backend': name}`` with the name from :func:`config_context`, else from
        the ``GPUSVM_BACKEND`` environment variable, else ``'auto'``.
    """
    backend = _context_backend.get()
    if backend is None:
        backend = os.environ.get(ENV_VARIABLE, "auto").strip().lower() or "auto"
        _check_backend_name(backend, f"The environment variable {ENV_VARIABLE}")
    return {"backend": backend}


@contextlib.contextmanager
def config_context(*, backend):
    """Set the default backend inside a ``with`` block.

    Parameters
    ----------
    backend : {'auto', 'numpy', 'cupy'}
        Used by every estimator whose own ``backend`` is ``'auto'``.

    Examples
    --------
    >>> import gpusvm
    >>> with gpusvm.config_context(backend="numpy"):
    ...     gpusvm.get_config()["backend"]
    'numpy'
    """
    _check_backend_name(backend, "config_context(backend=...)")
    token = _context_backend.set(backend)
    try:
        yield
    finally:
        _context_backend.reset(token)


def resolve_backend(backend="auto"):
    """Turn an estimator's ``backend`` parameter into ``'numpy'`` or ``'cupy'``.

    Raises
    ------
    ValueError
        For an unknown name.
    RuntimeError
        For ``'cupy'`` when CuPy is missing, sees no CUDA device, or the device is older
        than compute capability 6.0.
    """
    _check_backend_name(backend, "backend")
    if backend == "auto":
        backend = get_config()["backend"]
    if backend == "auto":
        return "cupy" if cupy_device_count() > 0 and current_device_problem() is None else "numpy"
    if backend == "cupy" and cupy_device_count() == 0:
        raise RuntimeError(
            "backend='cupy' needs CuPy and a CUDA device, but "
            + ("CuPy sees no CUDA device" if _cupy_imports() else "CuPy is not installed")
            + ". On a machine with an NVIDIA GPU, install the CuPy wheel for its CUDA version: "
            "pip install cupy-cuda12x (CUDA 12) or cupy-cuda13x (CUDA 13), as the extras gpusvm[cuda12] "
            'and gpusvm[cuda13] do (from a checkout: pip install -e ".[cuda12]"); '
            "or use backend='numpy' (or GPUSVM_BACKEND=numpy)."
        )
    if backend == "cupy" and (problem := current_device_problem()) is not None:
        raise RuntimeError(f"backend='cupy' cannot run here: {problem}. Use backend='numpy' (or GPUSVM_BACKEND=numpy).")
    return backend


def _cupy_imports():
    try:
        import cupy  # noqa: F401
    except Exception:
        return False
    return True


def get_namespace(backend_name):
    """The array module of a resolved backend name: :mod:`numpy` or :mod:`cupy`."""
    if backend_name == "cupy":
        import cupy

        return cupy
    return np


def on_device(xp):
    """Whether the array module ``xp`` (from :func:`get_namespace` or :func:`namespace_of`)
    is CuPy: the one test by which code that was given ``xp`` takes its device path
    (each solver's ``make_steps``)."""
    return xp is not np


def is_device_backend(backend):
    """Whether ``backend``, a resolved backend's name (as a fitted model's ``backend_``
    records it) or an array module, is the device's: the one place where a backend's name
    is compared."""
    if isinstance(backend, str):
        return backend == "cupy"
    return on_device(backend)


def is_cupy_array(x):
    """True for a CuPy array or ``cupyx.scipy.sparse`` matrix, without importing CuPy."""
    if "cupy" not in sys.modules:
        return False
    module = type(x).__module__
    return module.startswith("cupy") or module.startswith("cupyx")


def to_numpy(x):
    """Copy a CuPy array (or cupyx sparse matrix) to the host; host data passes through."""
    if is_cupy_array(x):
        return x.get()
    if scipy.sparse.issparse(x):
        return x
    return np.asarray(x)


def issparse(X):
    """True for a SciPy or cupyx sparse matrix."""
    if scipy.sparse.issparse(X):
        return True
    if is_cupy_array(X):
        import cupyx.scipy.sparse as cusparse

        return cusparse.issparse(X)
    return False


def namespace_of(X):
    """:mod:`cupy` for device data, :mod:`numpy` otherwise."""
    return get_namespace("cupy" if is_cupy_array(X) else "numpy")


def free_device_bytes():
    """Bytes the current CUDA device can still give: free on the device plus what
    CuPy's memory pool holds unused."""
    import cupy

    free, _ = cupy.cuda.Device().mem_info
    return int(free) + int(cupy.get_default_memory_pool().free_bytes())


KERNEL_SOLVER_WAYS_OUT = (
    "The kernel solvers keep every row and its response on the device at every step. Ways out: "
    "float32 X (half the bytes), fewer rows (a subsample), or backend='numpy' (host memory)."
)


def check_device_memory(needed, what, free=None, ways_out=KERNEL_SOLVER_WAYS_OUT):
    """Raise MemoryError, early and with the figures, when ``needed`` bytes (an estimate)
    exceed what the device has free, instead of an out-of-memory error mid-fit.

    Parameters
    ----------
    needed : int
    what : str
        What needs the memory, for the message (e.g. "SBPClassifier on 60000 rows").
    free : int, optional
        The free bytes (default: :func:`free_device_bytes`).
    ways_out : str
        What the user can do instead, for the message.
    """
    free = free_device_bytes() if free is None else free
    if needed > free:
        raise MemoryError(
            f"{what} needs about {needed / 2**30:.2f} GiB on the GPU, which has {free / 2**30:.2f} GiB free. "
            + ways_out
        )
