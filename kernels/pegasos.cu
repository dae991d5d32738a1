// One mini-batch Pegasos step on the device, in three launches (see
// gpusvm/solvers/pegasos/_cuda.py for the order and docs/algorithms.md section 1 for the math).
//
// The weights of class c are w_c = a_c * v_c (the `w = a*v` trick): shrinking w by
// (1 - 1/t) changes only the scalar a_c, and adding the violators' y*x touches only their
// nonzeros.  Column n_features of v (when fit_intercept) is the bias, a weight on an
// implicit constant feature of value 1.  Averaging keeps sum_s w_s = P + B * v, so that a
// change dv of v costs P -= B * dv on the same coordinates and nothing more.
#include "common.cuh"

// A step's values, a row of the schedule that the host computes before the steps run
// (gpusvm/solvers/pegasos/__init__.py, pegasos_schedule); step `offset` of a block of
// steps reads row position[0] + offset (gpusvm/_device/step_blocks.py).
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

// The pieces of a step that the per-phase kernels (1-3) and the fused steps (4) share.

// Batch lane `lane`'s row: given rows (gpusvm.dask gathers each block's rows in draw
// order, so lane j of the step reads row given_first_row + j), else drawn from the
// shared random stream.
__device__ inline long long pegasos_batch_row(const double* step_row, unsigned long long seed,
                                              unsigned long long lane, long long n_samples) {
    const unsigned long long step = (unsigned long long)step_row[PEGASOS_STEP];
    const long long given_first_row = (long long)step_row[PEGASOS_GIVEN_FIRST_ROW];
    return given_first_row >= 0 ? given_first_row + (long long)lane
                                : gpusvm_random_index(seed, step, lane, n_samples);
}

// A (row, class) pair's coefficient (eta/k) * s_i * y_ic when it violates the margin, else 0.
__device__ inline double pegasos_coefficient(double dot, double bias, double y, double scale_a,
                                             double eta_over_k, double weight) {
    const double margin = y * scale_a * (dot + bias);
    return margin < 1.0 ? eta_over_k * weight * y : 0.0;
}

// Term q of a violating row (its nonzeros, then the bias): v_c += factor * x on its
// column, and the average's P -= B * dv there; returns the change of ||v_c||^2 it makes
// (new^2 - old^2 of the atomic's own update, so the changes telescope exactly).
template <typename real>
__device__ inline double pegasos_add_term(const RowView<real>& rows, long long begin, long long end, long long q,
                                          int n_features, double factor, real* v_c,
                                          bool averaging, double b_c, double* p_c) {
    const long long p = begin + q;
    const bool is_bias = p >= end;
    const int column = is_bias ? n_features : rows.column(p, begin);
    const real delta = (real)(factor * (is_bias ? 1.0 : (double)rows.data[p]));
    const real old = atomicAdd(&v_c[column], delta);
    const real updated = old + delta;  // what the atomic stored (same IEEE rounding)
    if (averaging) atomicAdd(&p_c[column], -b_c * (double)delta);
    return (double)updated * (double)updated - (double)old * (double)old;
}

// A class's scalars at the end of a step: shrink a, project onto the ball of radius
// 1/sqrt(lambda) (radius <= 0: no projection), add average_weight * a to B.  Updates
// a, ||v||^2 and B in place and returns whether the maintenance is due; when it is,
// (*old_a, *old_b) are the a and B to fold with (P += B v, v *= a) and the scalars are
// already those after it (a = 1, B = 0, ||v||^2 *= a^2).
__device__ inline bool pegasos_finish_scalars(const double* step_row, double radius, double fold_ratio,
                                              double renormalize_below, double* scale_a, double* sq_norm_v,
                                              double* avg_b, double* old_a, double* old_b) {
    double a = *scale_a * step_row[PEGASOS_STEP_SCALE];
    const double sq = fmax(*sq_norm_v, 0.0);
    if (radius > 0.0) {
        const double norm_w = a * sqrt(sq);
        if (norm_w > radius) a *= radius / norm_w;
    }
    double b = *avg_b + step_row[PEGASOS_AVERAGE_WEIGHT] * a;
    const bool due = a < renormalize_below || b > fold_ratio * a * step_row[PEGASOS_WEIGHT_SUM];
    *old_a = a;
    *old_b = b;
    if (due) {
        *sq_norm_v = sq * a * a;
        a = 1.0;
        b = 0.0;
    }
    *avg_b = b;
    *scale_a = a;
    return due;
}

