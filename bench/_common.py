"""Shared pieces of the benchmark scripts: machine facts, timing, result files."""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
LIBRARIES = ("gpusvm", "numpy", "scipy", "scikit-learn", "cupy-cuda12x", "cupy-cuda13x", "nvtx")


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_facts():
    """Device 0's name and memory, the CUDA runtime and driver, CuPy's version (the facts
    of ``gpusvm info``) and the driver release, or None without a device."""
    from gpusvm._device.system_info import cuda_facts

    found = cuda_facts(check_kernels=False)
    if not found.get("devices"):
        return None
    device = found["devices"][0]
    facts = {
        "name": device["name"],
        "memory_gib": device["memory_gib"],
        "cuda_runtime": found["cuda_runtime"],
        "cuda_driver": found["cuda_driver"],
        "cupy": found["cupy"],
    }
    try:
        facts["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return facts


def machine():
    """What ran the benchmark: CPU model and count, GPU when there is one, Python."""
    return {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu": gpu_facts(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def library_versions():
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    if "gpusvm" not in versions:  # run from a checkout with PYTHONPATH=.
        import gpusvm

        versions["gpusvm"] = gpusvm.__version__
    return versions


def device_tag(backends):
    """A file-name tag: the GPU's name when a CuPy run is included, else the CPU's."""
    facts = gpu_facts() if "cupy" in backends else None
    name = facts["name"] if facts else "cpu-" + cpu_model()
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48]


def synchronize_device(backend):
    """Wait for the device's queued work (nothing to wait for on the CPU)."""
    if backend == "cupy":
        import cupy

        cupy.cuda.Device().synchronize()


def timed_run(run, backend):
    """Seconds for ``run()`` on a host clock, the device synchronised before and after."""
    synchronize_device(backend)
    start = time.perf_counter()
    run()
    synchronize_device(backend)
    return time.perf_counter() - start


def timed_fit(model, X, y, backend):
    """Seconds for ``model.fit(X, y)``: CUDA events on the GPU, a host clock on the CPU."""
    if backend == "cupy":
        import cupy

        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        cupy.cuda.Device().synchronize()
        start.record()
        model.fit(X, y)
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1000.0
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start


def linear_weights(model):
    """``[coef, intercept]``, one row per class, whatever shapes the solver keeps them in
    (the peers' own conventions differ)."""
    import numpy as np

    coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))
    intercept = np.atleast_1d(np.asarray(model.intercept_, dtype=np.float64)).reshape(-1, 1)
    return np.hstack([coef, intercept])


def binary_accuracy(weights, X, y):
    """Test accuracy of the binary linear model ``weights`` (one row), the positive class
    being the larger label: computed the same way for every solver."""
    import numpy as np

    negative, positive = np.unique(y)
    predicted = np.where(X @ weights[0, :-1] + weights[0, -1] > 0, positive, negative)
    return float(np.mean(predicted == y))


def binary_svm_objective(weights, X, y, lam):
    """The primal ``lam/2 (||w||^2 + b^2) + mean hinge`` of the binary linear model
    ``weights`` (one row, the bias last and regularized) on ``(X, y)``, the positive class
    being the larger label: computed the same way for every solver."""
    import numpy as np

    from gpusvm.solvers.pegasos import primal_objective

    targets = np.where(y == np.unique(y)[1], 1.0, -1.0)[:, None]
    return primal_objective(X, targets, np.ones(X.shape[0]), weights, lam, True)


def sbp_kernel_values_source(model):
    """Where a fitted SBPClassifier's steps read their kernel values, from its
    ``history_``: 'matrix' (resident on the device), 'cache' (a row cache, on the device
    or the host) or 'products' (computed each step); one-vs-one pairs trained one after
    another can differ: their sources joined by '+', in order of first use.
    KernelPegasosSVC says it in ``kernel_values_source_``."""
    return "+".join(dict.fromkeys(record["kernel_values_source"] for record in model.history_))


def median(values):
    return float(statistics.median(values))


