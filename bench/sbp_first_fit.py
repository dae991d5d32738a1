"""The first SBPClassifier() fit of a fresh Python process, with the compiled pair steps and
with the NumPy ones (issue 47).

One-vs-one SBP steps its pairs on the host in functions compiled by Numba
(``gpusvm/solvers/sbp/_pairs_compiled.py``): the first fit of a process imports Numba and
loads them from Numba's cache, which the warmed-up fits of ``bench/sbp_defaults.py`` do
not count. Here each data set is fitted in a new process twice in a row, with
``GPUSVM_COMPILED_STEPS`` unset (compiled) and ``=0`` (NumPy), after one untimed run of
each that fills Numba's cache (the compilation after an install is timed once, in the
first row: its cache emptied into a fresh folder through ``NUMBA_CACHE_DIR``). The
process's imports are outside the times.

    python bench/sbp_first_fit.py [--datasets penbased ...] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402

DATASETS = ["digits", "penbased", "satimage", "texture", "letter"]
QUICK_ROWS = 1_000

# Run in the child process: load the data, fit twice, print the two times as JSON.
CHILD = """
import json, sys, time
import numpy as np
from gpusvm import SBPClassifier
name, rows = sys.argv[1], int(sys.argv[2])
if name == "digits":
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
else:
    from gpusvm.datasets import load_keel
    X, y, _, _ = load_keel(name)
X, y = X[:rows], y[:rows]
seconds = []
for _ in range(2):
    start = time.perf_counter()
    SBPClassifier(random_state=0).fit(X, y)
    seconds.append(time.perf_counter() - start)
print(json.dumps({"rows": int(X.shape[0]), "classes": int(np.unique(y).size), "seconds": seconds}))
"""


def fits(name, rows, compiled, cache_dir=None):
    """The first and second fit of a fresh process."""
    env = {**os.environ, "GPUSVM_COMPILED_STEPS": "1" if compiled else "0"}
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    done = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(rows)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} training rows: a smoke run")
    args = parser.parse_args()
    rows = QUICK_ROWS if args.quick else 10**9
    results = []
    with tempfile.TemporaryDirectory() as empty_cache:
        cold = fits(args.datasets[0], rows, True, cache_dir=empty_cache)
    results.append(
        {
            "dataset": args.datasets[0],
            "rows": cold["rows"],
            "classes": cold["classes"],
            "steps": "compiled, Numba's cache empty (after an install)",
            "first": cold["seconds"][0],
            "second": cold["seconds"][1],
        }
    )
    for name in args.datasets:
        for compiled in (True, False):
            fits(name, rows, compiled)  # untimed: Numba's cache filled, the data files read once
            run = fits(name, rows, compiled)
            row = {
                "dataset": name,
                "rows": run["rows"],
                "classes": run["classes"],
                "steps": "compiled" if compiled else "NumPy (GPUSVM_COMPILED_STEPS=0)",
                "first": run["seconds"][0],
                "second": run["seconds"][1],
            }
            results.append(row)
            print(row, flush=True)
    for row in results:
        row["first_over_second"] = row["first"] / row["second"]
    report(
        "sbp_first_fit",
        ["numpy"],
        columns=[
            ("data", "dataset", "s"),
            ("training rows", "rows", "g"),
            ("classes", "classes", "g"),
            ("pair steps", "steps", "s"),
            ("first fit of the process, s", "first", ".2f"),
            ("second fit, s", "second", ".2f"),
        ],
        title="SBPClassifier() fitted twice in a fresh process: the first fit pays Numba's import and cache",
        payload={
            "dataset": ", ".join(args.datasets),
            "parameters": {"quick": args.quick},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
