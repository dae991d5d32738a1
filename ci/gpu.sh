#!/usr/bin/env bash
# A window of 15 minutes on a GPU starts with ci/device_window.sh (one command: the tests,
# the switches, the headlines). This script holds the longer runs, for longer leases.
# On a CUDA machine, in steps that each fit one 10-minute call on a lent GPU machine:
#   ci/gpu.sh triage    gpusvm info, the whole suite on CuPy, a summary (ci/gpu_triage.sh)
#   ci/gpu.sh online    the online learners on Adult and the 10M-row stream
#   ci/gpu.sh kernel    KernelPegasosSVC and SBPClassifier beside SVC (CPU), ThunderSVM and
#                       torchkm on Adult; PegasosSVC beside LIBLINEAR (CPU) and snapml on Adult
#   ci/gpu.sh mnist     the same kernel solvers and GPU peers on MNIST-8
#   ci/gpu.sh linear    PegasosSVC's time to objective beside LIBLINEAR, SGD and snapml
#                       (Adult and 1M sparse rows), direct and with fused steps (to 512 epochs; and
#                       at batch 1,024, where Pegasos needs far fewer steps to 1%)
#   ci/gpu.sh batches   PegasosSVC's time to objective at batch sizes 64 to 16,384 (1M sparse rows);
#                       optional: the steps each batch size needs are the same on every backend
#                       (bench/pegasos_steps.py, recorded on the CPU), so the roofline of the graphs
#                       step (seconds a step by batch size) is enough to pick the GPU default
#   ci/gpu.sh extra     the water level; SBPClassifier beside SVC (CPU) on KEEL letter; the SBP
#                       step with its kernel rows in a device row cache (bench/sbp_step.py)
#   ci/gpu.sh pairs     one-vs-one SBPClassifier on KEEL penbased and letter, its pairs reading the
#                       kernel matrix, a row cache of it, or training one after another
#   ci/gpu.sh graphs    blocks of steps replayed as CUDA graphs, and Pegasos' fused steps,
#                       against direct launches (the tests that decide the defaults of
#                       GPUSVM_CUDA_GRAPHS and GPUSVM_FUSED_STEPS), then the roofline table of
#                       PegasosSVC and FTRL by batch size: direct, graph and fused launches
#   ci/gpu.sh sbp       the kernel solvers' steps: SBPClassifier's and KernelPegasosSVC's tests
#                       on CuPy (levels, blocks as graphs, the kernel matrix resident or not),
#                       then bench/sbp_step.py (SBP's step time against its bandwidth and
#                       latency floors, n = 1e4 to 1e6, 1/10/26 classes)
#   ci/gpu.sh dask      gpusvm.dask's tests with CuPy chunks and backends resolved on the workers
#   ci/gpu.sh streaming the streamed fits' tests on CuPy (pinned buffers, copy stream, two device
#                       slots), then streamed against in-memory speed and the copy bandwidth
#   ci/gpu.sh all       every step in turn (on a machine without the 10-minute limit)
# On a 30-minute device lease (three or four calls): triage first, then sbp and graphs (the
# figures and switches the open issues wait on), then linear (Pegasos' time to 1% of the
# optimum, which fused steps may bring under LIBLINEAR's), streaming, extra and pairs.
# What the first such run decides, each in a commit naming the device:
#   - GPUSVM_CUDA_GRAPHS on by default only if the graphs step's tests pass (graph == direct);
#   - GPUSVM_FUSED_STEPS on by default only if its fused tests pass and the roofline shows fused
#     steps faster than graph launches (at the batch sizes where they are: a threshold if need be);
#   - PegasosSVC's batch size on CuPy: the one that makes steps to the gap (bench/pegasos_steps.py's
#     table; the steps do not depend on the backend) times seconds a step (the roofline) smallest.
# Results land in bench/results/*-<device>.json (each names the device, CUDA and CuPy).
# Each benchmark has its own time limit (seconds) so that one slow script cannot take the
# whole step; a script over it writes the runs it finished, marked as stopped at its limit
# (bench/common.py's TimeLimit; killed 30 s later if it has not), is reported, and the
# step goes on. The CPU runs (numpy) are
# recorded on CPU machines; here only where the script needs them beside the GPU.
# On a lent machine ($OUT set, the device tool's folder) each result file is copied under
# $OUT/bench/results as soon as it is written, so a call cut short still brings back the
# scripts that finished.
# Runs from the checkout with no build step: ci/prepare_gpu_run.sh --all gathers the wheels
# and peers to carry (ThunderSVM prebuilt for sm_90; ci/build_thundersvm.sh builds it there
# if that library fails).
# Usage: ci/gpu.sh STEP [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-all}
quick=""
[ "${2:-}" = "--quick" ] && quick="--quick"
source ci/use_wheels.sh
source ci/use_peers.sh
export GPUSVM_BACKEND=cupy
status=0
started=$(mktemp)  # result files newer than this one are this run's

