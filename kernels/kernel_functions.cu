// Kernel values from inner products: the elementwise part of a kernel block; and the
// drawn rows of a CSR matrix made dense, for the kernel solvers' products.
//
// The inner products X Y^T come from cuBLAS / cuSPARSE; kernel_from_dots turns them, in
// place, into K(x, y) using the precomputed squared norms (rbf) or the affine map (poly),
// in the block's precision (float32 blocks in float32, as the NumPy path computes them).
#include "common.cuh"
#include "kernel_values.cuh"

template <typename real>
__global__ void kernel_from_dots(
        real* __restrict__ block,              // (n_rows, n_cols): dots in, kernel values out
        const real* __restrict__ row_sq_norms, // (n_rows,) rbf only
        const real* __restrict__ col_sq_norms, // (n_cols,) rbf only
        long long n_rows, long long n_cols, int kind, double gamma, double coef0,
        int degree) {
    const KernelFunction<real> kernel{kind, (real)gamma, (real)coef0, degree};
    const long long size = n_rows * n_cols;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < size;
         p += (long long)gridDim.x * blockDim.x) {
        if (kind == GPUSVM_KERNEL_RBF) {
            const long long i = p / n_cols, j = p - i * n_cols;
            block[p] = kernel(block[p], row_sq_norms[i], col_sq_norms[j]);
        } else {
            block[p] = kernel(block[p], real(0), real(0));
        }
    }
}

// The drawn rows of a CSR matrix as dense rows (out: count x n_features), one block a
// row: a product with X needs no host synchronisation, where indexing a CSR matrix by
// device indices does (the result's size).
template <typename real>
__global__ void dense_rows(const real* __restrict__ data, const int* __restrict__ indices,
                           const int* __restrict__ indptr, const long long* __restrict__ drawn,
                           int n_features, real* __restrict__ out) {
    real* row = out + (long long)blockIdx.x * n_features;
    for (int f = threadIdx.x; f < n_features; f += blockDim.x) row[f] = real(0);
    __syncthreads();
    const long long i = drawn[blockIdx.x];
    for (int at = indptr[i] + threadIdx.x; at < indptr[i + 1]; at += blockDim.x) row[indices[at]] = data[at];
}
