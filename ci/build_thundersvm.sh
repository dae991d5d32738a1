#!/usr/bin/env bash
# On a CUDA machine: build ThunderSVM's library from .peers/thundersvm-src.tar.gz for this
# device into .peers/tsvm-lib/lib/libthundersvm.so (about 4 MB; about 4 minutes with 6 jobs
# on an H100 machine's 16 cores). Its CMakeLists asks for C++11/14, which CUDA 13's Thrust
# and CUB refuse, so the build is moved to C++17. Bring the library back (under $OUT on a
# lent machine) and carry it in .peers next time, so later runs skip the build.
# Usage: ci/build_thundersvm.sh [CUDA architecture, default 90]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
arch=${1:-90}
work=$(mktemp -d)
tar -xzf "$root/.peers/thundersvm-src.tar.gz" -C "$work"
sed -i 's/-std=c++1[14]/-std=c++17/; s/"-std=c++11"/"-std=c++17"/; s/CMAKE_CXX_STANDARD 11/CMAKE_CXX_STANDARD 17/' \
    "$work/tsvm/CMakeLists.txt"
mkdir -p "$work/tsvm/build"
cd "$work/tsvm/build"
cmake .. -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=Release >cmake.log
make -j"${JOBS:-6}" thundersvm >make.log || { tail -30 make.log; exit 1; }
mkdir -p "$root/.peers/tsvm-lib/lib"
cp lib/libthundersvm.so "$root/.peers/tsvm-lib/lib/"
echo "built $root/.peers/tsvm-lib/lib/libthundersvm.so"