keep_results() {  # copy this run's result files under $OUT now (nothing without $OUT)
  [ -n "${OUT:-}" ] || return 0
  find bench/results -type f -newer "$started" -exec cp --parents {} "$OUT" \;
}

bench() {  # LIMIT MODULE ARGS...: one benchmark (python3 -m MODULE) under its time limit; a failure marks the step failed
  local limit=$1
  shift
  echo "== $* (limit ${limit} s)"
  timeout -k 30 "$limit" python3 -m "$@" $quick || { echo "FAILED or over time: $*"; status=1; }
  keep_results
}

if [ "$step" = triage ] || [ "$step" = all ]; then
  ci/gpu_triage.sh || status=1
  keep_results
fi
if [ "$step" = online ] || [ "$step" = all ]; then
  bench 150 bench.online_adult --backends numpy cupy
  # river is not on the CUDA image: it is recorded on CPU machines
  bench 150 bench.online_throughput --backends cupy --batch-sizes 32 1024 8192 --no-river
fi
if [ "$step" = kernel ] || [ "$step" = all ]; then
  # SVC and LinearSVC (the CPU peers) run on this machine's CPU beside the GPU runs
  bench 400 bench.sbp_kernel --datasets adult --backends cupy
  bench 110 bench.adult_linear --backends cupy
fi
if [ "$step" = mnist ] || [ "$step" = all ]; then
  # SVC takes minutes on MNIST-8 on a CPU: here the GPU peers stand in for it
  bench 240 bench.mnist_kernel --backends cupy --no-svc
  bench 300 bench.sbp_kernel --datasets mnist8 --settings "no bias" --backends cupy --max-epochs 4
fi
if [ "$step" = linear ] || [ "$step" = all ]; then
  bench 560 bench.linear_objective --backends cupy
fi
if [ "$step" = batches ] || [ "$step" = all ]; then
  # LIBLINEAR and Snap ML to 64 iterations only: their full curves are the linear step's
  bench 560 bench.linear_objective --backends cupy --datasets synthetic --pegasos-batch-sizes 64 1024 16384 \
    --max-iterations 64
fi
if [ "$step" = extra ] || [ "$step" = all ]; then
  bench 120 bench.water_level --backends cupy
  bench 200 bench.sbp_kernel --datasets letter --backends cupy  # 26 classes, one-vs-one
  bench 180 bench.sbp_step --backends cupy --kernel-values cache --rows 100000 1000000 --classes 1 26
fi
if [ "$step" = pairs ] || [ "$step" = all ]; then
  bench 500 bench.sbp_one_vs_one --backends cupy
fi
if [ "$step" = graphs ] || [ "$step" = all ]; then
  echo "== step blocks as CUDA graphs (limit 200 s)"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_pegasos.py tests/test_online_logistic.py \
    -k "replayed or cupy or fused" || { echo "FAILED: step blocks"; status=1; }
  # 1,024 rows: the largest batch the fused Pegasos kernel takes
  bench 380 bench.roofline --backends cupy --stream-rows 10000000 --batch-sizes 32 256 1024 2048 16384 65536
fi
if [ "$step" = sbp ] || [ "$step" = all ]; then
  echo "== SBP on CuPy (limit 200 s)"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_sbp.py tests/test_sbp_solver.py \
    tests/test_row_cache.py tests/test_water_level.py tests/test_kernel_pegasos.py -k "cupy or device or gpu or backends" || { echo "FAILED: kernel solvers on CuPy"; status=1; }
  bench 380 bench.sbp_step --backends cupy
fi
if [ "$step" = dask ] || [ "$step" = all ]; then
  echo "== tests/test_dask.py (limit 500 s)"
  timeout 500 python3 -m pytest -q -p no:cacheprovider tests/test_dask.py || { echo "FAILED: gpusvm.dask"; status=1; }
fi
if [ "$step" = streaming ] || [ "$step" = all ]; then
  echo "== tests/test_streaming.py on CuPy (limit 150 s)"
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_streaming.py -k "cupy or staging" \
    || { echo "FAILED: streaming on CuPy"; status=1; }
  bench 400 bench.streamed_throughput --backends cupy
fi
keep_results
exit $status
