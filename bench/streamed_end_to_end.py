"""From a svmlight file to a trained model: does a streamed fit run at the speed of the disk
once its chunks are cached (issue 65)? gpusvm streamed with and without its chunk cache, in
memory, and Vowpal Wabbit and river on the same file, in the same run.

1. Data: a svmlight file written from the hashed click-log stream (``bench/datasets.py``'s
   ``HashedStream``: 20 categorical fields hashed into 2^20 columns, about 20 nonzeros a
   row, values 1 (2 where two fields collide), labels -1/+1 drawn from a known logistic
   model, about 25% positive). Its rows are independent draws, so the file is in a random
   order (never sorted by label). ``--rows`` rows (1.5 million by default: about 270 MB,
   the issue's example), one-based indices as LIBSVM writes them. The test rows are fresh
   rows of the same stream (past the file's end), written to a second file for the peers.
   Both files are written to a temporary folder, their writing not timed, and deleted at
   the end.
2. gpusvm, ``FTRLClassifier(max_iter=5)`` and ``PegasosSVC(max_iter=5, tol=None)``, otherwise
   at their defaults (``random_state=0``, ``backend='numpy'``, ``verbose=0``), classes given,
   ``SvmlightChunks(path, --chunk-rows)``:

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
   (``bench.peers.MissingPeer``):

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

Every model is scored on the same held-out rows (test accuracy), beside the accuracy of the
stream's own model on them (the best to expect). Before the timings, every gpusvm path and each peer runs once on a
small file (imports, first calls), untimed. The file is read from the page cache (it was
just written), so a pass's time is the parse's or the training's, not a disk's.

    python -m bench.streamed_end_to_end [--rows 1500000] [--chunk-rows 100000]
        [--river-rows 100000] [--test-rows 100000] [--note TEXT] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from bench.common import TimeLimit, binary_accuracy, linear_weights, markdown_table, report, timed_run
from bench.datasets import HashedStream
from bench.peers import MissingPeer

from gpusvm import FTRLClassifier, PegasosSVC
from gpusvm.data_files import SvmlightChunks
from gpusvm.datasets import load_svmlight

N_FEATURES, N_FIELDS = 2**20, 20
WRITE_ROWS = 50_000  # the stream's chunk: the rows generated and written at a time
EPOCHS = 5
CLASSES = np.array([-1, 1])
MB = 1e6  # MB/s: megabytes of the text file a second
WARM_UP_ROWS = 2_000


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


def write_data(folder, rows, test_rows, name="train"):
    """``rows`` rows of the hashed stream as a svmlight file in ``folder``, and ``test_rows``
    fresh rows of the same stream (chunks past the file's end) as a second file: a Data."""
    stream = HashedStream(rows, chunk_rows=WRITE_ROWS, n_features=N_FEATURES, n_fields=N_FIELDS, seed=0)
    path, test_path = folder / f"{name}.svm", folder / f"{name}-test.svm"
    started, nonzeros = time.perf_counter(), 0
    with open(path, "wb") as handle:
        for index in range(stream.n_chunks):
            X, y = stream.chunk(index)
            dump_svmlight_file(X, 2 * y - 1, handle, zero_based=False)
            nonzeros += X.nnz
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
    model = make()
    fit = timed_run(lambda: model.fit_chunks(reader, classes=CLASSES, cache_file=cache_file), "numpy")
    return model, first, fit


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
        rows.append(pass_row(data, name, "streamed, no cache (text every pass)", f"scan + {epochs}", scan, fit, epochs))
        rows[-1]["test_accuracy"] = held_out_accuracy(text_model, data)
        cache_file = data.folder / "chunks.cache"
        cached_model, scan, fit = streamed(make, data.path, chunk_rows, cache_file)
        cache_bytes = cache_file.stat().st_size
        cache_file.unlink()
        rows.append(
            pass_row(data, name, "streamed, chunk cache", f"scan writing the cache + {epochs}", scan, fit, epochs)
        )
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


def parse_rows(data, chunk_rows, load_seconds):
    """One pass over the file alone, no training: the scan, a parse pass of a scanned
    reader, the scan writing the cache, a pass from the complete cache; the whole file
    into memory by gpusvm's reader (timed in :func:`gpusvm_rows`) and scikit-learn's."""
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
    timings.append(
        (
            "scikit-learn load_svmlight_file: the whole file into memory",
            timed_run(lambda: load_svmlight_file(str(data.path)), "numpy"),
        )
    )
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


def warm_up(folder, chunk_rows):
    """Every timed path once on a small file, untimed: imports, first calls, VW's library."""
    print(f"warming up on {WARM_UP_ROWS:,} rows (not timed)", flush=True)
    data = write_data(folder, WARM_UP_ROWS, 500, name="warm-up")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too few rows for the learners' checks
        _, _, load_seconds = gpusvm_rows(data, min(chunk_rows, 500), EPOCHS)
    parse_rows(data, min(chunk_rows, 500), load_seconds)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_500_000, help="rows of the training file")
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--test-rows", type=int, default=100_000, help="held-out rows")
    parser.add_argument("--river-rows", type=int, default=100_000, help="rows river learns (its one pass)")
    parser.add_argument("--note", default=None, help="a remark kept in the result file (how the machine was used)")
    parser.add_argument("--quick", action="store_true", help="4,000 rows in chunks of 1,000 (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.chunk_rows, args.test_rows, args.river_rows = 4_000, 1_000, 1_000, 1_000
    folder = Path(tempfile.mkdtemp(prefix="gpusvm-end-to-end-"))
    results, parses, facts = [], [], {}
    try:
        warm_up(folder, args.chunk_rows)
        data = write_data(folder, args.rows, args.test_rows)
        print(f"wrote {data.rows:,} rows, {data.file_bytes / MB:.0f} MB in {data.write_seconds:.0f} s", flush=True)
        vw_path, test_vw = folder / "train.vw", folder / "train-test.vw"
        facts["vw_file_write_s"] = write_vw_file(data.path, vw_path)
        write_vw_file(data.test_path, test_vw)
        with TimeLimit() as limit:
            gpusvm_results, facts["gpusvm_cache_bytes"], load_seconds = gpusvm_rows(data, args.chunk_rows, EPOCHS)
            results += gpusvm_results
            parses = parse_rows(data, args.chunk_rows, load_seconds)
            results += vw_rows(data, vw_path, test_vw, EPOCHS)
            results += river_rows(data, args.river_rows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    parse_table = markdown_table(
        [
            ("one pass alone", "pass", "s"),
            ("seconds", "seconds", ".2f"),
            ("rows/s", "rows_per_s", ",.0f"),
            ("MB/s of text", "mb_per_s", ",.1f"),
        ],
        parses,
    )
    columns = [
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
        ("test accuracy", "test_accuracy", ".4f"),
        ("coef_ = no cache's", "same_as_text", ""),
    ]
    note = f" {args.note}" if args.note else ""
    cache_size = f"{facts['gpusvm_cache_bytes'] / MB:.0f} MB" if facts.get("gpusvm_cache_bytes") else "not written"
    report(
        "streamed_end_to_end",
        ["numpy"],
        title=f"## From a svmlight file to a trained model: {data.rows:,} rows, {data.file_bytes / MB:.0f} MB\n\n"
        f"HashedStream ({N_FIELDS} fields hashed into 2^20 columns, {data.nonzeros / data.rows:.1f} nonzeros a row), "
        f"chunks of {args.chunk_rows:,} rows, {EPOCHS} epochs, NumPy backend, one run each, on "
        f"{os.cpu_count()} cores (pyarrow's parse may use them all; gpusvm's steps and river use one, VW a "
        f"parser thread beside its learner).{note} Test accuracy on {args.test_rows:,} held-out rows; the true "
        f"model's: {data.true_accuracy:.4f}. gpusvm's chunk cache: {cache_size}. "
        f"VW's file was written in {facts['vw_file_write_s']:.1f} s (not counted).\n\n"
        + "\n".join(parse_table)
        + "\n\nTraining. A pass reads the whole file (river: its first rows). gpusvm's first pass is its reader's "
        "scan, or the load into memory; the later passes train. VW's first pass with its cache: its run less "
        f"{EPOCHS - 1} passes of a second run that reads the complete cache.",
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
                "rows": args.rows,
                "chunk_rows": args.chunk_rows,
                "epochs": EPOCHS,
                "river_rows": args.river_rows,
                "vw_arguments": {name: f"{loss} {VW_COMMON}" for name, loss in VW_LOSSES.items()},
                "peers": peer_versions(),
                "quick": args.quick,
                "note": args.note,
                **facts,
            },
            "parse_passes": parses,
            "results": results,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
