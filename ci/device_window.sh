#!/usr/bin/env bash
# One GPU window in one command (the first, usually the only one, of a device lease):
# verifies the GPU design, measures what decides its switches, then the headlines beside
# ThunderSVM and LIBLINEAR, in steps ordered by what must not be lost if the run is cut off.
# Each step has its own time cap (never more than the budget left); a step with too little
# budget left is skipped and says so. After each step a line goes into the summary and the
# archive is rebuilt, so what comes back from $OUT is at most four files, whenever it stops:
#   window.log       everything printed
#   summary.md       a line a step: status, seconds, cap, counts or result files
#   summary.json     the same with the card's facts
#   window.tar.gz    logs/<step>.log, junit/*.xml, results/<step>/ (bench/results files it wrote)
#
# Steps (cap in seconds; in parentheses what each took on an H200, 2026-11-27, 424 s in all):
#   setup     15   install .whl, put ThunderSVM's prebuilt library on the path and smoke-fit
#                  it; if that fails, build it (ci/build_thundersvm.sh, ~4 min) in the
#                  background for the headline steps (5 s)
#   facts     90   nvidia-smi, `gpusvm info` (compiles every kernels/*.cu into CuPy's cache) (7 s)
#   tests    170   the device tests (-k cupy, gpu, device, graph, replay, fused, staging:
#                  ~400 tests) twice at once: with the defaults (CUDA graphs on, fused
#                  Pegasos steps up to batch 64) and with GPUSVM_CUDA_GRAPHS=0
#                  GPUSVM_FUSED_STEPS=0 (every launch direct); a per-test timeout, no -x (47 s)
#   scale    150   bench/sbp_scale.py: MNIST8M-like 8-versus-rest generated on the card
#                  (gpusvm.datasets.make_deformed_mnist) at 1e5, 1e6 and 8.1e6 rows, SBP at
#                  growing step budgets past the kernel matrix, prediction of a million rows
#                  and one row's latency, ThunderSVM on 250,000 rows capped (not yet run)
#   roofline 100   bench/roofline.py: Pegasos and FTRL seconds a step by batch size, direct,
#                  graph and fused launches (7 s)
#   sbp-step-direct, sbp-step-graphs  50 each   bench/sbp_step.py (1e4 and 1e5 rows; 1, 10
#                  and 26 classes) with graphs off, then on (40 s each without 26 classes)
#   sbp-launches 40   bench/sbp_launches.py: each launch of the SBP step timed apart at 1e5
#                  rows, 1 and 10 classes, and how often the level search fell back (12 s)
#   headline-binary 150   bench/sbp_kernel.py --no-svc: SBPClassifier (batch 64) and
#                  KernelPegasosSVC beside ThunderSVM on Adult and MNIST 8-vs-rest, the SBP
#                  paper's settings without bias (44 s)
#   headline-ovo    90   the same on all ten MNIST digits, one-vs-one beside ThunderSVM's (37 s)
#   headline-letter 45   the same on KEEL letter (26 classes, 325 pairs), one-vs-one (not yet run)
#   fit-phases 50  bench/sbp_fit_phases.py: where the time of the headlines' SBP and
#                  KernelPegasosSVC fits goes (the library's nvtx ranges timed apart), the
#                  kernel matrix beside cuBLAS's GEMM of the same shape and its bytes at peak
#                  bandwidth (not yet run)
#   headline-linear 70   bench/linear_objective.py on Adult: PegasosSVC (direct and fused) to
#                  1% of the optimum beside LIBLINEAR (28 s)
#   streams  120   bench/streamed_end_to_end.py --backend cupy: a 4e6-row svmlight file (730 MB)
#                  written to the machine's disk, FTRL (batch 1,024 and 16,384) and PegasosSVC
#                  streamed from its chunk cache (5 passes) and from the text (1 pass) against
#                  their fits on the rows resident on the device; the disk's rate (issue 65's
#                  target; not yet run)
#   rest     what is left   the rest of the suite on CuPy (168 s)
# WINDOW_BUDGET_S (default 540) bounds the total. The headline steps run with the defaults
# (graphs on) unless a test failed with them that passed with direct launches (then with
# graphs off): a failure of both runs is not the graphs'.
#
# Usage, on the GPU machine from the checkout, with .whl and .peers carried
# (ci/prepare_gpu_run.sh):  OUT=$OUT ci/device_window.sh
# Dry run on a CPU (the mechanics: caps, skips, summary, archive; tested in CI):
#   ci/device_window.sh --dry-run   the Python steps under ../shared/tools/cuda-emu (or
#                  WINDOW_EMULATOR), tiny sizes, a stub for the card's facts
# Settings: WINDOW_BUDGET_S; WINDOW_CAP_<step> (a cap in seconds, '-' as '_' in the name);
# WINDOW_STEPS (the steps to run, by name, separated by spaces; the others are skipped and
# say so, setup always runs: a short second call reruns what a change needs measured;
# without the tests step the headlines run with direct launches);
# WINDOW_PYTHON (default python3); OUT (default .window-out).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dry=false
[ "${1:-}" = --dry-run ] && dry=true
budget=${WINDOW_BUDGET_S:-540}
reserve=10  # seconds kept for the last summary and archive
python=${WINDOW_PYTHON:-python3}
out=${OUT:-$root/.window-out}
started=$(date +%s)
work=$(mktemp -d)
mkdir -p "$out" "$work/logs" "$work/junit" "$work/results" "$work/facts"
marker="$work/started"  # result files newer than this are this window's
touch "$marker"
exec > >(tee -a "$out/window.log") 2>&1
log_pid=$!

