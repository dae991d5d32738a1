"""Chunks copied to the device while it computes: pinned host buffers, a copy stream of
their own, and two device slots used in turn (double buffering).

For chunk ``i`` in slot ``s = i % 2``:

1. the host waits until the last copy out of the slot's pinned buffers (chunk ``i - 2``)
   has finished, then writes chunk ``i`` into them (a host copy; pinned memory is what
   lets the device copy run asynchronously);
2. the copy stream waits until the solver's stream has finished with the slot's device
   buffers (the steps of chunk ``i - 2``, marked when chunk ``i - 1`` was asked for),
   then copies;
3. the solver's stream waits for that copy, and only then runs chunk ``i``'s steps.

So the copy of chunk ``i`` runs while the steps of chunk ``i - 1`` do, and the host never
waits on the device except for a slot's pinned buffers, two chunks later.  A slot grows
(by a quarter more than asked) when a chunk does not fit; fresh device memory may be
memory the solver's stream has just freed, so the copy into it also waits for the
solver's stream as it stands.
"""

from __future__ import annotations

import dataclasses

import cupy
import cupyx
import cupyx.scipy.sparse as cusparse
import numpy as np

from .._backend import is_cupy_array, issparse

SLOTS = 2


@dataclasses.dataclass
class _Slot:
    pinned: dict = dataclasses.field(default_factory=dict)  # name -> uint8 pinned host buffer
    device: dict = dataclasses.field(default_factory=dict)  # name -> uint8 device buffer
    copied: object = None  # event: the last copy out of the pinned buffers has finished
    released: object = None  # event: the solver's stream is done with the device buffers


def _parts(X):
    """The host arrays of ``X`` to copy, by name (none when X is on the device already)."""
    if is_cupy_array(X):
        return {}
    if issparse(X):
        return {"data": X.data, "indices": X.indices, "indptr": X.indptr}
    return {"X": X}


def _grown(buffers, name, nbytes, allocate):
    """``buffers[name]``, replaced by a larger one when it holds fewer than ``nbytes``;
    also says whether it was replaced."""
    buffer = buffers.get(name)
    if buffer is not None and buffer.nbytes >= nbytes:
        return buffer, False
    buffers[name] = allocate(max(256, nbytes + nbytes // 4))
    return buffers[name], True


class DeviceStaging:
    """Copies of host chunks into device slots, overlapped with the solver's work on the
    current (CuPy) stream; see the module's docstring for the order of events."""

    def __init__(self, n_slots=SLOTS):
        self.stream = cupy.cuda.Stream(non_blocking=True)  # never waits on the legacy default stream
        self._slots = [_Slot() for _ in range(n_slots)]
        self._count = 0

    def staged(self, chunks):
        """Each :class:`gpusvm._stream.pipeline.ReadyChunk` of ``chunks`` with its arrays
        on the device; a chunk's slot is released when the next chunk is asked for."""
        for chunk in chunks:
            slot = self._slots[self._count % len(self._slots)]
            self._count += 1
            yield self.stage(chunk, slot)
            slot.released = cupy.cuda.get_current_stream().record()

    def stage(self, chunk, slot):
        """``chunk`` with its host arrays copied into ``slot`` (asynchronous; the current
        stream waits for the copy)."""
        solver_stream = cupy.cuda.get_current_stream()
        host = {
            **_parts(chunk.X),
            **{f"rows.{name}": array for name, array in chunk.rows.items() if not is_cupy_array(array)},
        }
        if slot.copied is not None:
            slot.copied.synchronize()  # chunk i - 2's copy has left the pinned buffers
        views, any_grown = {}, False
        for name, array in host.items():
            pinned, _ = _grown(slot.pinned, name, array.nbytes, lambda n: cupyx.empty_pinned(n, dtype=np.uint8))
            device, grown = _grown(slot.device, name, array.nbytes, lambda n: cupy.empty(n, dtype=np.uint8))
            any_grown |= grown
            pinned_view = pinned[: array.nbytes].view(array.dtype).reshape(array.shape)
            np.copyto(pinned_view, array)
            views[name] = (pinned_view, device[: array.nbytes].view(array.dtype).reshape(array.shape))
        solver_done = solver_stream.record() if any_grown else None
        with self.stream:
            for event in (slot.released, solver_done):
                if event is not None:
                    self.stream.wait_event(event)
            for pinned_view, device_view in views.values():
                device_view.set(pinned_view, stream=self.stream)
            slot.copied = self.stream.record()
        solver_stream.wait_event(slot.copied)
        return dataclasses.replace(
            chunk,
            X=_device_X(chunk.X, {name: device for name, (_, device) in views.items()}),
            rows={
                name: views[f"rows.{name}"][1] if f"rows.{name}" in views else array
                for name, array in chunk.rows.items()
            },
        )


def _device_X(X, device):
    """X rebuilt from its device copies (``X`` itself when it was on the device)."""
    if is_cupy_array(X):
        return X
    if "X" in device:
        return device["X"]
    parts = (device["data"], device["indices"], device["indptr"])
    if hasattr(cusparse.csr_matrix, "_from_parts"):
        # CuPy 14.2's constructor reads indptr's ends back to the host, on the solver's
        # stream: the host would wait for the previous chunk's steps. Its builder from
        # checked parts reads nothing (private, hence the test for it).
        return cusparse.csr_matrix._from_parts(*parts, X.shape, has_canonical_format=True)
    X_device = cusparse.csr_matrix(parts, shape=X.shape)
    X_device.has_canonical_format = True  # made canonical on the host; saves the device a check
    return X_device
