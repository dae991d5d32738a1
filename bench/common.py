"""What the benchmark scripts share: machine facts, timing, result files, measures of a
fitted model, and the settings and references that more than one script uses.

- the machine: its CPU and GPU (:func:`machine`, :func:`device_tag`), the card's peak
  memory bandwidth and the copy bandwidth measured here;
- timing: device-synchronised clocks, a time limit that ends a run cleanly
  (:class:`TimeLimit`), a fresh process for a fit whose memory is measured;
- result files: ``results/<name>-<device>.json`` and its Markdown table (:func:`report`);
- measures of fitted models: linear weights, accuracy, the primal objective, where an SBP
  fit read its kernel values, SBP's ``nu`` from SVCs;
- the SBP paper's kernel SVM experiments (``bench.sbp_kernel``; ``bench.perceptron_kernel``,
  ``bench.sbp_fit_phases`` and ``bench.sbp_one_vs_one`` rerun its settings): the settings,
  the models, SVC's reference (fitted, or read from a CPU record);
- the linear SVM's optimum (``bench.linear_objective``, ``bench.pegasos_steps``);
- the SBP step alone (``bench.sbp_step``, ``bench.sbp_launches``): the problem and the stepper.

The data the scripts read or generate is :mod:`bench.datasets`'s; the peers beside gpusvm
are :mod:`bench.peers`'.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC, LinearSVC

from gpusvm import KernelPegasosSVC, SBPClassifier, nu_from_svc
from gpusvm._backend import get_namespace
from gpusvm._validation import one_vs_rest_targets, to_backend
from gpusvm.kernel_functions import KernelSpec
from gpusvm.solvers.pegasos import primal_objective
from gpusvm.solvers.sbp import NumpySBPSteps, SBPProblem

RESULTS = Path(__file__).resolve().parent / "results"
LIBRARIES = ("gpusvm", "numpy", "scipy", "scikit-learn", "cupy-cuda12x", "cupy-cuda13x", "nvtx")


# --- the machine --------------------------------------------------------------------------------------------


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


# Peak memory bandwidth (bytes a second, the data sheets) by a piece of the device's name,
# most specific first: the first piece found in the name gives the card's figure.
PEAK_BANDWIDTH = (
    ("H200", 4.8e12),
    ("H100 NVL", 3.9e12),
    ("H100 PCIe", 2.0e12),
    ("H100", 3.35e12),  # SXM, HBM3
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12),
    ("A100", 1.555e12),  # 40 GB
)


def peak_bandwidth(device_name):
    """The data sheet's bandwidth of the card named ``device_name`` (bytes a second), or None."""
    for piece, bandwidth in PEAK_BANDWIDTH:
        if piece.lower() in device_name.lower():
            return bandwidth
    return None


def copy_bandwidth(backend):
    """Bytes a second of copying a 512 MiB array (read plus write), best of 5."""
    xp = get_namespace(backend)
    source = xp.ones(2**26)
    target = xp.empty_like(source)
    best = min(timed_run(lambda: target.__setitem__(Ellipsis, source), backend) for _ in range(5))
    return 2 * source.nbytes / best


# --- timing -------------------------------------------------------------------------------------------------


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
PEAK_RSS_SOURCE = """
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
        [sys.executable, "-c", PEAK_RSS_SOURCE + script, *map(str, arguments)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    if done.returncode != 0:
        raise RuntimeError(f"a fresh process of the benchmark exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- result files -------------------------------------------------------------------------------------------


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


# --- measures of a fitted model -----------------------------------------------------------------------------


def linear_weights(model):
    """``[coef, intercept]``, one row per class, whatever shapes the solver keeps them in
    (the peers' own conventions differ)."""
    coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))
    intercept = np.atleast_1d(np.asarray(model.intercept_, dtype=np.float64)).reshape(-1, 1)
    return np.hstack([coef, intercept])


def binary_accuracy(weights, X, y):
    """Test accuracy of the binary linear model ``weights`` (one row), the positive class
    being the larger label: computed the same way for every solver."""
    negative, positive = np.unique(y)
    predicted = np.where(X @ weights[0, :-1] + weights[0, -1] > 0, positive, negative)
    return float(np.mean(predicted == y))


