#!/usr/bin/env bash
# On a CUDA machine: the whole test suite on the CuPy backend, then the GPU benchmarks.
# Results land in bench/results/*-<device>.json (each names the device, CUDA and CuPy).
#
# Runs from the checkout with no build step; ci/use_wheels.sh says how to carry wheels.
# Usage: ci/gpu.sh [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
quick=""
[ "${1:-}" = "--quick" ] && quick="--quick"
source ci/use_wheels.sh
export GPUSVM_BACKEND=cupy
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
python3 -m gpusvm info || exit 1  # versions, the device, and whether every kernel compiles on it

status=0
python3 -m pytest -q -rs tests 2>&1 | tee bench/results/gpu-tests.log || status=1
python3 bench/adult_linear.py --backends numpy cupy $quick || status=1
# SVC (the peer) runs on the CPU beside the cupy runs; the numpy sweep is recorded on CPU machines
python3 bench/mnist_kernel.py --backends cupy $quick || status=1
python3 bench/water_level.py --backends numpy cupy $quick || status=1
python3 bench/sbp_kernel.py --datasets adult --backends cupy $quick || status=1
python3 bench/sbp_kernel.py --datasets mnist8 --settings "no bias" --backends cupy --max-epochs 4 $quick || status=1
python3 bench/online_adult.py --backends numpy cupy $quick || status=1
# river is not on the CUDA image: the script leaves it out there (CPU runs record it)
python3 bench/online_throughput.py --backends cupy --batch-sizes 32 1024 8192 $quick || status=1
exit $status
