#!/usr/bin/env bash
# Build ThunderSVM's library from .peers/thundersvm-src.tar.gz (copied there from ../shared/peers/):
#   ci/build_thundersvm.sh [ARCH]  on a CUDA machine, for CUDA architecture ARCH (default 90),
#                                  into .peers/tsvm-lib/lib/libthundersvm.so (about 4 MB; about
#                                  4 minutes with 6 jobs on an H100 machine's 16 cores); for
#                                  sm_90, ../shared/peers/thundersvm-sm90 holds a prebuilt one
#                                  (ci/prepare_gpu_run.sh carries it): build only if it fails
#   ci/build_thundersvm.sh cpu     without CUDA (OpenMP on every core, Eigen from the archive),
#                                  into .peers/tsvm-cpu/lib/libthundersvm.so: the CPU runs' peer
# Its CMakeLists asks for C++11/14, which CUDA 13's Thrust and CUB refuse, so the build is
# moved to C++17. Bring the GPU library back (under $OUT on a lent machine) and carry it in
# .peers next time, so later runs skip the build. ci/use_peers.sh puts a build on the path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${1:-90}
peers=${PEERS_DIR:-$root/.peers}  # where the archive is and the library goes
work=$(mktemp -d)
archive="$peers/thundersvm-src.tar.gz"  # ci/use_peers.sh takes the Python wrapper from it too
[ -f "$archive" ] || { mkdir -p "$peers" && cp "$root/../shared/peers/thundersvm-src.tar.gz" "$archive"; }
tar -xzf "$archive" -C "$work"
sed -i 's/-std=c++1[14]/-std=c++17/; s/"-std=c++11"/"-std=c++17"/; s/CMAKE_CXX_STANDARD 11/CMAKE_CXX_STANDARD 17/' \
    "$work/tsvm/CMakeLists.txt"
if [ "$target" = cpu ]; then
  # Its CPU build calls a CUDA-only function in SvmModel::predict_dec_values_instant (the
  # prediction path for over 10,000 binary models), so the library cannot be loaded (upstream
  # issue #276): that call is kept for CUDA builds, and a CPU build stops there with a message.
  sed -i 's|^\( *\)sum_kernel_values_instant(coef|#ifdef USE_CUDA\n\1sum_kernel_values_instant(coef|;
          s|^\( *batch_ins.size(),vote_device);\)$|\1\n#else\n        LOG(FATAL) << "over 10,000 binary models need the CUDA build";\n#endif|' \
      "$work/tsvm/src/thundersvm/model/svmmodel.cpp"
  grep -q "need the CUDA build" "$work/tsvm/src/thundersvm/model/svmmodel.cpp" ||
    { echo "ci/build_thundersvm.sh: the CPU patch to svmmodel.cpp no longer applies; see issue #276" >&2; exit 1; }
  flags=(-DUSE_CUDA=OFF)
  dest="$peers/tsvm-cpu/lib"
else
  # its FindCUDA build ignores CMAKE_CUDA_ARCHITECTURES (a library built so holds sm_75 code
  # and PTX, compiled by the driver at first load): only CUDA_NVCC_FLAGS sets the target
  flags=("-DCUDA_NVCC_FLAGS=-gencode=arch=compute_${target},code=sm_${target}")
  dest="$peers/tsvm-lib/lib"
fi
mkdir -p "$work/tsvm/build"
cd "$work/tsvm/build"
cmake .. -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >cmake.log
make -j"${JOBS:-6}" thundersvm >make.log || { tail -30 make.log; exit 1; }
mkdir -p "$dest"
cp lib/libthundersvm.so "$dest/"
echo "built $dest/libthundersvm.so"
