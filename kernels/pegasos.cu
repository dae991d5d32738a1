// One mini-batch Pegasos step on the device, in three launches (see
// gpusvm/solvers/_pegasos_cuda.py for the order and algorithms.md section 1 for the math).
//
// The weights of class c are w_c = a_c * v_c (the `w = a*v` trick): shrinking w by
// (1 - 1/t) changes only the scalar a_c, and adding the violators' y*x touches only their
// nonzeros.  Column n_features of v (when fit_intercept) is the bias, a weight on an
// implicit constant feature of value 1.  Averaging keeps sum_s w_s = P + B * v, so that a
// change dv of v costs P -= B * dv on the same coordinates and nothing more.
#include "common.cuh"

// A step's values, a row of the schedule that the host computes before the steps run
// (gpusvm/solvers/_pegasos_cuda.py, pegasos_schedule); step `offset` of a block of
// steps reads row position[0] + offset (gpusvm/_step_blocks.py).
#define PEGASOS_STEP 0             // t, counted over the model's life
#define PEGASOS_ETA_OVER_K 1       // 1 / (lambda t k)
#define PEGASOS_STEP_SCALE 2       // 1 - 1/t (1 at t = 1)
#define PEGASOS_AVERAGE_WEIGHT 3   // the iterate's weight in the average (0: not averaging yet)
#define PEGASOS_WEIGHT_SUM 4       // the sum of the weights up to this step
#define PEGASOS_GIVEN_FIRST_ROW 5  // >= 0: the step's rows are given from this row on; -1: drawn
#define PEGASOS_SCHEDULE_COLUMNS 6

__device__ inline const double* pegasos_step_row(const double* __restrict__ schedule,
                                                 const long long* __restrict__ position, int offset) {
    return gpusvm_schedule_row(schedule, PEGASOS_SCHEDULE_COLUMNS, position, offset);
}

// 1. Draw the batch's rows, compute their margins under the current w, and write each
//    (row, class) pair's coefficient (eta/k) * s_i * y_ic when it violates the margin.
//    One block per batch row.
template <typename real>
__global__ void pegasos_margins(
        const real* __restrict__ data, const int* __restrict__ indices,
        const int* __restrict__ indptr, int is_csr, long long n_samples, int n_features,
        const real* __restrict__ v, const double* __restrict__ scale_a,
        const real* __restrict__ targets,        // (n_samples, n_classes), +-1
        const real* __restrict__ sample_weight,  // (n_samples,)
        int n_classes, int v_stride, int fit_intercept, unsigned long long seed,
        const double* __restrict__ schedule, const long long* __restrict__ position, int offset,
        long long* __restrict__ batch_index,     // out (batch,)
        double* __restrict__ coef) {             // out (batch, n_classes)
    const RowView<real> rows{data, indices, indptr, n_features, is_csr};
    const double* step_row = pegasos_step_row(schedule, position, offset);
    const unsigned long long step = (unsigned long long)step_row[PEGASOS_STEP];
    const double eta_over_k = step_row[PEGASOS_ETA_OVER_K];
    const long long given_first_row = (long long)step_row[PEGASOS_GIVEN_FIRST_ROW];
    // Given rows: the batch was drawn elsewhere (gpusvm.dask gathers each block's rows
    // in draw order), so lane j of this step reads row given_first_row + j.
    const long long row = given_first_row >= 0 ? given_first_row + blockIdx.x
                                               : gpusvm_random_index(seed, step, blockIdx.x, n_samples);
    if (threadIdx.x == 0) batch_index[blockIdx.x] = row;
    const long long begin = rows.begin(row), end = rows.end(row);
    const double weight = (double)sample_weight[row];
    for (int c = 0; c < n_classes; ++c) {
        const real* v_c = v + (long long)c * v_stride;
        double partial = 0.0;
        for (long long p = begin + threadIdx.x; p < end; p += blockDim.x)
            partial += (double)data[p] * (double)v_c[rows.column(p, begin)];
        const double dot = gpusvm_block_sum(partial);
        if (threadIdx.x == 0) {
            const double bias = fit_intercept ? (double)v_c[n_features] : 0.0;
            const double y = (double)targets[row * n_classes + c];
            const double margin = y * scale_a[c] * (dot + bias);
            coef[blockIdx.x * (long long)n_classes + c] =
                margin < 1.0 ? eta_over_k * weight * y : 0.0;
        }
    }
}

