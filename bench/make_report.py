"""Write ``bench/README.md`` from the recorded results in ``bench/results/*.json``.

Every table comes from a result file (each keeps its table beside its raw figures); the
two cross-run figures are drawn here from the recorded curves:

* test error against fit seconds for every kernel SVM experiment (question 1), and
* test error against kernel evaluations, the SBP paper's Figure 2, with the online
  Perceptron's curves where ``perceptron_kernel`` recorded them (question 2).

``--quick`` reports the smoke runs (``*-quick.json``) into ``bench/README-quick.md``
instead, so a test can run the whole pipeline without touching the recorded report.

    python -m bench.make_report [--quick]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

QUESTIONS = [
    (
        "1. Kernel SVM: time to accuracy against SVC (LIBSVM)",
        ["sbp_kernel", "mnist_kernel", "sbp_one_vs_one", "sbp_defaults", "sbp_small", "sbp_first_fit", "sbp_nu"],
        "time_to_accuracy",
    ),
    ("2. Test error against kernel evaluations (the SBP paper's Figure 2)", ["perceptron_kernel"], "kernel_evals"),
    (
        "3. Linear SVM: time to objective against LIBLINEAR and SGD",
        ["adult_linear", "linear_objective", "linear_objective_batches", "pegasos_steps"],
        None,
    ),
    (
        "4. Online learners: log loss, sparsity and throughput",
        ["online_adult", "online_throughput", "online_defaults"],
        None,
    ),
    ("5. How cost grows with n and d", ["scaling", "sbp_scale"], None),
    ("6. Probabilities from the SVMs: Platt scaling against SVC(probability=True)", ["probability"], None),
    (
        "7. Data larger than memory: streamed training",
        ["streaming", "svmlight_reading", "streamed_throughput", "streamed_end_to_end"],
        None,
    ),
    ("8. On a dask cluster: gpusvm.dask against single-node, and data larger than a worker", ["dask_scaling"], None),
    (
        "The water level and the SBP step (SBP's inner loop; the step against its floor)",
        ["water_level", "sbp_steps", "sbp_step", "sbp_launches", "sbp_fit_phases"],
        None,
    ),
    ("The linear and online solvers against the memory roofline, by batch size", ["roofline"], None),
    ("Kernel values in float32: where they keep their digits", ["kernel_precision"], None),
]


def load_results(quick):
    """``{(benchmark, device tag): result}`` of the recorded (or the quick) runs."""
    results = {}
    for path in sorted(RESULTS.glob("*.json")):
        if path.stem.endswith("-quick") != quick or "-emulated" in path.stem:  # ci/emulated_bench.py's dry runs
            continue
        stem = path.stem.removesuffix("-quick")
        name, _, device = stem.partition("-")
        result = json.loads(path.read_text())
        result["_stem"] = path.stem
        if "table" not in result:  # written before tables were kept in the JSON
            result["table"] = path.with_suffix(".md").read_text().rstrip("\n").split("\n")
        results[(name, device)] = result
    return results


def machine_line(result):
    machine = result["machine"]
    gpu = machine.get("gpu")
    where = (
        (
            f"GPU {gpu['name']} ({gpu.get('memory_gib')} GiB, driver {gpu.get('driver', '?')}, "
            f"CUDA {gpu.get('cuda_runtime')}, CuPy {gpu.get('cupy')})"
        )
        if gpu
        else "no GPU"
    )
    return f"{machine['cpu']} ({machine['cpu_count']} cores), {where}"


def experiments(results, device):
    """The kernel SVM experiments recorded by ``sbp_kernel`` on a device, with the
    Perceptron curves of the same data set and setting added where recorded."""
    found = []
    for (name, tag), result in results.items():
        if tag == device and name.startswith("sbp_kernel"):
            found += [dict(experiment, curves=dict(experiment["curves"])) for experiment in result["experiments"]]
    perceptron = results.get(("perceptron_kernel", device))
    for experiment in found if perceptron else []:
        for curve in perceptron["curves"]:
            if curve["dataset"] == experiment["dataset"] and curve["sigma2"] == experiment["sigma2"]:
                experiment["curves"][f"Perceptron ({curve['epochs_label']})"] = curve["points"]
    return found


def plot_experiments(found, x_key, x_label, path):
    """One panel per experiment: test error against ``x_key``, SVC as a dashed line/star."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, len(found))
    rows = -(-len(found) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.4 * columns, 3.6 * rows), squeeze=False)
    for ax in axes.flat[len(found) :]:
        ax.axis("off")
    for ax, experiment in zip(axes.flat, found, strict=False):
        svc = experiment["svc"]
        for label, curve in experiment["curves"].items():
            points = [p for p in curve if p.get(x_key)]
            ax.plot([p[x_key] for p in points], [100 * p["test_error"] for p in points], marker="o", ms=3, label=label)
        ax.axhline(100 * svc["test_error"], color="k", ls="--", lw=1, label="SVC (LIBSVM) error")
        if x_key == "seconds":
            ax.plot([svc["seconds"]], [100 * svc["test_error"]], "k*", ms=10, label="SVC fit time")
        ax.set_xscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel("test error (%)")
        ax.set_title(f"{experiment['dataset']}, {experiment['setting']} (n={experiment['n_train']})", fontsize=10)
        low = 100 * svc["test_error"]
        ax.set_ylim(max(0, low - 3), low + 8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(title, names, figure, results, devices, quick, write_figures):
    lines = [f"## {title}", ""]
    for device in devices:
        recorded = [
            (name, results[(name, device)])
            for name in sorted({n for n, d in results if d == device})
            if any(name.startswith(prefix) for prefix in names)
        ]
        found = experiments(results, device) if figure else []
        if not recorded and not found:
            continue
        lines += [f"### On {device}", ""]
        for _, result in recorded:
            lines += [f"*{result['date']}, {machine_line(result)}; `{result['_stem']}.json`*", ""]
            lines += [_demoted(line) for line in result["table"]] + [""]
            png = RESULTS / f"{result['_stem']}.png"
            if png.exists():
                lines += [f"![{result['_stem']}](results/{png.name})", ""]
        if found:
            suffix = "-quick" if quick else ""
            path = RESULTS / f"report_{figure}-{device}{suffix}.png"
            if write_figures and figure == "time_to_accuracy":
                plot_experiments(found, "seconds", "fit seconds (CPU clock / CUDA events)", path)
            elif write_figures:
                plot_experiments(found, "kernel_evals", "kernel evaluations", path)
            lines += [f"![{figure}](results/{path.name})", ""]
    if len(lines) == 2:
        lines += ["No run recorded yet.", ""]
    return lines


def _demoted(line):
    """A result's own ``## title`` sits under this report's ``### On <device>``."""
    return "#### " + line.lstrip("#").lstrip() if line.startswith("#") else line


def gpu_section(results):
    """Where the GPU figures come from: devices, the suite on CuPy, the GPU peers, and the
    logs of runs stopped at their time limit."""
    gpus = sorted({device for (_, device), result in results.items() if result["machine"].get("gpu")})
    lines = ["## 9. On a GPU", ""]
    if gpus:
        lines += [f"Recorded on: {', '.join(gpus)} (their tables are in the sections above).", ""]
    else:
        lines += ["No GPU run is recorded yet: every figure above is from a CPU.", ""]
    lines += [
        "`ci/device_window.sh` runs the GPU side's tests, switches and headlines in one command of about "
        "9 minutes, and `ci/gpu.sh STEP` the longer runs in steps that each fit a 10-minute call on a lent "
        "GPU machine (`ci/prepare_gpu_run.sh` gathers what to carry there). The CuPy backend's test runs: "
        + ", ".join(f"`results/gpu-triage/{path.name}`" for path in sorted(RESULTS.glob("gpu-triage/*.md")))
        + ".",
        "",
        "GPU peers, each reported as missing (with the reason) when it cannot run: ThunderSVM (SMO on "
        "the GPU, built on the device by `ci/build_thundersvm.sh`) and torchkm (kernel SVM on PyTorch; its "
        "time includes the 2-fold cross-validation its estimator always runs) beside the kernel solvers, "
        "and Snap ML (`snapml`, its GPU and CPU solvers) beside PegasosSVC. cuML is not among them: its "
        "wheels with their "
        "dependencies are about 700 MiB, more than a run on the lent GPU machines (which reach no "
        "package registry) can carry.",
        "",
    ]
    logs = sorted(RESULTS.glob("logs/*.log"))
    if logs:
        lines += [
            "Runs stopped at their time limit before writing a result file left their logs: "
            + ", ".join(f"`results/logs/{path.name}`" for path in logs)
            + ".",
            "",
        ]
    return lines


def build(quick=False, write_figures=True):
    """The report's lines; its two figures are (re)drawn into ``bench/results`` when
    ``write_figures``."""
    results = load_results(quick)
    devices = sorted({device for _, device in results})
    lines = [
        "# gpusvm benchmarks",
        "",
        "Generated by `python -m bench.make_report` from `bench/results/*.json`; do not edit by hand.",
        "Each JSON result names the machine, library versions, data, parameters and every repeat; "
        "tables report medians.",
        "",
        "Rerun: `bench/get_data.sh` once (data packages, no dependencies), then any script in `bench/` as "
        "`python -m bench.<script>` from the repository's root (`--quick` for a one-minute smoke run, which "
        "writes `*-quick.*` and never replaces a recorded figure), then this report. `ci/gpu.sh` runs the GPU side. "
        "The CPU runs' peers, each reported as "
        'missing when it is not there: Snap ML\'s CPU solver (`pip install -e ".[bench]"`) and ThunderSVM on '
        "every core (`ci/build_thundersvm.sh cpu`, then `source ci/use_peers.sh cpu` in the shell that runs the "
        "kernel benchmarks).",
        "",
    ]
    for title, names, figure in QUESTIONS:
        lines += section(title, names, figure, results, devices, quick, write_figures)
    lines += gpu_section(results)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="report the -quick runs into README-quick.md")
    args = parser.parse_args()
    path = HERE / ("README-quick.md" if args.quick else "README.md")
    path.write_text("\n".join(build(args.quick)) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
