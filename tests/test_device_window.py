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

ROOT = Path(__file__).resolve().parent.parent
EMULATOR = ROOT.parent / "shared" / "tools" / "cuda-emu"
STEPS = ["setup", "facts", "tests", "roofline", "sbp-step-direct", "sbp-step-graphs", "headline-binary",
         "headline-ovo", "headline-linear", "rest"]


@pytest.mark.skipif(not (EMULATOR / "run").exists(), reason="needs the CUDA emulator in ../shared/tools/cuda-emu")
def test_dry_run_keeps_caps_and_budget_and_brings_back_four_files(tmp_path):
    budget = 90
    env = {**os.environ, "OUT": str(tmp_path / "out"), "WINDOW_PYTHON": sys.executable,
           "WINDOW_BUDGET_S": str(budget), "WINDOW_CAP_facts": "1", "WINDOW_CAP_tests": "30"}
    start = time.monotonic()
    done = subprocess.run([str(ROOT / "ci" / "device_window.sh"), "--dry-run"], env=env, capture_output=True,
                          text=True, timeout=budget + 120)
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
    assert all(s["status"] in ("ok", "skipped", "stopped at its limit") or s["status"].startswith("failed")
               for s in steps)
    assert seconds < budget + 60  # the steps' limits never pass the budget (the kill comes 15 s after)
    summary = (out / "summary.md").read_text()
    assert "dry run" in summary and all(f"| {name} |" in summary for name in STEPS)
    with tarfile.open(out / "window.tar.gz") as archive:
        names = archive.getnames()
    ran = [s["step"] for s in steps if s["status"] != "skipped" and s["step"] != "setup"]
    assert all(f"./logs/{name}.log" in names for name in ran)
    assert "./steps.jsonl" in names and "./junit/tests-committed.xml" in names
