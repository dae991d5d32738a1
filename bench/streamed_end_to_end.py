"""From a svmlight file to a trained model: does a streamed fit run at the speed of the disk
once its chunks are cached (issue 65)? gpusvm streamed with and without its chunk cache, in
memory (on the GPU: resident on the device), and Vowpal Wabbit and river on the same file,
in the same run.

1. Data: a svmlight file written from the hashed click-log stream (``bench/datasets.py``'s
   ``HashedStream``: 20 categorical fields hashed into 2^20 columns, about 20 nonzeros a
   row, values 1 (2 where two fields collide), labels -1/+1 drawn from a known logistic
   model, about 25% positive). Its rows are independent draws, so the file is in a random
   order (never sorted by label). ``--rows`` rows (1.5 million by default: about 270 MB,
   the issue's example), one-based indices as LIBSVM writes them, written in parts by as
   many processes as there are cores (``dump_svmlight_file`` uses one) and joined. The
   test rows are fresh rows of the same stream (past the file's end), written to a second
   file for the peers. Both files are written to a temporary folder, their writing not
   timed, and deleted at the end.
2. gpusvm, ``FTRLClassifier`` and ``PegasosSVC(tol=None)``, ``max_iter`` ``--epochs`` (5),
   otherwise at their defaults (``random_state=0``, ``backend='numpy'``, ``verbose=0``),
   classes given, ``SvmlightChunks(path, --chunk-rows)``:

   a. streamed, no cache: ``fit_chunks(reader, cache_file=None)``: every pass parses the
      text;
   b. streamed through a chunk cache: ``SvmlightChunks(path, chunk_rows, cache_file=...)``;
      its first pass (the scan, which parses the text to learn the file's width and writes
      the cache) is timed apart, through ``reader.n_rows``, then the fit, whose passes read
      the cache. Its coef_ and intercept_ are compared, bit for bit, with (a)'s;
   c. in memory: ``gpusvm.datasets.load_svmlight`` of the whole file (the parse the reader
      uses; the arrays scikit-learn's ``load_svmlight_file`` returns), then ``fit`` on the
      same epochs (FTRL's ``fit`` shuffles the rows each epoch, its default; ``fit_chunks``
      takes them in the file's order).

   (a) times its scan apart too, so that every row reads as a first pass over the file
   (parse; parse and write the cache; load into memory) and then the training passes.
3. One pass alone, no training: a reader's scan, a parse pass of a scanned reader, a scan
   that writes the cache, a pass that reads the complete cache; and scikit-learn's
   ``load_svmlight_file`` of the whole file, for reference.
4. Peers, each optional, reported as missing with the reason when it cannot run
   (``bench.peers.MissingPeer``); ``--no-peers`` leaves them out (and scikit-learn's reader):

   - Vowpal Wabbit (``vowpalwabbit``'s ``Workspace``, which reads the data file itself):
     the same rows in VW's text format (``label |f index:value ...``, written beforehand,
     its writing time reported and not counted), ``--ftrl --loss_function logistic`` and
     ``--loss_function hinge`` (a linear SVM), otherwise its defaults but ``-b 20`` (the
     file's 2^20 columns without more collisions) and ``--holdout_off`` (every row trained
     on, every pass run, as gpusvm's): one pass with no cache, and 5 passes with its cache
     (``--cache_file PATH -k``; not with ``-c`` as well, which names a second cache,
     ``<data>.cache``, and VW warns that it writes only one). VW's whole run is timed (the
     workspace made, the data read and learned, the model written). Its cached passes are
     timed in a second run that reads the complete cache only (5 passes, divided by 5); its
     first pass with the cache (parse, learn, write the cache) is the first run's time less
     four such passes.
   - river: ``linear_model.LogisticRegression()`` and ``linear_model.PAClassifier()`` (a
     hinge loss), at their defaults, one row at a time through ``learn_one`` from
     ``river.stream.iter_libsvm`` (river's own parse of the file), one pass over the
     file's first ``--river-rows`` rows (river is slow).
5. On the GPU (``--backend cupy``), gpusvm alone (the peers run on the CPU: their figures
   are the CPU record's): FTRLClassifier at the stream batch (1,024) and at a large one
   (16,384; ``--ftrl-batches``), taking the rows in the file's order in every fit
   (``shuffle=False``), and
   PegasosSVC at its default batch (64), ``--epochs`` passes, each

   a. resident: ``fit`` on the whole file loaded (``load_svmlight``) and put on the
      device once (a cupyx CSR matrix, ``gpusvm._validation.to_backend``): the step rate
      with the data resident, the median of three fits timed by CUDA events;
   b. streamed through the chunk cache, written once by a reader's scan (timed apart: the
      first pass of every learner's row), then ``fit_chunks`` from a reader that finds it
      complete: chunks read ahead on a worker thread, copied to the device on a stream of
      their own;
   c. streamed from the text: ``fit_chunks`` from a scanned reader, ``--text-epochs``
      passes (the parser's rate bounds them whatever the learner: a pass measures it).

   Each streamed rate is also given as a fraction of its learner's resident rate, and
   FTRL's from the cache beside the issue's target: a third of the resident rate at the
   same batch, or the disk's rate where that is lower. The fits read the cache from the
   page cache (it was just written, and the machine's memory holds it); the disk's rate
   is the cache file read alone after its pages were dropped from the page cache
   (``posix_fadvise(DONTNEED)``; the share still cached after it, asked of ``mincore``,
   is reported). The one-pass table holds it beside the reader's passes (the cache from
   the page cache and after the same drop, the text, the scans, the load).

Every model is scored on the same held-out rows (test accuracy), beside the accuracy of the
stream's own model on them (the best to expect). Before the timings, every gpusvm path and each peer runs once on a
small file (imports, first calls, on the GPU the kernels' compilation), untimed. On the
CPU the file is read from the page cache (it was just written), so a pass's time is the
parse's or the training's, not a disk's.

    python -m bench.streamed_end_to_end [--backend numpy|cupy] [--rows 1500000] [--chunk-rows 100000]
        [--epochs 5] [--text-epochs N] [--ftrl-batches 1024 16384] [--river-rows 100000]
        [--test-rows 100000] [--no-peers] [--note TEXT] [--quick]
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import mmap
import multiprocessing
import os
import re
import shutil
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from bench.common import (
    TimeLimit,
    binary_accuracy,
    gpu_facts,
    linear_weights,
    markdown_table,
    median,
    report,
    synchronize_device,
    timed_fit,
    timed_run,
)
from bench.datasets import HashedStream
from bench.peers import MissingPeer

from gpusvm import FTRLClassifier, PegasosSVC
from gpusvm._validation import to_backend
from gpusvm.data_files import SvmlightChunks
from gpusvm.datasets import load_svmlight

N_FEATURES, N_FIELDS = 2**20, 20
WRITE_ROWS = 50_000  # the stream's chunk: the rows generated and written at a time
EPOCHS = 5
CLASSES = np.array([-1, 1])
MB = 1e6  # MB/s: megabytes of the text file a second
TEXT, CACHED = "streamed, no cache (text every pass)", "streamed, chunk cache"  # how a row trained
RESIDENT = "resident on the device (load_svmlight, copy, fit)"
WARM_UP_ROWS = 2_000
FTRL_BATCHES = (1024, 16384)  # FTRL's batches on the GPU: its stream batch, and a large one
RESIDENT_REPEATS = 3  # a resident fit on the GPU is short: the median of this many
READ_BLOCK = 16 * 2**20  # the disk's rate: the cache file read in blocks of this many bytes
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass
class Data:
    """The training file and the held-out rows."""

    folder: Path
    path: Path  # the training rows, svmlight
    rows: int
    nonzeros: int
    file_bytes: int
    test_path: Path  # the held-out rows, svmlight (the peers read them from it)
    X_test: object  # CSR, N_FEATURES columns (column j is the file's index j + 1)
    y_test: np.ndarray
    true_accuracy: float  # the stream's own model on the held-out rows
    write_seconds: float


def hashed_stream(rows):
    return HashedStream(rows, chunk_rows=WRITE_ROWS, n_features=N_FEATURES, n_fields=N_FIELDS, seed=0)


def write_part(rows, first_chunk, end_chunk, path):
    """Chunks ``first_chunk`` to ``end_chunk - 1`` of the stream of ``rows`` rows, as
    svmlight, to ``path``; returns the nonzeros written (one process's part of
    :func:`write_data`)."""
    stream, nonzeros = hashed_stream(rows), 0
    with open(path, "wb") as handle:
        for index in range(first_chunk, end_chunk):
            X, y = stream.chunk(index)
            dump_svmlight_file(X, 2 * y - 1, handle, zero_based=False)
            nonzeros += X.nnz
    return nonzeros


def write_data(folder, rows, test_rows, name="train"):
    """``rows`` rows of the hashed stream as a svmlight file in ``folder``, and ``test_rows``
    fresh rows of the same stream (chunks past the file's end) as a second file: a Data.
    The training file is written in parts, one a core (each process writes its chunks of
    the stream, which are drawn from their index alone), then joined in order."""
    stream = hashed_stream(rows)
    path, test_path = folder / f"{name}.svm", folder / f"{name}-test.svm"
    started = time.perf_counter()
    processes = min(CORES, stream.n_chunks)
    if processes == 1:
        nonzeros = write_part(rows, 0, stream.n_chunks, path)
    else:
        bounds = np.linspace(0, stream.n_chunks, processes + 1).astype(int).tolist()
        parts = [folder / f"{name}.part{number}" for number in range(processes)]
        # spawned, not forked: this process may hold a device context and threads
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
            nonzeros = sum(pool.map(write_part, [rows] * processes, bounds[:-1], bounds[1:], parts))
        with open(path, "wb") as target:
            for part in parts:
                with open(part, "rb") as source:
                    shutil.copyfileobj(source, target, READ_BLOCK)
                part.unlink()
    write_seconds = time.perf_counter() - started
    test = [stream.chunk(stream.n_chunks + i) for i in range(-(-test_rows // WRITE_ROWS))]
    X_test = sp.vstack([X for X, _ in test], format="csr")[:test_rows]
    labels = np.concatenate([y for _, y in test])[:test_rows]
    dump_svmlight_file(X_test, 2 * labels - 1, str(test_path), zero_based=False)
    margins = X_test @ stream.true_weights + stream.true_intercept
    return Data(
        folder=folder,
        path=path,
        rows=rows,
        nonzeros=nonzeros,
        file_bytes=path.stat().st_size,
        test_path=test_path,
        X_test=X_test,
        y_test=2 * labels - 1,
        true_accuracy=float(np.mean((margins > 0) == (labels == 1))),
        write_seconds=write_seconds,
    )


def held_out_accuracy(model, data):
    """A gpusvm model's accuracy on the held-out rows, cut to the columns it was trained on
    (the file's largest index: the columns past it have no weight)."""
    weights = linear_weights(model)
    return binary_accuracy(weights, data.X_test[:, : weights.shape[1] - 1], data.y_test)


# --- gpusvm ---------------------------------------------------------------------------------------------


def gpusvm_learners(epochs):
    """The two learners at their defaults but a fixed number of epochs: name -> a factory."""
    return {
        "gpusvm FTRLClassifier": lambda: FTRLClassifier(max_iter=epochs, random_state=0, backend="numpy", verbose=0),
        "gpusvm PegasosSVC": lambda: PegasosSVC(max_iter=epochs, tol=None, random_state=0, backend="numpy", verbose=0),
    }


def streamed(make, path, chunk_rows, cache_file):
    """``make()`` trained by ``fit_chunks`` from a reader of ``path``: ``(model, first pass s,
    fit s)``. The first pass is the reader's scan (``n_rows``), which parses the text, and
    writes the cache when there is ``cache_file``; the fit's passes parse the text again
    (``cache_file=None``) or read the cache (a reader's own cache, which ``fit_chunks``
    takes as it is)."""
    reader = SvmlightChunks(path, chunk_rows, cache_file=cache_file)
    first = timed_run(lambda: reader.n_rows, "numpy")
    model, fit = fit_stream(make, reader, cache_file, "numpy")
    return model, first, fit


def fit_stream(make, reader, cache_file, backend):
    """``make()`` trained by ``fit_chunks`` from ``reader``: ``(model, seconds)``."""
    model = make()
    return model, timed_run(lambda: model.fit_chunks(reader, classes=CLASSES, cache_file=cache_file), backend)


def in_memory(make, X, y):
    """``make()`` fitted on rows already in memory: ``(model, fit s)``."""
    model = make()
    return model, timed_run(lambda: model.fit(X, y), "numpy")


def gpusvm_rows(data, chunk_rows, epochs):
    """The result rows of (a) streamed without cache, (b) streamed through the cache and
    (c) in memory, for each learner; and the bytes of the cache (b) wrote."""
    started = time.perf_counter()
    X, y = load_svmlight(data.path)
    load_seconds = time.perf_counter() - started
    rows, cache_bytes = [], None
    for name, make in gpusvm_learners(epochs).items():
        text_model, scan, fit = streamed(make, data.path, chunk_rows, None)
        rows.append(pass_row(data, name, TEXT, f"scan + {epochs}", scan, fit, epochs))
        rows[-1]["test_accuracy"] = held_out_accuracy(text_model, data)
        cache_file = data.folder / "chunks.cache"
        cached_model, scan, fit = streamed(make, data.path, chunk_rows, cache_file)
        cache_bytes = cache_file.stat().st_size
        cache_file.unlink()
        rows.append(pass_row(data, name, CACHED, f"scan writing the cache + {epochs}", scan, fit, epochs))
        same = bool(
            np.array_equal(cached_model.coef_, text_model.coef_)
            and np.array_equal(cached_model.intercept_, text_model.intercept_)
        )
        rows[-1].update(test_accuracy=held_out_accuracy(cached_model, data), same_as_text=same)
        model, fit = in_memory(make, X, y)
        rows.append(
            pass_row(data, name, "in memory (load_svmlight, then fit)", f"load + {epochs}", load_seconds, fit, epochs)
        )
        rows[-1]["test_accuracy"] = held_out_accuracy(model, data)
        print(*rows[-3:], sep="\n", flush=True)
    return rows, cache_bytes, load_seconds


def pass_row(data, learner, how, passes, first, later_total, epochs, rows=None, file_bytes=None, derived=False):
    """A result row: the first pass over the file (``first`` s) and ``epochs`` later
    passes (``later_total`` s), per pass in seconds, rows/s and MB/s of the text file.
    ``rows`` and ``file_bytes``: what a pass reads, the whole file by default."""
    rows, file_bytes = rows or data.rows, file_bytes or data.file_bytes
    later = later_total / epochs if later_total is not None else None
    row = {
        "learner": learner,
        "how": how,
        "passes": passes,
        "total_s": first + (later_total or 0.0),
        "first_pass_s": first,
        "later_pass_s": later,
        "first_rows_per_s": rows / first if first > 0 else None,
        "later_rows_per_s": rows / later if later else None,
        "first_mb_per_s": file_bytes / MB / first if first > 0 else None,
        "later_mb_per_s": file_bytes / MB / later if later else None,
    }
    if derived:
        row["first_pass_derived"] = True
    return row


def parse_rows(data, chunk_rows, load_seconds, reference=True):
    """One pass over the file alone, no training: the scan, a parse pass of a scanned
    reader, the scan writing the cache, a pass from the complete cache; the whole file
    into memory by gpusvm's reader (timed in :func:`gpusvm_rows`) and (``reference``)
    scikit-learn's."""
    text = SvmlightChunks(data.path, chunk_rows)
    cache_file = data.folder / "parse.cache"
    cached = SvmlightChunks(data.path, chunk_rows, cache_file=cache_file)
    timings = [
        ("SvmlightChunks: scan (parse, learn the width)", timed_run(lambda: text.n_rows, "numpy")),
        ("SvmlightChunks: a pass over the text (scanned reader)", timed_run(lambda: all_chunks(text), "numpy")),
        ("SvmlightChunks: scan writing the cache", timed_run(lambda: cached.n_rows, "numpy")),
    ]
    reread = SvmlightChunks(data.path, chunk_rows, cache_file=cache_file)  # a new reader finds the complete cache
    timings.append(("SvmlightChunks: a pass from the complete cache", timed_run(lambda: all_chunks(reread), "numpy")))
    cache_file.unlink()
    timings.append(("gpusvm load_svmlight: the whole file into memory", load_seconds))
    if reference:
        timings.append(
            (
                "scikit-learn load_svmlight_file: the whole file into memory",
                timed_run(lambda: load_svmlight_file(str(data.path)), "numpy"),
            )
        )
    return one_pass_rows(data, timings)


def one_pass_rows(data, timings):
    """The one-pass table's rows, from ``(what, seconds)`` pairs of a pass over the file."""
    return [
        {
            "pass": what,
            "seconds": seconds,
            "rows_per_s": data.rows / seconds,
            "mb_per_s": data.file_bytes / MB / seconds,
        }
        for what, seconds in timings
    ]


def all_chunks(reader):
    for _ in reader:
        pass


# --- gpusvm on the GPU ----------------------------------------------------------------------------------


def device_learners(epochs, ftrl_batches):
    """The learners on the GPU, each at one batch size in all its fits, streamed or
    resident: FTRL at each of ``ftrl_batches``, taking the rows in their order
    (``shuffle=False``, as ``fit_chunks`` does), and Pegasos at its default batch (64).
    Name -> a factory."""

    def ftrl(batch):
        return lambda: FTRLClassifier(
            max_iter=epochs, batch_size=batch, shuffle=False, random_state=0, backend="cupy", verbose=0
        )

    learners = {f"gpusvm FTRLClassifier, batch {batch:,}": ftrl(batch) for batch in ftrl_batches}
    learners["gpusvm PegasosSVC, batch 64"] = lambda: PegasosSVC(
        max_iter=epochs, tol=None, random_state=0, backend="cupy", verbose=0
    )
    return learners


def resident(make, X, y, repeats):
    """``make()`` fitted on an X already on the device: ``(model, seconds)``, the median of
    ``repeats`` fits timed by CUDA events."""
    seconds = []
    for _ in range(repeats):
        model = make()
        seconds.append(timed_fit(model, X, y, "cupy"))
    return model, median(seconds)


def device_rows(data, args, results, passes, facts, repeats=RESIDENT_REPEATS):
    """The GPU's measures at ``args``' chunk rows, epochs, text epochs and FTRL batches,
    appended to ``results`` (training) and ``passes`` (one pass alone) as they are made, so
    that a run stopped at its time limit keeps them; ``facts`` gets the cache's size and
    the disk's rate. ``repeats``: the resident fits timed, of which the median is kept.

    In the order of what the issue's target needs: the whole file loaded and put on the
    device; the scan that writes the chunk cache (once, for every learner); each learner's
    resident fit, then its stream from the cache; one pass alone from the cache (from the
    page cache and from the disk) and from the text; last, each learner streamed from the
    text, ``text_epochs`` passes.
    """
    chunk_rows, epochs, text_epochs = args.chunk_rows, args.epochs, args.text_epochs
    started = time.perf_counter()
    X, y = load_svmlight(data.path)
    X = to_backend(X, "cupy")
    synchronize_device("cupy")
    load_seconds = time.perf_counter() - started
    cache_file = data.folder / "chunks.cache"
    scan_writing = timed_run(lambda: SvmlightChunks(data.path, chunk_rows, cache_file=cache_file).n_rows, "numpy")
    facts["gpusvm_cache_bytes"] = cache_file.stat().st_size
    for name, make in device_learners(epochs, args.ftrl_batches).items():
        model, fit = resident(make, X, y, repeats)
        results.append(pass_row(data, name, RESIDENT, f"load + {epochs}", load_seconds, fit, epochs))
        results[-1]["test_accuracy"] = held_out_accuracy(model, data)
        reader = SvmlightChunks(data.path, chunk_rows, cache_file=cache_file)  # finds the complete cache
        model, fit = fit_stream(make, reader, cache_file, "cupy")
        results.append(pass_row(data, name, CACHED, f"scan writing the cache + {epochs}", scan_writing, fit, epochs))
        results[-1]["test_accuracy"] = held_out_accuracy(model, data)
        print(*results[-2:], sep="\n", flush=True)
    del X  # the device's memory back before the text's passes
    text = SvmlightChunks(data.path, chunk_rows)
    scan = timed_run(lambda: text.n_rows, "numpy")
    timings = [
        ("SvmlightChunks: scan writing the cache", scan_writing),
        *cache_passes(data, chunk_rows, cache_file, facts),
        ("SvmlightChunks: scan (parse, learn the width)", scan),
        ("SvmlightChunks: a pass over the text (scanned reader)", timed_run(lambda: all_chunks(text), "numpy")),
        ("gpusvm load_svmlight and the copy to the device", load_seconds),
    ]
    passes += one_pass_rows(data, timings)
    for name, make in device_learners(text_epochs, args.ftrl_batches).items():
        model, fit = fit_stream(make, text, None, "cupy")
        results.append(pass_row(data, name, TEXT, f"scan + {text_epochs}", scan, fit, text_epochs))
        results[-1]["test_accuracy"] = held_out_accuracy(model, data)
        print(results[-1], flush=True)


def cache_passes(data, chunk_rows, cache_file, facts):
    """A pass over the complete cache from the page cache; then, each after the cache's
    pages were dropped from the page cache, the same pass and the file read alone (the
    disk's rate): ``(what, seconds)`` pairs. ``facts`` gets the disk's rate (None where the
    drop left more than a tenth of the pages cached, or cannot be checked)."""
    warm = SvmlightChunks(data.path, chunk_rows, cache_file=cache_file)
    timings = [
        ("SvmlightChunks: a pass from the complete cache (page cache)", timed_run(lambda: all_chunks(warm), "numpy"))
    ]
    still = drop_from_page_cache(cache_file)
    cold = SvmlightChunks(data.path, chunk_rows, cache_file=cache_file)
    seconds = timed_run(lambda: all_chunks(cold), "numpy")
    timings.append((f"SvmlightChunks: a pass from the complete cache, {dropped(still)}", seconds))
    still = drop_from_page_cache(cache_file)
    seconds = timed_run(lambda: read_alone(cache_file), "numpy")
    timings.append((f"the cache file read alone (the disk), {dropped(still)}", seconds))
    measured = still is not None and still <= 0.1
    facts.update(
        cache_still_cached=still,
        disk_mb_per_s=facts["gpusvm_cache_bytes"] / MB / seconds if measured else None,
        disk_rows_per_s=data.rows / seconds if measured else None,
    )
    return timings


def dropped(still):
    """What the one-pass table says of a pass after :func:`drop_from_page_cache`."""
    share = "the page cache could not be asked" if still is None else f"{still:.0%} still cached"
    return f"dropped from the page cache first ({share})"


def drop_from_page_cache(path):
    """Ask Linux to drop ``path``'s pages from the page cache (``posix_fadvise(DONTNEED)``
    drops clean pages and needs no privilege; the file is synced first); the share of them
    still cached after it (:func:`page_cache_share`), None where it cannot be asked."""
    if not hasattr(os, "posix_fadvise"):
        return None
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return page_cache_share(path)


def page_cache_share(path):
    """The share of ``path``'s pages in the page cache (Linux's ``mincore`` on a mapping of
    the file), or None where it cannot be asked."""
    size = os.path.getsize(path)
    pages = np.zeros(-(-size // mmap.PAGESIZE), dtype=np.uint8)
    try:
        mincore = ctypes.CDLL(None, use_errno=True).mincore
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
            address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))  # the view is released at once
            failed = mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), pages.ctypes.data_as(ctypes.c_void_p))
    except (AttributeError, OSError, ValueError):
        return None
    return None if failed else float(np.mean(pages & 1))


