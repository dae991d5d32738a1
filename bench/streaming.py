"""Training from a file larger than memory is wanted in: peak memory and time of the
streamed fit, and what streaming does to Pegasos' objective.

1. A svmlight file of about 2 GB (``--gigabytes``) is written from the hashed click-log
   stream (``bench/datasets.py``'s ``HashedStream``: 40 categorical fields hashed into 2^20 columns, about
   5.6 million rows). FTRLClassifier and PegasosSVC train on it with
   ``fit_chunks(SvmlightChunks(path, chunk_rows=100_000))``, one epoch, each in a fresh
   process whose peak resident memory (VmHWM) is recorded beside the file's size
   and the size of one chunk as CSR; each twice, with the file's chunks parsed through
   pyarrow (``parser='auto'``, gpusvm._stream.svmlight_arrow) and by scikit-learn's reader
   (``parser='scikit-learn'``, as where pyarrow is not installed).
   The file is deleted afterwards.
2. Streamed PegasosSVC (chunks in a random order, steps drawn within each chunk) against
   in-memory PegasosSVC at equal epochs (``tol=None``): on Adult in chunks of 5,000 rows,
   and on linear_objective.py's 1M-row synthetic problem (100,000 columns, 20 nonzeros
   a row) in chunks of 100,000: the exact primal objective and test accuracy of both.
3. The same two with their defaults (``tol=1e-3``, ``n_iter_no_change=5``,
   ``max_iter=1000``): the epochs each runs and why it stopped (``tol``, or
   ``max_iter``), in memory on its exact objective after each epoch, streamed on the
   progressive objective (``ProgressiveObjective``), with the last value of each, the
   exact objective of the model returned and its test accuracy.  ``--quick`` runs Adult's
   first 8,000 rows in chunks of 2,000 and 20,000 synthetic rows.

``--only-stopping`` runs part 3 alone and keeps parts 1 and 2 from the recorded result
of this machine (``results/streaming-<device>.json``), marked in the file
(``rerun``: the parts run this time, ``kept_from``: the date of the others).

    python -m bench.streaming [--gigabytes 2] [--quick | --only-stopping]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file

from bench.common import RESULTS, binary_svm_objective, in_fresh_process, markdown_table, report, result_stem
from bench.datasets import HashedStream, load


CHUNK_ROWS = 100_000
PARSERS = ("auto", "scikit-learn")  # SvmlightChunks' parser: pyarrow where installed, or scikit-learn's reader
N_FEATURES = 2**20

# Run in a fresh process per learner, so that the peak is that fit's alone.
FIT_SCRIPT = """
import json, sys, time
from gpusvm import FTRLClassifier, PegasosSVC
from gpusvm.data_files import SvmlightChunks
path, learner, parser = sys.argv[1], sys.argv[2], sys.argv[5]
chunk_rows, n_features = int(sys.argv[3]), int(sys.argv[4])
chunks = SvmlightChunks(path, chunk_rows, n_features=n_features, zero_based=True, parser=parser)
model = {"ftrl": FTRLClassifier(max_iter=1, random_state=0, backend="numpy"),
         "pegasos": PegasosSVC(max_iter=1, random_state=0, backend="numpy")}[learner]
started = time.perf_counter()
model.fit_chunks(chunks, classes=[0, 1])
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "rows": chunks.n_rows, "chunks": len(chunks),
                  "peak_rss_bytes": peak_rss_bytes()}))
