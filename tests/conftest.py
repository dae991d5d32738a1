"""Shared fixtures: every solver test runs on NumPy, and on CuPy when a device is present."""

import numpy as np
import pytest

from gpusvm._backend import cupy_device_count

NO_DEVICE = "backend='cupy' needs CuPy and a CUDA device; this machine has none"


@pytest.fixture(params=["numpy", "cupy"])
def backend(request):
    """The backend name; the CuPy case is skipped with a reason on a CPU machine."""
    if request.param == "cupy" and cupy_device_count() == 0:
        pytest.skip(NO_DEVICE)
    return request.param


needs_device = pytest.mark.skipif(cupy_device_count() == 0, reason=NO_DEVICE)


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded from the test's name (reproducible, not shared)."""
    return np.random.default_rng(abs(hash(request.node.nodeid)) % 2**32)
