// The state of one problem's SBP water-level search (kernels/sbp_level.cu), read by the
// steps that use its answer (kernels/sbp.cu) and by gpusvm/_sbp_level_cuda.py.
#pragma once

struct SBPLevelState {
    double lo[2], hi[2];      // each basin's window: lo <= response < hi
    long long below[2];       // responses below lo
    double below_sum[2];
    long long gathered[2];    // responses appended (more than LEVEL_WINDOW: overflow)
    double level, bias, edge[2];  // the answer; covered rows: response <= edge[basin]
    long long covered;        // k*
    int done, pad;            // settled by an earlier round of this search
    long long settled_by[2];  // searches settled by a window, by the bisection
};
static_assert(sizeof(SBPLevelState) == 18 * 8, "gpusvm/_sbp_level_cuda.py reads 18 words");

// The basin of row j: 1 for a negative label when there are two (the bias), else 0.
__device__ inline int level_basin(const double* labels, long long j, int two_basins) {
    return two_basins && labels[j] < 0.0 ? 1 : 0;
}
