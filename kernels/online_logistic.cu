// Online sparse logistic regression on the device: one mini-batch in three launches.
// The math (the merged mini-batch rule, the lazy FOBOS/TG penalties, the state layout)
// is in gpusvm/solvers/online_logistic/, whose NumPy steps these kernels mirror; the
// launch order is in gpusvm/solvers/online_logistic/_cuda.py.
//
//   1. online_margins:   one warp per batch row: its margin under the current weights,
//                        its residual p - y for every one-vs-rest model, its loss.
//   2. online_gradients: one warp per batch row: atomically add each nonzero's gradient
//                        (and squared gradient, for FTRL) into dense per-coordinate sums,
//                        and append each newly touched column to a list, once.
//   3. online_update:    one thread per touched column: the rule's update from the sums,
//                        then the sums and the column's mark are reset to zero.
//
// State arrays `first` and `second` are (n_models, n_features + 1) doubles; column
// n_features is the intercept, an always-present feature of value 1 with no penalty.
#include "common.cuh"

#define ONLINE_FTRL 0
#define ONLINE_TG 1
#define ONLINE_FOBOS 2
#define ONLINE_RDA 3

// A batch's values, a row of the schedule that the host computes before the batches run
// (gpusvm/solvers/online_logistic/_cuda.py, online_schedule); batch `offset` of a block
// of batches reads row position[0] + offset (gpusvm/_device/step_blocks.py).
#define ONLINE_EXAMPLES 0    // examples seen before the batch (RDA's t)
#define ONLINE_LEVEL 1       // FOBOS/TG: penalties applied up to the batch start
#define ONLINE_NEXT_LEVEL 2  // ... and up to its end
#define ONLINE_START 3       // the batch's first position in the epoch's row order
#define ONLINE_ROWS 4        // the batch's rows (the last batch of an epoch may be short)
#define ONLINE_SCHEDULE_COLUMNS 5

__device__ inline const double* online_batch_row(const double* __restrict__ schedule,
                                                 const long long* __restrict__ position, int offset) {
    return gpusvm_schedule_row(schedule, ONLINE_SCHEDULE_COLUMNS, position, offset);
}

// Hyperparameters in the order of `params` (see gpusvm/solvers/online_logistic/_cuda.py, rule_parameters).
struct OnlineRule {
    int kind;
    double l1, l2, alpha, beta, theta, gamma;
    double examples, level, next_level;  // the batch's, from its schedule row

    __device__ OnlineRule(int kind_, const double* __restrict__ params, const double* __restrict__ batch)
        : kind(kind_), l1(params[0]), l2(params[1]), alpha(params[2]), beta(params[3]), theta(params[4]),
          gamma(params[5]), examples(batch[ONLINE_EXAMPLES]), level(batch[ONLINE_LEVEL]),
          next_level(batch[ONLINE_NEXT_LEVEL]) {}

    // sign(v) max(0, |v| - amount); TG shrinks only where |v| <= theta.
    __device__ double shrink(double v, double amount) const {
        const double excess = fabs(v) - amount;
        const double soft = excess > 0.0 ? copysign(excess, v) : 0.0;
        return (kind == ONLINE_TG && !(fabs(v) <= theta)) ? v : soft;
    }

    // The weight of one coordinate as of the batch start; `penalized` is 0 for the intercept.
    __device__ double weight(double first, double second, double penalized) const {
        const double lam1 = l1 * penalized;
        if (kind == ONLINE_FTRL) {
            if (fabs(first) <= lam1) return 0.0;
            return -(first - copysign(lam1, first)) / ((beta + sqrt(second)) / alpha + l2 * penalized);
        }
        if (kind == ONLINE_RDA) {
            if (examples == 0.0) return 0.0;
            const double mean_gradient = first / examples;
            if (fabs(mean_gradient) <= lam1) return 0.0;
            return -(sqrt(examples) / gamma) * (mean_gradient - copysign(lam1, mean_gradient));
        }
        return shrink(first, (level - second) * penalized);
    }

    // One merged update from the batch's summed gradient and squared gradient.
    __device__ void update(double& first, double& second, double weight_now, double gradient, double squared,
                           double penalized) const {
        if (kind == ONLINE_FTRL) {
            const double sigma = (sqrt(second + squared) - sqrt(second)) / alpha;
            first += gradient - sigma * weight_now;
            second += squared;
        } else if (kind == ONLINE_RDA) {
            first += gradient;
        } else {
            first = shrink(weight_now - gradient, (next_level - level) * penalized);
            second = next_level;
        }
    }
};

__device__ inline double online_warp_sum(double value) {
    for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_down_sync(0xffffffffu, value, offset);
    return __shfl_sync(0xffffffffu, value, 0);
}

// log(1 + exp(m)) without overflow.
__device__ inline double online_softplus(double m) { return fmax(m, 0.0) + log1p(exp(-fabs(m))); }

