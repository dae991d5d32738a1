"""Shared fixtures: every solver test runs on NumPy, and on CuPy when a device is present; and the
helpers that several test files use."""

import zlib

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from gpusvm._backend import cupy_device_count, is_cupy_array, resolve_backend, to_numpy
from gpusvm.solvers import row_cache

NO_DEVICE = "backend='cupy' needs CuPy and a CUDA device; this machine has none"


@pytest.fixture(params=["numpy", "cupy"])
def backend(request):
    """The backend name; the CuPy case is skipped with a reason on a CPU machine."""
    if request.param == "cupy" and cupy_device_count() == 0:
        pytest.skip(NO_DEVICE)
    return request.param


needs_device = pytest.mark.skipif(cupy_device_count() == 0, reason=NO_DEVICE)


def numba_imports():
    """Whether Numba, which the compiled one-vs-one steps need, imports here."""
    try:
        import numba  # noqa: F401
    except Exception:
        return False
    return True


needs_numba = pytest.mark.skipif(not numba_imports(), reason="the compiled pair steps need Numba")


def to_host(value):
    """A NumPy copy of a CuPy array; anything else as it is."""
    return to_numpy(value) if is_cupy_array(value) else value


def assert_same_result(actual, desired, backend):
    """Equal, exactly on NumPy; on CuPy up to rounding, since float64 atomics (and cuBLAS)
    add in an order that can change from one run to the next."""
    actual, desired = to_host(actual), to_host(desired)
    if backend == "cupy":
        np.testing.assert_allclose(actual, desired, rtol=1e-10, atol=1e-12)
    else:
        np.testing.assert_array_equal(actual, desired)


def default_backend():
    """The backend a model's default ``backend='auto'`` runs on here: 'numpy' on a CPU
    machine, 'cupy' where the suite runs with ``GPUSVM_BACKEND=cupy`` (a device window)."""
    return resolve_backend("auto")


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded from the test's name (reproducible, not shared;
    crc32, not hash(), whose strings are salted per process)."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(params=["replay", "graph"])
def step_block_mode(request, monkeypatch):
    """Runs a CuPy stepper's blocks of steps (``gpusvm._device.step_blocks``) in the mode named,
    three steps a block so that full and partial blocks both recur; the graph case is
    skipped where CuPy cannot capture (the CPU emulation of CUDA)."""
    import gpusvm._device.step_blocks as step_blocks

    if cupy_device_count() == 0:
        pytest.skip(NO_DEVICE)
    import cupy

    if request.param == "graph" and not hasattr(getattr(cupy.cuda, "Stream", None), "begin_capture"):
        pytest.skip("this CuPy cannot capture CUDA graphs")
    monkeypatch.setattr(step_blocks, "default_mode", lambda: request.param)
    monkeypatch.setattr(step_blocks, "BLOCK_STEPS", 3)
    return request.param


@pytest.fixture(scope="module")
def breast_cancer():
    """scikit-learn's breast cancer data, standardized, split 70/30 (the SBP tests')."""
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def low_memory_after(monkeypatch, rows_read, row_bytes):
    """The host's memory reads low once a cache has filled ``rows_read`` slots (memory
    read every slot), and plenty before."""
    monkeypatch.setattr(row_cache, "MEMORY_CHECK_BYTES", row_bytes)
    monkeypatch.setattr(row_cache, "total_memory_bytes", lambda: 100)
    reads = iter([50] * (rows_read - 1) + [5] * 10**6)  # below the floor of 10 from the rows_read-th read
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: next(reads))
