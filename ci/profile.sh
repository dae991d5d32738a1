#!/usr/bin/env bash
# Capture gpusvm's nvtx ranges with Nsight Systems on a CUDA machine.
#
# Trains one solver on the embedded Adult data through the command line (training,
# then the training-accuracy prediction), under `nsys profile`, and prints the time
# per nvtx range and per CUDA kernel.  The ranges each solver opens:
#   pegasos.margins / pegasos.update / pegasos.epoch / pegasos.objective
#   kernel_pegasos.margins / kernel_pegasos.update / kernel_pegasos.kernel_rows
#   sbp.kernel_row / sbp.water_level / sbp.update / sbp.checkpoint
#   online.epoch / online.margins / online.update
#   predict.linear / predict.kernel
# Open the .nsys-rep file in the Nsight Systems GUI for the timeline.
#
# Usage: ci/profile.sh [SOLVER [OUT_DIR [SOLVER OPTIONS...]]]
#   e.g. ci/profile.sh sbp /tmp/profile --max-iter 2
# SOLVER defaults to sbp, OUT_DIR to $OUT (the device tool's folder) or bench/results/profile.
set -euo pipefail
cd "$(dirname "$0")/.."
solver=${1:-sbp}
out=${2:-${OUT:-bench/results}/profile}
shift $(( $# > 2 ? 2 : $# ))
source ci/use_wheels.sh
if ! command -v nsys >/dev/null; then
  echo "ci/profile.sh: nsys (Nsight Systems) is not on PATH; it comes with the CUDA toolkit" \
       "or NVIDIA's nsight-systems package." >&2
  exit 1
fi
mkdir -p "$out"
python3 -m gpusvm info --backend cupy
python3 -c "
from sklearn.datasets import dump_svmlight_file
from gpusvm.datasets import load_adult
X, y, _, _ = load_adult()
dump_svmlight_file(X, y, '$out/adult.svm', zero_based=False)
"
report="$out/gpusvm-$solver"
nsys profile --trace=cuda,nvtx --force-overwrite=true --output "$report" \
  python3 -m gpusvm train --backend cupy --solver "$solver" --n-features 123 "$@" "$out/adult.svm" "$out/model"
nsys stats --force-export=true --report nvtx_sum --report cuda_gpu_kern_sum "$report.nsys-rep"