// 1. Margins, residuals and losses.  Block: 128 threads = 4 warps = 4 batch rows.
template <typename real>
__global__ void online_margins(
        const real* __restrict__ data, const int* __restrict__ indices, const int* __restrict__ indptr,
        int is_csr, int n_features, const long long* __restrict__ order,
        const double* __restrict__ schedule, const long long* __restrict__ position, int offset,
        const int* __restrict__ labels, int n_models, int positive_offset, int fit_intercept,
        const double* __restrict__ first, const double* __restrict__ second,
        int kind, const double* __restrict__ params,
        double* __restrict__ residuals,  // out (batch rows, n_models)
        double* __restrict__ loss_sum,   // in/out: the epoch's summed loss
        int* __restrict__ touched_count) {  // reset for this batch's online_gradients
    if (blockIdx.x == 0 && threadIdx.x == 0) *touched_count = 0;
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const double* batch = online_batch_row(schedule, position, offset);
    if (b >= (int)batch[ONLINE_ROWS]) return;  // a whole warp leaves together
    const OnlineRule rule(kind, params, batch);
    const RowView<real> rows{data, indices, indptr, n_features, is_csr};
    const long long row = order[(long long)batch[ONLINE_START] + b];
    const long long begin = rows.begin(row), end = rows.end(row);
    const long long stride = n_features + 1;
    double row_loss = 0.0;
    for (int k = 0; k < n_models; ++k) {
        const double* first_k = first + k * stride;
        const double* second_k = second + k * stride;
        double partial = 0.0;
        for (long long p = begin + lane; p < end; p += 32) {
            const double x = (double)data[p];
            if (x == 0.0) continue;
            const int column = rows.column(p, begin);
            partial += x * rule.weight(first_k[column], second_k[column], 1.0);
        }
        double margin = online_warp_sum(partial);
        if (fit_intercept) margin += rule.weight(first_k[n_features], second_k[n_features], 0.0);
        const double y = labels[row] == k + positive_offset ? 1.0 : 0.0;
        if (lane == 0) {
            residuals[(long long)b * n_models + k] = 1.0 / (1.0 + exp(-margin)) - y;
            row_loss += online_softplus(margin) - y * margin;
        }
    }
    if (lane == 0) atomicAdd(loss_sum, row_loss);
}

// Marks `column` as touched in this batch; the first warp to touch it appends it.
__device__ inline void online_touch(int column, int* __restrict__ marks, int* __restrict__ touched,
                                    int* __restrict__ touched_count) {
    if (marks[column] == 0 && atomicExch(&marks[column], 1) == 0) touched[atomicAdd(touched_count, 1)] = column;
}

// 2. Summed gradients per coordinate.  Same layout as online_margins.
template <typename real>
__global__ void online_gradients(
        const real* __restrict__ data, const int* __restrict__ indices, const int* __restrict__ indptr,
        int is_csr, int n_features, const long long* __restrict__ order,
        const double* __restrict__ schedule, const long long* __restrict__ position, int offset,
        int n_models, int fit_intercept, const double* __restrict__ residuals,
        double eta0, int scale_by_step, int with_squares,
        double* __restrict__ gradient, double* __restrict__ squared,  // (n_models, n_features + 1), zero outside a batch
        int* __restrict__ marks, int* __restrict__ touched, int* __restrict__ touched_count) {
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const double* batch = online_batch_row(schedule, position, offset);
    if (b >= (int)batch[ONLINE_ROWS]) return;
    const RowView<real> rows{data, indices, indptr, n_features, is_csr};
    const long long row = order[(long long)batch[ONLINE_START] + b];
    const long long begin = rows.begin(row), end = rows.end(row);
    const long long stride = n_features + 1;
    // TG and FOBOS weigh example s = examples + b + 1 by its step size eta0 / sqrt(s).
    const double step = scale_by_step ? eta0 / sqrt(batch[ONLINE_EXAMPLES] + (double)b + 1.0) : 1.0;
    const double* residual = residuals + (long long)b * n_models;
    for (long long p = begin + lane; p < end; p += 32) {
        const double x = (double)data[p];
        if (x == 0.0) continue;
        const int column = rows.column(p, begin);
        online_touch(column, marks, touched, touched_count);
        for (int k = 0; k < n_models; ++k) {
            const double g = residual[k] * x;
            atomicAdd(&gradient[k * stride + column], g * step);
            if (with_squares) atomicAdd(&squared[k * stride + column], g * g);
        }
    }
    if (fit_intercept && lane == 0) {
        online_touch(n_features, marks, touched, touched_count);
        for (int k = 0; k < n_models; ++k) {
            atomicAdd(&gradient[k * stride + n_features], residual[k] * step);
            if (with_squares) atomicAdd(&squared[k * stride + n_features], residual[k] * residual[k]);
        }
    }
}

// 3. The rule's update of every touched column, for every model; resets the sums.
extern "C" __global__ void online_update(
        int n_features, int n_models, double* __restrict__ first, double* __restrict__ second,
        int kind, const double* __restrict__ params, const double* __restrict__ schedule,
        const long long* __restrict__ position, int offset, double* __restrict__ gradient, double* __restrict__ squared, int with_squares,
        int* __restrict__ marks, const int* __restrict__ touched, const int* __restrict__ touched_count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= *touched_count) return;
    const OnlineRule rule(kind, params, online_batch_row(schedule, position, offset));
    const int column = touched[i];
    const double penalized = column < n_features ? 1.0 : 0.0;
    const long long stride = n_features + 1;
    for (int k = 0; k < n_models; ++k) {
        const long long at = k * stride + column;
        const double weight_now = rule.weight(first[at], second[at], penalized);
        const double sq = with_squares ? squared[at] : 0.0;
        rule.update(first[at], second[at], weight_now, gradient[at], sq, penalized);
        gradient[at] = 0.0;
        if (with_squares) squared[at] = 0.0;
    }
    marks[column] = 0;
}
