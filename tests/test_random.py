import shutil
import subprocess

import numpy as np
import pytest

from gpusvm._device.cuda_modules import cuda_source_dir
from gpusvm._random import (
    positions_below,
    random_bits,
    random_index_block,
    random_indices,
    random_positions,
    random_positions_of_streams,
    seed_from_random_state,
    stream_bits_block,
)

from .conftest import needs_device

MASK = 2**64 - 1


def splitmix64_int(z):
    """splitmix64 in Python integers: an independent oracle for the NumPy version."""
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def bits_int(seed, step, lane):
    key = splitmix64_int(seed)
    return splitmix64_int(splitmix64_int(key ^ step) ^ lane)


@pytest.mark.parametrize("seed,step", [(0, 0), (1, 1), (2**63 + 5, 12345), (42, 2**40)])
def test_numpy_stream_matches_integer_oracle(seed, step):
    got = random_bits(seed, step, 8)
    assert [int(g) for g in got] == [bits_int(seed, step, lane) for lane in range(8)]
    n = 1000003
    expected = [((bits_int(seed, step, lane) >> 32) * n) >> 32 for lane in range(8)]
    assert random_indices(seed, step, 8, n).tolist() == expected


def test_block_equals_step_by_step(rng):
    seed, first, n = int(rng.integers(2**63)), int(rng.integers(2**40)), int(rng.integers(1, 2**31))
    block = random_index_block(seed, first, 7, 5, n)
    assert block.shape == (7, 5)
    for s in range(7):
        assert np.array_equal(block[s], random_indices(seed, first + s, 5, n))


def test_many_streams_equal_each_stream_alone(rng):
    seeds = rng.integers(0, 2**63, size=6, dtype=np.uint64)
    bounds = rng.integers(1, 2**31, size=6)
    step = int(rng.integers(2**40))
    together = random_positions_of_streams(seeds, step, 5, bounds)
    assert together.shape == (6, 5)
    for row, seed, bound in zip(together, seeds, bounds, strict=True):
        assert np.array_equal(row, random_positions(int(seed), step, np.arange(5), np.full(5, bound)))
        assert np.array_equal(row, random_indices(int(seed), step, 5, int(bound)))


def test_a_block_of_steps_of_many_streams_draws_each_step_as_alone(rng):
    seeds = rng.integers(0, 2**63, size=4, dtype=np.uint64)
    first = int(rng.integers(2**40))
    block = stream_bits_block(seeds, first, 6, 5)
    assert block.shape == (4, 6, 5)
    for s in range(6):
        bounds = rng.integers(1, 2**31, size=4)
        assert np.array_equal(
            positions_below(block[:, s], bounds), random_positions_of_streams(seeds, first + s, 5, bounds)
        )


def test_indices_are_uniform():
    n, draws = 10, 200_000
    counts = np.bincount(random_indices(7, 3, draws, n), minlength=n)
    chi2 = ((counts - draws / n) ** 2 / (draws / n)).sum()
    assert chi2 < 30  # 9 degrees of freedom: p < 1e-3 beyond 27.9


def test_streams_differ_by_seed_and_step():
    a = random_indices(1, 1, 64, 2**31)
    assert not np.array_equal(a, random_indices(2, 1, 64, 2**31))
    assert not np.array_equal(a, random_indices(1, 2, 64, 2**31))
    assert np.array_equal(a, random_indices(1, 1, 64, 2**31))


def test_seed_from_random_state():
    assert seed_from_random_state(5) == 5
    assert seed_from_random_state(np.random.RandomState(0)) == seed_from_random_state(np.random.RandomState(0))
    with pytest.raises(ValueError):
        random_indices(0, 0, 4, 0)


@needs_device
def test_cupy_stream_matches_numpy(rng):
    import cupy

    from gpusvm._device.cuda_modules import get_cuda_kernel

    seed, step, n = int(rng.integers(2**63)), int(rng.integers(2**40)), int(rng.integers(1, 2**31))
    expected = random_indices(seed, step, 4096, n)
    assert np.array_equal(random_indices(seed, step, 4096, n, xp=cupy).get(), expected)
    out = cupy.empty(4096, dtype=np.int64)
    kernel = get_cuda_kernel("random.cu", "random_indices")
    kernel((16,), (256,), (np.uint64(seed), np.uint64(step), np.int64(4096), np.uint64(n), out))
    assert np.array_equal(out.get(), expected)


HOST_PROGRAM = r"""
#include <cstdio>
#include "common.cuh"
int main(int argc, char** argv) {
    unsigned long long seed = strtoull(argv[1], 0, 10), step = strtoull(argv[2], 0, 10), n = strtoull(argv[3], 0, 10);
    for (unsigned long long lane = 0; lane < 16; ++lane)
        printf("%llu %lld\n", gpusvm_random_bits(seed, step, lane), gpusvm_random_index(seed, step, lane, n));
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_cuda_header_stream_matches_numpy(tmp_path):
    """The device header, compiled for the host by nvcc, draws what NumPy draws."""
    source = tmp_path / "stream.cu"
    source.write_text(HOST_PROGRAM)
    binary = tmp_path / "stream"
    subprocess.run(
        ["nvcc", "-std=c++17", f"-I{cuda_source_dir()}", "-o", str(binary), str(source)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    seed, step, n = 2**62 + 11, 987654321, 32561
    lines = subprocess.run(
        [str(binary), str(seed), str(step), str(n)], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    bits = [int(line.split()[0]) for line in lines if line]
    indices = [int(line.split()[1]) for line in lines if line]
    assert bits == [int(b) for b in random_bits(seed, step, 16)]
    assert indices == random_indices(seed, step, 16, n).tolist()


def test_a_row_count_the_stream_cannot_draw_from_is_named():
    from gpusvm._random import check_draw_range

    for n in (0, 2**32):
        with pytest.raises(ValueError, match=rf"got n={n} rows"):
            check_draw_range(n)
    check_draw_range(2**32 - 1)
