// SBP water levels of every problem at once, with or without the bias, and no sort
// (gpusvm/water_level/_sbp_level_cuda.py).
//
// Problem p's responses are the first n_train (its SBPShape) of row p of a (k, stride)
// array; a stopped problem (not active) is skipped. With the bias they fall in two
// basins (positives, negatives), without it in one. With u_K the sum over the basins of
// each one's K-th smallest response and U_K the sum of those K smallest, the water
// covers the k* lowest of each basin, k* = max { K : K u_K - U_K <= volume }, and the
// level is (volume + U_k*) / k* (halved with the bias); water_level.py has the proof
// and the sort-based oracle this must equal.
//
// The level moves little from one step to the next, so each basin keeps a window of
// values [lo, hi) around its last k*-th response:
//   sbp_level_gather  (blocks, k): counts and sums the responses below each window and
//                     appends those inside it to a buffer (one pass over the responses);
//   sbp_level_solve   (k): one block sorts each basin's window in shared memory (at most
//                     LEVEL_WINDOW values), and reads k* off the ranks the windows share
//                     when the criterion holds at the first shared rank and fails inside
//                     them; then sets the next step's windows around k*.
// When a window misses (k* outside it, or too many values in it) the solve moves it, and
// a second gather and solve run; when that misses too, the last solve finds k* by a
// bisection over ranks, each rank a radix select by the same block (slow: 20 ms at 1e5
// rows on an H200, one block's passes over the responses, measured with a warp's adds
// combined, before the runs of level_select; and not rare there: 32% to
// 58% of the levels of 10 one-vs-rest problems of 1e5 rows, 6% to 38% of a binary one's,
// whose rank order moves more than the windows' 2 x 256 ranks a step). So a level costs
// four launches whatever the number of problems, with no host synchronisation; the state
// of each problem lives in device memory (SBPLevelState).
#include "common.cuh"
#include "sbp_level.cuh"

#define LEVEL_WINDOW 2048      // values of one basin one block sorts
#define LEVEL_HALF_RANKS 256   // ranks on each side of k* the next window is built from
#define LEVEL_RADIX_BITS 8
#define LEVEL_INF __longlong_as_double(0x7ff0000000000000LL)
#define LEVEL_NO_RANK 0x7fffffffffffffffLL


// One pass over problem blockIdx.y's responses (grid-stride over blockIdx.x); nothing
// once an earlier round of this search has settled it, or for a stopped problem.
extern "C" __global__ void sbp_level_gather(
        const double* __restrict__ responses, const double* __restrict__ labels, long long label_stride,
        long long row_stride, int two_basins, const SBPShape* __restrict__ shapes,
        SBPLevelState* __restrict__ states, double* __restrict__ windows) {
    const int p = blockIdx.y;
    SBPLevelState* state = states + p;
    if (state->done || !shapes[p].active) return;
    const long long n = shapes[p].n_train;
    const double* c = responses + p * row_stride;
    const double* y = labels + p * label_stride;
    // Per basin, in registers (a basin chosen by a conditional, never a run-time index,
    // which would put them in local memory).
    const double lo0 = state->lo[0], lo1 = state->lo[1], hi0 = state->hi[0], hi1 = state->hi[1];
    double count0 = 0.0, count1 = 0.0, sum0 = 0.0, sum1 = 0.0;
    const unsigned lane = threadIdx.x & 31u;
    const long long stride = (long long)gridDim.x * blockDim.x;
    // Every thread of a warp runs the same number of iterations: the ballots see the whole warp.
    const long long rounds_up = (n + stride - 1) / stride * stride;
    for (long long base = 0; base < rounds_up; base += stride) {
        const long long j = base + blockIdx.x * (long long)blockDim.x + threadIdx.x;
        int in_window = -1;
        double value = 0.0;
        if (j < n) {
            value = c[j];
            const int b = level_basin(y, j, two_basins);
            if (value < (b ? lo1 : lo0)) {
                if (b) {
                    count1 += 1.0;
                    sum1 += value;
                } else {
                    count0 += 1.0;
                    sum0 += value;
                }
            } else if (value < (b ? hi1 : hi0)) {
                in_window = b;
            }
        }
        for (int b = 0; b < 2; ++b) {
            const unsigned ballot = __ballot_sync(0xffffffffu, in_window == b);
            if (!ballot) continue;
            long long first = 0;
            if (lane == 0)
                first = (long long)atomicAdd((unsigned long long*)&state->gathered[b], (unsigned long long)__popc(ballot));
            first = __shfl_sync(0xffffffffu, first, 0);
            const long long slot = first + __popc(ballot & ((1u << lane) - 1u));
            if (in_window == b && slot < LEVEL_WINDOW) windows[(2LL * p + b) * LEVEL_WINDOW + slot] = value;
        }
    }
    for (int b = 0; b < 2; ++b) {
        const double block_count = gpusvm_block_sum(b ? count1 : count0);
        const double block_sum = gpusvm_block_sum(b ? sum1 : sum0);
        if (threadIdx.x == 0 && block_count > 0.0) {
            atomicAdd((unsigned long long*)&state->below[b], (unsigned long long)block_count);
            atomicAdd(&state->below_sum[b], block_sum);
        }
    }
}

