// SBP water levels of every problem at once, with or without the bias, and no sort
// (gpusvm/water_level/_sbp_level_cuda.py).
//
// Problem p's responses are the first n_train (its SBPShape) of row p of a (k, stride)
// array; a stopped problem (not active) is skipped. With the bias they fall in two
// basins (positives, negatives), without it in one. With u_K the sum over the basins of
// each one's K-th smallest response and U_K the sum of those K smallest, the water
// covers the k* lowest of each basin, k* = max { K : K u_K - U_K <= volume }, and the
// level is (volume + U_k*) / k* (halved with the bias); gpusvm/water_level/__init__.py has
// the proof and the sort-based oracle this must equal.
//
// The level moves little from one step to the next, so each basin keeps a window of
// values [lo, hi) around its last k*-th response. A search is rounds of two launches:
//   sbp_level_gather  (blocks, k): counts and sums the responses below each window and
//                     appends those inside it to a buffer (one pass over the responses),
//                     and takes each basin's least and greatest response;
//   sbp_level_solve   (k): one block sorts each basin's window in shared memory (at most
//                     LEVEL_WINDOW values), and reads k* off the ranks the windows share
//                     when the criterion holds at the first shared rank and fails inside
//                     them; then sets the next step's windows around k*.
// When a window misses (k* outside it, or too many values in it), the next round's
// gather counts and sums every response in LEVEL_BUCKETS equal buckets from the least to
// the greatest instead, and its solve bounds K u_K - U_K at every rank from the buckets
// alone (a rank's value lies between its bucket's edges), which brackets k* within about
// a bucket's values: the round after gathers the window of those buckets (or, where they
// are still too many, buckets of them). Only when the last round has not settled it does
// the solve find k* by a bisection over ranks, each rank a radix select by the one block
// (slow: one block's passes over every response). Before the histograms, the windows were
// moved by their width after a miss, and a large share of the levels ended in the
// bisection (their rank order moves more than the windows' 2 x 256 ranks a step; the
// figures: docs/user_guide/gpu_internals.md, from bench/sbp_launches.py). The rounds
// are a fixed count of launches whatever the number of problems, with no host
// synchronisation; the state of each problem lives in device memory (SBPLevelState).
#include "common.cuh"
#include "sbp_level.cuh"

#define LEVEL_WINDOW 2048      // values of one basin one block sorts
#define LEVEL_HALF_RANKS 256   // ranks on each side of k* the next window is built from
#define LEVEL_BUCKETS (LEVEL_WINDOW / 2)  // of a histogram: counts, then sums, in a basin's window slots
#define LEVEL_RADIX_BITS 8
#define LEVEL_INF __longlong_as_double(0x7ff0000000000000LL)
#define LEVEL_NO_RANK 0x7fffffffffffffffLL


// Edge j of a histogram's buckets over [lo, hi]: lo + j (hi - lo) / LEVEL_BUCKETS, and hi
// at j = LEVEL_BUCKETS (the gather and the solve compute them the same way).
__device__ inline double level_edge(double lo, double hi, int j) {
    return j >= LEVEL_BUCKETS ? hi : lo + (double)j * ((hi - lo) / LEVEL_BUCKETS);
}

// The bucket of a value in [lo, hi]: edge(j) <= value < edge(j + 1), or value <= hi in the
// last (estimated by a division, then moved past any edge its rounding crossed). With
// lo == hi every edge is lo: the last bucket.
__device__ inline int level_bucket(double value, double lo, double hi) {
    const double width = (hi - lo) / LEVEL_BUCKETS;
    if (!(width > 0.0)) return LEVEL_BUCKETS - 1;
    int j = (int)fmin(fmax((value - lo) / width, 0.0), (double)(LEVEL_BUCKETS - 1));
    while (j > 0 && value < level_edge(lo, hi, j)) --j;
    while (j < LEVEL_BUCKETS - 1 && value >= level_edge(lo, hi, j + 1)) ++j;
    return j;
}

