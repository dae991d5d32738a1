// The state of one problem's SBP water-level search (kernels/sbp_level.cu), read by the
// steps that use its answer (kernels/sbp.cu) and by gpusvm/water_level/_sbp_level_cuda.py.
#pragma once

struct SBPLevelState {
    double lo[2], hi[2];      // each basin's window: lo <= response < hi (a histogram's: lo <= response <= hi)
    long long below[2];       // responses below lo
    double below_sum[2];
    long long gathered[2];    // responses appended (more than LEVEL_WINDOW: overflow)
    double level, bias, edge[2];  // the answer; covered rows: response <= edge[basin]
    long long covered;        // k*
    int done;                 // settled by an earlier round of this search
    int histogram;            // this round's gather counts [lo, hi] in buckets instead of gathering a window
    long long settled_by[2];  // searches settled by a window, by the bisection
    unsigned long long lowest_key_flipped[2], highest_key[2];  // this round's least (~ its order key) and
                                                               // greatest response per basin: 0 when none
    long long histograms;     // histogram rounds so far
};
static_assert(sizeof(SBPLevelState) == 23 * 8, "gpusvm/water_level/_sbp_level_cuda.py reads 23 words");

// One problem of an SBP launch (gpusvm/water_level/_sbp_level_cuda.py's problem_table). Its
// training columns are the first n_train of its row of the responses and labels, its
// holdout columns the first n_holdout of its row of the holdout responses: one-vs-rest
// problems have every row, one-vs-one pairs their two classes' (and rows of padding).
struct SBPShape {
    long long n_train, n_holdout;
    unsigned long long seed, first_lane;  // its draws: lanes first_lane + b of stream `seed`
    double volume;                        // n_train nu
    double eta_scale;                     // its step size over the schedule's
    long long active;                     // 0: stopped; no launch reads or writes its state
};
static_assert(sizeof(SBPShape) == 7 * 8, "gpusvm/water_level/_sbp_level_cuda.py writes 7 words");

// The basin of row j: 1 for a negative label when there are two (the bias), else 0.
__device__ inline int level_basin(const double* labels, long long j, int two_basins) {
    return two_basins && labels[j] < 0.0 ? 1 : 0;
}