export PYTHONUNBUFFERED=1 GPUSVM_BACKEND=cupy
if $dry; then
  emulator=${WINDOW_EMULATOR:-$root/../shared/tools/cuda-emu}
  [ -x "$emulator/run" ] || { echo "device_window: --dry-run needs the CUDA emulator at $emulator"; exit 2; }
  export EMU_BUILD=${EMU_BUILD:-${TMPDIR:-/tmp}/gpusvm-cuda-emu}
  export PYTHONPATH="$root/ci:$root${PYTHONPATH:+:$PYTHONPATH}"
  mode="dry run (CUDA emulator at $emulator)"
else
  emulator=""
  mode="device"
fi
"$python" -c "import json, sys; json.dump({'mode': sys.argv[1], 'budget': int(sys.argv[2]),
  'started': sys.argv[3]}, open(sys.argv[4], 'w'))" "$mode" "$budget" "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" \
  "$work/window.json"

py() {  # a Python command, under the emulator in a dry run
  if $dry; then "$emulator/run" "$python" "$@"; else "$python" "$@"; fi
}
bench() {  # MODULE ARGS...: a benchmark, python -m MODULE (in a dry run through ci/emulated_bench.py)
  if $dry; then py ci/emulated_bench.py "$@"; else py -m "$@"; fi
}
pytest_run() {  # NAME ARGS...: pytest with a JUnit report junit/NAME.xml
  local name=$1
  shift
  local options=(-q -rfE -p no:cacheprovider --junitxml="$work/junit/$name.xml")
  if $dry; then
    options+=(-p emulated_device)
  fi
  "$python" -c "import pytest_timeout" 2>/dev/null && options+=(--timeout=90)
  py -m pytest "${options[@]}" "$@"
}
export -f py bench pytest_run
export dry work python emulator

left() {  # seconds of the budget left, less the reserve
  echo $(( budget - ($(date +%s) - started) - reserve ))
}

archive() {  # rebuild window.tar.gz from the working folder (written aside, then moved)
  tar -czf "$out/window.tar.gz.part" -C "$work" . && mv "$out/window.tar.gz.part" "$out/window.tar.gz"
  "$python" ci/window_summary.py render "$work" "$out"
}

