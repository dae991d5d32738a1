// Stochastic Batch Perceptron steps on the GPU, every problem in each launch
// (gpusvm/solvers/sbp/_cuda.py). After the water level (sbp_level.cu), a step is:
//   sbp_count_and_draw (k): for problems of at most 32,768 rows, the count and the draw
//                      below in one launch, a block a problem; else:
//   sbp_count_covered  (tiles, k): the rows at or under their basin's edge, per tile;
//   sbp_draw           (draws / 8, k): B rows per problem, uniformly among the covered
//                      ones in index order, one warp a draw, from the shared random
//                      stream (lane first_lane + b of the problem's seed at step t, as
//                      the NumPy path);
//   sbp_norm_step      (k): ||w||^2 after the step, from the old responses at the drawn
//                      rows and the B x B kernel values among them; adds eta / B to
//                      their alpha; the projection factor;
//   sbp_update         (blocks, k) of (32, 8): a thread per column and group of drawn
//                      rows: the combined kernel row g_j = 1/B sum_b y_b K(x_b, x_j),
//                      fused with the response update c_j += eta y_j g_j, the
//                      projection and the running sums.
// Each problem's columns, step size and stream are an SBPShape (sbp_level.cuh): the
// one-vs-rest problems of a fit share every row of X; the one-vs-one pairs each have
// their two classes' rows, found through a table of rows (SBPColumns), and a stopped
// pair is skipped by every launch. Kernel values come from a resident kernel matrix
// (computed once, in X's dtype), from a cache of its rows, or are computed from inner
// products of the drawn rows with every row (X's dtype): kernel_values.cuh. The step
// number and size are read from the schedule at the block's position
// (gpusvm/_device/step_blocks.py), so that a block of steps is the same launches every
// time. Responses, coefficients and sums are double.
#include "common.cuh"
#include "kernel_values.cuh"
#include "sbp_level.cuh"

#define SBP_TILE_ROWS 2048
#define SBP_DRAWS_PER_BLOCK 8  // one warp a draw
#define SBP_ONE_BLOCK_THREADS 1024                         // sbp_count_and_draw's block
#define SBP_ONE_BLOCK_CHUNKS SBP_ONE_BLOCK_THREADS          // chunks of 32 rows: one a thread in its scan
#define SBP_ONE_BLOCK_ROWS (32 * SBP_ONE_BLOCK_CHUNKS)      // 32,768
#define SBP_UPDATE_COLUMNS 32     // sbp_update's block: a warp of columns (threadIdx.x)...
#define SBP_UPDATE_ROW_GROUPS 8   // ... by warps over every 8th drawn row (threadIdx.y)

#define SBP_SCHEDULE_COLUMNS 2  // t, eta_t (times each problem's eta_scale)
// Drawn rows (a batch at most this) whose row of X and label the norm step and the update
// read once into shared memory, before their kernel values: the reads of those values
// then wait on nothing but the shared memory, and go out together (a read of a drawn row's
// position, then of its row, before each kernel value kept every one waiting on two
// global reads in turn: latency, several times the step's bandwidth floor; the figures are
// in docs/benchmarks.md, "Figures behind the code"). A larger batch reads them from global
// memory as before.
#define SBP_STAGED_ROWS 256

// The row of X (and of the kernel matrix) at each position of each problem: training
// column j at position j, holdout column v at train_stride + v. Without a table
// (stride 0), the position itself: one-vs-rest problems have every row of X, training
// rows first.
struct SBPColumns {
    const long long* rows;  // (k, stride)
    long long stride;

    __device__ long long operator()(int p, long long position) const {
        return stride ? rows[p * stride + position] : position;
    }
};
#define SBP_COLUMN_PARAMETERS const long long *__restrict__ column_rows, long long column_row_stride
#define SBP_COLUMNS_FROM_PARAMETERS SBPColumns{column_rows, column_row_stride}

// Each basin's edge, read once into registers: a copy of the whole SBPLevelState indexed
// by basin at run time would live in local memory (a load per row).
struct SBPEdges {
    double first, second;

    __device__ explicit SBPEdges(const SBPLevelState* state) : first(state->edge[0]), second(state->edge[1]) {}
    __device__ double operator[](int basin) const { return basin ? second : first; }
};

