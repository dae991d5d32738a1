// The SBP water level on the GPU: a radix select over the responses' bits.
//
// gamma solves sum_i max(0, gamma - c_i) = V. Map each double to a 64-bit key with the
// same order, and fix the key's bits 11 at a time, from the top (6 rounds). A round
// counts and sums, per bucket of the next 11 bits, the responses that share the bits
// fixed so far (one pass, per-block histograms in shared memory); one block then finds
// the bucket that holds the level: with e_j the smallest value of bucket j and
// K_<j, S_<j the count and sum of the responses below it, the level is at least e_j
// exactly when K_<j e_j - S_<j <= V (monotone in j), so it lies in the last such
// bucket. An empty bucket, or the last round (one value per bucket), gives the level
// in closed form: (V + S) / K over the responses below it.
//
// Nothing comes back to the host: the state (bits fixed, count and sum below, done)
// lives in device memory, every launch reads it, and launches after the answer exit at
// once. From the second round on, the responses that still match are also copied to a
// scratch buffer, so later rounds read only those.
#include "common.cuh"

#define WL_BITS 11
#define WL_BUCKETS (1 << WL_BITS)
#define WL_ROUNDS 6

// The state of one search, in device memory.
struct WaterLevelState {
    unsigned long long prefix;  // key bits fixed so far (lower bits zero)
    long long below_count;      // responses below every key with this prefix
    double below_sum;
    double volume;
    double level;               // the answer, once done
    int done;
    int pad;
    long long scratch_count[2]; // responses copied to each scratch buffer
};

// Bits examined by a round (11, the last 9) and where they sit in the key.
__device__ inline int wl_width(int round) { return min(WL_BITS, 64 - round * WL_BITS); }
__device__ inline int wl_shift(int round) { return 64 - round * WL_BITS - wl_width(round); }

__device__ inline bool wl_matches(unsigned long long key, unsigned long long prefix, int round) {
    if (round == 0) return true;
    const int kept = 64 - round * WL_BITS;  // bits still open; prefix fixes the rest
    return (key >> kept) == (prefix >> kept);
}

extern "C" __global__ void water_level_start(WaterLevelState* state, double volume,
                                             long long* hist_count, double* hist_sum) {
    for (int j = threadIdx.x; j < WL_BUCKETS; j += blockDim.x) {
        hist_count[j] = 0;
        hist_sum[j] = 0.0;
    }
    if (threadIdx.x == 0) {
        state->prefix = 0ULL;
        state->below_count = 0;
        state->below_sum = 0.0;
        state->volume = volume;
        state->level = 0.0;
        state->done = 0;
        state->scratch_count[0] = 0;
        state->scratch_count[1] = 0;
    }
}

// One pass of round `round` over `source` (n values, or *source_count when it is not
// null). From round 1 on, matching values are appended to `target` (count in
// *target_count), which the next round reads: round r >= 1 writes scratch buffer
// (r - 1) % 2 and round r >= 2 reads buffer r % 2.
extern "C" __global__ void water_level_histogram(
        const double* __restrict__ source, long long n, const long long* source_count,
        WaterLevelState* state, int round, long long* hist_count, double* hist_sum,
        double* __restrict__ target, long long* target_count) {
    __shared__ unsigned int block_count[WL_BUCKETS];
    __shared__ double block_sum[WL_BUCKETS];
    if (state->done) return;
    const long long size = source_count ? *source_count : n;
    const unsigned long long prefix = state->prefix;
    const int shift = wl_shift(round);
    const unsigned long long mask = (1ULL << wl_width(round)) - 1ULL;
    for (int j = threadIdx.x; j < WL_BUCKETS; j += blockDim.x) {
        block_count[j] = 0;
        block_sum[j] = 0.0;
    }
    __syncthreads();
    const unsigned lane = threadIdx.x & 31u;
    const long long stride = (long long)gridDim.x * blockDim.x;
    // Every thread of a warp runs the same number of iterations, so the ballot below
    // always sees the whole warp.
    const long long rounds_up = (size + stride - 1) / stride * stride;
    for (long long base = 0; base < rounds_up; base += stride) {
        const long long i = base + blockIdx.x * (long long)blockDim.x + threadIdx.x;
        bool match = false;
        double value = 0.0;
        if (i < size) {
            value = source[i];
            const unsigned long long key = gpusvm_order_key(value);
            match = wl_matches(key, prefix, round);
            if (match) {
                const int bucket = (int)((key >> shift) & mask);
                atomicAdd(&block_count[bucket], 1u);
                atomicAdd(&block_sum[bucket], value);
            }
        }
        if (target != nullptr) {  // warp-aggregated append of the matching values
            const unsigned ballot = __ballot_sync(0xffffffffu, match);
            long long first = 0;
            if (lane == 0 && ballot) first = (long long)atomicAdd((unsigned long long*)target_count, (unsigned long long)__popc(ballot));
            first = __shfl_sync(0xffffffffu, first, 0);
            if (match) target[first + __popc(ballot & ((1u << lane) - 1u))] = value;
        }
    }
    __syncthreads();
    for (int j = threadIdx.x; j < WL_BUCKETS; j += blockDim.x) {
        if (block_count[j]) {
            atomicAdd((unsigned long long*)&hist_count[j], (unsigned long long)block_count[j]);
            atomicAdd(&hist_sum[j], block_sum[j]);
        }
    }
}

