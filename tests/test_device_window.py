"""ci/device_window.sh's mechanics, in its dry run on the CPU (the CUDA emulator stands in
for the device): every step has a line in the summary, a step over its cap is stopped and
the next one runs, a step the budget cannot fit is skipped, and at most four files come
back from ``$OUT``, the archive holding each step's log."""

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

# Slow as a whole (each runs the window's script under the CUDA emulator):
# `python -m pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EMULATOR = ROOT.parent / "shared" / "tools" / "cuda-emu"
STEPS = [
    "setup",
    "facts",
    "tests",
    "scale",
    "roofline",
    "sbp-step-direct",
    "sbp-step-graphs",
    "sbp-launches",
    "headline-binary",
    "headline-ovo",
    "headline-letter",
    "fit-phases",
    "headline-linear",
    "streams",
    "rest",
]


@pytest.mark.skipif(not (EMULATOR / "run").exists(), reason="needs the CUDA emulator in ../shared/tools/cuda-emu")
def test_dry_run_keeps_caps_and_budget_and_brings_back_four_files(tmp_path):
    budget = 90
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "WINDOW_PYTHON": sys.executable,
        "WINDOW_BUDGET_S": str(budget),
        "WINDOW_CAP_facts": "1",
        "WINDOW_CAP_tests": "30",
    }
    start = time.monotonic()
    done = subprocess.run(
        [str(ROOT / "ci" / "device_window.sh"), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=budget + 120,
    )
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["summary.json", "summary.md", "window.log", "window.tar.gz"]
    steps = json.loads((out / "summary.json").read_text())["steps"]
    assert [s["step"] for s in steps] == STEPS
    by_name = {s["step"]: s for s in steps}
    assert by_name["facts"]["status"] == "stopped at its limit" and by_name["facts"]["limit"] == 1
    assert by_name["tests"]["status"] != "skipped" and by_name["tests"]["limit"] <= 30
    assert by_name["rest"]["status"] == "skipped"  # it needs 40 s, more than such a budget leaves
    assert all(
        s["status"] in ("ok", "skipped", "stopped at its limit") or s["status"].startswith("failed") for s in steps
    )
    assert seconds < budget + 60  # the steps' limits never pass the budget (the kill comes 15 s after)
    summary = (out / "summary.md").read_text()
    assert "dry run" in summary and all(f"| {name} |" in summary for name in STEPS)
    with tarfile.open(out / "window.tar.gz") as archive:
        names = archive.getnames()
    ran = [s["step"] for s in steps if s["status"] != "skipped" and s["step"] != "setup"]
    assert all(f"./logs/{name}.log" in names for name in ran)
    assert "./steps.jsonl" in names and "./junit/tests-committed.xml" in names


def test_thundersvm_build_sets_the_device_target_through_nvcc_flags(tmp_path):
    """ThunderSVM's FindCUDA build ignores CMAKE_CUDA_ARCHITECTURES (its library then held
    sm_75 code, compiled by the driver at first load): the target goes in CUDA_NVCC_FLAGS.
    cmake and make are stand-ins here that record their arguments."""
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    (stand_ins / "cmake").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/cmake-arguments\n')
    (stand_ins / "make").write_text("#!/bin/sh\nmkdir -p lib && touch lib/libthundersvm.so\n")
    for tool in stand_ins.iterdir():
        tool.chmod(0o755)
    peers = tmp_path / "peers"
    peers.mkdir()
    archive = ROOT.parent / "shared" / "peers" / "thundersvm-src.tar.gz"
    if not archive.exists():
        pytest.skip("needs ../shared/peers/thundersvm-src.tar.gz")
    env = {**os.environ, "PATH": f"{stand_ins}:{os.environ['PATH']}", "PEERS_DIR": str(peers)}
    done = subprocess.run(
        [str(ROOT / "ci" / "build_thundersvm.sh"), "90"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    arguments = (tmp_path / "cmake-arguments").read_text().splitlines()
    assert "-DCUDA_NVCC_FLAGS=-gencode=arch=compute_90,code=sm_90" in arguments
    assert not any("CMAKE_CUDA_ARCHITECTURES" in argument for argument in arguments)
    assert (peers / "tsvm-lib" / "lib" / "libthundersvm.so").exists()


def test_no_svc_reads_the_newest_cpu_record_of_the_same_problem(tmp_path, monkeypatch):
    from bench import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    setting = common.PAPER_SETTINGS["mnist10"][0]

    def record(name, date, n_train, test_error, **changes):
        experiment = {
            "dataset": "mnist10",
            **setting,
            "n_train": n_train,
            **changes,
            "svc": {"seconds": 1.0, "test_error": test_error, "nu_from_svc": 1e-3},
        }
        (tmp_path / name).write_text(json.dumps({"date": date, "experiments": [experiment]}))

    record("sbp_kernel_svc_mnist10-cpu-amd-epyc.json", "2026-11-20", 60000, 0.02)
    record("sbp_kernel_mnist10-cpu-amd-epyc.json", "2026-11-25", 60000, 0.01)
    record("sbp_kernel_mnist10-cpu-amd-epyc-quick.json", "2026-11-26", 60000, 0.5)  # a smoke run: never read
    record("sbp_kernel_mnist10-nvidia-h100.json", "2026-11-26", 60000, 0.5)  # not a CPU record
    record("sbp_kernel_svc_other-cpu-amd-epyc.json", "2026-11-26", 60000, 0.5, C=10.0)  # another problem
    found = common.recorded_svc("mnist10", setting, 60000)
    assert found["test_error"] == 0.01 and found["recorded_in"] == "sbp_kernel_mnist10-cpu-amd-epyc.json"
    assert common.recorded_svc("mnist10", setting, 2000) is None


def junit_report(path, outcomes):
    """A JUnit report of test ``name: outcome`` pairs ('passed', 'failure' or 'error')."""
    cases = "".join(
        f'<testcase classname="tests.t" name="{name}">'
        + ("" if outcome == "passed" else f"<{outcome}/>")
        + "</testcase>"
        for name, outcome in outcomes.items()
    )
    path.write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
    return str(path)


@pytest.mark.parametrize(
    "defaults, direct, safe",
    [
        ({"a": "passed", "b": "passed"}, {"a": "passed", "b": "passed"}, True),
        ({"a": "passed", "b": "failure"}, {"a": "passed", "b": "failure"}, True),  # both: not the graphs'
        ({"a": "passed", "b": "error"}, {"a": "passed", "b": "passed"}, False),  # the defaults' alone
        ({"a": "failure"}, {"a": "failure"}, False),  # nothing passed
    ],
)
def test_the_headlines_keep_the_defaults_unless_a_test_fails_with_them_alone(
    tmp_path, monkeypatch, defaults, direct, safe
):
    monkeypatch.syspath_prepend(str(ROOT / "ci"))
    from window_summary import main

    reports = [junit_report(tmp_path / "defaults.xml", defaults), junit_report(tmp_path / "direct.xml", direct)]
    assert (main(["defaults-safe", *reports]) == 0) is safe
    assert main(["defaults-safe", reports[0], str(tmp_path / "missing.xml")]) == 1


@pytest.mark.skipif(not (EMULATOR / "run").exists(), reason="needs the CUDA emulator in ../shared/tools/cuda-emu")
def test_dry_run_of_chosen_steps_skips_the_others_and_says_why(tmp_path):
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "WINDOW_PYTHON": sys.executable,
        "WINDOW_BUDGET_S": "90",
        "WINDOW_STEPS": "facts streams",
    }
    done = subprocess.run(
        [str(ROOT / "ci" / "device_window.sh"), "--dry-run"], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = json.loads((tmp_path / "out" / "summary.json").read_text())["steps"]
    assert [s["step"] for s in steps] == STEPS
    by_name = {s["step"]: s for s in steps}
    assert by_name["setup"]["status"] == "ok" and by_name["facts"]["status"] != "skipped"
    # the streams step's CuPy branch, at its dry run's size, ran under the emulator to its result file
    assert by_name["streams"]["status"] == "ok", by_name["streams"]
    assert "streamed_end_to_end-emulated.json" in by_name["streams"]["detail"]
    others = [s for s in steps if s["step"] not in ("setup", "facts", "streams")]
    assert all(s["status"] == "skipped" and "not in WINDOW_STEPS" in s["detail"] for s in others)