__device__ inline bool sbp_covered(const double* c, const double* y, long long j, int two_basins,
                                   const SBPEdges& edges) {
    return c[j] <= edges[level_basin(y, j, two_basins)];
}

// Covered training rows of problem blockIdx.y in tile blockIdx.x (rows of width `stride`).
extern "C" __global__ void sbp_count_covered(
        const double* __restrict__ responses, const double* __restrict__ labels, long long stride, int two_basins,
        const SBPShape* __restrict__ shapes, const SBPLevelState* __restrict__ states,
        long long* __restrict__ tile_counts) {
    const int p = blockIdx.y;
    if (!shapes[p].active) return;
    const long long n = shapes[p].n_train;
    const SBPEdges edges(states + p);
    const double* c = responses + p * stride;
    const double* y = labels + p * stride;
    const long long start = (long long)blockIdx.x * SBP_TILE_ROWS;
    const long long stop = min(n, start + SBP_TILE_ROWS);
    double count = 0.0;
    for (long long j = start + threadIdx.x; j < stop; j += blockDim.x) count += sbp_covered(c, y, j, two_basins, edges);
    count = gpusvm_block_sum(count);
    if (threadIdx.x == 0) tile_counts[(long long)p * gridDim.x + blockIdx.x] = (long long)count;
}

// Inclusive sum over a warp's lanes.
__device__ inline long long sbp_warp_scan(long long value, unsigned lane) {
    for (int offset = 1; offset < 32; offset <<= 1) {
        const long long other = __shfl_up_sync(0xffffffffu, value, offset);
        if (lane >= (unsigned)offset) value += other;
    }
    return value;
}

// Draw b = blockIdx.x * 8 + warp of problem blockIdx.y: the r-th covered row (index
// order) with r uniform in [0, covered count).
extern "C" __global__ void sbp_draw(
        const double* __restrict__ responses, const double* __restrict__ labels, long long stride, int two_basins,
        const SBPShape* __restrict__ shapes, const SBPLevelState* __restrict__ states,
        const long long* __restrict__ tile_counts, long long n_tiles, const double* __restrict__ schedule,
        const long long* __restrict__ position, int offset, int batch, long long* __restrict__ drawn) {
    const int p = blockIdx.y;
    const unsigned lane = threadIdx.x & 31u;
    const int b = blockIdx.x * SBP_DRAWS_PER_BLOCK + (threadIdx.x >> 5);
    const SBPShape shape = shapes[p];
    if (b >= batch || !shape.active) return;  // a whole warp
    const long long n = shape.n_train;
    const SBPEdges edges(states + p);
    const long long* counts = tile_counts + (long long)p * n_tiles;
    long long total = 0;
    for (long long i = lane; i < n_tiles; i += 32) total += counts[i];
    for (int shift = 16; shift > 0; shift >>= 1) total += __shfl_xor_sync(0xffffffffu, total, shift);
    const unsigned long long step = (unsigned long long)gpusvm_schedule_row(schedule, SBP_SCHEDULE_COLUMNS, position, offset)[0];
    long long r = gpusvm_random_index(shape.seed, step, shape.first_lane + b, (unsigned long long)total);
    long long tile = 0, seen = 0;  // the tile holding the r-th covered row, and the rows before it
    for (long long base = 0; base < n_tiles; base += 32) {
        const long long count = base + lane < n_tiles ? counts[base + lane] : 0;
        const long long through = seen + sbp_warp_scan(count, lane);
        const unsigned past = __ballot_sync(0xffffffffu, through > r);
        if (past) {
            const int first = __popc((past & -past) - 1u);  // lowest lane past r
            tile = base + first;
            seen = __shfl_sync(0xffffffffu, through - count, first);
            break;
        }
        seen = __shfl_sync(0xffffffffu, through, 31);
    }
    r -= seen;
    const double* c = responses + p * stride;
    const double* y = labels + p * stride;
    const long long start = tile * SBP_TILE_ROWS, stop = min(n, start + SBP_TILE_ROWS);
    for (long long base = start; base < stop; base += 32) {
        const long long j = base + lane;
        const bool covered = j < stop && sbp_covered(c, y, j, two_basins, edges);
        const unsigned ballot = __ballot_sync(0xffffffffu, covered);
        const long long here = __popc(ballot);
        if (r < here) {
            if (covered && __popc(ballot & ((1u << lane) - 1u)) == r) drawn[(long long)p * batch + b] = j;
            return;
        }
        r -= here;
    }
}