def binary_svm_objective(weights, X, y, lam):
    """The primal ``lam/2 (||w||^2 + b^2) + mean hinge`` of the binary linear model
    ``weights`` (one row, the bias last and regularized) on ``(X, y)``, the positive class
    being the larger label: computed the same way for every solver."""
    targets = np.where(y == np.unique(y)[1], 1.0, -1.0)[:, None]
    return primal_objective(X, targets, np.ones(X.shape[0]), weights, lam, True)


def sbp_kernel_values_source(model):
    """Where a fitted SBPClassifier's steps read their kernel values, from its
    ``history_``: 'matrix' (resident on the device), 'cache' (a row cache, on the device
    or the host) or 'products' (computed each step); one-vs-one pairs trained one after
    another can differ: their sources joined by '+', in order of first use.
    KernelPegasosSVC says it in ``kernel_values_source_``."""
    return "+".join(dict.fromkeys(record["kernel_values_source"] for record in model.history_))


def error_rate(model, X, y):
    """The fraction of the rows of ``X`` that ``model`` predicts wrong."""
    return float(np.mean(model.predict(X) != y))


def median_nu(svc, X, y, multi_class):
    """The median ``nu`` (:func:`gpusvm.nu_from_svc`) over SVCs with ``svc``'s parameters
    fitted to the binary problems SBPClassifier trains with this ``multi_class``: a class
    against the rest ('ovr') or the rows of a pair of classes ('ovo')."""
    classes = np.unique(y)
    if multi_class == "ovr":
        problems = [(np.ones(y.shape[0], dtype=bool), y == label) for label in classes]
    else:
        problems = [
            (np.isin(y, classes[[i, j]]), y == classes[i]) for i, j in itertools.combinations(range(classes.size), 2)
        ]
    nus = []
    for rows, positive in problems:
        labels = positive[rows].astype(int)
        nus.append(nu_from_svc(clone(svc).fit(X[rows], labels), X[rows], labels))
    return float(np.median(nus))


# --- the SBP paper's kernel SVM experiments -----------------------------------------------------------------


# Cotter, Shalev-Shwartz and Srebro (2012), section 5 and Table 2: each data set's settings,
# the Gaussian kernel exp(-||x - x'||^2 / (2 sigma^2)) and SVC's C = 1 / (lambda n).
PAPER_SETTINGS = {
    "adult": [
        {"setting": "no bias", "sigma2": 10.0, "C": 1.0, "nu": 1.10e-2, "fit_intercept": False},
        {"setting": "bias", "sigma2": 100.0, "C": 100.0, "nu": 5.79e-4, "fit_intercept": True},
    ],
    "mnist8": [
        {"setting": "no bias", "sigma2": 25.0, "C": 1.0, "nu": 2.21e-4, "fit_intercept": False},
        {"setting": "bias", "sigma2": 25.0, "C": 1000.0, "nu": 6.42e-11, "fit_intercept": True},
    ],
    # KEEL, standardized: gamma = 1 / d (SVC's gamma='scale' there), C = 1, and SBP's nu
    # read off the SVC (nu = None; for letter and penbased, the median over the pairs).
    "magic": [{"setting": "bias", "sigma2": 5.0, "C": 1.0, "nu": None, "fit_intercept": True}],
    "letter": [{"setting": "bias", "sigma2": 8.0, "C": 1.0, "nu": None, "fit_intercept": True}],
    "penbased": [{"setting": "bias", "sigma2": 8.0, "C": 1.0, "nu": None, "fit_intercept": True}],
    # all ten digits, one-vs-one: MNIST's kernel, SVC's C = 1 and intercept, nu read off the pairs' SVCs
    "mnist10": [{"setting": "bias", "sigma2": 25.0, "C": 1.0, "nu": None, "fit_intercept": True}],
}

LARGE_BATCH = 64  # SBP's second batch size beside 1, and KernelPegasosSVC's


