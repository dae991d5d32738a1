"""A benchmark script's CuPy branch on a CPU, under ../shared/tools/cuda-emu: a dry run of
what ``ci/gpu.sh`` will run on a device (arguments, launches, result files), not a timing.

The stand-in gets what ci/emulated_device.py gives the tests (free device memory,
streams, events, pinned memory, CuPy's refusals of host arrays). It lacks ``cupyx.profiler`` (bench/water_level.py) and
CUDA graphs (graph launches are left out where a script checks for them). Emulated
kernels are slow: pass small sizes (``--rows``, ``--steps``, ``--quick``). Its result
files name the device "emulated": git and bench/make_report.py leave them out.

    EMU_BUILD=/tmp/emu ../shared/tools/cuda-emu/run python ci/emulated_bench.py \\
        bench.sbp_step --backends cupy --rows 300 --classes 1 3 --steps 2

from the repository's root: the benchmark module runs as ``python -m bench.sbp_step`` would.
"""

import os
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emulated_device  # noqa: E402

if __name__ == "__main__":
    emulated_device.install()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    sys.path.insert(0, os.getcwd())  # first on the path, as `python -m` puts it
    runpy.run_module(module, run_name="__main__", alter_sys=True)