// Problems of at most SBP_ONE_BLOCK_ROWS training rows: the count and the draws in one
// launch, a block of SBP_ONE_BLOCK_THREADS a problem, with no other block to wait for.
// Each warp ballots chunks of 32 rows (the covered ones' bits) into shared memory in one
// pass, the block scans the chunks' counts, and draw b finds the chunk that holds its
// r-th covered row by a binary search over the scan, and the row among the chunk's bits:
// the row sbp_draw draws, with no read of the responses after the pass. (Inline: the CPU
// emulation of CUDA keeps every __shared__ of a source in inline functions or in plain
// ones, not both.)
__device__ inline void sbp_count_and_draw_block(
        const double* __restrict__ responses, const double* __restrict__ labels, long long stride, int two_basins,
        const SBPShape* __restrict__ shapes, const SBPLevelState* __restrict__ states,
        const double* __restrict__ schedule, const long long* __restrict__ position, int offset, int batch,
        long long* __restrict__ drawn) {
    __shared__ unsigned int covered_bits[SBP_ONE_BLOCK_CHUNKS];  // chunk i: rows 32 i to 32 i + 31
    __shared__ int covered_before[SBP_ONE_BLOCK_CHUNKS];         // covered rows in the chunks before
    __shared__ long long warp_before[32], covered_total;
    const int p = blockIdx.x;
    const SBPShape shape = shapes[p];
    if (!shape.active) return;  // the whole block
    const int n = (int)shape.n_train, chunks = (n + 31) / 32;  // n <= SBP_ONE_BLOCK_ROWS (the launcher's check)
    const SBPEdges edges(states + p);
    const double* c = responses + p * stride;
    const double* y = labels + p * stride;
    const unsigned lane = threadIdx.x & 31u;
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5, t = threadIdx.x;
    for (int chunk = warp; chunk < chunks; chunk += warps) {  // a whole warp a chunk
        const long long j = 32LL * chunk + lane;
        const unsigned bits = __ballot_sync(0xffffffffu, j < n && sbp_covered(c, y, j, two_basins, edges));
        if (lane == 0) covered_bits[chunk] = bits;
    }
    __syncthreads();
    // Exclusive scan of the chunks' counts, a chunk a thread (chunks <= blockDim.x).
    const long long count = t < chunks ? __popc(covered_bits[t]) : 0;
    const long long through = sbp_warp_scan(count, lane);
    if (lane == 31) warp_before[warp] = through;  // the warp's total, for now
    __syncthreads();
    if (warp == 0) {
        const long long total = lane < (unsigned)warps ? warp_before[lane] : 0;
        const long long running = sbp_warp_scan(total, lane);
        warp_before[lane] = running - total;
        if (lane == 31) covered_total = running;
    }
    __syncthreads();
    if (t < chunks) covered_before[t] = (int)(warp_before[warp] + through - count);
    __syncthreads();
    const unsigned long long step = (unsigned long long)gpusvm_schedule_row(schedule, SBP_SCHEDULE_COLUMNS, position, offset)[0];
    for (int b = t; b < batch; b += blockDim.x) {
        const long long r = gpusvm_random_index(shape.seed, step, shape.first_lane + b, (unsigned long long)covered_total);
        // The last chunk with covered_before <= r holds it: an empty chunk there would
        // leave the same count to the next one, or to the total (> r) at the end.
        int low = 0, high = chunks - 1;
        while (low < high) {
            const int middle = (low + high + 1) / 2;
            if (covered_before[middle] <= r) low = middle;
            else high = middle - 1;
        }
        unsigned bits = covered_bits[low];
        for (long long skip = r - covered_before[low]; skip > 0; --skip) bits &= bits - 1u;  // drop the lowest
        drawn[(long long)p * batch + b] = 32LL * low + __popc((bits & -bits) - 1u);  // the lowest left
    }
}