keep_results() {  # STEP: this window's new bench/results files, into results/STEP/
  local step=$1
  (cd bench/results && find . -type f -newer "$marker" -print0 |
    xargs -0 -r cp --parents -t "$work/results/$step" 2>/dev/null) || true
  touch "$marker"
}

step() {  # NAME CAP LEAST COMMAND: run COMMAND (a bash string) under min(CAP, budget left)
  local name=$1 cap=$2 least=$3 command=$4
  local override="WINDOW_CAP_${name//-/_}"
  cap=${!override:-$cap}
  local available
  available=$(left)
  if [ -n "${WINDOW_STEPS:-}" ] && [[ " $WINDOW_STEPS " != *" $name "* ]]; then
    echo "== $name: skipped, not in WINDOW_STEPS"
    "$python" ci/window_summary.py add "$work" --step "$name" --status skipped --seconds 0 --limit 0 \
      --detail "not in WINDOW_STEPS ($WINDOW_STEPS)"
    archive
    return
  fi
  if (( available < least )); then
    echo "== $name: skipped, ${available} s of the budget left (needs ${least} s)"
    "$python" ci/window_summary.py add "$work" --step "$name" --status skipped --seconds 0 --limit 0 \
      --detail "${available} s of the budget left, needs ${least} s"
    archive
    return
  fi
  local limit=$(( cap < available ? cap : available ))
  echo "== $name (limit ${limit} s): $command"
  mkdir -p "$work/results/$name"
  local begin rc
  begin=$(date +%s)
  timeout -k 15 "$limit" bash -c "$command" 2>&1 | tee "$work/logs/$name.log"
  rc=${PIPESTATUS[0]}
  local seconds=$(( $(date +%s) - begin ))
  local status
  case $rc in
    0) status=ok ;;
    124|137) status="stopped at its limit" ;;
    *) status="failed (exit $rc)" ;;
  esac
  keep_results "$name"
  local detail
  detail=$(step_detail "$name")
  echo "== $name: $status in ${seconds} s. $detail"
  "$python" ci/window_summary.py add "$work" --step "$name" --status "$status" --seconds "$seconds" \
    --limit "$limit" --detail "$detail"
  archive
}

step_detail() {  # NAME: the summary's detail: test counts, else the result files written
  local name=$1
  local reports=("$work"/junit/"$name"*.xml)
  if [ -e "${reports[0]}" ]; then
    for report in "${reports[@]}"; do
      echo -n "$(basename "$report" .xml): $("$python" ci/window_summary.py tests "$report") "
    done
  elif [ -f "$work/logs/$name.detail" ]; then
    cat "$work/logs/$name.detail"
  else
    local files
    files=$(cd "$work/results/$name" && find . -name '*.json' | sed 's|^\./||' | sort | tr '\n' ' ')
    echo "results: ${files:-none}"
  fi
}

# --- the steps' commands (a dry run: the same scripts at tiny sizes) ----------------------
if $dry; then
  device_tests="tests/test_random.py::test_cupy_stream_matches_numpy"
  rest_tests="tests/test_random.py -k 'not cupy'"
  roofline_args="--backends cupy --rows 2000 --batch-sizes 256"
  sbp_step_args="--backends cupy --rows 300 --classes 1 --data dense --kernel-values matrix --steps 2"
  launches_args="--quick"
  scale_args="--backend cupy --rows 300 --steps 2 --cap-s 5 --thundersvm-rows 0"
  binary_args="--datasets adult --quick --settings 'no bias' --batch-sizes 64 --max-epochs 1"
  ovo_args="--datasets mnist10 --quick --batch-sizes 64 --max-epochs 1"
  letter_args="--datasets letter --quick --batch-sizes 64 --max-epochs 1"
  phases_args="--datasets adult --quick --rows 300"
  linear_args="--datasets adult --quick"
  # small FTRL batches: an emulated launch costs by its batch (16,384 takes 16 s)
  streams_args="--rows 400 --chunk-rows 200 --test-rows 200 --epochs 1 --text-epochs 1 --ftrl-batches 64 256"
  workers=""
  graphs_on=0  # the emulator cannot capture CUDA graphs: its graph steps run direct launches
