"""The launchers of ``kernels/sbp_level.cu``: water levels of many SBP problems at once.

On the GPU, with or without the bias, and no sort.

Each problem keeps a window of values per basin (positives and negatives with the bias,
all rows without) around its last level; a search is rounds of a gather over the
responses and a solve by one block per problem that sorts only the windows.  After a
window misses, the next gather counts the responses in buckets instead, whose counts
and sums bracket the level within about a bucket's values, and the round after gathers
the window of those; the last solve falls back to an exact bisection over ranks when
no window has settled it.  Two launches a round (three or four rounds) whatever the
number of problems, no host synchronisation; the answers (level,
bias and each basin's edge: the covered rows are the responses at or under it) stay in
device memory for the steps that use them.  Exact against
:func:`~gpusvm.water_level.find_gamma_and_bias_sorted`, the sort-based oracle in
``gpusvm/water_level/__init__.py``, up to the rounding of the sums.
"""

from __future__ import annotations

import numpy as np

from .._device.cuda_modules import get_cuda_kernel, multiprocessor_count

_SOURCE = "sbp_level.cu"
WINDOW = 2048  # LEVEL_WINDOW in sbp_level.cu
STATE_WORDS = 23  # sizeof(SBPLevelState) / 8
# SBPShape (sbp_level.cuh), one row of a problem table per problem.
SHAPE_DTYPE = np.dtype(
    [
        ("n_train", np.int64),
        ("n_holdout", np.int64),
        ("seed", np.uint64),
        ("first_lane", np.uint64),
        ("volume", np.float64),
        ("eta_scale", np.float64),
        ("active", np.int64),
    ]
)
ACTIVE_WORD = 6
# Words of SBPLevelState (sbp_level.cuh) read here.
_LEVEL, _BIAS, _EDGES, _SETTLED_BY, _HISTOGRAMS = 10, 11, slice(12, 14), slice(16, 18), 22
GATHER_THREADS = 256
SOLVE_THREADS = 512
# A window, a histogram and its window; past this many rows a bracket may need a second
# histogram (about 3 x rows / 1,024 values in it, against the 2,048 a window holds).
ROUNDS_FEW_ROWS, ROUNDS, FEW_ROWS = 3, 4, 1 << 16


