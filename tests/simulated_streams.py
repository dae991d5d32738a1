"""A simulated CUDA device for testing the order of copies and kernels across streams.

Stands in for the few CuPy names ``gpusvm._device.staging`` uses (streams, events,
``cupy.empty``, ``ndarray.set``, ``cupyx.empty_pinned``, ``cupyx.scipy.sparse.csr_matrix``).
Work queued on a stream does not run when it is queued: it runs when the simulated device
gets to it, in an order drawn from a seeded random generator among the streams whose
next operation may run (a stream stops at an event it waits for until the event is
recorded).  The host waits only through ``Event.synchronize`` (``host_waits`` lists the
stream of each wait).  A missing wait, or a host write into memory a queued copy still has
to read, then shows as wrong data on some seed, as on a real device it would on some run.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import types

import numpy as np


class DeviceArray(np.ndarray):
    """A device buffer (host memory here); ``set`` queues a copy that reads its source
    when the copy runs, as a DMA from pinned memory does."""

    device = None

    def set(self, source, stream=None):
        target = self
        stream.queue(lambda: np.copyto(target.view(np.ndarray), source))


class Event:
    def __init__(self, device, stream):
        self.device, self.stream, self.done = device, stream, False

    def synchronize(self):
        self.device.host_waits.append(self.stream)
        self.device.run_until(lambda: self.done)


class Stream:
    def __init__(self, device, non_blocking=False):
        self.device, self.operations = device, []
        device.streams.append(self)

    def queue(self, operation, waits_for=None):
        self.operations.append((operation, waits_for))
        self.device.advance_some()

    def record(self):
        event = Event(self.device, self)
        self.queue(lambda: setattr(event, "done", True))
        return event

    def wait_event(self, event):
        self.queue(lambda: None, waits_for=event)

    def runnable(self):
        return bool(self.operations) and (self.operations[0][1] is None or self.operations[0][1].done)

    def run_one(self):
        operation, _ = self.operations.pop(0)
        operation()

    def __enter__(self):
        self.device.current.append(self)
        return self

    def __exit__(self, *exc):
        self.device.current.pop()
        return False


class SimulatedDevice:
    """The device: its streams, the current one, and a seeded order of execution."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.streams, self.host_waits = [], []
        self.null = Stream(self)
        self.current = [self.null]

    def advance_some(self):
        """Run a few queued operations, chosen at random (after every host call)."""
        for _ in range(self.rng.randrange(3)):
            if not self._run_one():
                return

    def run_until(self, condition):
        while not condition():
            if not self._run_one():
                raise RuntimeError("deadlock: nothing can run, and the host waits")

    def finish(self):
        self.run_until(lambda: not any(stream.operations for stream in self.streams))

    def _run_one(self):
        runnable = [stream for stream in self.streams if stream.runnable()]
        if not runnable:
            return False
        self.rng.choice(runnable).run_one()
        return True

    def kernel(self, operation):
        """Queue ``operation`` on the current stream, as a kernel launch would."""
        self.current[-1].queue(operation)

    def modules(self):
        """Stand-ins for ``cupy``, ``cupyx`` and ``cupyx.scipy.sparse`` on this device."""
        device = self

        def empty(n, dtype):
            return np.empty(n, dtype=dtype).view(DeviceArray)

        class CsrMatrix:
            def __init__(self, arrays, shape):
                # CuPy 14.2's constructor reads indptr's ends to the host on the current stream
                device.current[-1].record().synchronize()
                self.data, self.indices, self.indptr = arrays
                self.shape, self.has_canonical_format = shape, False

            @classmethod
            def _from_parts(cls, data, indices, indptr, shape, has_canonical_format=None):
                X = cls.__new__(cls)  # as CuPy 14.2's: no read back
                X.data, X.indices, X.indptr, X.shape = data, indices, indptr, shape
                X.has_canonical_format = bool(has_canonical_format)
                return X

        cuda = types.SimpleNamespace(
            Stream=lambda non_blocking=False: Stream(device, non_blocking),
            get_current_stream=lambda: device.current[-1],
        )
        cupy = types.ModuleType("cupy")
        cupy.cuda, cupy.empty, cupy.ndarray = cuda, empty, DeviceArray
        sparse = types.ModuleType("cupyx.scipy.sparse")
        sparse.csr_matrix = CsrMatrix
        cupyx = types.ModuleType("cupyx")
        cupyx.empty_pinned = lambda n, dtype: np.empty(n, dtype=dtype)
        cupyx.scipy = types.ModuleType("cupyx.scipy")
        cupyx.scipy.sparse = sparse
        return {"cupy": cupy, "cupyx": cupyx, "cupyx.scipy": cupyx.scipy, "cupyx.scipy.sparse": sparse}


def load_on_simulated_device(module_name, monkeypatch, seed):
    """A fresh copy of ``module_name`` whose ``import cupy`` and ``import cupyx`` get a
    :class:`SimulatedDevice`'s stand-ins (all in ``sys.modules`` for this test only).
    Returns ``(device, module)``."""
    device = SimulatedDevice(seed)
    for name, module in device.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.find_spec(module_name)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, module_name, module)
    spec.loader.exec_module(module)
    return device, module
