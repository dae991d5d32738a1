// The position counter of gpusvm/_device/step_blocks.py: the launches of a block of steps read
// their step's row of the schedule at position + offset; this advances it past the block.
extern "C" __global__ void advance_position(long long* __restrict__ position, long long steps) {
    if (blockIdx.x == 0 && threadIdx.x == 0) position[0] += steps;
}
