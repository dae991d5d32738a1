// The shared random stream on the device (see common.cuh and gpusvm/_random.py).
#include "common.cuh"

// out[lane] = index in [0, n) for lanes 0..count-1 of one step.
extern "C" __global__ void random_indices(
        unsigned long long seed, unsigned long long step, long long count,
        unsigned long long n, long long* __restrict__ out) {
    for (long long lane = blockIdx.x * (long long)blockDim.x + threadIdx.x; lane < count;
         lane += (long long)gridDim.x * blockDim.x)
        out[lane] = gpusvm_random_index(seed, step, (unsigned long long)lane, n);
}
