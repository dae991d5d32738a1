"""The SBP paper's experiments: SBPClassifier beside scikit-learn's SVC (LIBSVM) and KernelPegasosSVC.

Cotter, Shalev-Shwartz and Srebro (2012), section 5 and Table 2, on the real data sets:

* Adult (the embedded copy, a9a encoding): sigma^2 = 10, lambda = 1/n, nu = 1.10e-2
  without bias; sigma^2 = 100, lambda = 1/(100 n), nu = 5.79e-4 with bias.
* MNIST 8 versus the rest: sigma^2 = 25, lambda = 1/n, nu = 2.21e-4 without bias;
  lambda = 1/(1000 n), nu = 6.42e-11 with bias.

The Gaussian kernel is exp(-||x - x'||^2 / (2 sigma^2)) (gamma = 1 / (2 sigma^2)) and SVC's
C = 1 / (lambda n). Each SBP point is a fit from scratch with ``max_kernel_evals`` at a
budget (same seed, so a smaller budget's run is a prefix of a larger one's); budgets double
until SBP's test error is within 0.1 points of SVC's (then two more) or the epoch cap.
KernelPegasosSVC runs 1, 2, 4, ... epochs; its kernel evaluations are its violations times
n. Writes ``results/sbp_kernel_<datasets>-<device>.{json,md}`` and the paper's Figure 2 as
``results/sbp_kernel_<datasets>-<device>.png`` (test error against kernel evaluations).

The peers (at SVC's parameters; with the cupy backend ThunderSVM and torchkm on the GPU,
otherwise ThunderSVM on every CPU core) run beside them on the two-class data sets when
they are importable, and are reported as missing otherwise (``bench/peers.py``).

* KEEL magic, letter and penbased (``bench/get_data.sh``), standardized: gamma = 1/d,
  C = 1, and the SVC's nu. On letter (26 classes) and penbased (10) both are one-vs-one
  (SBPClassifier's default multi_class); SVC is timed as users run it, and SBP's nu is
  the median over the pairs' SVCs, fitted untimed.

* MNIST, all ten digits (``mnist10``): sigma^2 = 25, C = 1, with bias, one-vs-one, SBP's
  nu the median over the pairs' SVCs; ThunderSVM's one-vs-one beside it.

* ``--float32``: SBP also runs at batch 64 on float32 copies of float64 data (its kernel
  values in float32, the responses and level in float64); MNIST is float32 throughout.
  Every SBP fit here sets ``kernel_dtype`` to its X's dtype (the default, 'auto', is
  float32 wherever float32 keeps the digits, whatever X's), so that the two curves
  compare float64 and float32 kernel values.

* ``--no-svc``: SVC's test error, fit seconds and ``nu`` are read from the newest result of
  this script on a CPU machine for the same data set, setting and training rows (a
  file ``results/sbp_kernel_*-cpu-*.json``), instead of fitting SVC here: on a GPU
  machine's CPU it takes minutes a data set. ``--svc-only`` makes such a record
  (``results/sbp_kernel_svc_<datasets>-<device>.json``) without the other solvers.

Each peer is timed after an untimed fit on a few hundred rows (``bench/peers.py``:
ThunderSVM loads its library and initializes CUDA at its first fit).

Every SBP and KernelPegasos point records where the fit read its kernel values
(``kernel_values_source``: 'matrix', resident on the device; 'cache', a row cache;
'products', computed each step; pairs trained in turn joined by '+'), which
``kernel_cache='auto'`` decides by the device's free memory.

    python -m bench.sbp_kernel [--datasets adult mnist8 mnist10 magic letter] [--backends numpy cupy]
        [--batch-sizes 1 64] [--float32] [--no-svc | --svc-only] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import (
    LARGE_BATCH,
    PAPER_SETTINGS,
    TimeLimit,
    error_rate,
    first_budget,
    kernel_pegasos_model,
    markdown_table,
    n_problems,
    result_stem,
    sbp_kernel_values_source,
    sbp_model,
    svc_reference,
    timed_fit,
    write_results,
)
from bench.datasets import kernel_svm_rows, load
from bench.peers import MissingPeer, kernel_peers, timed_peer_fit

from gpusvm import KernelPegasosSVC

TARGET_MARGIN = 0.001  # "within 0.1 points" of SVC's test error


def sbp_curve(X, y, X_test, y_test, setting, batch_size, backend, target, max_epochs, cache_mb, points):
    """SBP test error at doubling kernel-evaluation budgets, appended to ``points`` as
    each fit ends."""
    n, problems = X.shape[0], n_problems(y)
    budget, after_target = first_budget(y, n, batch_size), None
    while budget <= max_epochs * problems * n * n:
        model = sbp_model(setting, batch_size, backend, max_epochs, budget, cache_mb, X.dtype)
        seconds = timed_fit(model, X, y, backend)
        points.append(
            {
                "kernel_evals": model.history_[-1]["kernel_evals"],
                "seconds": seconds,
                "epochs": model.n_iter_,
                "test_error": error_rate(model, X_test, y_test),
                "rows_computed": model.history_[-1]["kernel_rows_computed"],
                "kernel_values_source": sbp_kernel_values_source(model),
                "n_support": int(model.support_.size),
                "level": float(model.water_level_[0]),
            }
        )
        print(f"  SBP B={batch_size} {backend}", points[-1], flush=True)
        if after_target is None and points[-1]["test_error"] <= target:
            after_target = 0
        elif after_target is not None:
            after_target += 1
        if after_target == 2:
            break
        budget *= 2


def fit_peer(make, setting, X, y, X_test, y_test):
    """A peer at SVC's C and gamma: its one point (seconds, test error), or why it is missing."""
    try:
        model = make(setting["C"], 1 / (2 * setting["sigma2"]))
        seconds = timed_peer_fit(model, X, y)
    except MissingPeer as missing:
        return {"missing": str(missing)}
    return {"seconds": seconds, "test_error": error_rate(model, X_test, y_test)}


