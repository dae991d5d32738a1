// Stochastic Batch Perceptron steps on the GPU (gpusvm/solvers/_sbp_cuda.py).
//
// A step for one binary problem, after the water level:
//   sbp_draw       B indices, uniformly among the responses at or below the level, from
//                  the running count of them and the shared random stream;
//   sbp_norm_step  ||w||^2 after the step, from the old responses at the drawn rows and
//                  the B x B kernel values among them; adds eta / B to their alpha; the
//                  projection factor;
//   sbp_update     one thread per column: the combined kernel row
//                  g_j = 1/B sum_b y_b K(x_b, x_j), computed from the inner products
//                  (cuBLAS / cuSPARSE) and squared norms, fused with the response update
//                  c_j += eta y_j g_j, the projection and the running sums for the average.
// Responses, coefficients and sums are double; kernel values are computed in the input's
// precision (float32 input: float32 kernel values, as the NumPy path computes them) and
// accumulated in double.
#include "common.cuh"

#define SBP_KERNEL_LINEAR 0
#define SBP_KERNEL_RBF 1
#define SBP_KERNEL_POLY 2

template <typename real>
struct SBPKernel {
    int kind;
    real gamma;
    real coef0;
    int degree;

    __device__ double operator()(real dot, real sq_a, real sq_b) const {
        real value = dot;
        if (kind == SBP_KERNEL_RBF) {
            value = exp(-gamma * fmax(real(0), sq_a + sq_b - real(2) * dot));
        } else if (kind == SBP_KERNEL_POLY) {
            const real base = gamma * dot + coef0;
            value = real(1);
            for (int e = 0; e < degree; ++e) value *= base;
        }
        return (double)value;
    }
};

// out[b] = the r-th row with below[row] set, r drawn from [0, count) on lane lane0 + b;
// `running` is the inclusive running count of `below`, so count = running[n - 1].
extern "C" __global__ void sbp_draw(const long long* __restrict__ running, long long n,
                                    unsigned long long seed, unsigned long long step,
                                    long long lane0, int batch, long long* __restrict__ out) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= batch) return;
    const long long count = running[n - 1];
    const long long r = gpusvm_random_index(seed, step, (unsigned long long)(lane0 + b),
                                            (unsigned long long)count);
    long long lo = 0, hi = n - 1;  // the first row whose running count exceeds r
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (running[mid] > r) hi = mid; else lo = mid + 1;
    }
    out[b] = lo;
}

// One block. dots: (rows, n_total) inner products of the drawn rows with every column;
// this problem's rows are first .. first + batch - 1.
template <typename real>
__global__ void sbp_norm_step(
        const real* __restrict__ dots, const long long* __restrict__ drawn,
        const real* __restrict__ sq_norms, const double* __restrict__ labels,
        const double* __restrict__ responses, double* __restrict__ alpha,
        double* __restrict__ r2, double* __restrict__ factor, int first, int batch,
        long long n_total, double eta, int kind, double gamma, double coef0, int degree) {
    const SBPKernel<real> kernel{kind, (real)gamma, (real)coef0, degree};
    double gram = 0.0, old = 0.0;  // sum_{b, b'} y_b y_b' K_bb' and sum_b c_b
    for (int pair = threadIdx.x; pair < batch * batch; pair += blockDim.x) {
        const int b = pair / batch, c = pair - b * batch;
        const long long i = drawn[first + b], j = drawn[first + c];
        const double value = kernel(dots[(long long)(first + b) * n_total + j], sq_norms[i], sq_norms[j]);
        gram += labels[i] * labels[j] * value;
    }
    for (int b = threadIdx.x; b < batch; b += blockDim.x) old += responses[drawn[first + b]];
    gram = gpusvm_block_sum(gram);
    old = gpusvm_block_sum(old);
    if (threadIdx.x == 0) {
        const double B = (double)batch;
        const double norm = *r2 + 2.0 * eta * old / B + eta * eta * gram / (B * B);
        *factor = norm > 1.0 ? 1.0 / sqrt(norm) : 1.0;
        *r2 = fmin(norm, 1.0);
    }
    for (int b = threadIdx.x; b < batch; b += blockDim.x)
        atomicAdd(&alpha[drawn[first + b]], eta / (double)batch);
}

// One thread per column j of n_total = n_train + n_holdout.
template <typename real>
__global__ void sbp_update(
        const real* __restrict__ dots, const long long* __restrict__ drawn,
        const real* __restrict__ sq_norms, const double* __restrict__ labels,
        const double* __restrict__ factor_ptr, double* __restrict__ responses,
        double* __restrict__ response_sum, double* __restrict__ alpha,
        double* __restrict__ alpha_sum, double* __restrict__ holdout,
        double* __restrict__ holdout_sum, int first, int batch, long long n_train,
        long long n_total, double eta, int kind, double gamma, double coef0, int degree) {
    const SBPKernel<real> kernel{kind, (real)gamma, (real)coef0, degree};
    const double factor = *factor_ptr;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n_total;
         j += (long long)gridDim.x * blockDim.x) {
        const real sq_j = sq_norms[j];
        double g = 0.0;
        for (int b = 0; b < batch; ++b) {
            const long long i = drawn[first + b];
            g += labels[i] * kernel(dots[(long long)(first + b) * n_total + j], sq_norms[i], sq_j);
        }
        g /= (double)batch;
        if (j < n_train) {
            const double c = (responses[j] + eta * labels[j] * g) * factor;
            responses[j] = c;
            response_sum[j] += c;
            const double a = alpha[j] * factor;
            alpha[j] = a;
            alpha_sum[j] += a;
        } else {
            const long long v = j - n_train;
            const double h = (holdout[v] + eta * g) * factor;
            holdout[v] = h;
            holdout_sum[v] += h;
        }
    }
}
