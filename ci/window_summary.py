"""The summary of a GPU window (``ci/device_window.sh``): a line a step, rewritten after each.

    python ci/window_summary.py add WORK --step NAME --status STATUS --seconds S --limit S [--detail TEXT]
    python ci/window_summary.py tests JUNIT...     one line: counts and the failing tests
    python ci/window_summary.py defaults-safe DEFAULTS DIRECT
                                                   exit 0 when no test fails with the defaults
                                                   (CUDA graphs, fused steps) that passes with
                                                   direct launches; else names those tests
    python ci/window_summary.py render WORK OUT    WORK/steps.jsonl -> OUT/summary.md and OUT/summary.json

``WORK`` is the window's working folder (its archive's content); ``steps.jsonl`` there
holds the steps in the order they ran. Runs on the machine's own Python, never under the
CUDA emulator.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from triage_summary import outcomes  # noqa: E402

FAILURES_LISTED = 8


def junit_counts(paths):
    """Counts of each outcome over the JUnit reports, the failing tests, and the reports
    that are missing or empty (pytest stopped before writing them)."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    failing, missing = [], []
    for path in map(Path, paths):
        if not path.is_file() or not path.stat().st_size:
            missing.append(path.name)
            continue
        for case in outcomes(path):
            counts[case["outcome"]] += 1
            if case["outcome"] in ("failed", "error"):
                failing.append(case["test"])
    return counts, failing, missing


def tests_line(paths):
    counts, failing, missing = junit_counts(paths)
    parts = [", ".join(f"{n} {k}" for k, n in counts.items())]
    if missing:
        parts.append("no report: " + ", ".join(missing))
    if failing:
        listed = "; ".join(failing[:FAILURES_LISTED])
        more = len(failing) - FAILURES_LISTED
        parts.append("failing: " + listed + (f"; and {more} more" if more > 0 else ""))
    return ". ".join(parts)


def defaults_safe(defaults, direct):
    """Whether the headlines may run with the defaults: both reports were written, the
    defaults' has passes, and every test failing there fails with direct launches too (a
    failure of both is not the graphs' or the fused steps'). Also the tests that failed
    with the defaults alone."""
    if junit_counts([defaults, direct])[2]:
        return False, []
    failing_direct = {case["test"] for case in outcomes(direct) if case["outcome"] in ("failed", "error")}
    cases = outcomes(defaults)
    only_defaults = [
        case["test"] for case in cases if case["outcome"] in ("failed", "error") and case["test"] not in failing_direct
    ]
    passed = any(case["outcome"] == "passed" for case in cases)
    return passed and not only_defaults, only_defaults


def add(work, step, status, seconds, limit, detail):
    record = {
        "step": step,
        "status": status,
        "seconds": seconds,
        "limit": limit,
        "detail": detail,
        "ended": time.strftime("%H:%M:%S"),
    }
    with open(Path(work) / "steps.jsonl", "a") as steps:
        steps.write(json.dumps(record) + "\n")


def render(work, out):
    work, out = Path(work), Path(out)
    steps_file = work / "steps.jsonl"
    steps = [json.loads(line) for line in steps_file.read_text().splitlines()] if steps_file.exists() else []
    facts = {}
    info = work / "facts" / "info.json"
    if info.is_file():
        try:
            facts = json.loads(info.read_text())
        except json.JSONDecodeError:
            facts = {"info": "unreadable"}
    settings = json.loads((work / "window.json").read_text()) if (work / "window.json").exists() else {}
    devices = facts.get("devices") or [{"name": "no device found"}]
    used = sum(step["seconds"] for step in steps)
    lines = [
        f"# GPU window on {devices[0]['name']} ({settings.get('started', '?')})",
        "",
        f"Mode: {settings.get('mode', '?')}; budget {settings.get('budget', '?')} s, "
        f"{used} s used by the steps. CuPy {facts.get('cupy')}, CUDA runtime {facts.get('cuda_runtime')}, "
        f"driver {facts.get('cuda_driver')}. Kernels: {facts.get('kernels')}.",
        "",
        "| step | status | seconds | limit (s) | detail |",
        "|---|---|---|---|---|",
    ]
    for step in steps:
        detail = step["detail"].replace("|", "/").replace("\n", " ")
        lines.append(f"| {step['step']} | {step['status']} | {step['seconds']} | {step['limit']} | {detail} |")
    lines += ["", "Logs, JUnit reports and result files of each step: window.tar.gz (logs/, junit/, results/<step>/)."]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(
        json.dumps({"settings": settings, "facts": facts, "steps": steps}, indent=2) + "\n"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    adding = commands.add_parser("add")
    adding.add_argument("work")
    adding.add_argument("--step", required=True)
    adding.add_argument("--status", required=True)
    adding.add_argument("--seconds", type=int, required=True)
    adding.add_argument("--limit", type=int, required=True)
    adding.add_argument("--detail", default="")
    commands.add_parser("tests").add_argument("junit", nargs="+")
    safe = commands.add_parser("defaults-safe")
    safe.add_argument("defaults")
    safe.add_argument("direct")
    rendering = commands.add_parser("render")
    rendering.add_argument("work")
    rendering.add_argument("out")
    args = parser.parse_args(argv)
    if args.command == "add":
        add(args.work, args.step, args.status, args.seconds, args.limit, args.detail)
    elif args.command == "tests":
        print(tests_line(args.junit))
    elif args.command == "defaults-safe":
        safe, only_defaults = defaults_safe(args.defaults, args.direct)
        if only_defaults:
            print("failing with the defaults only: " + "; ".join(only_defaults))
        return 0 if safe else 1
    else:
        render(args.work, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