def read_alone(path):
    """Read ``path`` from start to end in blocks, doing nothing with the bytes."""
    block = bytearray(READ_BLOCK)
    with open(path, "rb", buffering=0) as handle:
        while handle.readinto(block):
            pass


def compare_with_resident(results, facts):
    """Each streamed row's rate as a fraction of its learner's resident rate and, for FTRL
    from the cache, the issue's target: a third of the resident rate, or the disk's rate
    where that is lower (where the disk's rate was measured)."""
    resident_rates = {row["learner"]: row["later_rows_per_s"] for row in results if row["how"] == RESIDENT}
    disk = facts.get("disk_rows_per_s") or np.inf
    for row in results:
        resident_rate = resident_rates.get(row["learner"])
        if row["how"] == RESIDENT or not resident_rate or not row["later_rows_per_s"]:
            continue
        row["of_resident"] = row["later_rows_per_s"] / resident_rate
        if row["how"] == CACHED and "FTRLClassifier" in row["learner"]:
            row["target_rows_per_s"] = min(resident_rate / 3, disk)
            row["target_met"] = bool(row["later_rows_per_s"] >= row["target_rows_per_s"])


# --- Vowpal Wabbit ---------------------------------------------------------------------------------------


VW_LOSSES = {  # name -> VW's arguments beside the data's
    "Vowpal Wabbit --ftrl (logistic)": "--ftrl --loss_function logistic",
    "Vowpal Wabbit (hinge)": "--loss_function hinge",
}
VW_COMMON = f"-b {N_FEATURES.bit_length() - 1} --holdout_off --quiet"