else
  device_tests="tests -k 'cupy or gpu or device or graph or replay or fused or staging'"
  # bench/README.md is compared with bench/results/, which this window's own steps have just
  # added to: the README is rebuilt when they are committed
  rest_tests="tests -k 'not (cupy or gpu or device or graph or replay or fused or staging or bench_readme)'"
  roofline_args="--backends cupy --rows 1000000 --stream-rows 1000000 --batch-sizes 64 256 1024 16384"
  sbp_step_args="--backends cupy --rows 10000 100000 --classes 1 10 26 --data dense --kernel-values matrix"
  launches_args="--rows 100000 --classes 1 10 --later 200"
  scale_args="--backend cupy --rows 100000 1000000 8100000 --steps 250 1000 4000 --cap-s 40 --thundersvm-rows 250000 --thundersvm-cap-s 60"
  binary_args="--datasets adult mnist8 --settings 'no bias' --batch-sizes 64 --max-epochs 8"
  ovo_args="--datasets mnist10 --batch-sizes 64 --max-epochs 4"
  letter_args="--datasets letter --batch-sizes 64 --max-epochs 4"
  phases_args="--datasets adult mnist8 mnist10 letter"
  linear_args="--datasets adult"
  # 4e6 rows (730 MB of text, 1 GB of cache): written by a process a core (100,000 rows/s
  # each on the 2-core CPU), then 7 passes over the text (the load, two scans, one alone, a
  # stream a learner) and 17 over the cache: about 80 s at 5 times the 2-core CPU's parse
  # (234,000 rows/s) and its cache's reads (5e6 rows/s). The text's streams run last: a
  # slower parse loses those first (the step still reports what it finished)
  streams_args="--rows 4000000 --text-epochs 1"
  workers=$("$python" -c "import xdist" 2>/dev/null && echo "-n 4")
  graphs_on=1
fi

