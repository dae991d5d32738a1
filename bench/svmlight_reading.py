"""Reading svmlight files: gpusvm's readers (plain lines through pyarrow) beside
scikit-learn's reader, time and peak memory.

Two files are written: the hashed click-log stream (``bench/datasets.py``'s ``HashedStream``: 40
categorical fields in 2^20 columns, values 1; 1 million rows) and Gaussian values
written in full precision (50 nonzeros a row in 10,000 columns; 200,000 rows). Each is
read, each way in a fresh process whose peak resident memory (VmHWM) is recorded:

- whole: ``gpusvm.datasets.load_svmlight`` (what ``gpusvm train`` reads with) against
  ``sklearn.datasets.load_svmlight_file``;
- in chunks: one pass of ``SvmlightChunks(path, 100_000, n_features=..., zero_based=True)``
  with ``parser='auto'`` and ``parser='scikit-learn'`` (what ``fit_chunks`` reads, without
  the training).

The results are the same arrays either way (``tests/test_svmlight_arrow.py``).

    python -m bench.svmlight_reading [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from bench.common import in_fresh_process, report
from bench.datasets import HashedStream


CHUNK_ROWS = 100_000

# Run in a fresh process per reading, so that the peak is that reading's alone (the
# imports before the clock starts).
READ_SCRIPT = """
import json, sys, time
from sklearn.datasets import load_svmlight_file
from gpusvm.data_files import SvmlightChunks
from gpusvm.datasets import load_svmlight
path, how, chunk_rows, n_features = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
started = time.perf_counter()
if how == "gpusvm load_svmlight":
    X, y = load_svmlight(path)
elif how == "scikit-learn load_svmlight_file":
    X, y = load_svmlight_file(path)
else:
    parser = "auto" if how == "SvmlightChunks, parser='auto'" else "scikit-learn"
    for X, y in SvmlightChunks(path, chunk_rows, n_features=n_features, zero_based=True, parser=parser):
        pass
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak_rss_bytes()}))
"""
WAYS = (
    "gpusvm load_svmlight",
    "scikit-learn load_svmlight_file",
    "SvmlightChunks, parser='auto'",
    "SvmlightChunks, parser='scikit-learn'",
)


def write_files(folder, quick):
    """The two files: ``{name: (path, rows, n_features)}``."""
    scale = 50 if quick else 1
    hashed_rows, gaussian_rows = 1_000_000 // scale, 200_000 // scale
    files = {
        "hashed, values 1": (folder / "hashed.svm", hashed_rows, 2**20),
        "Gaussian values": (folder / "gaussian.svm", gaussian_rows, 10_000),
    }
    stream = HashedStream(hashed_rows, chunk_rows=50_000, n_features=2**20, n_fields=40, seed=0)
    with open(files["hashed, values 1"][0], "wb") as handle:
        for index in range(-(-hashed_rows // 50_000)):
            X, y = stream.chunk(index)
            dump_svmlight_file(X, y, handle, zero_based=True)
    rng = np.random.default_rng(0)
    columns = np.arange(50) * 200 + rng.integers(0, 200, size=(gaussian_rows, 50))  # one in each band of 200
    X = sp.csr_matrix(
        (rng.normal(size=gaussian_rows * 50), columns.ravel(), np.arange(0, gaussian_rows * 50 + 1, 50)),
        shape=(gaussian_rows, 10_000),
    )
    dump_svmlight_file(X, rng.integers(0, 2, size=gaussian_rows), str(files["Gaussian values"][0]), zero_based=True)
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="files 50 times smaller (a smoke run)")
    args = parser.parse_args()
    chunk_rows = CHUNK_ROWS // 50 if args.quick else CHUNK_ROWS
    results = []
    with tempfile.TemporaryDirectory(prefix="gpusvm-svmlight-") as folder:
        started = time.perf_counter()
        files = write_files(Path(folder), args.quick)
        print(f"wrote the files in {time.perf_counter() - started:.0f} s", flush=True)
        for name, (path, rows, n_features) in files.items():
            size = path.stat().st_size
            for how in WAYS:
                result = in_fresh_process(READ_SCRIPT, path, how, chunk_rows, n_features)
                results.append(
                    {
                        "file": name,
                        "rows": rows,
                        "mib": size / 2**20,
                        "how": how,
                        **result,
                        "mib_per_second": size / 2**20 / result["seconds"],
                        "peak_rss_mib": result["peak_rss_bytes"] / 2**20,
                    }
                )
                print(results[-1], flush=True)
    columns = [
        ("file", "file", "s"),
        ("rows", "rows", ",d"),
        ("MiB", "mib", ".0f"),
        ("read by", "how", "s"),
        ("seconds", "seconds", ".2f"),
        ("MiB/s", "mib_per_second", ".1f"),
        ("peak RSS (MiB)", "peak_rss_mib", ".0f"),
    ]
    report(
        "svmlight_reading",
        ["numpy"],
        columns=columns,
        title="## Reading svmlight files: gpusvm's readers beside scikit-learn's\n\n"
        f"Each reading in a fresh process (its peak resident memory); chunks of {chunk_rows:,} rows "
        "read in one pass without training; pyarrow parses the plain lines for gpusvm's "
        "load_svmlight and parser='auto':",
        payload={
            "dataset": {
                "hashed, values 1": "HashedStream: 40 fields, 2^20 columns, seed 0",
                "Gaussian values": "50 nonzeros a row in 10,000 columns, N(0, 1), seed 0",
            },
            "parameters": {"chunk_rows": chunk_rows, "quick": args.quick},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