def problem_table(n_train, n_holdout, volume, seed=0, first_lane=0, eta_scale=1.0):
    """The device table of ``SBPShape`` rows that the SBP launches read (int64, shape
    (k, 7)), every problem active: each argument one value per problem, or one for all
    (broadcast to the length of ``n_train``)."""
    import cupy

    n_train = np.atleast_1d(np.asarray(n_train, dtype=np.int64))
    table = np.zeros(n_train.size, dtype=SHAPE_DTYPE)
    for name, value in (
        ("n_train", n_train),
        ("n_holdout", n_holdout),
        ("seed", seed),
        ("first_lane", first_lane),
        ("volume", volume),
        ("eta_scale", eta_scale),
    ):
        table[name] = value
    table["active"] = 1
    return cupy.asarray(table.view(np.int64).reshape(n_train.size, SHAPE_DTYPE.itemsize // 8))


class DeviceLevels:
    """Repeated level searches of ``k`` problems' responses, each warm-started from its last.

    Parameters
    ----------
    labels : CuPy float64 array of shape (k, n)
        Each problem's labels in {-1, +1}, C-contiguous.
    class_sizes : sequence of (int, int)
        Each problem's count of positive and negative labels (a host value, so that no
        search synchronises to count them).
    two_basins : bool
        With the unregularized bias (both classes needed), or without it.
    volume : float
        ``n * nu``, for ``problems=None``.
    problems : CuPy int64 array of shape (k, 7), optional
        A :func:`problem_table`: each problem's training rows (a prefix of its row of
        ``labels`` and of the responses), its volume, whether it is active (a stopped
        problem's search is skipped). None: every problem has all ``n`` rows and ``volume``.
    rounds : int, optional
        Rounds of a search (at least 2): by default 3 up to ``FEW_ROWS`` rows, else 4.
    """

    def __init__(self, labels, class_sizes, two_basins, volume=None, problems=None, rounds=None):
        import cupy

        self.labels = labels
        self.k, self.n = labels.shape
        self.two_basins = bool(two_basins)
        if problems is None:
            problems = problem_table(np.full(self.k, self.n), 0, float(volume))
        self.problems = problems
        sizes = np.array(class_sizes, dtype=np.int64).reshape(self.k, 2)
        if not self.two_basins:
            sizes = np.stack([sizes.sum(axis=1), np.zeros(self.k, dtype=np.int64)], axis=1)
        elif (sizes == 0).any():
            raise ValueError(
                f"a level with the bias needs both classes in every problem, got class sizes {sizes.tolist()!r}."
            )
        self.sizes = cupy.asarray(sizes)
        self.state = cupy.zeros((self.k, STATE_WORDS), dtype=np.int64)
        self.windows = cupy.zeros((self.k, 2, WINDOW), dtype=np.float64)  # zero: a histogram's start
        self.rounds = int(rounds or (ROUNDS_FEW_ROWS if self.n <= FEW_ROWS else ROUNDS))
        self.gather_blocks = int(
            max(1, min(4 * multiprocessor_count() // max(1, self.k) + 1, -(-self.n // (GATHER_THREADS * 8))))
        )
        self._gather = get_cuda_kernel(_SOURCE, "sbp_level_gather")
        self._solve = get_cuda_kernel(_SOURCE, "sbp_level_solve")

    def launch_search(self, responses, launch):
        """Issue the search of ``responses`` (CuPy float64 of shape (k, n), rows C-contiguous
        with any row stride; a problem's rows past its ``n_train`` are not read) through
        ``launch(kernel, grid, block, args)``."""
        row_stride = np.int64(responses.strides[0] // 8)
        common = (responses, self.labels, np.int64(self.n), row_stride, np.int32(self.two_basins))
        for round_number in range(self.rounds):
            rounds_left = np.int32(self.rounds - 1 - round_number)
            launch(
                self._gather,
                (self.gather_blocks, self.k),
                (GATHER_THREADS,),
                (*common, self.problems, self.state, self.windows),
            )
            launch(
                self._solve,
                (self.k,),
                (SOLVE_THREADS,),
                (*common, self.sizes, self.problems, self.state, self.windows, rounds_left),
            )

    def search(self, responses):
        """Levels and biases of ``responses`` (shape (k, n)), as CuPy arrays of shape (k,)."""
        import cupy

        self.launch_search(
            cupy.ascontiguousarray(responses, dtype=np.float64),
            lambda kernel, grid, block, args: kernel(grid, block, args),
        )
        return self.level, self.bias

    @property
    def words(self):
        """The state as float64 words (the doubles of SBPLevelState)."""
        return self.state.view(np.float64)

    @property
    def level(self):
        return self.words[:, _LEVEL]

    @property
    def bias(self):
        return self.words[:, _BIAS]

    @property
    def edges(self):
        """Each basin's edge, shape (k, 2): the covered rows are the responses at or under it."""
        return self.words[:, _EDGES]

    @property
    def settled_by(self):
        """Searches so far settled by the windows and by the bisection, shape (k, 2)."""
        return self.state[:, _SETTLED_BY]

    @property
    def histograms(self):
        """Rounds so far that counted the responses in buckets after a window missed, shape (k,)."""
        return self.state[:, _HISTOGRAMS]


def find_gamma_and_bias_cuda(labels, values, volume, n_positive, n_negative):
    """``(gamma, b)`` of one problem as 0-d device arrays (checked float64 ``values`` and
    ``labels`` in {-1, +1}, with their class sizes)."""
    levels = DeviceLevels(labels.reshape(1, -1).astype(np.float64), [(n_positive, n_negative)], True, volume)
    level, bias = levels.search(values.reshape(1, -1))
    return level[0], bias[0]
