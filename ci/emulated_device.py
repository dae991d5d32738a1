"""A pytest plugin for ci/emulated_cuda.sh: what the CPU stand-in for CuPy lacks.

- Device memory to ask about: the CuPy paths that size their buffers by the free device
  memory (SBP's kernel_cache, the early memory checks) are told 64 GiB are free.
- Streams, events and pinned host memory (the streamed fits' copies,
  ``gpusvm._staging_cuda``): the stand-in runs everything at once, in order, so a stream
  here is a context that makes itself current, an event is always complete, and pinned
  memory is ordinary host memory.  This lets the staging's data flow (slots, growth,
  views) run; the order of events on a real device is checked by
  tests/test_streaming.py's recorded-timeline test and by the device run.  An event
  records the host clock, so that ``cupy.cuda.get_elapsed_time`` (the benchmarks' fit
  times) gives the emulated work's wall time.
"""

import time


class _Event:
    seconds = 0.0  # the host clock when recorded

    def synchronize(self):
        pass

    def record(self, stream=None):
        self.seconds = time.perf_counter()

    done = True


class _Stream:
    current = None  # the stream of the innermost ``with``; None: the default stream

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.non_blocking = non_blocking

    def __enter__(self):
        self._outer, _Stream.current = _Stream.current, self
        return self

    def __exit__(self, *exc):
        _Stream.current = self._outer
        return False

    def record(self, event=None):
        return event or _Event()

    def wait_event(self, event):
        pass

    def synchronize(self):
        pass


def _install_streams():
    import cupy
    import cupyx
    import numpy as np

    _Stream.null = _Stream()
    cupy.cuda.Stream = _Stream
    cupy.cuda.Event = _Event
    cupy.cuda.get_current_stream = lambda: _Stream.current or _Stream.null
    cupy.cuda.get_elapsed_time = lambda start, end: 1e3 * (end.seconds - start.seconds)
    cupyx.empty_pinned = lambda shape, dtype=np.float64, order="C": np.empty(shape, dtype=dtype, order=order)

    def set_from_host(self, array, stream=None):
        np.copyto(self.view(np.ndarray), array)

    cupy.ndarray.set = set_from_host


def install():
    """Give the stand-in what it lacks (this module's docstring); ci/emulated_bench.py
    calls it for a benchmark script."""
    import gpusvm._backend

    gpusvm._backend.free_device_bytes = lambda: 64 * 2**30
    _install_streams()


def pytest_configure(config):
    install()
