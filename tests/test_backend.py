import subprocess
import sys

import pytest
from sklearn.datasets import make_classification

import gpusvm
from gpusvm import PegasosSVC, config_context, get_config, resolve_backend
from gpusvm._backend import cupy_device_count

from .conftest import needs_device


def test_import_does_not_import_cupy():
    code = "import sys, gpusvm; gpusvm.PegasosSVC(); print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_backend_is_named_in_the_error():
    with pytest.raises(ValueError, match="backend.*'tpu'"):
        resolve_backend("tpu")
    X, y = make_classification(30, 4, random_state=0)
    with pytest.raises(ValueError, match="backend.*'tpu'"):
        PegasosSVC(backend="tpu").fit(X, y)
    with pytest.raises(ValueError, match="'tpu'"):
        with config_context(backend="tpu"):
            pass


@pytest.mark.skipif(cupy_device_count() > 0, reason="a CUDA device is present")
def test_cupy_without_device_says_how_to_fix_it():
    with pytest.raises(RuntimeError, match="backend='numpy'") as error:
        resolve_backend("cupy")
    assert "gpusvm[cuda12]" in str(error.value)
    X, y = make_classification(30, 4, random_state=0)
    with pytest.raises(RuntimeError, match="CUDA device"):
        PegasosSVC(backend="cupy").fit(X, y)


def test_precedence_estimator_then_context_then_environment(monkeypatch):
    monkeypatch.setenv("GPUSVM_BACKEND", "numpy")
    assert get_config()["backend"] == "numpy"
    assert resolve_backend("auto") == "numpy"
    monkeypatch.setenv("GPUSVM_BACKEND", "nonsense")
    with pytest.raises(ValueError, match="GPUSVM_BACKEND.*'nonsense'"):
        resolve_backend("auto")
    with config_context(backend="numpy"):  # the context wins over the variable
        assert resolve_backend("auto") == "numpy"
        assert resolve_backend("numpy") == "numpy"
    monkeypatch.delenv("GPUSVM_BACKEND")
    expected = "cupy" if cupy_device_count() else "numpy"
    assert resolve_backend("auto") == expected


def test_fitted_estimator_records_backend():
    X, y = make_classification(40, 4, random_state=0)
    with config_context(backend="numpy"):
        model = PegasosSVC(max_iter=2, random_state=0).fit(X, y)
    assert model.backend_ == "numpy"


@needs_device
def test_auto_picks_cupy_when_a_device_is_present(monkeypatch):
    monkeypatch.delenv("GPUSVM_BACKEND", raising=False)
    assert resolve_backend("auto") == "cupy"


def test_version_and_public_names():
    assert gpusvm.__version__
    for name in gpusvm.__all__:
        assert hasattr(gpusvm, name)


def test_a_device_older_than_compute_capability_6_is_refused_clearly(monkeypatch):
    """float64 atomicAdd needs compute capability 6.0: 'cupy' says so, 'auto' falls back."""
    import gpusvm._backend as backend_module

    monkeypatch.delenv("GPUSVM_BACKEND", raising=False)  # 'auto' as the user's default (a device run sets it)
    monkeypatch.setattr(backend_module, "cupy_device_count", lambda: 1)
    monkeypatch.setattr(backend_module, "current_device_problem", lambda: backend_module._device_problem(0, 52))
    assert resolve_backend("auto") == "numpy"
    with pytest.raises(RuntimeError, match=r"compute capability 5\.2.*6\.0 or newer.*backend='numpy'"):
        resolve_backend("cupy")
    assert backend_module._device_problem(0, 90) is None


def test_a_device_older_than_what_nvrtc_compiles_for_is_refused_clearly(monkeypatch):
    """CUDA 13's NVRTC compiles for compute capability 7.5 and newer: a 7.0 card is
    refused for that reason (the float64 atomics alone would allow it)."""
    import gpusvm._backend as backend_module

    monkeypatch.delenv("GPUSVM_BACKEND", raising=False)
    monkeypatch.setattr(backend_module, "cupy_device_count", lambda: 1)
    monkeypatch.setattr(backend_module, "current_device_problem", lambda: backend_module._device_problem(0, 70, 75))
    assert resolve_backend("auto") == "numpy"
    with pytest.raises(
        RuntimeError, match=r"compute capability 7\.0.*7\.5 or newer \(the oldest that this CuPy's NVRTC"
    ):
        resolve_backend("cupy")
    assert backend_module._device_problem(0, 75, 75) is None


def test_the_oldest_compute_capability_is_the_float64_atomics_or_nvrtcs(monkeypatch):
    """6.0 for the kernels' float64 atomics, or the oldest architecture NVRTC lists when
    it is newer; 6.0 when CuPy cannot say."""
    import types

    import gpusvm._backend as backend_module

    for archs, oldest in [((75, 80, 90), 75), ((50, 52, 60, 90), 60)]:
        nvrtc = types.SimpleNamespace(getSupportedArchs=lambda archs=archs: archs)
        cuda = types.SimpleNamespace(nvrtc=nvrtc)
        monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
        monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
        backend_module.oldest_compute_capability.cache_clear()
        assert backend_module.oldest_compute_capability() == oldest
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy fails
    monkeypatch.delitem(sys.modules, "cupy.cuda")
    backend_module.oldest_compute_capability.cache_clear()
    assert backend_module.oldest_compute_capability() == backend_module.MIN_COMPUTE_CAPABILITY
    backend_module.oldest_compute_capability.cache_clear()
