// Kernel values from inner products: the elementwise part of a kernel block.
//
// The inner products X Y^T come from cuBLAS / cuSPARSE; this turns them, in place,
// into K(x, y) using the precomputed squared norms (rbf) or the affine map (poly), in the
// block's precision (float32 blocks in float32, as the NumPy path computes them).
#include "common.cuh"

#define GPUSVM_KERNEL_LINEAR 0
#define GPUSVM_KERNEL_RBF 1
#define GPUSVM_KERNEL_POLY 2

template <typename real>
__global__ void kernel_from_dots(
        real* __restrict__ block,              // (n_rows, n_cols): dots in, kernel values out
        const real* __restrict__ row_sq_norms, // (n_rows,) rbf only
        const real* __restrict__ col_sq_norms, // (n_cols,) rbf only
        long long n_rows, long long n_cols, int kind, double gamma, double coef0,
        int degree) {
    const long long size = n_rows * n_cols;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < size;
         p += (long long)gridDim.x * blockDim.x) {
        const real dot = block[p];
        real value = dot;
        if (kind == GPUSVM_KERNEL_RBF) {
            const long long i = p / n_cols, j = p - i * n_cols;
            // Clamp: rounding can make the squared distance slightly negative.
            const real sq_dist = fmax(real(0), row_sq_norms[i] + col_sq_norms[j] - real(2) * dot);
            value = exp(-(real)gamma * sq_dist);
        } else if (kind == GPUSVM_KERNEL_POLY) {
            const real base = (real)gamma * dot + (real)coef0;
            value = real(1);
            for (int e = 0; e < degree; ++e) value *= base;
        }
        block[p] = value;
    }
}
