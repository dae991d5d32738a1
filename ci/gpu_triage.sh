#!/usr/bin/env bash
# GPU triage, one command well under 10 minutes: `gpusvm info`, then the whole test suite
# on the CuPy backend with every failure collected (no -x; a per-test timeout), and a
# summary in bench/results/gpu-triage/<device>.{json,md} (device, versions,
# passed/failed/skipped, each failure's first lines) beside the full log.
# Usage: ci/gpu_triage.sh [extra pytest arguments]
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/use_wheels.sh
export GPUSVM_BACKEND=cupy
out=bench/results/gpu-triage
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
info=$(mktemp --suffix=.json)
junit=$(mktemp --suffix=.xml)
python3 -m gpusvm info --json > "$info"
info_status=$?
cat "$info"
timeout 480 python3 -m pytest -q -rfE -n 4 --timeout=120 --junitxml="$junit" -p no:cacheprovider tests "$@" \
    2>&1 | tee "$out/tests.log"
python3 ci/triage_summary.py "$junit" "$info"
exit $(( info_status || $? ))
