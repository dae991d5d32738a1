"""A pytest plugin for ci/emulated_cuda.sh: the CPU stand-in for CuPy has no device
memory to ask about, so the CuPy paths that size their buffers by the free device
memory (SBP's kernel_cache, the early memory checks) are told 64 GiB are free."""


def pytest_configure(config):
    import gpusvm._backend

    gpusvm._backend.free_device_bytes = lambda: 64 * 2**30
