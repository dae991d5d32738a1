"""Streamed chunks made ready one ahead of the solver, so that reading, copying and the
steps on the current chunk overlap.

On the cupy backend, the next chunk is read and checked (parsed, validated, its targets
made) on a worker thread while the device trains on the current one, then copied to the
device on a stream of its own, out of pinned host buffers, into one of two device slots
(double buffering, :class:`gpusvm._device.staging.DeviceStaging`): the copy runs while the
device still computes on the other slot, and the solver's stream waits for it only when
it needs the chunk.  Nothing here reads the device, so the solver can queue a chunk's
steps and come back for the next one at once.

On the numpy backend the chunks of text are made ready in the caller's thread, in turn:
both the svmlight parsers and the NumPy steps hold Python's GIL most of the time, so a
worker thread adds its switches and saves nothing (measured slower:
``docs/user_guide/larger_than_memory.md`` has the figures). Chunks read back as arrays (a
text file's chunk cache) are read ahead on a worker thread, as on cupy: reading them
waits on the disk and checks CRC-32s outside the GIL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import sklearn

from .._backend import is_cupy_array, is_device_backend, issparse
from .._validation import canonical_csr, check_int32_indexable, to_backend


@dataclasses.dataclass
class ReadyChunk:
    """One chunk as a solver takes it.

    ``X`` is a C-order dense matrix or a canonical CSR matrix with int32 indices, and
    ``rows`` holds arrays with one entry per row of ``X`` (targets, weights, labels...),
    all on the host after :func:`prepared_chunk`, on the training backend once
    :func:`ready_chunks` yields them.  ``facts`` are numbers about the chunk computed on
    the host, so that the solver needs no read from the device (``longest_row``: the
    most stored entries of a row, the width of X when dense).  ``epoch`` is the pass the
    chunk belongs to.
    """

    X: object
    rows: dict
    facts: dict
    epoch: int = 0

    @property
    def n_rows(self):
        return self.X.shape[0]


def prepared_chunk(X, rows, backend, epoch=0, **facts):
    """A :class:`ReadyChunk` of a validated ``X``, with ``facts`` beside ``longest_row``.

    A host X stays on the host (a CSR X made canonical with int32 indices, so that the
    device copy needs no conversion; a dense X made C-order); a device X goes to
    ``backend`` at once (its ``longest_row`` is then the bound ``n_features``).
    """
    if is_cupy_array(X):
        X = to_backend(X, backend)
    if issparse(X) and not is_cupy_array(X):
        X = canonical_csr(X.tocsr())
        check_int32_indexable(X)
        X.indices, X.indptr = X.indices.astype(np.int32, copy=False), X.indptr.astype(np.int32, copy=False)
        longest_row = int(np.diff(X.indptr).max()) if X.shape[0] else 0
    else:
        X = X if is_cupy_array(X) else np.ascontiguousarray(X)
        longest_row = X.shape[1]
    return ReadyChunk(X=X, rows=rows, facts={"longest_row": longest_row, **facts}, epoch=epoch)


_END = object()


class _NoTiming:
    """The timing of a stream nobody reads: ``reading`` and ``waiting`` do nothing."""

    def reading(self, seconds):
        pass

    def waiting(self, seconds):
        pass


def read_ahead(items, prepare, timing=None):
    """``prepare(item, number)`` for each item, in order, the next one computed on a
    worker thread while the caller works on the current one.

    An exception raised for an item comes out when the caller reaches that item.  The
    worker runs under the caller's scikit-learn configuration (``config_context`` is
    per thread).  Closing the generator waits for the item in progress, at most.
    ``timing`` (as :func:`ready_chunks`') is told the seconds each item took the worker
    and the seconds the caller waited for it.
    """
    iterator, config, timing = iter(items), sklearn.get_config(), timing or _NoTiming()

    def prepare_next(number):
        started = time.perf_counter()
        with sklearn.config_context(**config):
            item = next(iterator, _END)
            chunk = _END if item is _END else prepare(item, number)
        timing.reading(time.perf_counter() - started)
        return chunk

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpusvm-read-ahead") as worker:
        number, pending = 0, worker.submit(prepare_next, 0)
        try:
            while True:
                started = time.perf_counter()
                chunk = pending.result()
                timing.waiting(time.perf_counter() - started)
                if chunk is _END:
                    return
                number += 1
                pending = worker.submit(prepare_next, number)
                yield chunk
        finally:
            pending.cancel()


def made_ready_in_turn(items, prepare, timing=None):
    """``prepare(item, number)`` for each item, in order, in the caller's thread;
    ``timing`` is told the seconds of each (reading the item and preparing it), which
    the caller waits."""
    iterator, timing = iter(items), timing or _NoTiming()
    for number in itertools.count():
        started = time.perf_counter()
        item = next(iterator, _END)
        if item is _END:
            return
        chunk = prepare(item, number)
        seconds = time.perf_counter() - started
        timing.reading(seconds)
        timing.waiting(seconds)
        yield chunk


@contextlib.contextmanager
def ready_chunks(items, prepare, backend, *, host_read_ahead=False, timing=None):
    """The chunks of ``items`` ready for a solver on ``backend``, as a context manager
    (leaving it stops the cupy backend's worker, also on an error).

    Parameters
    ----------
    items : iterable
        Whatever ``prepare`` takes: ``(X, y)`` pairs, or pairs tagged with their epoch.
    prepare : callable
        ``prepare(item, number) -> ReadyChunk`` on the host (see :func:`prepared_chunk`);
        on cupy it runs on a worker thread, one item ahead.
    backend : {'numpy', 'cupy'}
    host_read_ahead : bool
        On numpy, read and prepare the next item on a worker thread, as on cupy (for items
        read as arrays, not parsed).
    timing : object, optional
        Told, by ``timing.reading(seconds)``, the seconds each item took to read and make
        ready (on whichever thread), and by ``timing.waiting(seconds)`` the seconds the
        caller waited for it (for example :class:`gpusvm._instrumentation.EpochBars`).

    Yields
    ------
    iterator of ReadyChunk
        On cupy, ``X`` and ``rows`` on the device, in one of two slots that are reused:
        a chunk must not be used once the next one has been asked for.  Its steps may
        still be running then; the next copy into its slot waits for them.
    """
    if not is_device_backend(backend):  # text: one thread, parsing and NumPy's steps both hold the GIL
        if not host_read_ahead:
            yield made_ready_in_turn(items, prepare, timing)
            return
        chunks = read_ahead(items, prepare, timing)
        with contextlib.closing(chunks):
            yield chunks
        return
    from .._device.staging import DeviceStaging

    chunks = read_ahead(items, prepare, timing)
    with contextlib.closing(chunks):
        yield DeviceStaging().staged(chunks)