setup_peers() {  # ThunderSVM's prebuilt library on the path, smoke-fitted; else built aside
  if ! $dry && ls .whl/*.whl >/dev/null 2>&1; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/gpusvm-site .whl/*.whl \
      || echo "the wheels in .whl/ do not install here"
    export PYTHONPATH="/tmp/gpusvm-site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  source ci/use_peers.sh gpu
  export PYTHONPATH=".:${PYTHONPATH:-}"
  if "$python" -c "
import numpy as np
from thundersvm import SVC
X = np.random.default_rng(0).normal(size=(400, 8)); y = (X[:, 0] > 0).astype(float)
assert (SVC(kernel='rbf', gpu_id=0).fit(X, y).predict(X) == y).mean() > 0.9
" >"$work/logs/thundersvm-smoke.log" 2>&1; then
    echo "ThunderSVM: the prebuilt library fits" | tee "$work/logs/setup.detail"
  elif $dry; then
    echo "ThunderSVM: missing (dry run: not built)" | tee "$work/logs/setup.detail"
  else
    echo "ThunderSVM: the prebuilt library failed its smoke fit (logs/thundersvm-smoke.log); building it" \
      | tee "$work/logs/setup.detail"
    (JOBS=6 timeout 420 ci/build_thundersvm.sh 90 >"$work/logs/thundersvm-build.log" 2>&1;
     echo $? >"$work/thundersvm-build.done") &
  fi
}

await_thundersvm() {  # in a headline step: wait for a build started by setup, then use it
  if [ -f "$work/logs/thundersvm-build.log" ]; then
    while [ ! -f "$work/thundersvm-build.done" ]; do sleep 5; done
    source ci/use_peers.sh gpu
    export PYTHONPATH=".:${PYTHONPATH:-}"
  fi
}
export -f await_thundersvm

# --- the window ---------------------------------------------------------------------------
echo "GPU window: $mode, budget ${budget} s, results under $out"
begin=$(date +%s)
setup_peers 2>&1 | tee "$work/logs/setup.log"
# (a pipeline runs in a subshell: the exports are made again here)
! $dry && ls .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH="/tmp/gpusvm-site${PYTHONPATH:+:$PYTHONPATH}"
source ci/use_peers.sh gpu
export PYTHONPATH=".:${PYTHONPATH:-}"
"$python" ci/window_summary.py add "$work" --step setup --status ok --seconds $(( $(date +%s) - begin )) \
  --limit 0 --detail "$(cat "$work/logs/setup.detail" 2>/dev/null)"
archive

if $dry; then
  facts='echo "nvidia-smi: none (dry run)"; py -m gpusvm info --json --backend cupy > "$work/facts/info.json"; cat "$work/facts/info.json"'
else
  facts='nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nvcc --version | tail -2;
py -m gpusvm info --json --backend cupy > "$work/facts/info.json"; cat "$work/facts/info.json"'
fi
step facts 90 20 "$facts"

step tests 170 40 "
pytest_run tests-committed $workers $device_tests > \"\$work/logs/tests-committed.log\" 2>&1 &
committed=\$!
GPUSVM_CUDA_GRAPHS=0 GPUSVM_FUSED_STEPS=0 pytest_run tests-direct $workers $device_tests \
  > \"\$work/logs/tests-direct.log\" 2>&1 &
direct=\$!
wait \$committed; first=\$?; wait \$direct; second=\$?
tail -3 \"\$work/logs/tests-committed.log\" \"\$work/logs/tests-direct.log\"
exit \$(( first || second ))"
graphs=0  # the defaults unless a test fails with them and passes with direct launches
if "$python" ci/window_summary.py defaults-safe "$work/junit/tests-committed.xml" "$work/junit/tests-direct.xml"; then
  echo "no test failed with the defaults (graphs on) that passed with direct launches"
  graphs=$graphs_on
fi
echo "the headline steps run with GPUSVM_CUDA_GRAPHS=$graphs"

step scale 150 40 "await_thundersvm; GPUSVM_CUDA_GRAPHS=$graphs bench bench.sbp_scale $scale_args"
step roofline 100 40 "bench bench.roofline $roofline_args"
step sbp-step-direct 50 20 "GPUSVM_CUDA_GRAPHS=0 bench bench.sbp_step $sbp_step_args"
step sbp-step-graphs 50 20 "GPUSVM_CUDA_GRAPHS=$graphs_on bench bench.sbp_step $sbp_step_args"
step sbp-launches 40 15 "bench bench.sbp_launches $launches_args"
step headline-binary 150 60 "await_thundersvm; GPUSVM_CUDA_GRAPHS=$graphs bench bench.sbp_kernel --backends cupy --no-svc $binary_args"
step headline-ovo 90 40 "await_thundersvm; GPUSVM_CUDA_GRAPHS=$graphs bench bench.sbp_kernel --backends cupy --no-svc $ovo_args"
step headline-letter 45 20 "await_thundersvm; GPUSVM_CUDA_GRAPHS=$graphs bench bench.sbp_kernel --backends cupy --no-svc $letter_args"
step fit-phases 50 20 "GPUSVM_CUDA_GRAPHS=$graphs bench bench.sbp_fit_phases --backends cupy $phases_args"
step headline-linear 70 30 "GPUSVM_CUDA_GRAPHS=$graphs bench bench.linear_objective --backends cupy $linear_args"
step streams 120 30 "GPUSVM_CUDA_GRAPHS=$graphs bench bench.streamed_end_to_end --backend cupy --no-peers $streams_args"
step rest 600 40 "pytest_run rest ${workers/4/8} $rest_tests"

echo "GPU window done in $(( $(date +%s) - started )) s; summary:"
cat "$out/summary.md"
rm -rf "$work"
exec >&- 2>&-
wait "$log_pid"