// 2. v_c += coef / a_c' * x for every violating (row, class), with a_c' = a_c * step_scale
//    the scale after this step's shrink.  Keeps ||v_c||^2 exact by telescoping
//    new^2 - old^2 over the atomic updates, and the average's P -= B * dv.
//    Grid: (batch, n_classes).
template <typename real>
__global__ void pegasos_accumulate(
        const real* __restrict__ data, const int* __restrict__ indices,
        const int* __restrict__ indptr, int is_csr, int n_features,
        const long long* __restrict__ batch_index, const double* __restrict__ coef,
        int n_classes, int v_stride, int fit_intercept,
        const double* __restrict__ scale_a, const double* __restrict__ schedule,
        const long long* __restrict__ position, int offset,
        real* __restrict__ v, double* __restrict__ sq_norm_v,
        double* __restrict__ avg_p, const double* __restrict__ avg_b) {
    const int c = blockIdx.y;
    const double coefficient = coef[blockIdx.x * (long long)n_classes + c];
    if (coefficient == 0.0) return;  // uniform over the block: no barrier is skipped by half of it
    const RowView<real> rows{data, indices, indptr, n_features, is_csr};
    const long long row = batch_index[blockIdx.x];
    const long long begin = rows.begin(row), end = rows.end(row);
    const double* step_row = pegasos_step_row(schedule, position, offset);
    const double factor = coefficient / (scale_a[c] * step_row[PEGASOS_STEP_SCALE]);
    const bool averaging = step_row[PEGASOS_AVERAGE_WEIGHT] > 0.0;
    real* v_c = v + (long long)c * v_stride;
    double* p_c = avg_p + (long long)c * v_stride;
    const double b_c = averaging ? avg_b[c] : 0.0;
    double sq_change = 0.0;
    const long long n_terms = (end - begin) + (fit_intercept ? 1 : 0);
    for (long long q = threadIdx.x; q < n_terms; q += blockDim.x) {
        const long long p = begin + q;
        const bool is_bias = p >= end;
        const int column = is_bias ? n_features : rows.column(p, begin);
        const real delta = (real)(factor * (is_bias ? 1.0 : (double)data[p]));
        const real old = atomicAdd(&v_c[column], delta);
        const real updated = old + delta;  // what the atomic stored (same IEEE rounding)
        sq_change += (double)updated * (double)updated - (double)old * (double)old;
        if (averaging) atomicAdd(&p_c[column], -b_c * (double)delta);
    }
    const double total = gpusvm_block_sum(sq_change);
    if (threadIdx.x == 0) atomicAdd(&sq_norm_v[c], total);
}

// 3. Per class (one block each): shrink a, project onto the ball of radius
//    1/sqrt(lambda) (radius <= 0: no projection), add average_weight * w to the running
//    sum (0: not averaging yet), and maintain: when a is tiny, or when B is large next to
//    a * (sum of weights) so that P + B v would cancel, fold P += B v and renormalize
//    v *= a, a := 1, B := 0, ||v||^2 *= a^2.  The maintenance is rare, so its pass over
//    the weights is done by the class's one block, and only when it is due: the step
//    needs no launch of its own for it.
template <typename real>
__global__ void pegasos_finish(
        int v_stride, const double* __restrict__ schedule, const long long* __restrict__ position,
        int offset, double radius, double fold_ratio, double renormalize_below,
        double* __restrict__ scale_a, double* __restrict__ sq_norm_v, double* __restrict__ avg_b,
        real* __restrict__ v, double* __restrict__ avg_p) {
    const int c = blockIdx.x;
    __shared__ double old_a, old_b;
    __shared__ int due;
    if (threadIdx.x == 0) {
        const double* step_row = pegasos_step_row(schedule, position, offset);
        double a = scale_a[c] * step_row[PEGASOS_STEP_SCALE];
        const double sq = fmax(sq_norm_v[c], 0.0);
        if (radius > 0.0) {
            const double norm_w = a * sqrt(sq);
            if (norm_w > radius) a *= radius / norm_w;
        }
        double b = avg_b[c] + step_row[PEGASOS_AVERAGE_WEIGHT] * a;
        due = a < renormalize_below || b > fold_ratio * a * step_row[PEGASOS_WEIGHT_SUM];
        old_a = a;
        old_b = b;
        if (due) {
            sq_norm_v[c] = sq * a * a;
            a = 1.0;
            b = 0.0;
        }
        avg_b[c] = b;
        scale_a[c] = a;
    }
    __syncthreads();
    if (!due) return;  // uniform over the block
    real* v_c = v + (long long)c * v_stride;
    double* p_c = avg_p + (long long)c * v_stride;
    for (int j = threadIdx.x; j < v_stride; j += blockDim.x) {
        const double value = (double)v_c[j];
        p_c[j] += old_b * value;
        v_c[j] = (real)(value * old_a);
    }
}
