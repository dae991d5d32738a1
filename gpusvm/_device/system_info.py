"""What ``gpusvm info`` reports: versions, the backend chosen, the devices, and whether
the CUDA kernels compile on this device."""

from __future__ import annotations

import os
import platform

from .._backend import ENV_VARIABLE, cupy_device_count, oldest_compute_capability, resolve_backend


def system_info(backend="auto"):
    """Facts about this installation, as a JSON-serializable dict.

    Parameters
    ----------
    backend : {'auto', 'numpy', 'cupy'}
        The backend asked for; ``'auto'`` resolves through ``config_context``,
        ``GPUSVM_BACKEND`` and device detection, as an estimator's does.

    Returns
    -------
    dict
        ``backend`` is the backend chosen, or None with the reason in
        ``backend_error``; ``kernels`` maps each ``kernels/*.cu`` file to ``'ok'`` or
        its compiler error when a CUDA device is present, else None.
    """
    import numpy
    import scipy
    import sklearn

    from .._version import __version__

    info = {
        "gpusvm": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "backend_requested": backend,
        ENV_VARIABLE: os.environ.get(ENV_VARIABLE),
        "backend": None,
        "backend_error": None,
        "cupy": None,
        "cuda_runtime": None,
        "cuda_driver": None,
        "devices": [],
        "kernels": None,
    }
    try:
        info["backend"] = resolve_backend(backend)
    except (RuntimeError, ValueError) as error:
        info["backend_error"] = str(error)
    info.update(cuda_facts())
    return info


def cuda_facts(check_kernels=True):
    """CuPy's version and, with a device, the CUDA runtime and driver versions, each
    device's name, compute capability and memory, and (``check_kernels``) the kernel
    compile report."""
    try:
        import cupy
    except Exception as error:  # not installed, or its CUDA libraries fail to load
        return {"cupy": f"not available ({type(error).__name__}: {error})"}
    found = {"cupy": cupy.__version__}
    if cupy_device_count() == 0:
        return found
    runtime = cupy.cuda.runtime
    found["cuda_runtime"] = _cuda_version(runtime.runtimeGetVersion())
    found["cuda_driver"] = _cuda_version(runtime.driverGetVersion())
    devices = []
    for index in range(cupy_device_count()):
        properties = runtime.getDeviceProperties(index)
        name = properties["name"]
        devices.append(
            {
                "index": index,
                "name": name.decode() if isinstance(name, bytes) else str(name),
                "compute_capability": cupy.cuda.Device(index).compute_capability,
                "supported": int(cupy.cuda.Device(index).compute_capability) >= oldest_compute_capability(),
                "memory_gib": round(properties["totalGlobalMem"] / 2**30, 1),
            }
        )
    found["devices"] = devices
    if check_kernels:
        found["kernels"] = kernel_compile_report()
    return found


def _cuda_version(number):
    """``13000`` -> ``'13.0'``."""
    return f"{number // 1000}.{number % 1000 // 10}"


def kernel_compile_report():
    """Compile every ``kernels/*.cu`` on the current device; ``{file: 'ok' | error}``."""
    from .cuda_modules import cuda_source_dir, get_cuda_module

    report = {}
    for source in sorted(cuda_source_dir().glob("*.cu")):
        try:
            get_cuda_module(source.name)
            report[source.name] = "ok"
        except Exception as error:  # a compile error names the file and line
            report[source.name] = f"error: {error}"
    return report
