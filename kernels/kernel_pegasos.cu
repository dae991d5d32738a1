// Kernelized Pegasos on the GPU: a step's draw, margin test and count update in one
// launch, every class together (gpusvm/solvers/_kernel_pegasos_cuda.py).
//
// Thread (b, c) draws row b of the step from the shared random stream (lane b at step t,
// as gpusvm/_random.py's random_index_block), tests class c's margin
// y (scale r_c(x)) < 1 on the unscaled responses, adds the row's sample weight to the
// violation count and t times it to the stamps (repeated rows add up), and writes the
// row's weight y coef in the step's combination of kernel rows.
#include "common.cuh"

extern "C" __global__ void kernel_pegasos_violations(
        const double* __restrict__ responses, const double* __restrict__ targets,
        const double* __restrict__ sample_weight, unsigned long long seed, unsigned long long step,
        long long n, int batch, int n_classes, double scale, double* __restrict__ counts,
        double* __restrict__ stamps, long long* __restrict__ rows, double* __restrict__ weights) {
    const long long total = (long long)batch * n_classes;
    for (long long at = blockIdx.x * (long long)blockDim.x + threadIdx.x; at < total;
         at += (long long)gridDim.x * blockDim.x) {
        const int b = (int)(at / n_classes), c = (int)(at % n_classes);
        const long long row = gpusvm_random_index(seed, step, (unsigned long long)b, (unsigned long long)n);
        if (c == 0) rows[b] = row;
        const double y = targets[row * n_classes + c];
        const bool violating = y * (scale * responses[c * n + row]) < 1.0;
        const double coef = violating ? sample_weight[row] : 0.0;
        if (coef != 0.0) {
            atomicAdd(&counts[c * n + row], coef);
            atomicAdd(&stamps[c * n + row], (double)step * coef);
        }
        weights[(long long)c * batch + b] = coef * y;
    }
}
