// Kernel values as the kernel solvers' fused steps read them (kernels/sbp.cu,
// kernels/kernel_pegasos.cu), and the kernel function itself (kernels/kernel_functions.cu).
//
// A step needs K(x_row, x_column) for a few drawn rows and every column: read from the
// resident kernel matrix (row-major, one row per training row) or from a cache of its
// rows, or computed from the drawn rows' inner products with every column (one product
// per step, by cuBLAS or cuSPARSE), in the matrix's or the products' precision.
#pragma once

#define GPUSVM_KERNEL_LINEAR 0
#define GPUSVM_KERNEL_RBF 1
#define GPUSVM_KERNEL_POLY 2

// K from an inner product and the two squared norms (rbf), in `real` as the NumPy path
// computes it (gpusvm/kernel_functions/, scikit-learn's conventions).
template <typename real>
struct KernelFunction {
    int kind;
    real gamma;
    real coef0;
    int degree;

    __device__ real operator()(real dot, real sq_a, real sq_b) const {
        real value = dot;
        if (kind == GPUSVM_KERNEL_RBF) {
            // Clamp: rounding can make the squared distance slightly negative.
            value = exp(-gamma * fmax(real(0), sq_a + sq_b - real(2) * dot));
        } else if (kind == GPUSVM_KERNEL_POLY) {
            const real base = gamma * dot + coef0;
            value = real(1);
            for (int e = 0; e < degree; ++e) value *= base;
        }
        return value;
    }
};

// Where a step's kernel values come from (KernelValues::source).
#define KERNEL_VALUES_FROM_PRODUCTS 0  // the drawn rows' inner products, a row per slot
#define KERNEL_VALUES_FROM_MATRIX 1    // the resident kernel matrix, a row per training row
#define KERNEL_VALUES_FROM_CACHE 2     // a row cache: the store row of each slot in store_rows

// K(x_row, x_column) for the drawn row in `slot`: `values[row * slot_stride + column]` of
// the resident matrix, `values[store_rows[slot] * slot_stride + column]` of a row cache,
// or computed from the slot's inner products, `values[slot * slot_stride + column *
// column_stride]`.
template <typename real>
struct KernelValues {
    const real* values;
    long long slot_stride, column_stride;
    int source;
    const long long* store_rows;
    const real* sq_norms;
    KernelFunction<real> kernel;

    __device__ double operator()(long long slot, long long row, long long column) const {
        if (source == KERNEL_VALUES_FROM_MATRIX) return (double)values[row * slot_stride + column];
        if (source == KERNEL_VALUES_FROM_CACHE) return (double)values[store_rows[slot] * slot_stride + column];
        return (double)kernel(values[slot * slot_stride + column * column_stride], sq_norms[row], sq_norms[column]);
    }
};

// The parameters that make a KernelValues (CuPy passes scalars and arrays, not structs),
// in the order gpusvm/solvers/_kernel_values_cuda.py's kernel_value_arguments gives them.
#define KERNEL_VALUE_PARAMETERS                                                                  \
    const real *__restrict__ kernel_source, long long slot_stride, long long column_stride,      \
        int source, const long long *__restrict__ store_rows, const real *__restrict__ sq_norms, \
        int kind, double gamma, double coef0, int degree
#define KERNEL_VALUES_FROM_PARAMETERS                                                            \
    KernelValues<real> {                                                                         \
        kernel_source, slot_stride, column_stride, source, store_rows, sq_norms,                 \
            KernelFunction<real>{kind, (real)gamma, (real)coef0, degree}                         \
    }
