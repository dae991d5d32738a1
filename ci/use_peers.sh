# Sourced by ci/gpu.sh: put the GPU peers that travelled in .peers/ on PYTHONPATH.
# ThunderSVM: its Python wrapper from the source archive, beside the library built for
# this device by ci/build_thundersvm.sh (kept in .peers/tsvm-lib/lib). snapml travels as
# a wheel in .whl/ (ci/prepare_gpu_run.sh). A peer that is not here is reported as
# missing by the benchmarks.
if [ -f .peers/thundersvm-src.tar.gz ] && [ -f .peers/tsvm-lib/lib/libthundersvm.so ]; then
  mkdir -p /tmp/gpusvm-peers
  tar -xzf .peers/thundersvm-src.tar.gz -C /tmp/gpusvm-peers tsvm/python/thundersvm &&
    cp .peers/tsvm-lib/lib/libthundersvm.so /tmp/gpusvm-peers/tsvm/python/thundersvm/ &&
    export PYTHONPATH="/tmp/gpusvm-peers/tsvm/python:${PYTHONPATH:-}"
fi
