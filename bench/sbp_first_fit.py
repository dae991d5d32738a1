"""The first SBPClassifier() fit of a fresh Python process, with the pair steps as chosen by
default, forced compiled, and forced NumPy (issue 47).

One-vs-one SBP steps its pairs on the host in functions compiled by Numba
(``gpusvm/solvers/sbp/pairs/_compiled.py``) or in NumPy: the first use of the compiled
ones in a process imports Numba and loads them from Numba's cache, which the warmed-up
fits of ``bench/sbp_defaults.py`` do not count, so by default a process's fits take the
NumPy steps until their work would pay for that (``use_compiled_steps``). Here each data
set is fitted in a new process twice in a row, with ``GPUSVM_COMPILED_STEPS`` unset (the
rule), ``=1`` (compiled) and ``=0`` (NumPy), after one untimed run of each that fills
Numba's cache; each fit's row says which steps it ran. The compilation after an install
is timed once, in the first row (compiled, its cache emptied into a fresh folder through
``NUMBA_CACHE_DIR``). The process's imports are outside the times. The fits are on the
host (``backend='numpy'``) wherever this runs: the compiled steps are the host's.

    python -m bench.sbp_first_fit [--datasets penbased ...] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench.common import report

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
seconds, steps = [], []
for _ in range(2):
    start = time.perf_counter()
    SBPClassifier(random_state=0, backend="numpy").fit(X, y)  # the host's steps, on any machine
    seconds.append(time.perf_counter() - start)
    # the compiled steps' module is imported at their first use
    steps.append("compiled" if "gpusvm.solvers.sbp.pairs._numba" in sys.modules else "NumPy")
print(json.dumps({"rows": int(X.shape[0]), "classes": int(np.unique(y).size), "seconds": seconds, "steps": steps}))
"""
# GPUSVM_COMPILED_STEPS: the settings compared, and their names in the table
SWITCHES = {None: "default (unset)", "1": "compiled (=1)", "0": "NumPy (=0)"}


def fits(name, rows, switch, cache_dir=None):
    """The first and second fit of a fresh process, ``GPUSVM_COMPILED_STEPS`` as ``switch``."""
    env = {key: value for key, value in os.environ.items() if key != "GPUSVM_COMPILED_STEPS"}
    if switch is not None:
        env["GPUSVM_COMPILED_STEPS"] = switch
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    done = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(rows)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def row_of(name, setting, run):
    """A table row from a process's two fits."""
    return {
        "dataset": name,
        "rows": run["rows"],
        "classes": run["classes"],
        "setting": setting,
        "first": run["seconds"][0],
        "first_steps": run["steps"][0],
        "second": run["seconds"][1],
        "second_steps": run["steps"][1],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} training rows: a smoke run")
    args = parser.parse_args()
    rows = QUICK_ROWS if args.quick else 10**9
    results = []
    with tempfile.TemporaryDirectory() as empty_cache:
        cold = fits(args.datasets[0], rows, "1", cache_dir=empty_cache)
    results.append(row_of(args.datasets[0], "compiled (=1), Numba's cache empty (after an install)", cold))
    for name in args.datasets:
        for switch, setting in SWITCHES.items():
            fits(name, rows, switch)  # untimed: Numba's cache filled, the data files read once
            results.append(row_of(name, setting, fits(name, rows, switch)))
            print(results[-1], flush=True)
    for row in results:
        row["first_over_second"] = row["first"] / row["second"]
    report(
        "sbp_first_fit",
        ["numpy"],
        columns=[
            ("data", "dataset", "s"),
            ("training rows", "rows", "g"),
            ("classes", "classes", "g"),
            ("GPUSVM_COMPILED_STEPS", "setting", "s"),
            ("first fit of the process, s", "first", ".2f"),
            ("its steps", "first_steps", "s"),
            ("second fit, s", "second", ".2f"),
            ("its steps", "second_steps", "s"),
        ],
        title="SBPClassifier() fitted twice in a fresh process: the first use of the compiled steps pays "
        "Numba's import and cache",
        payload={
            "dataset": ", ".join(args.datasets),
            "parameters": {"quick": args.quick},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