// One pass over problem blockIdx.y's responses (grid-stride over blockIdx.x); nothing
// once an earlier round of this search has settled it, or for a stopped problem. A
// window's values go to its buffer; a histogram's counts and sums to the same slots.
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
    const bool histogram = state->histogram != 0;
    double count0 = 0.0, count1 = 0.0, sum0 = 0.0, sum1 = 0.0;
    double least0 = LEVEL_INF, least1 = LEVEL_INF, greatest0 = -LEVEL_INF, greatest1 = -LEVEL_INF;
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
            const double lo = b ? lo1 : lo0, hi = b ? hi1 : hi0;
            if (b) {
                least1 = fmin(least1, value);
                greatest1 = fmax(greatest1, value);
            } else {
                least0 = fmin(least0, value);
                greatest0 = fmax(greatest0, value);
            }
            if (value < lo) {
                if (b) {
                    count1 += 1.0;
                    sum1 += value;
                } else {
                    count0 += 1.0;
                    sum0 += value;
                }
            } else if (histogram) {
                if (value <= hi) {
                    double* slots = windows + (2LL * p + b) * LEVEL_WINDOW;
                    const int bucket = level_bucket(value, lo, hi);
                    atomicAdd(slots + bucket, 1.0);
                    atomicAdd(slots + LEVEL_BUCKETS + bucket, value);
                }
            } else if (value < hi) {
                in_window = b;
            }
        }
        if (histogram) continue;  // the same for the whole block
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
        const double block_least = -gpusvm_block_max(-(b ? least1 : least0));
        const double block_greatest = gpusvm_block_max(b ? greatest1 : greatest0);
        if (threadIdx.x != 0) continue;
        if (block_count > 0.0) {
            atomicAdd((unsigned long long*)&state->below[b], (unsigned long long)block_count);
            atomicAdd(&state->below_sum[b], block_sum);
        }
        if (block_least <= block_greatest) {  // the block saw the basin
            gpusvm_atomic_max(&state->lowest_key_flipped[b], ~gpusvm_order_key(block_least));
            gpusvm_atomic_max(&state->highest_key[b], gpusvm_order_key(block_greatest));
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

// Level, bias and edges from k* and U_k* (gpusvm/water_level/__init__.py:
// find_gamma_and_bias_sorted and _bias_and_edges; without the bias, the covered rows are
// those <= max(level, lowest)).
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

// In place, in each of `segments` runs of `length` values of `flat` (a power of two from
// 32 to LEVEL_WINDOW, segments * length <= 2 LEVEL_WINDOW): value i of segment s becomes
// the sum of its values 0..i, for i < count[s]; every thread of the block calls it. Runs
// past count[s] are skipped (they would add zeros after every value that is read). A
// block scan: each warp sums runs of 32 values by shuffles, one thread a segment adds up
// the runs' totals, and every value gets the total of the runs before its own. A fixed
// order of additions, so the same values give the same sums on every run.
__device__ inline void level_scan(double* flat, int length, int segments, const long long* count) {
    __shared__ double run_before[2 * LEVEL_WINDOW / 32];  // per run of 32: the sum of the segment's runs before it
    const unsigned lane = threadIdx.x & 31u;
    const int warps = blockDim.x >> 5, total = segments * length;
    for (int base = (threadIdx.x >> 5) * 32; base < total; base += warps * 32) {
        const int s = base / length, slot = base % length + lane;  // a run lies in one segment
        if (base % length >= count[s]) continue;  // a run past the segment's values (the whole warp)
        const double value = level_warp_scan(slot < count[s] ? flat[base + lane] : 0.0, lane);
        if (slot < count[s]) flat[base + lane] = value;
        if (lane == 31) run_before[base / 32] = value;  // the run's total, for now
    }
    __syncthreads();
    if (threadIdx.x < segments) {  // a dependent chain: only over the runs that hold values
        const int first = threadIdx.x * (length / 32), runs = (int)((count[threadIdx.x] + 31) / 32);
        double running = 0.0;
        for (int r = first; r < first + runs; ++r) {
            const double run_total = run_before[r];
            run_before[r] = running;
            running += run_total;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < total; i += blockDim.x)
        if (i % length < count[i / length]) flat[i] += run_before[i / 32];
    __syncthreads();
}

// Running sums of each basin's first count[b] sorted window values (level_scan).
__device__ inline void level_prefix(double (*values)[LEVEL_WINDOW], const long long* count) {
    level_scan(&values[0][0], LEVEL_WINDOW, 2, count);
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
        // adding to one shared counter in turn were most of the bisection's time. Each
        // thread now adds its run of values that fall in one bucket as one count and one
        // sum: about one atomic a thread a pass where they all share a bucket, one a value
        // where they are spread (as before, without the contention). Adding a warp's lanes
        // as one by ballots, the answer before this one, made the CPU emulation of these
        // passes many times slower (the device times before it and with it: docs/benchmarks.md,
        // "Figures behind the code").
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

// A round's histograms, their counts and sums run up (level_scan) in the block's shared
// slots: basin b's responses in [lo[b], hi[b]] that are in buckets 0..j number
// counts[b][j] and add up to sums[b][j]; below[b] are under lo[b] (below_sum[b] their sum).
struct LevelHistogram {
    const double* counts[2];
    const double* sums[2];
    double lo[2], hi[2], below_sum[2];
    long long below[2];
    int basins;
};

// The bucket that holds basin b's rank K (from 1): -1 under the histogram, LEVEL_BUCKETS over it.
__device__ inline int level_bucket_of_rank(const LevelHistogram& h, int b, long long K) {
    if (K <= h.below[b]) return -1;
    const double rank = (double)(K - h.below[b]);
    if (h.counts[b][LEVEL_BUCKETS - 1] < rank) return LEVEL_BUCKETS;
    int first = 0, last = LEVEL_BUCKETS - 1;  // the least j whose running count reaches the rank
    while (first < last) {
        const int middle = (first + last) / 2;
        if (h.counts[b][middle] >= rank) last = middle; else first = middle + 1;
    }
    return first;
}

// A bound on K u_K - U_K from the histograms alone: from below (upper = false) or from
// above (+inf where a rank lies outside them). With R responses under a value t <= u_K
// adding up to T, K u_K - U_K >= R u_K - T >= R t - T; and when rank K is in the bucket
// [e0, e1] whose running count starts at R, K u_K - U_K <= K e1 - T - (K - R) e0.
__device__ inline double level_bound(const LevelHistogram& h, long long K, bool upper) {
    double bound = 0.0;
    for (int b = 0; b < h.basins; ++b) {
        const int j = level_bucket_of_rank(h, b, K);
        if (j < 0 || j >= LEVEL_BUCKETS) {
            if (upper) return LEVEL_INF;
            if (j >= LEVEL_BUCKETS)
                bound += (double)h.below[b] * h.hi[b] + h.counts[b][LEVEL_BUCKETS - 1] * h.hi[b] - h.below_sum[b] -
                         h.sums[b][LEVEL_BUCKETS - 1];
            continue;  // under the histogram: at least 0
        }
        const double R = (double)h.below[b] + (j > 0 ? h.counts[b][j - 1] : 0.0);
        const double T = h.below_sum[b] + (j > 0 ? h.sums[b][j - 1] : 0.0);
        const double e0 = level_edge(h.lo[b], h.hi[b], j), e1 = level_edge(h.lo[b], h.hi[b], j + 1);
        bound += upper ? (double)K * e1 - T - ((double)K - R) * e0 : R * e0 - T;
    }
    return bound;
}

// The least K in [from, most] whose bound (level_bound) exceeds the volume, most + 1 if
// none, by the block: each pass tests as many ranks as it has threads, evenly spaced,
// and keeps the span between the last that fit and the first that did not (exact where
// the bound grows with K, as the lower one does). *fits: the greatest K tested whose
// bound is at most the volume (0 if none), which fits whatever the bound's shape.
// Every thread of the block calls it and gets the answer.
__device__ inline long long level_histogram_search(const LevelHistogram& h, bool upper, double volume,
                                                   long long from, long long most, long long* fits) {
    __shared__ int fitting_tested;
    long long first = from, last = most;  // the answer is in [first, last + 1]
    double greatest_fit = 0.0;
    while (first <= last) {
        const long long step = (last - first + blockDim.x) / blockDim.x, tested = (last - first) / step + 1;
        if (threadIdx.x == 0) fitting_tested = 0;
        __syncthreads();
        const long long K = first + (long long)threadIdx.x * step;
        if (threadIdx.x < tested && level_bound(h, K, upper) <= volume) {
            atomicAdd(&fitting_tested, 1);
            greatest_fit = fmax(greatest_fit, (double)K);
        }
        __syncthreads();
        const long long fit = fitting_tested;
        __syncthreads();  // read by every thread before the next pass resets it
        if (fit == tested) {
            first += (tested - 1) * step + 1;
        } else {
            last = first + fit * step - 1;
            if (fit > 0) first += (fit - 1) * step + 1;
        }
    }
    *fits = (long long)gpusvm_block_max(greatest_fit);
    return last + 1;
}

// What the next round gathers: each basin's window [lo, hi), or (histogram) buckets of [lo, hi].
struct LevelPlan {
    double lo[2], hi[2];
    int histogram;
};

// Basin b's buckets around the one that holds rank `rank`: that bucket, then its
// neighbours on either side while the values they hold together stay within `room`.
__device__ inline void level_buckets_around(const LevelHistogram& h, int b, long long rank, double room,
                                            int* low_bucket, int* high_bucket) {
    *low_bucket = *high_bucket = min(max(level_bucket_of_rank(h, b, rank), 0), LEVEL_BUCKETS - 1);
    for (bool grown = true; grown;) {
        grown = false;
        for (int side = 0; side < 2; ++side) {
            const int low = *low_bucket - (side == 0), high = *high_bucket + (side == 1);
            if (low < 0 || high >= LEVEL_BUCKETS) continue;
            if (h.counts[b][high] - (low > 0 ? h.counts[b][low - 1] : 0.0) > room) continue;
            *low_bucket = low;
            *high_bucket = high;
            grown = true;
        }
    }
}

// From a round's histograms: k* bracketed by the bounds, then the buckets that hold
// ranks k* -/+ LEVEL_HALF_RANKS of each basin as the next window, or those of the
// bracket alone where those are too many; or else, when a round after the next one can
// use it (`narrow`), a histogram of the bracket's buckets, and when not, the window of
// as many buckets as fit around the bracket's middle rank (the last round's only chance
// before the bisection). Every thread of the block calls it; thread 0 writes the plan.
__device__ inline void level_plan_from_histogram(const LevelHistogram& h, const long long* size, double volume,
                                                 long long most, bool narrow, LevelPlan* plan) {
    long long fits_low, fits_high;
    long long inside = 1;  // the first rank in every basin's histogram (the upper bound is +inf below it)
    for (int b = 0; b < h.basins; ++b) inside = max(inside, min(h.below[b] + 1, most));
    const long long past = level_histogram_search(h, false, volume, 1, most, &fits_low);  // no K from past fits
    level_histogram_search(h, true, volume, inside, most, &fits_high);                 // K = fits_high fits
    if (threadIdx.x != 0) return;
    const long long k_high = max(1LL, past - 1), k_low = min(k_high, max(1LL, fits_high));
    // Room for the values the buckets' edges add by rounding, and margins of a few ranks.
    const double room = LEVEL_WINDOW - 64;
    int low_bucket[2] = {0, 0}, high_bucket[2] = {0, 0};
    for (int attempt = 0; attempt < 3; ++attempt) {
        const long long margin = attempt == 0 ? LEVEL_HALF_RANKS : 4;
        bool fits = true;
        for (int b = 0; b < h.basins; ++b) {
            const long long top = h.below[b] + (long long)h.counts[b][LEVEL_BUCKETS - 1];
            const long long low_rank = max(h.below[b] + 1, k_low - margin);
            const long long high_rank = max(low_rank, min(min(size[b], top), k_high + 1 + margin));
            low_bucket[b] = min(max(level_bucket_of_rank(h, b, low_rank), 0), LEVEL_BUCKETS - 1);
            high_bucket[b] = min(max(level_bucket_of_rank(h, b, high_rank), low_bucket[b]), LEVEL_BUCKETS - 1);
            if (attempt == 2 && !narrow) {
                const long long middle = max(h.below[b] + 1, min(top, (k_low + k_high + 1) / 2));
                level_buckets_around(h, b, middle, room, &low_bucket[b], &high_bucket[b]);
            }
            const double values =
                h.counts[b][high_bucket[b]] - (low_bucket[b] > 0 ? h.counts[b][low_bucket[b] - 1] : 0.0);
            fits &= values <= room;
        }
        if (fits || attempt == 2) {
            plan->histogram = !fits && narrow;  // a histogram of the bracket's buckets, edges included
            for (int b = 0; b < h.basins; ++b) {
                plan->lo[b] = level_edge(h.lo[b], h.hi[b], low_bucket[b]);
                plan->hi[b] = plan->histogram || high_bucket[b] < LEVEL_BUCKETS - 1
                                  ? level_edge(h.lo[b], h.hi[b], high_bucket[b] + 1)
                                  : nextafter(h.hi[b], LEVEL_INF);
            }
            return;
        }
    }
}

// After a missed window: when every basin's responses are all one value (at the start of
// a fit), the answer (every rank fits, and k* is the smaller basin's size); else, where a
// round after the next can use them (`histogram`), histograms of every response from the
// round's least to its greatest (the last round would only bisect: the window stays).
__device__ inline void level_after_a_miss(SBPLevelState* state, const long long* size, int basins, bool histogram,
                                          LevelAnswer* answer) {
    bool flat = true;
    double least[2], greatest[2];
    for (int b = 0; b < basins; ++b) {
        least[b] = gpusvm_key_value(~state->lowest_key_flipped[b]);
        greatest[b] = gpusvm_key_value(state->highest_key[b]);
        flat &= least[b] == greatest[b];
    }
    if (flat || histogram) {
        for (int b = 0; b < basins; ++b) {
            state->lo[b] = least[b];
            state->hi[b] = greatest[b];
        }
        state->histogram = !flat;
    }
    if (!flat) return;
    long long most = size[0];
    if (basins == 2) most = min(most, size[1]);
    answer->covered = most;
    answer->covered_sum = 0.0;
    answer->lowest = state->lo[0];
    for (int b = 0; b < 2; ++b) {
        const double value = b < basins ? state->lo[b] : 0.0;
        answer->covered_sum += (double)most * value;
        answer->kth[b] = answer->window_lo[b] = answer->window_hi[b] = value;
        answer->next[b] = b < basins && most + 1 > size[b] ? LEVEL_INF : value;
    }
    answer->found = 1;
}

// Thread 0 of the solve, last: the answer written, or what the next round gathers.
__device__ inline void level_next_round(SBPLevelState* state, LevelAnswer* answer, const LevelPlan& plan,
                                        const long long* size, int basins, double volume, int two_basins,
                                        int rounds_left) {
    const bool last_round = rounds_left == 0;
    if (state->histogram) state->histograms += 1;
    else if (!answer->found) level_after_a_miss(state, size, basins, rounds_left > 1, answer);
    if (answer->found) {
        level_write(state, *answer, volume, two_basins);
        level_next_windows(state, *answer, basins);
        state->histogram = 0;
        state->done = last_round ? 0 : 1;
        state->settled_by[answer->found - 1] += 1;
    } else if (plan.histogram >= 0) {
        for (int b = 0; b < basins; ++b) {
            state->lo[b] = plan.lo[b];
            state->hi[b] = plan.hi[b];
        }
        state->histogram = plan.histogram;
    }
    for (int b = 0; b < 2; ++b) {
        state->below[b] = 0;
        state->below_sum[b] = 0.0;
        state->gathered[b] = 0;
        state->lowest_key_flipped[b] = 0ULL;
        state->highest_key[b] = 0ULL;
    }
}

// The body of sbp_level_solve (inline: the CPU emulation of CUDA keeps every __shared__
// of a source in inline functions or in plain ones, not both).
__device__ inline void level_solve(
        const double* __restrict__ responses, const double* __restrict__ labels, long long label_stride,
        long long row_stride, int two_basins, const long long* __restrict__ sizes,
        const SBPShape* __restrict__ shapes, SBPLevelState* __restrict__ states, double* __restrict__ windows,
        int rounds_left) {
    __shared__ double values[2][LEVEL_WINDOW];
    __shared__ LevelAnswer answer;
    __shared__ LevelPlan plan;
    __shared__ int fitting, was_done;
    const int p = blockIdx.x, basins = two_basins ? 2 : 1;
    if (!shapes[p].active) return;  // the whole block
    const long long n = shapes[p].n_train;
    const double volume = shapes[p].volume;
    const bool last_round = rounds_left == 0;
    SBPLevelState* state = states + p;
    if (threadIdx.x == 0) {
        was_done = state->done;
        answer.found = 0;
        plan.histogram = -1;  // none
    }
    __syncthreads();
    if (was_done) {
        if (threadIdx.x == 0 && last_round) state->done = 0;
        return;
    }
    const SBPLevelState s = *state;
    __syncthreads();  // every thread has its copy before thread 0 writes the next round's state
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
    if (threadIdx.x == 0) fitting = 0;
    if (s.histogram) {
        if (!last_round) {  // the last round has no gather after it: the bisection
            for (int i = threadIdx.x; i < 2 * LEVEL_WINDOW; i += blockDim.x) {
                const int b = i / LEVEL_WINDOW, slot = i % LEVEL_WINDOW;
                if (b < basins) values[b][slot] = window[b][slot];
            }
            __syncthreads();
            const long long buckets[4] = {LEVEL_BUCKETS, LEVEL_BUCKETS, LEVEL_BUCKETS, LEVEL_BUCKETS};
            level_scan(&values[0][0], LEVEL_BUCKETS, 2 * basins, buckets);
            LevelHistogram h;
            h.basins = basins;
            for (int b = 0; b < 2; ++b) {
                h.counts[b] = values[b];
                h.sums[b] = values[b] + LEVEL_BUCKETS;
                h.lo[b] = s.lo[b];
                h.hi[b] = s.hi[b];
                h.below[b] = s.below[b];
                h.below_sum[b] = s.below_sum[b];
            }
            level_plan_from_histogram(h, size, volume, most, rounds_left > 1, &plan);
        }
    } else if (!overflow) {
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
    __syncthreads();  // every thread has read answer.found before thread 0 sets it (a flat start)
    if (threadIdx.x == 0) level_next_round(state, &answer, plan, size, basins, volume, two_basins, rounds_left);
    __syncthreads();
    if (state->histogram)  // the next gather's counts and sums start at zero
        for (int i = threadIdx.x; i < 2 * LEVEL_WINDOW; i += blockDim.x) window[i / LEVEL_WINDOW][i % LEVEL_WINDOW] = 0.0;
}

// One block (any multiple of 32 threads) per problem, after sbp_level_gather; rounds_left:
// the rounds of this search after this one (0: the last, which settles every level).
extern "C" __global__ void sbp_level_solve(
        const double* __restrict__ responses, const double* __restrict__ labels, long long label_stride,
        long long row_stride, int two_basins, const long long* __restrict__ sizes,
        const SBPShape* __restrict__ shapes, SBPLevelState* __restrict__ states, double* __restrict__ windows,
        int rounds_left) {
    level_solve(responses, labels, label_stride, row_stride, two_basins, sizes, shapes, states, windows,
                rounds_left);
}
