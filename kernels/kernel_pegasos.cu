// Kernelized Pegasos on the GPU, every class in each launch
// (gpusvm/solvers/kernel_pegasos/_cuda.py). A step is two launches:
//   kernel_pegasos_violations  thread (b, c) draws row b of the step from the shared
//                              random stream (lane b at step t, as gpusvm/_random.py's
//                              random_index_block), tests class c's margin
//                              y (scale r_c(x)) < 1 on the unscaled responses, adds the
//                              row's sample weight to the violation count and t times it
//                              to the stamps (repeated rows add up), and writes the row's
//                              weight y coef in the step's combination of kernel rows;
//   kernel_pegasos_update      (blocks, classes): one thread a column j, the responses
//                              r_c(x_j) += sum_b weight_cb (K(x_b, x_j) + intercept),
//                              reading only the violating rows' kernel values.
// Kernel values come from the resident kernel matrix or from the drawn rows' inner
// products (kernel_values.cuh). The step t and the scale 1 / (lam (t - 1) k) are read
// from the schedule at the block's position, so a block of steps is the same launches
// every time (gpusvm/_device/step_blocks.py).
#include "common.cuh"
#include "kernel_values.cuh"

#define KERNEL_PEGASOS_STEP 0   // t
#define KERNEL_PEGASOS_SCALE 1  // 1 / (lam (t - 1) k); 0 at t = 1
#define KERNEL_PEGASOS_SCHEDULE_COLUMNS 2

extern "C" __global__ void kernel_pegasos_violations(
        const double* __restrict__ responses, const double* __restrict__ targets,
        const double* __restrict__ sample_weight, unsigned long long seed, long long n, int batch,
        int n_classes, const double* __restrict__ schedule, const long long* __restrict__ position,
        int offset, double* __restrict__ counts, double* __restrict__ stamps, long long* __restrict__ rows,
        double* __restrict__ weights) {
    const double* values = gpusvm_schedule_row(schedule, KERNEL_PEGASOS_SCHEDULE_COLUMNS, position, offset);
    const unsigned long long step = (unsigned long long)values[KERNEL_PEGASOS_STEP];
    const double scale = values[KERNEL_PEGASOS_SCALE];
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

// Column j (grid-stride over blockIdx.x) of class blockIdx.y's responses, after
// kernel_pegasos_violations; the step's drawn row b is kernel-value slot b.
template <typename real>
__global__ void kernel_pegasos_update(
        KERNEL_VALUE_PARAMETERS, const long long* __restrict__ rows, const double* __restrict__ weights,
        int batch, long long n, double intercept, double* __restrict__ responses) {
    const KernelValues<real> kernel_values = KERNEL_VALUES_FROM_PARAMETERS;
    const int c = blockIdx.y;
    const double* weight = weights + (long long)c * batch;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n;
         j += (long long)gridDim.x * blockDim.x) {
        double change = 0.0;
        for (int b = 0; b < batch; ++b) {
            if (weight[b] == 0.0) continue;  // not violating: its kernel row is not read
            change += weight[b] * (kernel_values(b, rows[b], j) + intercept);
        }
        responses[c * n + j] += change;
    }
}