def write_vw_file(svm_path, vw_path):
    """The svmlight file in VW's text format, line for line: ``label |f index:value ...``
    (one namespace; the svmlight indices are VW's feature names, the labels -1/+1 as they
    are). Returns the seconds it took."""
    started = time.perf_counter()
    with open(svm_path, "rb") as source, open(vw_path, "wb") as target:
        for lines in iter(lambda: source.readlines(1 << 24), []):
            target.write(re.sub(rb"(?m)^(\S+) ", rb"\1 |f ", b"".join(lines)))
    return time.perf_counter() - started


def vw_workspace():
    """vowpalwabbit's Workspace class, or MissingPeer with the reason."""
    try:
        from vowpalwabbit import Workspace
    except Exception as error:  # not installed, or its library fails to load
        raise MissingPeer(f"vowpalwabbit: {type(error).__name__}: {error}") from error
    return Workspace


def vw_run(arguments):
    """Seconds of VW's whole run with these arguments (the workspace made, the data read
    and learned, the model written by ``finish``); MissingPeer when VW fails."""
    Workspace = vw_workspace()
    try:
        started = time.perf_counter()
        Workspace(arguments).finish()
        return time.perf_counter() - started
    except Exception as error:
        raise MissingPeer(f"vowpalwabbit: {arguments!r} failed: {type(error).__name__}: {error}") from error