def sbp_model(setting, batch_size, backend, max_epochs, budget, cache_mb, dtype):
    """SBPClassifier at a setting (its ``nu`` resolved), stopped by ``budget`` kernel
    evaluations or ``max_epochs``, with no holdout and its kernel values in ``dtype``."""
    return SBPClassifier(
        nu=setting["nu"],
        gamma=1 / (2 * setting["sigma2"]),
        fit_intercept=setting["fit_intercept"],
        batch_size=batch_size,
        max_iter=max_epochs,
        validation_fraction=0.0,
        tol=None,
        max_kernel_evals=budget,
        cache_size=cache_mb,
        kernel_dtype=np.dtype(dtype).name,  # X's, as before kernel_dtype: --float32 compares the two
        random_state=0,
        backend=backend,
    )


def kernel_pegasos_model(setting, backend, epochs):
    """KernelPegasosSVC at a setting's C and gamma, batch 64, for ``epochs`` epochs, its
    last iterate (the violation count of ``bench.sbp_kernel``'s curves is the last iterate's)."""
    return KernelPegasosSVC(
        C=setting["C"],
        gamma=1 / (2 * setting["sigma2"]),
        batch_size=LARGE_BATCH,
        max_iter=epochs,
        average=False,
        random_state=0,
        backend=backend,
    )