def pegasos_curve(X, y, X_test, y_test, setting, backend, max_epochs, points):
    """KernelPegasosSVC (batch 64, last iterate) after 1, 2, 4, ... epochs, appended to
    ``points`` as each fit ends."""
    epochs = 1
    while epochs <= max_epochs:
        model = kernel_pegasos_model(setting, backend, epochs)
        seconds = timed_fit(model, X, y, backend)
        violations = np.abs(model.dual_coef_).sum() * model.lam_ * model.t_ * LARGE_BATCH
        points.append(
            {
                "kernel_evals": float(violations * X.shape[0]),
                "seconds": seconds,
                "epochs": epochs,
                "test_error": error_rate(model, X_test, y_test),
                "n_support": int(model.support_.size),
                "kernel_values_source": model.kernel_values_source_,
            }
        )
        print(f"  KernelPegasos {backend}", points[-1], flush=True)
        epochs *= 2


def time_to_target(points, target):
    reached = [p for p in points if p["test_error"] <= target]
    return min(reached, key=lambda p: p["kernel_evals"]) if reached else None


def plot(experiments, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(experiments), figsize=(4.2 * len(experiments), 3.6), squeeze=False)
    for ax, experiment in zip(axes[0], experiments, strict=True):
        for label, curve in experiment["curves"].items():
            ax.plot(
                [p["kernel_evals"] for p in curve],
                [100 * p["test_error"] for p in curve],
                marker="o",
                ms=3,
                label=label,
            )
        ax.axhline(100 * experiment["svc"]["test_error"], color="k", ls="--", lw=1, label="SVC (LIBSVM)")
        ax.set_xscale("log")
        ax.set_xlabel("kernel evaluations")
        ax.set_ylabel("test error (%)")
        ax.set_title(f"{experiment['dataset']}, {experiment['setting']}", fontsize=10)
        low = 100 * experiment["svc"]["test_error"]
        ax.set_ylim(max(0, low - 2), low + 6)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def measure_setting(args, name, setting, data, experiments):
    """SVC, then SBP's and KernelPegasosSVC's curves and the peers on one setting: a
    new entry of ``experiments``, filled in as each fit ends."""
    X, y, X_test, y_test = data
    print(name, setting, flush=True)
    svc_result = svc_reference(args, name, setting, X, y, X_test, y_test)
    print("  SVC", svc_result, flush=True)
    if setting["nu"] is None:
        setting = {**setting, "nu": svc_result["nu_from_svc"]}
    target = svc_result["test_error"] + TARGET_MARGIN
    experiment = {
        "dataset": name,
        **setting,
        "n_train": X.shape[0],
        "n_test": X_test.shape[0],
        "svc": svc_result,
        "peers": {},
        "curves": {},
    }
    experiments.append(experiment)
    curves = experiment["curves"]
    if args.svc_only:
        return
    for backend in args.backends:
        for batch in args.batch_sizes:
            sbp_curve(
                X,
                y,
                X_test,
                y_test,
                setting,
                batch,
                backend,
                target,
                args.max_epochs,
                args.cache_mb,
                curves.setdefault(f"SBP batch {batch} ({backend})", []),
            )
        if args.float32 and X.dtype == np.float64:
            sbp_curve(
                X.astype(np.float32),
                y,
                X_test.astype(np.float32),
                y_test,
                setting,
                LARGE_BATCH,
                backend,
                target,
                args.max_epochs,
                args.cache_mb,
                curves.setdefault(f"SBP batch {LARGE_BATCH}, float32 X ({backend})", []),
            )
        pegasos_curve(
            X,
            y,
            X_test,
            y_test,
            setting,
            backend,
            args.max_epochs,
            curves.setdefault(f"KernelPegasos batch {LARGE_BATCH} ({backend})", []),
        )
    for label, make in kernel_peers(args.backends, n_classes=np.unique(y).size).items():
        experiment["peers"][label] = fit_peer(make, setting, X, y, X_test, y_test)
        print(f"  {label}", experiment["peers"][label], flush=True)