// What the solve found (shared by the block).
struct LevelAnswer {
    long long covered;        // k*
    double covered_sum;       // U_k*
    double kth[2], next[2];   // each basin's k*-th and (k* + 1)-th response (inf past its end)
    double lowest;            // the smallest response (one basin; -inf when not known)
    double window_lo[2], window_hi[2];  // ranks k* -/+ LEVEL_HALF_RANKS (for the next window)
    int found;                // 0: not found; 1: by the windows; 2: by the bisection
};

// Level, bias and edges from k* and U_k* (water_level.py: find_gamma_and_bias_sorted and
// _bias_and_edges; without the bias, the covered rows are those <= max(level, lowest)).
__device__ inline void level_write(SBPLevelState* state, const LevelAnswer& a, double volume, int two_basins) {
    const double total = (volume + a.covered_sum) / (double)a.covered;
    state->covered = a.covered;
    if (two_basins) {
        const double low = fmax(a.kth[0], total - a.next[1]);
        const double high = fmin(a.next[0], total - a.kth[1]);
        const double g_plus = (low + high) / 2.0;
        state->level = total / 2.0;
        state->bias = (total - 2.0 * g_plus) / 2.0;
        state->edge[0] = fmin(fmax(g_plus, a.kth[0]), a.next[0]);
        state->edge[1] = fmin(fmax(total - g_plus, a.kth[1]), a.next[1]);
    } else {
        const double level = volume == 0.0 ? a.lowest : total;  // volume 0: exactly the lowest
        state->level = level;
        state->bias = 0.0;
        state->edge[0] = fmax(level, a.lowest);
        state->edge[1] = 0.0;
    }
}

// The sort's width: the least power of two at or above every basin's count (at most
// LEVEL_WINDOW). A window usually holds about 2 x 2 LEVEL_HALF_RANKS values (its ranks'
// span widened by half on each side), far fewer early on or with few rows, so sorting
// this prefix instead of all LEVEL_WINDOW slots saves barrier stages and exchanges.
__device__ inline int level_sort_width(const long long* count) {
    int width = 1;
    while (width < count[0] || width < count[1]) width <<= 1;
    return width;
}

// Sorts the first `count` of each basin's values ascending, in the first `width` slots
// (level_sort_width; the slots from count to width set to +inf): a bitonic network of
// log2(width) (log2(width) + 1) / 2 stages. Every thread of the block calls it.
__device__ inline void level_sort(double (*values)[LEVEL_WINDOW], const long long* count, int width) {
    for (int i = threadIdx.x; i < 2 * width; i += blockDim.x) {
        const int b = i / width, slot = i % width;
        if (slot >= count[b]) values[b][slot] = LEVEL_INF;
    }
    const int pairs = width / 2;  // of a basin, per stage
    for (int size = 2; size <= width; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int pair = threadIdx.x; pair < 2 * pairs; pair += blockDim.x) {  // both basins
                const int b = pair / pairs, half = pair % pairs;
                const int i = 2 * stride * (half / stride) + half % stride, j = i + stride;
                const bool ascending = (i & size) == 0;
                const double x = values[b][i], z = values[b][j];
                if ((x > z) == ascending) {
                    values[b][i] = z;
                    values[b][j] = x;
                }
            }
        }
    }
    __syncthreads();
}

// Inclusive sum over a warp's lanes (every lane of the warp calls it).
__device__ inline double level_warp_scan(double value, unsigned lane) {
    for (int offset = 1; offset < 32; offset <<= 1) {
        const double other = __shfl_up_sync(0xffffffffu, value, offset);
        if (lane >= (unsigned)offset) value += other;
    }
    return value;
}