def vw_accuracy(model_path, test_vw, labels, folder):
    """A saved VW model's accuracy on the held-out rows (VW's own test pass, ``-t``; its
    raw predictions, positive for the class +1)."""
    predictions = folder / "vw.predictions"
    vw_run(f"-i {model_path} -t -d {test_vw} -p {predictions} --quiet")
    scores = np.loadtxt(predictions, ndmin=1)
    predictions.unlink()
    return float(np.mean(np.where(scores > 0, 1, -1) == labels))


def vw_rows(data, vw_path, test_vw, epochs):
    """VW's rows for each loss: one pass with no cache, and ``epochs`` passes with its cache
    (the first run writes it; a second run reads it only, which times the cached passes)."""
    rows = []
    cache_file, model = data.folder / "vw.cache", data.folder / "vw.model"
    for name, loss in VW_LOSSES.items():
        try:
            one = vw_run(f"-d {vw_path} {loss} {VW_COMMON} -f {model}")
            one_accuracy = vw_accuracy(model, test_vw, data.y_test, data.folder)
            cached = f"-d {vw_path} {loss} {VW_COMMON} --passes {epochs} --cache_file {cache_file}"
            writing = vw_run(f"{cached} -k -f {model}")
            accuracy = vw_accuracy(model, test_vw, data.y_test, data.folder)
            cache_bytes = cache_file.stat().st_size
            from_cache = vw_run(cached)  # no -k: the complete cache is read, the text not
        except MissingPeer as reason:
            rows.append({"learner": f"{name}: missing ({reason})", "missing": str(reason)})
            continue
        finally:
            cache_file.unlink(missing_ok=True)
            model.unlink(missing_ok=True)
        rows.append(pass_row(data, name, "1 pass, no cache", "1", one, None, 1))
        rows[-1]["test_accuracy"] = one_accuracy
        later = from_cache / epochs
        rows.append(
            pass_row(
                data,
                name,
                "its cache (--cache_file, -k)",
                f"{epochs}",
                writing - (epochs - 1) * later,
                from_cache,
                epochs,
                derived=True,
            )
        )
        rows[-1].update(total_s=writing, test_accuracy=accuracy, cache_bytes=cache_bytes, from_cache_run_s=from_cache)
        print(*rows[-2:], sep="\n", flush=True)
    return rows