def first_budget(y, n, batch_size):
    """The smallest of a curve's doubling budgets of kernel evaluations."""
    return n_problems(y) * n * max(batch_size, n // 64)


def n_problems(y):
    """1 for two classes, else the number of classes: the scale of the first kernel
    evaluation budget (a one-vs-rest epoch over n rows is n_problems * n * n evaluations;
    a one-vs-one epoch is fewer, so its doubling budgets start at a smaller share)."""
    classes = np.unique(y).size
    return 1 if classes == 2 else classes


def fit_svc(setting, X, y, cache_mb):
    """SVC at the setting's C and gamma as a user runs it (one-vs-one for more than two
    classes), its fit seconds, and the ``nu`` at which SBP solves the same problem (for
    more than two classes, the median over the SVCs of SBP's one-vs-one pairs, fitted
    untimed)."""
    svc = SVC(C=setting["C"], gamma=1 / (2 * setting["sigma2"]), cache_size=cache_mb)
    seconds = timed_fit(svc, X, y, "numpy")
    if n_problems(y) == 1:
        return svc, seconds, nu_from_svc(svc, X, y)
    return svc, seconds, median_nu(svc, X, y, "ovo")


def recorded_svc(name, setting, n_train):
    """SVC's result (``seconds``, ``test_error``, ``nu_from_svc``) for this data set,
    setting and number of training rows from the newest CPU result of ``bench.sbp_kernel``
    that holds one, with the file it came from; None when no such result is recorded."""
    found = []
    for path in RESULTS.glob("sbp_kernel_*-cpu-*.json"):
        if path.stem.endswith("-quick"):
            continue
        payload = json.loads(path.read_text())
        for experiment in payload.get("experiments", []):
            if (
                experiment["dataset"] == name
                and experiment["setting"] == setting["setting"]
                and experiment["n_train"] == n_train
                and experiment.get("C") == setting["C"]
                and experiment.get("sigma2") == setting["sigma2"]
                and "svc" in experiment
            ):
                found.append((payload.get("date", ""), path.name, experiment["svc"]))
    if not found:
        return None
    date, file_name, svc = max(found)
    return {**svc, "recorded_in": file_name, "recorded_on": date}


def svc_reference(args, name, setting, X, y, X_test, y_test):
    """SVC's result on this setting: fitted here, or (``--no-svc``) read from a CPU record.
    A quick run with no record fits it (a few seconds); a full one stops with the command
    that makes the record."""
    if args.no_svc:
        recorded = recorded_svc(name, setting, X.shape[0])
        if recorded is not None:
            return recorded
        if not args.quick:
            raise SystemExit(
                f"--no-svc: no CPU result of SVC on {name} ({setting['setting']}, {X.shape[0]} training rows) in "
                f"{RESULTS}; record one on a CPU machine: python -m bench.sbp_kernel --datasets {name} --svc-only"
            )
        print(f"  --no-svc: no CPU record of SVC on {name} at {X.shape[0]} rows; fitting it here (quick run)")
    svc, seconds, nu = fit_svc(setting, X, y, args.cache_mb)
    return {"seconds": seconds, "test_error": error_rate(svc, X_test, y_test), "nu_from_svc": nu}


# --- the linear SVM's optimum -------------------------------------------------------------------------------


LINEAR_C = 1.0  # every solver's C where a gap to the optimum is measured
GAPS = (0.01, 0.001)  # the gaps to the optimum reported (relative): 1% and 0.1%
OPTIMA = RESULTS / "optima" / "linear.json"  # reference_objective's results, by data set


def reference_objective(X, y, start_iter, settle=1e-5, max_iter=16384):
    """The optimum to measure gaps from, not timed: LIBLINEAR at ``tol=1e-6`` from
    ``start_iter`` iterations, doubled until the objective moves by less than ``settle``
    (relative) or ``max_iter`` is reached. A fixed count is not enough: on the 1M-row problem
    128 iterations stopped 0.34% above the optimum, which a 0.1% column cannot afford.
    Returns the objective, the iterations and the last relative move."""
    previous, max_iter_run = None, start_iter
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = LinearSVC(C=LINEAR_C, loss="hinge", dual=True, max_iter=max_iter_run, tol=1e-6, random_state=0).fit(
                X, y
            )
        objective = binary_svm_objective(linear_weights(model), X, y, 1.0 / (LINEAR_C * X.shape[0]))
        move = None if previous is None else abs(previous - objective) / objective
        print(f"  reference: LIBLINEAR {max_iter_run} iterations, objective {objective:.8f}", flush=True)
        if (move is not None and move < settle) or max_iter_run >= max_iter:
            return {"objective": objective, "max_iter": max_iter_run, "relative_move": move}
        previous, max_iter_run = objective, 2 * max_iter_run


def cached_reference(key, X, y, start_iter, quick):
    """:func:`reference_objective` of the data named ``key``, from ``OPTIMA`` when a run has
    recorded it (the full runs record theirs; the objective does not depend on the machine)."""
    known = json.loads(OPTIMA.read_text()) if OPTIMA.exists() else {}
    if key not in known:
        found = reference_objective(X, y, start_iter)
        if quick:
            return found
        known[key] = found
        OPTIMA.parent.mkdir(parents=True, exist_ok=True)
        OPTIMA.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n")
    return known[key]


# --- the SBP step alone -------------------------------------------------------------------------------------


STEP_BATCH_SIZE = 64  # the batch of the steps timed
CACHE_FRACTION = 8  # a row cache ("cache") holds n / 8 rows


def sbp_step_problem(X, labels, n_classes, backend):
    """An SBPProblem at SBPClassifier's defaults on every row (no holdout)."""
    targets = one_vs_rest_targets(labels, np.arange(max(2, n_classes)))  # one column for two classes
    variance = float(X.multiply(X).mean() - X.mean() ** 2) if sp.issparse(X) else float(X.var())
    return SBPProblem(
        X=to_backend(X, backend),
        n_train=X.shape[0],
        targets=get_namespace(backend).asarray(targets),
        holdout_labels=np.empty(0, dtype=int),
        nu=1e-2,
        batch_size=STEP_BATCH_SIZE,
        kernel=KernelSpec("rbf", gamma=1.0 / (X.shape[1] * variance)),
        fit_intercept=True,
        seed=0,
    )


def sbp_stepper(problem, backend, kernel_values):
    """The stepper; None where the kernel values asked for cannot be had ("cache": the
    device only, and only below the matrix's size)."""
    n, k, row_bytes = problem.n_train, problem.n_problems, problem.n_rows * np.dtype(problem.X.dtype).itemsize
    if backend == "cupy":
        from gpusvm._backend import free_device_bytes
        from gpusvm.solvers.sbp._cuda import CupySBPSteps

        room = 0.9 * free_device_bytes()
        budget = {
            "matrix": n * row_bytes,
            "rows": 0,
            "cache": max(2 * k * problem.batch_size, n // CACHE_FRACTION) * row_bytes,
        }[kernel_values]
        if budget > room or (kernel_values == "cache" and budget >= n * row_bytes):
            return None
        return CupySBPSteps(problem, kernel_cache=int(budget))
    if kernel_values == "cache" or (kernel_values == "matrix" and n * row_bytes > 8 * 2**30):
        return None
    return NumpySBPSteps(problem, cache_bytes=n * row_bytes if kernel_values == "matrix" else 64 * row_bytes)