// The maintenance's pass over a class's weights, entries first, first + stride, ...
template <typename real>
__device__ inline void pegasos_fold(real* v_c, double* p_c, int v_stride, double old_a, double old_b,
                                    int first, int stride) {
    for (int j = first; j < v_stride; j += stride) {
        const double value = (double)v_c[j];
        p_c[j] += old_b * value;
        v_c[j] = (real)(value * old_a);
    }
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
    const double eta_over_k = step_row[PEGASOS_ETA_OVER_K];
    const long long row = pegasos_batch_row(step_row, seed, blockIdx.x, n_samples);
    if (threadIdx.x == 0) batch_index[blockIdx.x] = row;
    const long long begin = rows.begin(row), end = rows.end(row);
    const double weight = (double)sample_weight[row];
    for (int c = 0; c < n_classes; ++c) {
        const real* v_c = v + (long long)c * v_stride;
        double partial = 0.0;
        for (long long p = begin + threadIdx.x; p < end; p += blockDim.x)
            partial += (double)data[p] * (double)v_c[rows.column(p, begin)];
        const double dot = gpusvm_block_sum(partial);
        if (threadIdx.x == 0)
            coef[blockIdx.x * (long long)n_classes + c] = pegasos_coefficient(
                dot, fit_intercept ? (double)v_c[n_features] : 0.0, (double)targets[row * n_classes + c],
                scale_a[c], eta_over_k, weight);
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
    for (long long q = threadIdx.x; q < n_terms; q += blockDim.x)
        sq_change += pegasos_add_term(rows, begin, end, q, n_features, factor, v_c, averaging, b_c, p_c);
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
    if (threadIdx.x == 0)
        due = pegasos_finish_scalars(pegasos_step_row(schedule, position, offset), radius, fold_ratio,
                                     renormalize_below, &scale_a[c], &sq_norm_v[c], &avg_b[c], &old_a, &old_b);
    __syncthreads();
    if (!due) return;  // uniform over the block
    pegasos_fold(v + (long long)c * v_stride, avg_p + (long long)c * v_stride, v_stride, old_a, old_b,
                 threadIdx.x, blockDim.x);
}

// 4. Steps fused: `length` whole steps (schedule rows position + offset ...) in one
//    launch of one block, the same steps 1-3 take.  With small batches a step is a few
//    kilobytes of work and its three launches cost more than the work; here a step costs
//    its memory latencies and a few barriers.  The step's coefficients, rows and each
//    class's scalars (a, ||v||^2, B) stay in shared memory from step to step.  A group of
//    lanes per batch row computes margins, a group per violating (row, class) pair adds
//    it, then a thread per class finishes.  The groups are as wide as lets every row (or
//    pair) have its own, up to a warp, so that all rows' memory reads are in flight at
//    once.  A row group keeps its row from step to step and reads the next step's row
//    one step ahead (its bounds at the start of a step, its first entries during the
//    update), so a step's margins wait on the weights alone for short rows.  Needs
//    batch_size <= blockDim.x, batch_size <= PEGASOS_FUSED_MAX_BATCH, n_classes <=
//    PEGASOS_FUSED_MAX_CLASSES and their product <= PEGASOS_FUSED_MAX_PAIRS (the launcher
//    checks: gpusvm/solvers/pegasos/__init__.py, fits_fused_steps); blockDim.x a multiple of 32.
#define PEGASOS_FUSED_MAX_BATCH 1024
#define PEGASOS_FUSED_MAX_CLASSES 64
#define PEGASOS_FUSED_MAX_PAIRS 2048

// Lanes per group when `count` items share the block: the widest power of two up to 32
// that still gives every item a group of its own (1 when there are more items than threads).
__device__ inline int pegasos_group_lanes(int count) {
    int lanes = 32;
    while (lanes > 1 && (int)blockDim.x / lanes < count) lanes >>= 1;
    return lanes;
}

// Sum over each group of `lanes` consecutive lanes (a power of two); all 32 lanes of the
// warp call it, and every lane gets its group's sum (the same bits on every lane: each
// butterfly stage adds the same two values on both sides).
__device__ inline double pegasos_group_sum(double value, int lanes) {
    for (int offset = lanes >> 1; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
    return value;
}

// A lane's first entry of a row, when the row reaches that far (read ahead of its use).
template <typename real>
__device__ inline void pegasos_first_entry(const RowView<real>& rows, long long begin, long long end, int lane,
                                           real* value, int* column) {
    if (begin + lane < end) {
        *value = rows.data[begin + lane];
        *column = rows.column(begin + lane, begin);
    }
}

template <typename real>
__global__ void GPUSVM_MAX_THREADS(PEGASOS_FUSED_MAX_BATCH) pegasos_fused_steps(
        const real* __restrict__ data, const int* __restrict__ indices,
        const int* __restrict__ indptr, int is_csr, long long n_samples, int n_features,
        const real* __restrict__ targets, const real* __restrict__ sample_weight,
        int n_classes, int v_stride, int fit_intercept, unsigned long long seed,
        const double* __restrict__ schedule, const long long* __restrict__ position, int offset,
        int length, int batch_size, double radius, double fold_ratio, double renormalize_below,
        double* __restrict__ scale_a, double* __restrict__ sq_norm_v, double* __restrict__ avg_b,
        real* __restrict__ v, double* __restrict__ avg_p) {
    __shared__ double coef[PEGASOS_FUSED_MAX_PAIRS];
    __shared__ long long batch_rows[PEGASOS_FUSED_MAX_BATCH];
    __shared__ double class_a[PEGASOS_FUSED_MAX_CLASSES], class_sq[PEGASOS_FUSED_MAX_CLASSES];
    __shared__ double class_b[PEGASOS_FUSED_MAX_CLASSES];
    __shared__ double fold_a[PEGASOS_FUSED_MAX_CLASSES], fold_b[PEGASOS_FUSED_MAX_CLASSES];
    __shared__ int due[PEGASOS_FUSED_MAX_CLASSES];
    const RowView<real> rows{data, indices, indptr, n_features, is_csr};
    const int n_pairs = batch_size * n_classes;
    // Rows: a group of row_lanes lanes each (one round: blockDim.x >= batch_size); pairs:
    // groups of pair_lanes, in rounds that the whole block takes, so every lane of a warp
    // reaches each shuffle (a group with no item adds nothing).
    const int row_lanes = pegasos_group_lanes(batch_size), pair_lanes = pegasos_group_lanes(n_pairs);
    const int j = threadIdx.x / row_lanes, row_lane = threadIdx.x & (row_lanes - 1);
    const int pair_group = threadIdx.x / pair_lanes, pair_lane = threadIdx.x & (pair_lanes - 1);
    const int pair_groups = blockDim.x / pair_lanes;
    const bool has_row = j < batch_size;
    for (int c = threadIdx.x; c < n_classes; c += blockDim.x) {
        class_a[c] = scale_a[c];
        class_sq[c] = sq_norm_v[c];
        class_b[c] = avg_b[c];
    }
    // This group's row of the first step, its bounds and this lane's first entry.
    long long row = 0, begin = 0, end = 0;
    real first_value = 0;
    int first_column = 0;
    if (has_row && length > 0) {
        row = pegasos_batch_row(pegasos_step_row(schedule, position, offset), seed, j, n_samples);
        begin = rows.begin(row);
        end = rows.end(row);
        pegasos_first_entry(rows, begin, end, row_lane, &first_value, &first_column);
    }
    __syncthreads();
    for (int s = 0; s < length; ++s) {
        const double* step_row = pegasos_step_row(schedule, position, offset + s);
        // The next step's row and its bounds: loads in flight while this step runs.
        long long next_row = 0, next_begin = 0, next_end = 0;
        if (has_row && s + 1 < length) {
            next_row = pegasos_batch_row(pegasos_step_row(schedule, position, offset + s + 1), seed, j, n_samples);
            next_begin = rows.begin(next_row);
            next_end = rows.end(next_row);
        }
        // Margins under the step's starting weights.
        for (int c = 0; c < n_classes; ++c) {
            const real* v_c = v + (long long)c * v_stride;
            double y = 0.0, weight = 0.0, partial = 0.0;
            if (has_row) {
                y = (double)targets[row * n_classes + c];
                weight = (double)sample_weight[row];
                if (begin + row_lane < end) partial = (double)first_value * (double)v_c[first_column];
            }
            for (long long p = begin + row_lane + row_lanes; p < end; p += row_lanes)
                partial += (double)data[p] * (double)v_c[rows.column(p, begin)];
            const double dot = pegasos_group_sum(partial, row_lanes);
            if (has_row && row_lane == 0)
                coef[j * n_classes + c] = pegasos_coefficient(dot, fit_intercept ? (double)v_c[n_features] : 0.0, y,
                                                              class_a[c], step_row[PEGASOS_ETA_OVER_K], weight);
        }
        if (has_row && row_lane == 0) batch_rows[j] = row;
        __syncthreads();
        // The next step's first entries, read while the update runs.
        row = next_row;
        begin = next_begin;
        end = next_end;
        pegasos_first_entry(rows, begin, end, row_lane, &first_value, &first_column);
        // Accumulate the violating pairs.
        const bool averaging = step_row[PEGASOS_AVERAGE_WEIGHT] > 0.0;
        for (int first = 0; first < n_pairs; first += pair_groups) {
            const int pair = first + pair_group;
            const double coefficient = pair < n_pairs ? coef[pair] : 0.0;
            const int c = pair % n_classes;
            long long pair_begin = 0, pair_end = 0, n_terms = 0;
            if (coefficient != 0.0) {
                const long long pair_row = batch_rows[pair / n_classes];
                pair_begin = rows.begin(pair_row);
                pair_end = rows.end(pair_row);
                n_terms = (pair_end - pair_begin) + (fit_intercept ? 1 : 0);
            }
            const double factor = n_terms ? coefficient / (class_a[c] * step_row[PEGASOS_STEP_SCALE]) : 0.0;
            const double b_c = averaging && n_terms ? class_b[c] : 0.0;
            real* v_c = v + (long long)c * v_stride;
            double* p_c = avg_p + (long long)c * v_stride;
            double sq_change = 0.0;
            for (long long q = pair_lane; q < n_terms; q += pair_lanes)
                sq_change += pegasos_add_term(rows, pair_begin, pair_end, q, n_features, factor, v_c, averaging, b_c,
                                              p_c);
            sq_change = pegasos_group_sum(sq_change, pair_lanes);
            if (n_terms && pair_lane == 0) atomicAdd(&class_sq[c], sq_change);
        }
        __syncthreads();
        // Finish: a thread per class; then the due classes' passes over their weights.
        for (int c = threadIdx.x; c < n_classes; c += blockDim.x)
            due[c] = pegasos_finish_scalars(step_row, radius, fold_ratio, renormalize_below, &class_a[c],
                                            &class_sq[c], &class_b[c], &fold_a[c], &fold_b[c]);
        __syncthreads();
        bool folded = false;
        for (int c = 0; c < n_classes; ++c) {
            if (!due[c]) continue;  // shared, read after the barrier: uniform over the block
            pegasos_fold(v + (long long)c * v_stride, avg_p + (long long)c * v_stride, v_stride, fold_a[c],
                         fold_b[c], threadIdx.x, blockDim.x);
            folded = true;
        }
        if (folded) __syncthreads();  // the next step's margins read the folded weights
    }
    for (int c = threadIdx.x; c < n_classes; c += blockDim.x) {
        scale_a[c] = class_a[c];
        sq_norm_v[c] = class_sq[c];
        avg_b[c] = class_b[c];
    }
}