# --- river ----------------------------------------------------------------------------------------------


def river_models():
    """river's learners at their defaults, or MissingPeer with the reason: name -> a factory."""
    try:
        from river import linear_model
    except Exception as error:
        raise MissingPeer(f"river: {type(error).__name__}: {error}") from error
    return {
        "river LogisticRegression": linear_model.LogisticRegression,
        "river PAClassifier (hinge)": linear_model.PAClassifier,
    }


def river_rows(data, river_rows_count):
    """Each river learner, one pass, one row at a time, over the file's first
    ``river_rows_count`` rows as river parses them (``stream.iter_libsvm``, counted in its
    time), scored on the held-out rows."""
    try:
        models = river_models()
    except MissingPeer as reason:
        return [{"learner": f"river: missing ({reason})", "missing": str(reason)}]
    from river import stream

    count = min(river_rows_count, data.rows)
    with open(data.path, "rb") as handle:
        read_bytes = sum(len(line) for line in itertools.islice(handle, count))
    test = list(stream.iter_libsvm(str(data.test_path), target_type=int))
    rows = []
    for name, make in models.items():
        model = make()

        def learn(model=model):
            for x, label in itertools.islice(stream.iter_libsvm(str(data.path), target_type=int), count):
                model.learn_one(x, label == 1)

        seconds = timed_run(learn, "numpy")
        rows.append(
            pass_row(data, name, f"1 pass over the first {count:,} rows", "1", seconds, None, 1, count, read_bytes)
        )
        rows[-1]["test_accuracy"] = float(np.mean([model.predict_one(x) == (label == 1) for x, label in test]))
        print(rows[-1], flush=True)
    return rows