def table_rows(experiment):
    """The table's rows of one experiment: each peer's point, then each curve's first
    point within the target (SVC's error + 0.1 point) and its best point."""
    svc = experiment["svc"]
    target = svc["test_error"] + TARGET_MARGIN
    common = {
        "dataset": experiment["dataset"],
        "setting": experiment["setting"],
        "svc_seconds": svc["seconds"],
        "svc_error": svc["test_error"],
    }
    rows = []
    for label, peer in experiment["peers"].items():
        missing = peer.get("missing")
        reached = not missing and peer["test_error"] <= target
        rows.append(
            {
                **common,
                "solver": f"{label}: missing ({missing})" if missing else label,
                "seconds_to_target": peer["seconds"] if reached else None,
                "ratio": peer["seconds"] / svc["seconds"] if reached else None,
                "best_error": peer.get("test_error"),
                "best_seconds": peer.get("seconds"),
            }
        )
    for label, curve in experiment["curves"].items():
        if not curve:  # the time limit came before its first point
            continue
        hit = time_to_target(curve, target)
        best = min(curve, key=lambda p: p["test_error"])
        rows.append(
            {
                **common,
                "solver": label,
                "seconds_to_target": hit["seconds"] if hit else None,
                "ratio": hit["seconds"] / svc["seconds"] if hit else None,
                "best_error": best["test_error"],
                "best_seconds": best["seconds"],
            }
        )
    return rows


def svc_table(experiments, note=None):
    """The table of ``--svc-only``: SVC's fit on each setting, the record ``--no-svc`` reads."""
    rows = [
        {"dataset": e["dataset"], "setting": e["setting"], "n_train": e["n_train"], **e["svc"]} for e in experiments
    ]
    columns = [
        ("data", "dataset", "s"),
        ("setting", "setting", "s"),
        ("training rows", "n_train", ","),
        ("SVC fit (s)", "seconds", ".1f"),
        ("SVC error", "test_error", ".2%"),
        ("SBP's nu from it", "nu_from_svc", ".3g"),
    ]
    return [
        "## SVC (LIBSVM) at the SBP settings: the reference that `--no-svc` reads",
        "",
        *markdown_table(columns, rows),
        *(["", note] if note else []),
    ]


