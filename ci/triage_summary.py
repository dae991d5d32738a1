"""Summarize a pytest JUnit XML report from ci/gpu_triage.sh.

Writes ``bench/results/gpu-triage/<device>.json`` and ``.md``: the device and versions
(from ``gpusvm info --json``), the counts of passed, failed, errored and skipped tests,
and the first lines of each failure. Exits 1 when any test failed or errored.
"""

from __future__ import annotations

import json
import re
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results" / "gpu-triage"
FIRST_LINES = 12


def outcomes(junit_path):
    """Each test case's id, outcome and, for failures and skips, the message's first lines."""
    cases = []
    for case in ElementTree.parse(junit_path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome, detail = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                text = (found.get("message") or "") + "\n" + (found.text or "")
                detail = "\n".join(text.strip().splitlines()[-FIRST_LINES:])
                break
        cases.append({"test": test_id, "outcome": outcome, "seconds": float(case.get("time") or 0), "detail": detail})
    return cases


def main(junit_path, info_path):
    info = json.loads(Path(info_path).read_text()) if Path(info_path).exists() else {}
    devices = info.get("devices") or [{"name": "no-device"}]
    tag = re.sub(r"[^a-z0-9]+", "-", devices[0]["name"].lower()).strip("-")[:48]
    # no report at all when pytest died before writing it: counted as a failure below
    cases = outcomes(junit_path) if Path(junit_path).exists() and Path(junit_path).stat().st_size else []
    counts = {name: sum(c["outcome"] == name for c in cases) for name in ("passed", "failed", "error", "skipped")}
    bad = [c for c in cases if c["outcome"] in ("failed", "error")]
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "info": info,
        "counts": counts,
        "failures": bad,
        "slowest": sorted(cases, key=lambda c: -c["seconds"])[:15],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{tag}.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        f"# GPU triage on {devices[0]['name']} ({summary['date']})",
        "",
        f"CuPy {info.get('cupy')}, CUDA runtime {info.get('cuda_runtime')}, "
        f"driver {info.get('cuda_driver')}; kernels: {info.get('kernels')}",
        "",
        ", ".join(f"{n} {k}" for k, n in counts.items()),
        "",
    ]
    for case in bad:
        lines += [f"## {case['outcome']}: {case['test']}", "", "```", case["detail"], "```", ""]
    (RESULTS / f"{tag}.md").write_text("\n".join(lines))
    print("\n".join(lines[:6]))
    print(
        f"{len(bad)} failing tests" if cases else "no test report: pytest did not finish",
        f"; summary in bench/results/gpu-triage/{tag}.md",
    )
    return 1 if bad or not cases else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