// Inclusive scan of a (count, sum) pair over the 32 lanes of a warp.
__device__ inline void wl_warp_inclusive_scan(long long& count, double& sum, unsigned lane) {
    for (int offset = 1; offset < 32; offset <<= 1) {
        const long long other_count = __shfl_up_sync(0xffffffffu, count, offset);
        const double other_sum = __shfl_up_sync(0xffffffffu, sum, offset);
        if (lane >= (unsigned)offset) {
            count += other_count;
            sum += other_sum;
        }
    }
}

// One block of 1024 threads: find the bucket that holds the level, update the state,
// clear the histogram for the next round.
extern "C" __global__ void water_level_select(WaterLevelState* state, int round,
                                              long long* hist_count, double* hist_sum) {
    __shared__ long long warp_count[32];
    __shared__ double warp_sum[32];
    __shared__ int chosen;
    if (state->done) return;
    const int t = threadIdx.x;  // buckets 2t and 2t + 1
    const long long c0 = hist_count[2 * t], c1 = hist_count[2 * t + 1];
    const double s0 = hist_sum[2 * t], s1 = hist_sum[2 * t + 1];
    // Exclusive scan of (count, sum) over the threads: warp scan, then over warps.
    long long count = c0 + c1;
    double sum = s0 + s1;
    const unsigned lane = t & 31u, warp = t >> 5;
    wl_warp_inclusive_scan(count, sum, lane);
    if (lane == 31) {
        warp_count[warp] = count;
        warp_sum[warp] = sum;
    }
    __syncthreads();
    if (warp == 0) {
        long long total_count = warp_count[lane];
        double total_sum = warp_sum[lane];
        wl_warp_inclusive_scan(total_count, total_sum, lane);
        warp_count[lane] = total_count;  // inclusive over warps
        warp_sum[lane] = total_sum;
    }
    __syncthreads();
    const long long before_warp = warp ? warp_count[warp - 1] : 0;
    const double before_warp_sum = warp ? warp_sum[warp - 1] : 0.0;
    // Inclusive within the warp -> exclusive for this thread's first bucket.
    const long long below0 = state->below_count + before_warp + count - (c0 + c1);
    const double below0_sum = state->below_sum + before_warp_sum + sum - (s0 + s1);
    const long long below1 = below0 + c0;
    const double below1_sum = below0_sum + s0;
    const int shift = wl_shift(round);
    const double volume = state->volume;
    const unsigned long long prefix = state->prefix;
    const double edge0 = gpusvm_key_value(prefix | ((unsigned long long)(2 * t) << shift));
    const double edge1 = gpusvm_key_value(prefix | ((unsigned long long)(2 * t + 1) << shift));
    // The level is at least bucket j's smallest value; nothing below it needs no test
    // (and its edge may not be a number).
    const int n_buckets = 1 << wl_width(round);
    const bool reach0 = 2 * t < n_buckets && (below0 == 0 || (double)below0 * edge0 - below0_sum <= volume);
    const bool reach1 = 2 * t + 1 < n_buckets && (below1 == 0 || (double)below1 * edge1 - below1_sum <= volume);
    const int reached = __syncthreads_count(reach0) + __syncthreads_count(reach1);
    if (t == 0) chosen = max(reached - 1, 0);  // bucket 0 always qualifies; guard rounding
    __syncthreads();
    const int j = chosen;
    if (j == 2 * t || j == 2 * t + 1) {
        const bool first = j == 2 * t;
        const long long k_below = first ? below0 : below1;
        const double s_below = first ? below0_sum : below1_sum;
        const long long k_in = first ? c0 : c1;
        const double s_in = first ? s0 : s1;
        if (k_in == 0) {  // nothing between this bucket's edge and the level
            state->level = (volume + s_below) / (double)k_below;
            state->done = 1;
        } else if (round == WL_ROUNDS - 1) {  // one value per bucket: all of it is covered
            state->level = (volume + s_below + s_in) / (double)(k_below + k_in);
            state->done = 1;
        } else {
            state->prefix = prefix | ((unsigned long long)j << shift);
            state->below_count = k_below;
            state->below_sum = s_below;
            // The next round appends to the buffer this round read (it is free now).
            state->scratch_count[round % 2] = 0;
        }
    }
    hist_count[2 * t] = 0;
    hist_count[2 * t + 1] = 0;
    hist_sum[2 * t] = 0.0;
    hist_sum[2 * t + 1] = 0.0;
}

// The level as a device scalar (for the solvers), after the last round.
extern "C" __global__ void water_level_result(const WaterLevelState* state, double* level) {
    *level = state->level;
}