// One block (SBP_ONE_BLOCK_THREADS) per problem (blockIdx.x): sbp_count_covered and
// sbp_draw in one launch, for problems of at most SBP_ONE_BLOCK_ROWS training rows.
extern "C" __global__ void sbp_count_and_draw(
        const double* __restrict__ responses, const double* __restrict__ labels, long long stride, int two_basins,
        const SBPShape* __restrict__ shapes, const SBPLevelState* __restrict__ states,
        const double* __restrict__ schedule, const long long* __restrict__ position, int offset, int batch,
        long long* __restrict__ drawn) {
    sbp_count_and_draw_block(responses, labels, stride, two_basins, shapes, states, schedule, position, offset, batch,
                             drawn);
}

// One block per problem (blockIdx.x); rows of width `stride`.
template <typename real>
__global__ void sbp_norm_step(
        KERNEL_VALUE_PARAMETERS, SBP_COLUMN_PARAMETERS, const long long* __restrict__ drawn,
        const double* __restrict__ labels, const double* __restrict__ responses, double* __restrict__ alpha,
        double* __restrict__ r2, double* __restrict__ factor, long long stride, int batch,
        const SBPShape* __restrict__ shapes, const double* __restrict__ schedule,
        const long long* __restrict__ position, int offset) {
    const KernelValues<real> kernel_values = KERNEL_VALUES_FROM_PARAMETERS;
    const SBPColumns columns = SBP_COLUMNS_FROM_PARAMETERS;
    const int p = blockIdx.x;
    if (!shapes[p].active) return;  // the whole block
    const long long first = (long long)p * batch, n = stride;
    const double* y = labels + p * n;
    const double eta = gpusvm_schedule_row(schedule, SBP_SCHEDULE_COLUMNS, position, offset)[1] * shapes[p].eta_scale;
    __shared__ long long rows[SBP_STAGED_ROWS];  // the drawn rows' rows of X...
    __shared__ double signs[SBP_STAGED_ROWS];    // ... and labels
    double gram = 0.0, old = 0.0;  // sum_{b, b'} y_b y_b' K_bb' and sum_b c_b
    if (batch <= SBP_STAGED_ROWS) {  // the same sums, in the same order, as below
        for (int b = threadIdx.x; b < batch; b += blockDim.x) {
            const long long i = drawn[first + b];
            rows[b] = columns(p, i);
            signs[b] = y[i];
            old += responses[p * n + i];
        }
        __syncthreads();
#pragma unroll 8
        for (int pair = threadIdx.x; pair < batch * batch; pair += blockDim.x) {
            const int b = pair / batch, c = pair - b * batch;
            gram += signs[b] * signs[c] * kernel_values(first + b, rows[b], rows[c]);
        }
    } else {
        for (int pair = threadIdx.x; pair < batch * batch; pair += blockDim.x) {
            const int b = pair / batch, c = pair - b * batch;
            const long long i = drawn[first + b], j = drawn[first + c];
            gram += y[i] * y[j] * kernel_values(first + b, columns(p, i), columns(p, j));
        }
        for (int b = threadIdx.x; b < batch; b += blockDim.x) old += responses[p * n + drawn[first + b]];
    }
    gram = gpusvm_block_sum(gram);
    old = gpusvm_block_sum(old);
    if (threadIdx.x == 0) {
        const double B = (double)batch;
        const double norm = r2[p] + 2.0 * eta * old / B + eta * eta * gram / (B * B);
        factor[p] = norm > 1.0 ? 1.0 / sqrt(norm) : 1.0;
        r2[p] = fmin(norm, 1.0);
    }
    for (int b = threadIdx.x; b < batch; b += blockDim.x)
        atomicAdd(&alpha[p * n + drawn[first + b]], eta / (double)batch);
}