class TimeLimit:
    """A block of measurements that a time limit ends cleanly.

    ``ci/gpu.sh`` runs each script under ``timeout``, whose SIGTERM would otherwise end
    the process before it writes anything. Inside ``with TimeLimit() as limit:`` a SIGTERM
    or Ctrl-C ends the block instead, ``limit.reached`` becomes True, and the script goes
    on to report the runs it finished; passing ``limit.reached`` on as the payload's
    ``stopped_at_time_limit`` marks the files as partial (:func:`write_results`). The
    signal is handled between Python statements: a long call into compiled code (a
    LIBSVM fit, a device synchronisation) finishes first.
    """

    reached = False

    def __enter__(self):
        self._previous = signal.signal(signal.SIGTERM, _interrupt)
        return self

    def __exit__(self, kind, error, traceback):
        signal.signal(signal.SIGTERM, self._previous)
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.reached = True
            print("stopped at the time limit: reporting the runs finished so far", flush=True)
            return True
        return False


def _interrupt(signum, frame):
    raise KeyboardInterrupt


# peak_rss_bytes() for the scripts run by in_fresh_process: VmHWM, the peak of the
# process' own memory since it started, where ru_maxrss would also hold the peak of the
# parent it was forked from (Linux keeps it across exec).
_PEAK_RSS_SOURCE = """
def peak_rss_bytes():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
"""


def in_fresh_process(script, *arguments):
    """Run ``script`` (Python source that may call ``peak_rss_bytes()`` and prints a JSON
    object on its last line) in a new interpreter with gpusvm's checkout first on its path
    (before this process's ``PYTHONPATH``, which may hold gpusvm's dependencies, as on a
    GPU window), with ``arguments`` as ``sys.argv[1:]``; return that object."""
    path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_SOURCE + script, *map(str, arguments)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    if done.returncode != 0:
        raise RuntimeError(f"a fresh process of the benchmark exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(name, backends, *, title, columns, payload):
    """Write ``results/<name>-<device>.json`` and its Markdown table, and print the table.

    ``payload`` holds ``dataset``, ``parameters`` and ``results`` (the table's rows);
    ``columns`` are :func:`markdown_table`'s. A ``--quick`` run
    (``payload['parameters']['quick']``) adds ``-quick`` to the file names, so that a smoke
    run never replaces recorded figures.
    """
    table = [title, ""] + markdown_table(columns, payload["results"])
    paths = write_results(name, backends, payload, table)
    print("\n".join(table))
    print("wrote", *paths)


def result_stem(name, backends, quick=False):
    """The file name, without its suffix, of a benchmark's results on this machine:
    ``<name>-<device>``, with ``-quick`` for a smoke run."""
    return f"{name}-{device_tag(backends)}{'-quick' if quick else ''}"


def write_results(name, backends, payload, table_lines):
    """Write the JSON and Markdown files of :func:`report`; return their paths. A payload
    whose ``stopped_at_time_limit`` is true (:class:`TimeLimit`) gets a line under the
    table's title saying the runs are the ones finished before the limit."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    if payload.get("stopped_at_time_limit"):
        table_lines = [
            *table_lines[:1],
            "",
            "**Stopped at its time limit: only the runs finished before it.**",
            *table_lines[1:],
        ]
    stem = result_stem(name, backends, payload.get("parameters", {}).get("quick"))
    payload = {
        "benchmark": name,
        "machine": machine(),
        "libraries": library_versions(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "table": list(table_lines),
        **payload,
    }
    json_path = RESULTS / f"{stem}.json"
    json_path.write_text(json.dumps(payload, indent=2) + "\n")
    md_path = RESULTS / f"{stem}.md"
    md_path.write_text("\n".join(table_lines) + "\n")
    return json_path, md_path


def markdown_table(columns, rows):
    """Lines of a Markdown table; ``columns`` are (header, key, format) triples."""
    lines = ["| " + " | ".join(c[0] for c in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [format(row[key], fmt) if row.get(key) is not None else "" for _, key, fmt in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