"""


def write_file(path, gigabytes, quick):
    """Append chunks of the hashed stream until the file reaches ``gigabytes``."""
    stream = HashedStream(10**12, chunk_rows=50_000, n_features=N_FEATURES, n_fields=40, seed=0)
    target = gigabytes * 2**30
    chunk_bytes = 0
    with open(path, "wb") as handle:
        index = 0
        while handle.tell() < target:
            X, y = stream.chunk(index)
            dump_svmlight_file(X, y, handle, zero_based=True)
            index += 1
            if index == 1:
                chunk_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return os.path.getsize(path), chunk_bytes * CHUNK_ROWS // 50_000


def large_file_rows(gigabytes, quick):
    folder = Path(tempfile.mkdtemp(prefix="gpusvm-stream-"))
    path = folder / "hashed.svm"
    started = time.perf_counter()
    size, chunk_csr_bytes = write_file(path, gigabytes, quick)
    print(f"wrote {size / 2**30:.2f} GiB in {time.perf_counter() - started:.0f} s", flush=True)
    rows = []
    try:
        for learner, parser in itertools.product(("ftrl", "pegasos"), PARSERS):
            result = in_fresh_process(FIT_SCRIPT, path, learner, CHUNK_ROWS, N_FEATURES, parser)
            rows.append(
                {
                    "learner": learner,
                    "parser": parser,
                    "file_bytes": size,
                    "chunk_rows": CHUNK_ROWS,
                    "chunk_csr_bytes": chunk_csr_bytes,
                    **result,
                    "rows_per_second": result["rows"] / result["seconds"],
                }
            )
            print(rows[-1], flush=True)
    finally:
        path.unlink(missing_ok=True)
        folder.rmdir()
    return rows


def objectives(quick):
    """Streamed against in-memory PegasosSVC at equal epochs, on Adult (chunks of 5,000
    rows) and the 1M-row synthetic problem of linear_objective.py (chunks of 100,000)."""
    from gpusvm.datasets import load_adult

    X, y, X_test, y_test = load_adult()
    n = 20_000 if quick else 1_000_000
    problems = [
        ("adult", (X, y, X_test, y_test), 5_000, [1, 2] if quick else [1, 3, 10, 30]),
        ("synthetic", synthetic_problem(n), n // 10, [1, 2] if quick else [1, 3]),
    ]
    rows = []
    for data, problem, chunk_rows, epochs_list in problems:
        for epochs in epochs_list:
            for how, _, seconds, measured in both_fits({"max_iter": epochs, "tol": None}, problem, chunk_rows):
                rows.append({"data": data, "how": how, "epochs": epochs, "seconds": seconds, **measured})
                print(rows[-1], flush=True)
    return rows


def both_fits(params, data, chunk_rows):
    """PegasosSVC(``params``) fitted in memory, then streamed in chunks of ``chunk_rows``:
    for each, ``(how, model, seconds, {"objective", "test_accuracy"})``, the objective
    the exact primal one on the training rows."""
    from gpusvm import PegasosSVC

    X, y, X_test, y_test = data
    chunks = [(X[i : i + chunk_rows], y[i : i + chunk_rows]) for i in range(0, X.shape[0], chunk_rows)]
    for how, fit in (
        ("in memory", lambda m: m.fit(X, y)),
        (f"streamed, chunks of {chunk_rows}", lambda m: m.fit_chunks(chunks)),
    ):
        model = PegasosSVC(**params, random_state=0, backend="numpy")
        started = time.perf_counter()
        fit(model)
        seconds = time.perf_counter() - started
        weights = np.hstack([model.coef_, model.intercept_[:, None]])
        measured = {
            "objective": binary_svm_objective(weights, X, y, model.lam_),
            "test_accuracy": float(model.score(X_test, y_test)),
        }
        yield how, model, seconds, measured


def synthetic_problem(n):
    """The synthetic problem of linear_objective.py (:func:`bench.datasets.load`'s): ``n`` training
    rows and ``n / 10`` test rows."""
    return load("synthetic", train_rows=n, n_features=10_000 if n < 100_000 else 100_000)


def stopping(quick):
    """In-memory and streamed PegasosSVC with their defaults: the epochs each runs before
    its stopping rule (or max_iter) ends it."""
    from gpusvm.datasets import load_adult

    X, y, X_test, y_test = load_adult()
    n = 20_000 if quick else 1_000_000
    adult = (X[:8_000], y[:8_000], X_test, y_test) if quick else (X, y, X_test, y_test)
    problems = [("adult", adult, 2_000 if quick else 5_000), ("synthetic", synthetic_problem(n), n // 10)]
    rows = []
    for data, problem, chunk_rows in problems:
        for how, model, seconds, measured in both_fits({}, problem, chunk_rows):
            rows.append(
                {
                    "data": data,
                    "how": how,
                    "epochs": model.n_iter_,
                    "max_iter": model.max_iter,
                    "stopped_by": "tol" if model.n_iter_ < model.max_iter else "max_iter",
                    "rule_objective": "exact" if how == "in memory" else "progressive",
                    "last_rule_objective": model.objective_curve_[-1],
                    "seconds": seconds,
                    **measured,
                }
            )
            print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=2.0)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--quick", action="store_true", help="a 0.02 GB file and 1 to 2 epochs (a smoke run)")
    how.add_argument(
        "--only-stopping",
        action="store_true",
        help="part 3 alone; parts 1 and 2 kept from this machine's recorded result",
    )
    args = parser.parse_args()
    gigabytes = 0.02 if args.quick else args.gigabytes
    if args.only_stopping:
        recorded = json.loads((RESULTS / f"{result_stem('streaming', ['numpy'])}.json").read_text())
        large, results = recorded["large_file"], recorded["results"]
        gigabytes = recorded["parameters"]["gigabytes"]
        kept = {"rerun": ["stopping"], "kept_from": recorded["date"]}
    else:
        large = large_file_rows(gigabytes, args.quick)
        results = objectives(args.quick)
        kept = {"rerun": ["large_file", "objectives", "stopping"]}
    stops = stopping(args.quick)
    table_large = [
        "| learner | parser | file (GiB) | rows | chunk CSR (MiB) | peak RSS (MiB) | fit (s) | rows/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in large:
        table_large.append(
            f"| {row['learner']} | {row['parser']} | {row['file_bytes'] / 2**30:.2f} | {row['rows']:,} | "
            f"{row['chunk_csr_bytes'] / 2**20:.0f} | {row['peak_rss_bytes'] / 2**20:.0f} | "
            f"{row['seconds']:.1f} | {row['rows_per_second']:,.0f} |"
        )
    table_stops = markdown_table(
        [
            ("data", "data", "s"),
            ("how", "how", "s"),
            ("epochs", "epochs", "d"),
            ("stopped by", "stopped_by", "s"),
            ("rule's objective", "rule_objective", "s"),
            ("its last value", "last_rule_objective", ".5f"),
            ("fit (s)", "seconds", ".2f"),
            ("primal objective", "objective", ".5f"),
            ("test accuracy", "test_accuracy", ".4f"),
        ],
        stops,
    )
    columns = [
        ("data", "data", "s"),
        ("how", "how", "s"),
        ("epochs", "epochs", "d"),
        ("fit (s)", "seconds", ".2f"),
        ("primal objective", "objective", ".5f"),
        ("test accuracy", "test_accuracy", ".4f"),
    ]
    report(
        "streaming",
        ["numpy"],
        columns=columns,
        title="## Streamed training: one chunk in memory at a time\n\n"
        f"One epoch from a svmlight file, {CHUNK_ROWS:,} rows per chunk, NumPy backend, "
        "peak resident memory of the whole process:\n\n"
        + "\n".join(table_large)
        + "\n\nPegasosSVC with its defaults (tol=1e-3, n_iter_no_change=5, max_iter=1000), in memory (rule "
        "on the exact objective after each epoch) and streamed (rule on the progressive objective): "
        "epochs run and why it stopped:\n\n"
        + "\n".join(table_stops)
        + "\n\nPegasosSVC streamed (steps within each chunk, chunks in a random order) against in memory, "
        "equal epochs, tol=None:",
        payload={
            "dataset": {
                "large": "HashedStream: 40 fields, 2^20 columns, seed 0, written as svmlight",
                "adult": "UCI Adult (a9a encoding)",
                "synthetic": "linear_objective.py's make_linear_rule('linear', seed=1), 100,000 columns",
            },
            "parameters": {"gigabytes": gigabytes, "chunk_rows": CHUNK_ROWS, "quick": args.quick, **kept},
            "large_file": large,
            "stopping": stops,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