def write_report(args, experiments, final=False, stopped=False):
    """Write (or rewrite) the result files with the settings measured so far (a setting a
    time limit cut short with the fits it finished, marked by ``stopped``); the figure and
    the printed table come with the final write."""
    rows = [row for experiment in experiments for row in table_rows(experiment)]
    columns = [
        ("data", "dataset", "s"),
        ("setting", "setting", "s"),
        ("solver", "solver", "s"),
        ("SVC fit (s)", "svc_seconds", ".1f"),
        ("SVC error", "svc_error", ".2%"),
        ("time to SVC + 0.1 pt (s)", "seconds_to_target", ".1f"),
        ("ratio to SVC", "ratio", ".2f"),
        ("best error", "best_error", ".2%"),
        ("its fit (s)", "best_seconds", ".1f"),
    ]
    stem = ("sbp_kernel_svc_" if args.svc_only else "sbp_kernel_") + "_".join(args.datasets)
    table = (
        svc_table(experiments, args.note)
        if args.svc_only
        else [
            "## SBP against SVC (LIBSVM), the SBP paper's settings: time for SBP to reach within 0.1 points of SVC's "
            "test error",
            "",
            *markdown_table(columns, rows),
            "",
            "Empty cells: the target was not reached within the epoch cap. Curves (the paper's Figure 2): "
            f"{result_stem(stem, args.backends, args.quick)}.png",
        ]
    )
    payload = {
        "dataset": {"names": args.datasets},
        "parameters": {
            "settings": PAPER_SETTINGS,
            "max_epochs": args.max_epochs,
            "large_batch": LARGE_BATCH,
            "repeats": 1,
            "cache_mb": args.cache_mb,
            "quick": args.quick,
            "svc": "recorded" if args.no_svc else "fitted",
            "note": args.note,
        },
        "results": rows,
        "experiments": experiments,
        "complete": final and not stopped,
        "stopped_at_time_limit": stopped,
        "started": args.started,
    }
    paths = write_results(stem, args.backends, payload, table)
    if not final:
        return
    png = paths[0].with_suffix(".png")
    drawn = bool(experiments) and not args.svc_only
    if drawn:
        plot(experiments, png)
    print("\n".join(table))
    print("wrote", *paths, *([png] if drawn else []))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["adult", "mnist8"], choices=sorted(PAPER_SETTINGS))
    parser.add_argument("--settings", nargs="+", default=["no bias", "bias"])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument(
        "--batch-sizes",
        nargs="+",
        type=int,
        default=[1, LARGE_BATCH],
        help="SBP batch sizes (KernelPegasos always runs at batch 64)",
    )
    parser.add_argument(
        "--float32", action="store_true", help=f"also SBP at batch {LARGE_BATCH} on float32 copies of float64 data"
    )
    parser.add_argument("--max-epochs", type=int, default=8)
    parser.add_argument("--cache-mb", type=float, default=8000)
    parser.add_argument("--quick", action="store_true", help="2,000-3,000 rows, 2 epochs at most")
    svc = parser.add_mutually_exclusive_group()
    svc.add_argument("--no-svc", action="store_true", help="SVC's results from a CPU record (see above)")
    svc.add_argument("--svc-only", action="store_true", help="fit and record SVC alone (the record --no-svc reads)")
    parser.add_argument("--note", default=None, help="a remark kept in the result file (how the machine was used)")
    args = parser.parse_args()
    if args.quick:
        args.max_epochs = 2
    args.started = time.strftime("%Y-%m-%d %H:%M:%S")
    experiments = []
    with TimeLimit() as limit:
        for name in args.datasets:
            X, y, X_test, y_test = load(name, **kernel_svm_rows(name, args.quick))
            if "cupy" in args.backends:  # warm-up: compile the kernels outside the timings
                for setting in PAPER_SETTINGS[name]:  # each setting's (its bias, X's dtype)
                    warm_up = {**setting, "nu": setting["nu"] or 0.01}
                    sbp_model(warm_up, LARGE_BATCH, "cupy", 1, None, args.cache_mb, X.dtype).fit(X[:300], y[:300])
                KernelPegasosSVC(max_iter=1, backend="cupy").fit(X[:300], y[:300])
            for setting in PAPER_SETTINGS[name]:
                if setting["setting"] in args.settings:
                    measure_setting(args, name, setting, (X, y, X_test, y_test), experiments)
                    write_report(args, experiments)
    write_report(args, experiments, final=True, stopped=limit.reached)


if __name__ == "__main__":
    main()