// In place: values[b][i] becomes the sum of values[b][0..i], for i < count[b]; every
// thread of the block calls it. Runs past count[b] are skipped (they would add zeros
// after every value that is read). A block scan: each warp sums runs of 32 values by
// shuffles, one thread a basin adds up the runs' totals (64 a basin), and every value
// gets the total of the runs before its own. A fixed order of additions, so the same
// windows give the same sums on every run.
__device__ inline void level_prefix(double (*values)[LEVEL_WINDOW], const long long* count) {
    __shared__ double run_before[2 * LEVEL_WINDOW / 32];  // per run of 32: the sum of the basin's runs before it
    const unsigned lane = threadIdx.x & 31u;
    const int warps = blockDim.x >> 5;
    for (int base = (threadIdx.x >> 5) * 32; base < 2 * LEVEL_WINDOW; base += warps * 32) {
        const int b = base / LEVEL_WINDOW, slot = base % LEVEL_WINDOW + lane;  // a run lies in one basin
        if (base % LEVEL_WINDOW >= count[b]) continue;  // a run past the basin's values (the whole warp)
        const double value = level_warp_scan(slot < count[b] ? values[b][slot] : 0.0, lane);
        if (slot < count[b]) values[b][slot] = value;
        if (lane == 31) run_before[base / 32] = value;  // the run's total, for now
    }
    __syncthreads();
    if (threadIdx.x < 2) {  // a dependent chain: only over the runs that hold values
        const int first = threadIdx.x * (LEVEL_WINDOW / 32), runs = (int)((count[threadIdx.x] + 31) / 32);
        double running = 0.0;
        for (int r = first; r < first + runs; ++r) {
            const double total = run_before[r];
            run_before[r] = running;
            running += total;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * LEVEL_WINDOW; i += blockDim.x) {
        const int b = i / LEVEL_WINDOW, slot = i % LEVEL_WINDOW;
        if (slot < count[b]) values[b][slot] += run_before[i / 32];
    }
    __syncthreads();
}

// The windows' answer, or found = 0. `sorted` is the global copy of the sorted windows;
// `prefix` holds their running sums.
// The windows hold ranks first..last of every basin; no basin has more than `most`.
__device__ inline void level_from_windows(const SBPLevelState& s, const long long* size, int basins, double volume,
                                   long long first, long long last, long long most,
                                   const double* sorted0, const double* sorted1,
                                   double (*prefix)[LEVEL_WINDOW], LevelAnswer* answer, int* fitting) {
    const double* sorted[2] = {sorted0, sorted1};
    if (threadIdx.x == 0) *fitting = 0;
    __syncthreads();
    if (first > last) return;  // the windows share no rank
    for (long long K = first + threadIdx.x; K <= last; K += blockDim.x) {
        double height = 0.0, below = 0.0;
        for (int b = 0; b < basins; ++b) {
            const long long i = K - s.below[b] - 1;
            height += sorted[b][i];
            below += s.below_sum[b] + prefix[b][i];
        }
        if ((double)K * height - below <= volume) atomicAdd(fitting, 1);  // monotone in K
    }
    __syncthreads();
    const long long covered = first + *fitting - 1;
    if (*fitting == 0 || (covered == last && last < most)) return;  // k* below, or not proven inside
    if (threadIdx.x != 0) return;
    LevelAnswer a;
    a.covered = covered;
    a.covered_sum = 0.0;
    a.lowest = (basins == 1 && s.below[0] == 0) ? sorted[0][0] : -LEVEL_INF;
    if (basins == 1 && volume == 0.0 && s.below[0] > 0) return;  // the exact lowest is not here
    for (int b = 0; b < 2; ++b) a.kth[b] = a.next[b] = a.window_lo[b] = a.window_hi[b] = 0.0;
    for (int b = 0; b < basins; ++b) {
        const long long i = covered - s.below[b] - 1;
        a.kth[b] = sorted[b][i];
        a.covered_sum += s.below_sum[b] + prefix[b][i];
        if (i + 1 < s.gathered[b]) a.next[b] = sorted[b][i + 1];
        else if (covered + 1 > size[b]) a.next[b] = LEVEL_INF;
        else return;  // the basin's (k* + 1)-th response is past its window
        const long long low = max(s.below[b] + 1, covered - LEVEL_HALF_RANKS);
        const long long high = min(s.below[b] + s.gathered[b], covered + LEVEL_HALF_RANKS);
        a.window_lo[b] = sorted[b][low - s.below[b] - 1];
        a.window_hi[b] = sorted[b][high - s.below[b] - 1];
    }
    a.found = 1;
    *answer = a;
}

// Radix select, by one block, of rank[b] (from 1) in each basin: the value, and the
// count and sum of the basin's responses below it.
__device__ inline void level_select(const double* c, const double* y, long long n, int two_basins, int basins,
                             const long long* rank, double* value, long long* count_below, double* sum_below) {
    __shared__ unsigned int hist_count[2][1 << LEVEL_RADIX_BITS];
    __shared__ double hist_sum[2][1 << LEVEL_RADIX_BITS];
    __shared__ unsigned long long prefix[2];
    __shared__ long long below[2];
    __shared__ double below_total[2];
    if (threadIdx.x < 2) {
        prefix[threadIdx.x] = 0ULL;
        below[threadIdx.x] = 0;
        below_total[threadIdx.x] = 0.0;
    }
    const int buckets = 1 << LEVEL_RADIX_BITS;
    for (int shift = 64 - LEVEL_RADIX_BITS; shift >= 0; shift -= LEVEL_RADIX_BITS) {
        for (int i = threadIdx.x; i < 2 * buckets; i += blockDim.x) {
            hist_count[i / buckets][i % buckets] = 0u;
            hist_sum[i / buckets][i % buckets] = 0.0;
        }
        __syncthreads();
        const int fixed = 64 - shift - LEVEL_RADIX_BITS;  // bits chosen so far
        // The first passes put nearly every response in one bucket, and 512 threads
        // adding to one shared counter in turn were most of the bisection's time (an
        // H200, 2026-11-27, 1e5 rows, 10 problems: the solve 54.5 ms a step). Each thread
        // now adds its run of values that fall in one bucket as one count and one sum:
        // about one atomic a thread a pass where they all share a bucket, one a value
        // where they are spread (as before, without the contention). Adding a warp's
        // lanes as one by ballots measured 20.0 ms there (bench/results/sbp_launches*),
        // and made the CPU emulation of these passes many times slower.
        int run_slot = -1;  // b * buckets + bucket of the run being summed
        unsigned int run_count = 0u;
        double run_sum = 0.0;
        for (long long j = threadIdx.x; j < n; j += blockDim.x) {
            const int b = level_basin(y, j, two_basins);
            const unsigned long long key = gpusvm_order_key(c[j]);
            if (fixed > 0 && (key >> (64 - fixed)) != (prefix[b] >> (64 - fixed))) continue;
            const int slot = b * buckets + (int)((key >> shift) & (unsigned long long)(buckets - 1));
            if (slot != run_slot) {
                if (run_count > 0u) {
                    atomicAdd(&hist_count[0][0] + run_slot, run_count);
                    atomicAdd(&hist_sum[0][0] + run_slot, run_sum);
                }
                run_slot = slot;
                run_count = 0u;
                run_sum = 0.0;
            }
            run_count += 1u;
            run_sum += c[j];
        }
        if (run_count > 0u) {
            atomicAdd(&hist_count[0][0] + run_slot, run_count);
            atomicAdd(&hist_sum[0][0] + run_slot, run_sum);
        }
        __syncthreads();
        if (threadIdx.x < basins) {  // one thread a basin walks its buckets
            const int b = threadIdx.x;
            for (int bucket = 0; bucket < buckets; ++bucket) {
                if (below[b] + hist_count[b][bucket] >= rank[b]) {
                    prefix[b] |= (unsigned long long)bucket << shift;
                    break;
                }
                below[b] += hist_count[b][bucket];
                below_total[b] += hist_sum[b][bucket];
            }
        }
        __syncthreads();
    }
    for (int b = 0; b < basins; ++b) {
        value[b] = gpusvm_key_value(prefix[b]);
        count_below[b] = below[b];
        sum_below[b] = below_total[b];
    }
    __syncthreads();
}

// U_K and u_K at rank K (every thread gets them), and each basin's K-th value.
__device__ inline void level_at_rank(const double* c, const double* y, long long n, int two_basins, int basins,
                                     long long K, double* height, double* covered_sum, double* kth) {
    long long rank[2] = {K, K}, count_below[2];
    double sum_below[2];
    level_select(c, y, n, two_basins, basins, rank, kth, count_below, sum_below);
    *height = 0.0;
    *covered_sum = 0.0;
    for (int b = 0; b < basins; ++b) {
        *height += kth[b];
        *covered_sum += sum_below[b] + (double)(K - count_below[b]) * kth[b];  // ties at the K-th value
    }
}

// The answer by bisection over ranks (any responses; a few hundred passes by one block).
__device__ inline void level_by_bisection(const double* c, const double* y, long long n, int two_basins, int basins,
                                   const long long* size, double volume, LevelAnswer* answer) {
    long long most = size[0];
    if (basins == 2) most = min(most, size[1]);
    long long lo = 1, hi = most;  // K = 1 always fits
    double height, covered_sum, kth[2], next[2], count_sum;
    while (lo < hi) {
        const long long mid = lo + (hi - lo + 1) / 2;
        level_at_rank(c, y, n, two_basins, basins, mid, &height, &covered_sum, kth);
        if ((double)mid * height - covered_sum <= volume) lo = mid; else hi = mid - 1;
    }
    level_at_rank(c, y, n, two_basins, basins, lo, &height, &covered_sum, kth);
    double lowest[2] = {-LEVEL_INF, -LEVEL_INF};
    if (basins == 1) level_at_rank(c, y, n, two_basins, basins, 1, &height, &count_sum, lowest);
    double low_values[2], high_values[2];
    level_at_rank(c, y, n, two_basins, basins, max(1LL, lo - LEVEL_HALF_RANKS), &height, &count_sum, low_values);
    long long next_rank[2], count_below[2];  // rank k* + 1 where a basin has it
    double sum_below[2];
    for (int b = 0; b < 2; ++b) next_rank[b] = min(lo + 1, max(1LL, size[b]));
    level_select(c, y, n, two_basins, basins, next_rank, next, count_below, sum_below);
    for (int b = 0; b < basins; ++b)
        if (lo + 1 > size[b]) next[b] = LEVEL_INF;
    long long high_rank[2];  // per basin: the larger class's window reaches past k* + 1
    for (int b = 0; b < 2; ++b) high_rank[b] = min(lo + LEVEL_HALF_RANKS, max(1LL, size[b]));
    level_select(c, y, n, two_basins, basins, high_rank, high_values, count_below, sum_below);
    if (threadIdx.x == 0) {
        answer->covered = lo;
        answer->covered_sum = covered_sum;
        answer->lowest = lowest[0];
        for (int b = 0; b < 2; ++b) {
            answer->kth[b] = b < basins ? kth[b] : 0.0;
            answer->next[b] = b < basins ? next[b] : 0.0;
            answer->window_lo[b] = b < basins ? low_values[b] : 0.0;
            answer->window_hi[b] = b < basins ? high_values[b] : 0.0;
        }
        answer->found = 2;
    }
    __syncthreads();
}

// The next windows around ranks k* -/+ LEVEL_HALF_RANKS: widened by half their span on
// each side, for the responses' move by the next step.
__device__ inline void level_next_windows(SBPLevelState* state, const LevelAnswer& a, int basins) {
    for (int b = 0; b < basins; ++b) {
        const double low = a.window_lo[b], high = a.window_hi[b];
        const double margin = fmax((high - low) / 2.0, 1e-12 * fmax(1.0, fmax(fabs(low), fabs(high))));
        state->lo[b] = low - margin;
        state->hi[b] = high + margin;
    }
}

// A missed window moved for the next round: toward k* when the windows say where it
// is, narrowed when it held too many values.
__device__ inline void level_move_windows(SBPLevelState* state, int basins, bool overflow, bool empty_overlap,
                                          int fitting) {
    long long first = 0;
    for (int b = 0; b < basins; ++b) first = max(first, state->below[b] + 1);
    for (int b = 0; b < basins; ++b) {
        const double lo = state->lo[b], hi = state->hi[b], width = hi - lo;
        int direction;  // -1 down, +1 up, 0 narrow
        if (overflow) direction = 0;
        else if (empty_overlap && basins == 1) direction = state->below[0] == 0 ? +1 : -1;  // all above, or below
        else if (empty_overlap) direction = state->below[b] + 1 == first ? -1 : +1;  // the leading window down
        else direction = fitting == 0 ? -1 : +1;
        if (direction == 0) {
            state->lo[b] = lo + width / 4.0;
            state->hi[b] = hi - width / 4.0;
        } else if (direction > 0) {
            state->lo[b] = lo + width / 2.0;
            state->hi[b] = hi + width;
        } else {
            state->lo[b] = lo - width;
            state->hi[b] = hi - width / 2.0;
        }
    }
}

// The body of sbp_level_solve (inline: the CPU emulation of CUDA keeps every __shared__
// of a source in inline functions or in plain ones, not both).
__device__ inline void level_solve(
        const double* __restrict__ responses, const double* __restrict__ labels, long long label_stride,
        long long row_stride, int two_basins, const long long* __restrict__ sizes,
        const SBPShape* __restrict__ shapes, SBPLevelState* __restrict__ states, double* __restrict__ windows,
        int last_round) {
    __shared__ double values[2][LEVEL_WINDOW];
    __shared__ LevelAnswer answer;
    __shared__ int fitting, was_done;
    const int p = blockIdx.x, basins = two_basins ? 2 : 1;
    if (!shapes[p].active) return;  // the whole block
    const long long n = shapes[p].n_train;
    const double volume = shapes[p].volume;
    SBPLevelState* state = states + p;
    if (threadIdx.x == 0) {
        was_done = state->done;
        answer.found = 0;
    }
    __syncthreads();
    if (was_done) {
        if (threadIdx.x == 0 && last_round) state->done = 0;
        return;
    }
    const SBPLevelState s = *state;
    const long long size[2] = {sizes[2 * p], two_basins ? sizes[2 * p + 1] : 0};
    double* window[2] = {windows + 2LL * p * LEVEL_WINDOW, windows + (2LL * p + 1) * LEVEL_WINDOW};
    bool overflow = false;
    for (int b = 0; b < basins; ++b) overflow |= s.gathered[b] > LEVEL_WINDOW;
    long long count[2] = {s.gathered[0], basins == 2 ? s.gathered[1] : 0};
    long long first = 0, last = LEVEL_NO_RANK, most = LEVEL_NO_RANK;  // ranks every window holds
    for (int b = 0; b < basins; ++b) {
        first = max(first, s.below[b] + 1);
        last = min(last, s.below[b] + s.gathered[b]);
        most = min(most, size[b]);
    }
    const bool empty_overlap = first > last;
    if (threadIdx.x == 0) fitting = 0;
    if (!overflow) {
        for (int i = threadIdx.x; i < 2 * LEVEL_WINDOW; i += blockDim.x) {
            const int b = i / LEVEL_WINDOW, slot = i % LEVEL_WINDOW;
            if (slot < count[b]) values[b][slot] = window[b][slot];
        }
        level_sort(values, count, level_sort_width(count));
        for (int i = threadIdx.x; i < 2 * LEVEL_WINDOW; i += blockDim.x) {
            const int b = i / LEVEL_WINDOW, slot = i % LEVEL_WINDOW;
            if (slot < count[b]) window[b][slot] = values[b][slot];  // sorted, beside their sums
        }
        __syncthreads();
        level_prefix(values, count);
        level_from_windows(s, size, basins, volume, first, last, most, window[0], window[1], values, &answer,
                           &fitting);
        __syncthreads();
    }
    if (!answer.found && last_round) {
        const double* c = responses + p * row_stride;
        level_by_bisection(c, labels + p * label_stride, n, two_basins, basins, size, volume, &answer);
    }
    if (threadIdx.x != 0) return;
    if (answer.found) {
        level_write(state, answer, volume, two_basins);
        level_next_windows(state, answer, basins);
        state->done = last_round ? 0 : 1;
        state->settled_by[answer.found - 1] += 1;
    } else {
        level_move_windows(state, basins, overflow, empty_overlap, fitting);
    }
    for (int b = 0; b < 2; ++b) {
        state->below[b] = 0;
        state->below_sum[b] = 0.0;
        state->gathered[b] = 0;
    }
}

// One block (any multiple of 32 threads) per problem, after sbp_level_gather.
extern "C" __global__ void sbp_level_solve(
        const double* __restrict__ responses, const double* __restrict__ labels, long long label_stride,
        long long row_stride, int two_basins, const long long* __restrict__ sizes,
        const SBPShape* __restrict__ shapes, SBPLevelState* __restrict__ states, double* __restrict__ windows,
        int last_round) {
    level_solve(responses, labels, label_stride, row_stride, two_basins, sizes, shapes, states, windows,
                last_round);
}