// Columns j of the problem's n_train + n_holdout (grid-stride over blockIdx.x, 32 a
// block) of problem blockIdx.y: training rows of width `train_stride`, holdout rows of
// width `holdout_stride`. A block is 32 columns (threadIdx.x: a warp reads 32 consecutive
// values of a kernel row) by SBP_UPDATE_ROW_GROUPS warps (threadIdx.y), each over every
// SBP_UPDATE_ROW_GROUPS-th drawn row: a thread has B / 8 reads to wait on, not B, and all
// of a step's rows are in flight at once even when the columns are too few to fill the
// device; with the drawn rows staged in shared memory (SBP_STAGED_ROWS) a thread's reads
// go out together. The groups' sums are added in a fixed order (the same on every run).
template <typename real>
__global__ void sbp_update(
        KERNEL_VALUE_PARAMETERS, SBP_COLUMN_PARAMETERS, const long long* __restrict__ drawn,
        const double* __restrict__ labels, const double* __restrict__ factors, double* __restrict__ responses,
        double* __restrict__ response_sum, double* __restrict__ alpha, double* __restrict__ alpha_sum,
        double* __restrict__ holdout, double* __restrict__ holdout_sum, long long holdout_stride, int batch,
        long long train_stride, const SBPShape* __restrict__ shapes, const double* __restrict__ schedule,
        const long long* __restrict__ position, int offset) {
    __shared__ double group_sums[SBP_UPDATE_ROW_GROUPS][SBP_UPDATE_COLUMNS];
    const KernelValues<real> kernel_values = KERNEL_VALUES_FROM_PARAMETERS;
    const SBPColumns columns = SBP_COLUMNS_FROM_PARAMETERS;
    const int p = blockIdx.y, lane = threadIdx.x, group = threadIdx.y;
    const SBPShape shape = shapes[p];
    if (!shape.active) return;  // the whole block
    const long long first = (long long)p * batch, n_train = shape.n_train, n_total = n_train + shape.n_holdout;
    const double* y = labels + p * train_stride;
    const double eta = gpusvm_schedule_row(schedule, SBP_SCHEDULE_COLUMNS, position, offset)[1] * shape.eta_scale;
    const double factor = factors[p];
    __shared__ long long rows[SBP_STAGED_ROWS];  // the drawn rows' rows of X...
    __shared__ double signs[SBP_STAGED_ROWS];    // ... and labels
    const bool staged = batch <= SBP_STAGED_ROWS;
    if (staged) {
        for (int b = group * SBP_UPDATE_COLUMNS + lane; b < batch; b += SBP_UPDATE_COLUMNS * SBP_UPDATE_ROW_GROUPS) {
            const long long i = drawn[first + b];
            rows[b] = columns(p, i);
            signs[b] = y[i];
        }
        __syncthreads();
    }
    // Every thread of the block runs the same iterations: the barriers see the whole block.
    for (long long base = blockIdx.x * (long long)SBP_UPDATE_COLUMNS; base < n_total;
         base += (long long)gridDim.x * SBP_UPDATE_COLUMNS) {
        const long long j = base + lane;
        double g = 0.0;
        if (j < n_total) {
            const long long column = columns(p, j < n_train ? j : train_stride + j - n_train);
            if (staged) {
#pragma unroll 8
                for (int b = group; b < batch; b += SBP_UPDATE_ROW_GROUPS)
                    g += signs[b] * kernel_values(first + b, rows[b], column);
            } else {
                for (int b = group; b < batch; b += SBP_UPDATE_ROW_GROUPS) {
                    const long long i = drawn[first + b];
                    g += y[i] * kernel_values(first + b, columns(p, i), column);
                }
            }
        }
        group_sums[group][lane] = g;
        __syncthreads();
        if (group == 0 && j < n_total) {
            g = 0.0;
            for (int r = 0; r < SBP_UPDATE_ROW_GROUPS; ++r) g += group_sums[r][lane];
            g /= (double)batch;
            if (j < n_train) {
                const long long at = p * train_stride + j;
                const double c = (responses[at] + eta * y[j] * g) * factor;
                responses[at] = c;
                response_sum[at] += c;
                const double a = alpha[at] * factor;
                alpha[at] = a;
                alpha_sum[at] += a;
            } else {
                const long long v = p * holdout_stride + j - n_train;
                const double h = (holdout[v] + eta * g) * factor;
                holdout[v] = h;
                holdout_sum[v] += h;
            }
        }
        __syncthreads();  // group_sums is written again by the next columns
    }
}