# --- the run --------------------------------------------------------------------------------------------


def warm_up(folder, args):
    """Every timed path once on a small file, untimed: imports, first calls, VW's library,
    on the GPU the kernels' compilation."""
    rows, chunk_rows = min(WARM_UP_ROWS, args.rows // 2), min(args.chunk_rows, 500)
    print(f"warming up on {rows:,} rows (not timed)", flush=True)
    data = write_data(folder, rows, 500, name="warm-up")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too few rows for the learners' checks
        if args.backend == "cupy":
            once = argparse.Namespace(**{**vars(args), "chunk_rows": chunk_rows, "epochs": 1, "text_epochs": 1})
            device_rows(data, once, [], [], {}, repeats=1)
        else:
            _, _, load_seconds = gpusvm_rows(data, chunk_rows, args.epochs)
            parse_rows(data, chunk_rows, load_seconds, reference=args.peers)
    if args.peers:
        vw_path = folder / "warm-up.vw"
        write_vw_file(data.path, vw_path)
        try:
            vw_run(f"-d {vw_path} {VW_COMMON}")
        except MissingPeer:
            pass  # reported by the timed run
        river_rows(data, 100)
    for path in folder.iterdir():
        path.unlink()


def peer_versions():
    """The peers' versions, and pyarrow's (gpusvm's parser); None for one not installed."""
    versions = {}
    for name in ("vowpalwabbit", "river", "pyarrow"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def host_rows(data, args, results, passes, facts):
    """The CPU's rows: gpusvm's, the one-pass table, then the peers' (``args.peers``)."""
    if args.peers:
        vw_path, test_vw = data.folder / "train.vw", data.folder / "train-test.vw"
        facts["vw_file_write_s"] = write_vw_file(data.path, vw_path)
        write_vw_file(data.test_path, test_vw)
    with TimeLimit() as limit:
        gpusvm_results, facts["gpusvm_cache_bytes"], load_seconds = gpusvm_rows(data, args.chunk_rows, args.epochs)
        results += gpusvm_results
        passes += parse_rows(data, args.chunk_rows, load_seconds, reference=args.peers)
        if args.peers:
            results += vw_rows(data, vw_path, test_vw, args.epochs)
            results += river_rows(data, args.river_rows)
    return limit.reached


def gpu_rows(data, args, results, passes, facts):
    """The GPU's rows (:func:`device_rows`), compared with the resident fits."""
    with TimeLimit() as limit:
        device_rows(data, args, results, passes, facts)
    compare_with_resident(results, facts)
    return limit.reached


# The training table's columns: those of both backends, then the CPU's, then the GPU's.
COLUMNS = [
    ("learner", "learner", "s"),
    ("how", "how", "s"),
    ("passes", "passes", "s"),
    ("total s", "total_s", ".2f"),
    ("first pass s", "first_pass_s", ".2f"),
    ("later passes s each", "later_pass_s", ".2f"),
    ("first pass rows/s", "first_rows_per_s", ",.0f"),
    ("later rows/s", "later_rows_per_s", ",.0f"),
    ("first pass MB/s", "first_mb_per_s", ",.1f"),
    ("later MB/s", "later_mb_per_s", ",.1f"),
]
HOST_COLUMNS = COLUMNS + [("test accuracy", "test_accuracy", ".4f"), ("coef_ = no cache's", "same_as_text", "")]
DEVICE_COLUMNS = COLUMNS + [
    ("later rows/s / resident's", "of_resident", ".2f"),
    ("target rows/s", "target_rows_per_s", ",.0f"),
    ("target met", "target_met", ""),
    ("test accuracy", "test_accuracy", ".4f"),
]
PASS_COLUMNS = [
    ("one pass alone", "pass", "s"),
    ("seconds", "seconds", ".2f"),
    ("rows/s", "rows_per_s", ",.0f"),
    ("MB/s of text", "mb_per_s", ",.1f"),
]


def host_title(data, args, facts):
    """The CPU's report: what comes before the one-pass table, and before the training table."""
    note = f" {args.note}" if args.note else ""
    cache_size = f"{facts['gpusvm_cache_bytes'] / MB:.0f} MB" if facts.get("gpusvm_cache_bytes") else "not written"
    vw_file = f" VW's file was written in {facts['vw_file_write_s']:.1f} s (not counted)." if args.peers else ""
    return (
        f"## From a svmlight file to a trained model: {data.rows:,} rows, {data.file_bytes / MB:.0f} MB\n\n"
        f"HashedStream ({N_FIELDS} fields hashed into 2^20 columns, {data.nonzeros / data.rows:.1f} nonzeros a row), "
        f"chunks of {args.chunk_rows:,} rows, {args.epochs} epochs, NumPy backend, one run each, on "
        f"{os.cpu_count()} cores (pyarrow's parse may use them all; gpusvm's steps and river use one, VW a "
        f"parser thread beside its learner).{note} Test accuracy on {args.test_rows:,} held-out rows; the true "
        f"model's: {data.true_accuracy:.4f}. gpusvm's chunk cache: {cache_size}.{vw_file}",
        "Training. A pass reads the whole file (river: its first rows). gpusvm's first pass is its reader's "
        "scan, or the load into memory; the later passes train. VW's first pass with its cache: its run less "
        f"{args.epochs - 1} passes of a second run that reads the complete cache.",
    )


def device_title(data, args, results, facts):
    """The GPU's report: what comes before the one-pass table, and before the training table
    (the target's verdict for each FTRL batch)."""
    note = f" {args.note}" if args.note else ""
    device = (gpu_facts() or {}).get("name", "no device found")
    cache_size = f"{facts['gpusvm_cache_bytes'] / MB:.0f} MB" if facts.get("gpusvm_cache_bytes") else "not written"
    if facts.get("disk_mb_per_s"):
        disk = (
            f"{facts['disk_mb_per_s']:,.0f} MB/s, {facts['disk_rows_per_s']:,.0f} rows/s (the cache file read alone "
            f"after its pages were dropped from the page cache, {facts['cache_still_cached']:.0%} still cached)"
        )
    else:
        disk = f"not measured (the cache file was {dropped(facts.get('cache_still_cached'))})"
    targets = [
        f"{row['learner'].removeprefix('gpusvm ')}: {row['of_resident']:.2f} of the resident rate, "
        + ("met" if row["target_met"] else "not met")
        for row in results
        if "target_met" in row
    ]
    return (
        f"## From a svmlight file to a model on the GPU: {data.rows:,} rows, {data.file_bytes / MB:.0f} MB\n\n"
        f"{device}, CuPy backend. HashedStream ({N_FIELDS} fields hashed into 2^20 columns, "
        f"{data.nonzeros / data.rows:.1f} nonzeros a row), chunks of {args.chunk_rows:,} rows, {args.epochs} epochs "
        f"({args.text_epochs} from the text), on {os.cpu_count()} cores (pyarrow's parse may use them all). "
        f"Resident: the median of {RESIDENT_REPEATS} fits timed by CUDA events; streamed: one run each.{note} Test "
        f"accuracy on {args.test_rows:,} held-out rows; the true model's: {data.true_accuracy:.4f}. gpusvm's chunk "
        f"cache: {cache_size}, which the fits read from the page cache; the disk's rate: {disk}.",
        "Training. A pass reads the whole file. The first pass of a row is the reader's scan (the one that wrote the "
        "cache, shared by the learners), or the load and the copy to the device; the later passes train. The issue's "
        "target, FTRL from the cache at a third of its resident rate at the same batch or more (or at the disk's "
        f"rate where that is lower): {'; '.join(targets) or 'not measured'}.",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["numpy", "cupy"], default="numpy", help="where gpusvm trains")
    parser.add_argument("--rows", type=int, default=1_500_000, help="rows of the training file")
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="passes of every fit")
    parser.add_argument("--text-epochs", type=int, help="cupy: passes of the fits from the text (default: --epochs)")
    parser.add_argument(
        "--ftrl-batches", type=int, nargs="+", default=list(FTRL_BATCHES), help="cupy: FTRLClassifier's batch sizes"
    )
    parser.add_argument("--test-rows", type=int, default=100_000, help="held-out rows")
    parser.add_argument("--river-rows", type=int, default=100_000, help="rows river learns (its one pass)")
    parser.add_argument("--no-peers", dest="peers", action="store_false", help="gpusvm alone (cupy: always)")
    parser.add_argument("--note", default=None, help="a remark kept in the result file (how the machine was used)")
    parser.add_argument("--quick", action="store_true", help="4,000 rows in chunks of 1,000 (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.chunk_rows, args.test_rows, args.river_rows = 4_000, 1_000, 1_000, 1_000
    args.text_epochs = args.text_epochs or args.epochs
    args.peers = args.peers and args.backend == "numpy"  # the peers run on the CPU: the CPU record has them
    folder = Path(tempfile.mkdtemp(prefix="gpusvm-end-to-end-"))
    results, passes, facts = [], [], {}
    try:
        warm_up(folder, args)
        data = write_data(folder, args.rows, args.test_rows)
        print(f"wrote {data.rows:,} rows, {data.file_bytes / MB:.0f} MB in {data.write_seconds:.0f} s", flush=True)
        if args.backend == "cupy":
            stopped = gpu_rows(data, args, results, passes, facts)
        else:
            stopped = host_rows(data, args, results, passes, facts)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.backend == "cupy":
        (head, training), columns = device_title(data, args, results, facts), DEVICE_COLUMNS
    else:
        (head, training), columns = host_title(data, args, facts), HOST_COLUMNS
    report(
        "streamed_end_to_end",
        [args.backend],
        title=f"{head}\n\n" + "\n".join(markdown_table(PASS_COLUMNS, passes)) + f"\n\n{training}",
        columns=columns,
        payload={
            "dataset": {
                "stream": f"HashedStream: {N_FIELDS} fields, 2^20 columns, seed 0, labels -1/+1, written as svmlight "
                "(one-based); the test rows: the stream's rows past the file's end",
                "rows": data.rows,
                "nonzeros": data.nonzeros,
                "file_bytes": data.file_bytes,
                "test_rows": args.test_rows,
                "true_model_test_accuracy": data.true_accuracy,
                "write_s": data.write_seconds,
            },
            "parameters": {
                "backend": args.backend,
                "rows": args.rows,
                "chunk_rows": args.chunk_rows,
                "epochs": args.epochs,
                **(
                    {
                        "text_epochs": args.text_epochs,
                        "ftrl_batches": args.ftrl_batches,
                        "resident_repeats": RESIDENT_REPEATS,
                    }
                    if args.backend == "cupy"
                    else {}
                ),
                "river_rows": args.river_rows,
                "vw_arguments": {name: f"{loss} {VW_COMMON}" for name, loss in VW_LOSSES.items()},
                "peers": peer_versions() if args.peers else None,
                "quick": args.quick,
                "note": args.note,
                **facts,
            },
            "parse_passes": passes,
            "results": results,
            "stopped_at_time_limit": stopped,
        },
    )


if __name__ == "__main__":
    main()
