// Shared device helpers for every gpusvm kernel.
//
// Conventions: kernels are templates on `real` (float or double) and are instantiated
// by name from Python (`name<float>`, `name<double>`); sums that decide correctness
// (margins, norms, averages) accumulate in double.
#pragma once

// ---------------------------------------------------------------------------------
// The counter-based random stream; identical to gpusvm/_random.py.
// ---------------------------------------------------------------------------------
__host__ __device__ inline unsigned long long gpusvm_splitmix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__host__ __device__ inline unsigned long long gpusvm_random_bits(
        unsigned long long seed, unsigned long long step, unsigned long long lane) {
    const unsigned long long key = gpusvm_splitmix64(seed);
    return gpusvm_splitmix64(gpusvm_splitmix64(key ^ step) ^ lane);
}

// Uniform index in [0, n), n < 2^32 (Lemire's multiply-shift on the high 32 bits).
__host__ __device__ inline long long gpusvm_random_index(
        unsigned long long seed, unsigned long long step, unsigned long long lane,
        unsigned long long n) {
    return (long long)(((gpusvm_random_bits(seed, step, lane) >> 32) * n) >> 32);
}

#ifdef __CUDACC__
// The most threads a kernel's blocks launch with, for kernels launched with more than 256
// (at 1,024 a thread may hold 64 registers): the compiler then budgets the registers for
// that size, whichever ptxas CuPy or the driver runs on the device, instead of a launch
// failing there for want of them.  Nothing under the CPU emulation (neither nvcc nor NVRTC),
// which has no registers.
#if defined(__NVCC__) || defined(__CUDACC_RTC__)
#define GPUSVM_MAX_THREADS(threads) __launch_bounds__(threads)
#else
#define GPUSVM_MAX_THREADS(threads)
#endif

// ---------------------------------------------------------------------------------
// Step `offset` of a block of steps reads its values at row position[0] + offset of a
// schedule of `columns` values a step, which the host computes before the steps run
// (gpusvm/_device/step_blocks.py): the block's launches are the same every time it runs.
// ---------------------------------------------------------------------------------
__device__ inline const double* gpusvm_schedule_row(const double* schedule, int columns,
                                                    const long long* position, int offset) {
    return schedule + (position[0] + offset) * columns;
}

// ---------------------------------------------------------------------------------
// Doubles as 64-bit keys with the same order (radix selects over values).
// ---------------------------------------------------------------------------------
__device__ inline unsigned long long gpusvm_order_key(double value) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(value);
    return (bits >> 63) ? ~bits : (bits | 0x8000000000000000ULL);
}

__device__ inline double gpusvm_key_value(unsigned long long key) {
    const unsigned long long bits = (key >> 63) ? (key & 0x7FFFFFFFFFFFFFFFULL) : ~key;
    return __longlong_as_double((long long)bits);
}

// ---------------------------------------------------------------------------------
// Rows of a dense row-major matrix or of a CSR matrix, read the same way.
// ---------------------------------------------------------------------------------
template <typename real>
struct RowView {
    const real* data;
    const int* indices;  // CSR only
    const int* indptr;   // CSR only
    int n_features;
    int is_csr;

    __device__ long long begin(long long row) const {
        return is_csr ? (long long)indptr[row] : row * (long long)n_features;
    }
    __device__ long long end(long long row) const {
        return is_csr ? (long long)indptr[row + 1] : (row + 1) * (long long)n_features;
    }
    __device__ int column(long long position, long long row_begin) const {
        return is_csr ? indices[position] : (int)(position - row_begin);
    }
};

// Sum (or, with `maximum`, the greatest) of one double per thread over the block; every
// thread gets the result. blockDim.x must be a multiple of 32 and at most 1024.
template <bool maximum>
__device__ inline double gpusvm_block_reduce(double value) {
    __shared__ double warp_results[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (int offset = 16; offset > 0; offset >>= 1) {
        const double other = __shfl_down_sync(0xffffffffu, value, offset);
        value = maximum ? fmax(value, other) : value + other;
    }
    __syncthreads();  // warp_results may still be read by a previous call
    if (lane == 0) warp_results[warp] = value;
    __syncthreads();
    const unsigned n_warps = blockDim.x >> 5;
    const double identity = maximum ? -__longlong_as_double(0x7ff0000000000000LL) : 0.0;
    value = (threadIdx.x < n_warps) ? warp_results[threadIdx.x] : identity;
    if (warp == 0)
        for (int offset = 16; offset > 0; offset >>= 1) {
            const double other = __shfl_down_sync(0xffffffffu, value, offset);
            value = maximum ? fmax(value, other) : value + other;
        }
    if (threadIdx.x == 0) warp_results[0] = value;
    __syncthreads();
    return warp_results[0];
}

__device__ inline double gpusvm_block_sum(double value) { return gpusvm_block_reduce<false>(value); }
__device__ inline double gpusvm_block_max(double value) { return gpusvm_block_reduce<true>(value); }

// Raises *address to value where it is lower (atomicMax on 64-bit words, by compare-and-swap).
__device__ inline void gpusvm_atomic_max(unsigned long long* address, unsigned long long value) {
    unsigned long long seen = *address;
    while (seen < value) {
        const unsigned long long before = atomicCAS(address, seen, value);
        if (before == seen) break;
        seen = before;
    }
}
#endif
