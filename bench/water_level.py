"""The SBP water level: sort-based oracle, O(n) partition search, warm-started versions, GPU radix select.

For each n, responses are drawn from a normal distribution and volume = n * nu with
nu = 1e-3 (about the share of covered responses in SBP runs). "Warm" versions answer
for responses that moved a little (noise of 1e-3) since the previous call, as between
two SBP steps: Newton steps from the previous level (``find_gamma(start=...)``) and the
tracker that searches a window of ranks among the lowest responses (``LevelTracker``, what NumpySBPSteps uses).
On a GPU the radix select of ``kernels/water_level.cu`` runs beside the time of one
``cupy.sum`` over the same array and the bandwidth floor ``8 n / peak bandwidth``.

    python -m bench.water_level [--backends numpy cupy] [--max-n 10000000] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np

from bench.common import TimeLimit, median, report

from gpusvm.solvers.sbp._levels import LevelTracker
from gpusvm.water_level import find_gamma, find_gamma_partition, find_gamma_sorted

NU = 1e-3


def host_seconds(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return median(times)


def cpu_rows(n, repeats):
    rng = np.random.default_rng(n)
    previous = rng.standard_normal(n)
    values = previous + 1e-3 * rng.standard_normal(n)
    volume = n * NU
    start_level = find_gamma_partition(previous, volume)
    tracker = LevelTracker(volume)
    tracker.level(previous)
    expected = find_gamma_sorted(values, volume)
    # a call updates the tracker's state (its candidates, thresholds and k*): each timed call
    # gets its own copy of the state after the previous responses, made outside the timing
    warm = [copy.deepcopy(tracker) for _ in range(repeats + 1)]

    def tracked():
        return warm.pop().level(values)

    versions = {
        "sort (oracle)": lambda: find_gamma_sorted(values, volume),
        "partition search": lambda: find_gamma_partition(values, volume),
        "Newton from previous level": lambda: find_gamma(values, volume, start=start_level),
        "tracker (lowest responses)": tracked,
    }
    rows = []
    for name, function in versions.items():
        assert abs(function() - expected) <= 1e-9 * max(1.0, abs(expected)), name
        rows.append({"n": n, "backend": "numpy", "version": name, "median_ms": 1e3 * host_seconds(function, repeats)})
    return rows


def gpu_rows(n, repeats):
    import cupy
    from cupyx.profiler import benchmark

    from gpusvm.water_level._cuda import DeviceWaterLevel

    rng = np.random.default_rng(n)
    values_host = rng.standard_normal(n)
    values = cupy.asarray(values_host)
    volume = n * NU
    search = DeviceWaterLevel(n)
    got = float(search(values, volume))
    expected = find_gamma_partition(values_host, volume)
    assert abs(got - expected) <= 1e-9 * max(1.0, abs(expected)), (got, expected)
    radix = (
        benchmark(search, (values, volume), name="radix select", n_repeat=repeats, n_warmup=3).gpu_times.mean() * 1e3
    )
    one_pass = benchmark(cupy.sum, (values,), name="one pass", n_repeat=repeats, n_warmup=3).gpu_times.mean() * 1e3
    properties = cupy.cuda.runtime.getDeviceProperties(0)
    peak = 2 * properties["memoryClockRate"] * 1e3 * properties["memoryBusWidth"] / 8  # bytes per second
    floor = 8 * n / peak * 1e3
    return [
        {
            "n": n,
            "backend": "cupy",
            "version": "radix select (RawKernels)",
            "median_ms": radix,
            "one_pass_ms": one_pass,
            "floor_ms": floor,
        }
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--max-n", type=int, default=None, help="default 1e7 on the CPU, 1e8 on the GPU")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="n up to 1e5")
    args = parser.parse_args()
    rows = []
    with TimeLimit() as limit:
        for backend in args.backends:
            largest = args.max_n or (10**5 if args.quick else 10**7 if backend == "numpy" else 10**8)
            n = 1000
            while n <= largest:
                rows += cpu_rows(n, args.repeats) if backend == "numpy" else gpu_rows(n, args.repeats)
                print(rows[-1], flush=True)
                n *= 10
    columns = [
        ("n", "n", ".0e"),
        ("backend", "backend", "s"),
        ("version", "version", "s"),
        ("median (ms)", "median_ms", ".3f"),
        ("one cupy.sum (ms)", "one_pass_ms", ".3f"),
        ("bandwidth floor (ms)", "floor_ms", ".3f"),
    ]
    report(
        "water_level",
        args.backends,
        columns=columns,
        title=f"## Water level: find_gamma versions, volume = n * {NU}",
        payload={
            "dataset": {"name": "standard normal responses; warm versions after noise of 1e-3"},
            "parameters": {"nu": NU, "repeats": args.repeats, "quick": args.quick},
            "results": rows,
            "stopped_at_time_limit": limit.reached,
        },
    )


if __name__ == "__main__":
    main()
