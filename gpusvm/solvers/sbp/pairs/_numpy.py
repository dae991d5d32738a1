"""One-vs-one SBP's steps on the host, in NumPy: the reference (the package's
:mod:`gpusvm.solvers.sbp.pairs` says how the pairs step together)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading

import numpy as np

from ...._instrumentation import PhaseClock
from ...._random import positions_below, stream_bits_block
from ....kernel_functions import kernel_block, squared_row_norms
from ...row_cache import KernelRowCache, weighted_row_sums
from .._levels import class_offsets, class_ranks, levels_of_rows, lowest_needed
from .._problem import RENORMALIZE_BELOW, STEP_PHASES, HostCacheCounts, positive_level

# Ranks of each class sorted first by the level search before anything is known.
FIRST_WINDOW = 64
# A fill of at least this many multiply-adds (rows by class rows by features, about a
# third of a millisecond on one core) runs on all of BLAS's threads.
THREADED_FILL_MIN = 2**24
# Steps whose random bits are drawn together (a call's overhead shared by its steps).
BITS_BLOCK_STEPS = 16


class ClassBlockCache(KernelRowCache):
    """Kernel rows cut by class: the key ``c * n_rows + g`` holds ``K(x_g, class c's
    rows)`` (``n_rows`` rows in X), padded to the widest class. Pair (a, b)'s kernel row
    of row g is the blocks of (g, a) and (g, b), so the block of g's own class serves
    every pair of that class that draws g, computed once. Missing blocks are computed one
    kernel block per class, from a copy of each class's rows kept in one piece; keys
    ordered by class make a class's new blocks one run of fresh slots, written as a slice.
    A block's padding is never read (the store starts at zero, and a slot reused holds
    finite kernel values). The steps look blocks up by :meth:`block_slots`. While the steps
    run (:meth:`NumpyPairSteps.host_threads`), BLAS runs on one thread but for fills of
    at least ``THREADED_FILL_MIN`` multiply-adds."""

    def __init__(self, stack, sq_norms, max_bytes):
        self.n_classes = len(stack.class_rows)
        self.n_data_rows = stack.X.shape[0]
        width = max(rows.size for rows in stack.class_rows)
        super().__init__(None, self.n_data_rows * self.n_classes, width, stack.X.dtype, max_bytes, empty=np.zeros)
        self.stack, self.sq_norms = stack, sq_norms
        self.class_X = [stack.X[rows] for rows in stack.class_rows]
        self.class_sq_norms = [sq_norms[rows] for rows in stack.class_rows]
        self.blas_threads = None  # while the steps run on one BLAS thread: the threads for large fills

    def block_slots(self, keys):
        """The slots of the blocks of ``keys`` (any shape, repeats allowed), computing the
        missing ones (one kernel block per class: no prefetching). The kept ones are read
        off directly and marked as used at this call, so that computing the missing ones
        (most of a step's blocks are kept) evicts none of them."""
        slots = self.slot_of_row[keys]
        missing = slots < 0
        if not missing.any():
            self.clock += 1
            self.last_used[slots] = self.clock
            return slots
        self.last_used[slots[~missing]] = self.clock + 1  # the clock of slots() below: not evicted by it
        self.slots(np.unique(keys[missing]))
        return self.slot_of_row[keys]

    def _blas_threads(self):
        """BLAS on the threads it had before the steps limited it to one (as it is,
        outside :meth:`NumpyPairSteps.host_threads`)."""
        if self.blas_threads is None:
            return contextlib.nullcontext()
        return _blas_thread_limit().all_threads()

    def _fill(self, keys, slots):
        stack = self.stack
        order = np.argsort(keys, kind="stable")  # (block_slots's keys come sorted: one pass)
        keys, slots = keys[order], slots[order]
        classes, rows = np.divmod(keys, self.n_data_rows)
        bounds = np.searchsorted(classes, np.arange(self.n_classes + 1))
        for c in np.flatnonzero(np.diff(bounds)):
            at = slice(bounds[c], bounds[c + 1])
            drawn, into = rows[at], slots[at]
            # a large block (MNIST: 64 rows by 2,000 of 784 features) shares out over the
            # cores; the many small ones do not (see _one_blas_thread)
            large = drawn.size * self.class_X[c].shape[0] * stack.X.shape[1] >= THREADED_FILL_MIN
            with self._blas_threads() if large else contextlib.nullcontext():
                block = kernel_block(
                    stack.X[drawn],
                    self.class_X[c],
                    **stack.kernel.keywords,
                    X_sq_norms=self.sq_norms[drawn],
                    Y_sq_norms=self.class_sq_norms[c],
                )
            width = block.shape[1]
            if (np.diff(into) == 1).all():
                self.store[into[0] : into[-1] + 1, :width] = block  # fresh slots: one run
            else:
                self.store[into, :width] = block


class NumpyPairSteps(HostCacheCounts):
    """SBP steps of every pair of a :class:`PairStack` at once; ``phases.seconds``
    records the time of each part of the steps (``level``, ``draw``, ``rows``,
    ``update``), over all pairs."""

    kernel_values_source = "cache"  # a host cache of kernel rows, cut by class (its counts: class blocks)

    def __init__(self, stack, cache_bytes):
        self.stack = stack
        n_pairs, batch = stack.n_pairs, stack.batch_size
        self.n_train = stack.n_train  # (P,) training rows of each pair, read every step
        self.columns = stack.columns()
        column = np.arange(stack.width)
        first_width = stack.block_widths[:, :1]
        in_second = column - first_width  # position in the second class's block (< 0: in the first's)
        train_first, train_second = (stack.class_train[stack.pairs[:, side]][:, None] for side in (0, 1))
        self.first = column < first_width  # the pair's first (positive) class
        self.train = (column < train_first) | ((in_second >= 0) & (in_second < train_second))
        self.holdout = (self.columns >= 0) & ~self.train
        self.labels = np.where(self.train, np.where(self.first, 1.0, -1.0), 0.0)
        # y_j for training columns, 1 for holdout columns, 0 for padding: <u, Phi(x_j)> to a response
        self.signs = self.labels + self.holdout
        positive = self.train & self.first
        classes = (positive, self.train & ~positive) if stack.fit_intercept else (self.train,)
        self.classes = [class_offsets(mask) for mask in classes]  # as the level search takes them
        self.class_ranks = class_ranks(self.classes)
        self.sq_norms = squared_row_norms(stack.X)
        self.eta0 = stack.first_step_sizes(self.sq_norms)
        block_bytes = max(rows.size for rows in stack.class_rows) * stack.X.dtype.itemsize
        # a step's blocks must all be kept: at least two batches of every pair (two blocks a row)
        self.cache = ClassBlockCache(stack, self.sq_norms, max(cache_bytes, 4 * n_pairs * batch * block_bytes))
        # where each column's value lies in the product of a step, rows (2 p, 2 p + 1) for
        # pair p's two blocks: ``2 p * block width + block_position`` (padding: anything finite)
        block_width = self.cache.store.shape[1]
        self.block_position = np.where(self.first, column, np.where(self.columns >= 0, block_width + in_second, 0))
        self.product_position = self.block_position + 2 * block_width * np.arange(n_pairs)[:, None]  # all active
        self.A, self.stamps = np.zeros((n_pairs, stack.width)), np.zeros((n_pairs, stack.width))
        self.R, self.R_sum = np.zeros((n_pairs, stack.width)), np.zeros((n_pairs, stack.width))
        self.scale, self.r2, self.scale_sum = np.ones(n_pairs), np.zeros(n_pairs), np.zeros(n_pairs)
        self.n_steps = np.zeros(n_pairs, dtype=np.int64)
        self.window = self.checkpoint_window = FIRST_WINDOW
        self._work_rows = None  # the level search's room, kept from step to step
        self._bits_block = 0, np.empty((stack.n_pairs, 0, stack.batch_size), dtype=np.uint64)
        self.phases = PhaseClock(STEP_PHASES)

    def step(self, step, eta, active):
        """Step ``step`` (from 1) of the ``active`` pairs (int array) with step sizes ``eta``."""
        with self.phases.phase("level", "sbp.water_level", "purple"):
            covered = self._covered(active)
        with self.phases.phase("draw", "sbp.draw", "yellow"):
            draws = self._draw(step, active, covered)
        with self.phases.phase("rows", "sbp.kernel_row", "orange"):
            direction = self._direction(active, draws)
        with self.phases.phase("update", "sbp.update", "green"):
            self._update(active, draws, direction, eta)
        self.n_steps[active] = step

    def host_threads(self):
        """The context the steps run in: BLAS on one thread but for large fills
        (:func:`_one_blas_thread`), entered once for all the steps (entering it costs a
        tenth of a millisecond)."""
        return _one_blas_thread(self.cache)

    def _of(self, array, active):
        """``array[active]``: the array itself (no copy) while every pair is active."""
        return array if active.size == self.stack.n_pairs else array[active]

    def _covered(self, active):
        """Which training columns of each active pair the water covers."""
        # the level of scale * R is scale times the level of R with volume / scale
        volumes = self.stack.nu * self.n_train[active] / self.scale[active]
        responses = self._of(self.R, active)
        _, _, edges, counts = levels_of_rows(
            responses,
            [self._of(offsets, active) for offsets in self.classes],
            volumes,
            self.window,
            work=self._work(active.size),
            ranks=self._of(self.class_ranks, active),
        )
        self.window = lowest_needed(int(counts.max()))
        if self.stack.fit_intercept:
            threshold = np.where(self._of(self.first, active), edges[:, :1], edges[:, 1:])
        else:
            threshold = edges[:, :1]
        covered = responses <= threshold
        covered &= self._of(self.train, active)
        return covered

    def _work(self, n_active):
        """Room for the level search's per-class values of ``n_active`` pairs, kept
        from step to step (fresh memory costs page faults at every step)."""
        if self._work_rows is None:
            self._work_rows = np.empty((len(self.classes), self.stack.n_pairs, self.stack.width))
        return list(self._work_rows[:, :n_active])

    def _draw(self, step, active, covered):
        """``B`` columns per active pair, uniformly from its covered ones (each on its own
        stream, as the pair's binary fit draws), as :class:`_Draws`."""
        counts = np.count_nonzero(covered, axis=1)
        positions = positions_below(self._stream_bits(step)[active], counts)
        flat = np.flatnonzero(covered)  # by pair, then ascending: each pair's covered columns
        drawn = flat[(np.cumsum(counts) - counts)[:, None] + positions]  # flat positions in (len(active), W)
        # each pair's own positions are its row's: sorted row by row, all of them are sorted
        ordered = np.sort(drawn, axis=1).ravel()
        first = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        distinct, multiplicity = ordered[first], np.diff(first, append=ordered.size)
        pair, column = np.divmod(distinct, covered.shape[1])  # pairs by position in active, ascending
        return _Draws(pair, column, multiplicity)

    def _stream_bits(self, step):
        """Every pair's random bits at ``step`` (pairs by lanes), from a block of
        ``BITS_BLOCK_STEPS`` steps drawn at once."""
        first, block = self._bits_block
        if not first <= step < first + block.shape[1]:
            first = step
            block = stream_bits_block(self.stack.seeds, first, BITS_BLOCK_STEPS, self.stack.batch_size)
            self._bits_block = first, block
        return block[:, step - first]

    def _direction(self, active, draws):
        """``<u, Phi(x_j)>`` of each active pair over its columns, (len(active), W)
        float64: the pairs' weights times their drawn rows' blocks, in one product."""
        pair, batch = draws.pair, self.stack.batch_size
        weights = self.labels[active[pair], draws.column] * draws.multiplicity / batch
        row = self.columns[active[pair], draws.column]
        block_keys = self.stack.pairs[active[pair]] * self.cache.n_data_rows + row[:, None]  # (g, a) and (g, b)
        slots = self.cache.block_slots(block_keys)
        # product row 2 p + side: pair p's weights over the blocks of its class `side`; a
        # pair's draws are consecutive, so its side-0 entries go to its first row, then
        # its side-1 entries to its second
        per_pair = np.bincount(pair, minlength=active.size)
        side_0 = (np.cumsum(per_pair) - per_pair)[pair] + np.arange(pair.size)
        side_1 = side_0 + per_pair[pair]
        block_slots, block_weights = np.empty(2 * pair.size, dtype=np.int64), np.empty(2 * pair.size)
        block_slots[side_0], block_slots[side_1] = slots[:, 0], slots[:, 1]
        block_weights[side_0] = block_weights[side_1] = weights
        row_starts = np.concatenate([[0], np.cumsum(np.repeat(per_pair, 2))])
        halves = weighted_row_sums(self.cache.store, block_weights, block_slots, row_starts)
        if active.size == self.stack.n_pairs:
            return np.take(halves, self.product_position)
        at = self.block_position[active] + (2 * self.cache.store.shape[1]) * np.arange(active.size)[:, None]
        return np.take(halves, at)

    def _update(self, active, draws, direction, eta):
        """``A``, the responses, their sums and norms of the active pairs after a step
        along ``direction`` (as :meth:`NumpySBPSteps.step`, row-wise)."""
        batch = self.stack.batch_size
        direction *= self._of(self.signs, active)
        scale = self.scale[active]
        pair, column, multiplicity = draws.pair, draws.column, draws.multiplicity
        at = (active[pair], column)
        # the means over each pair's B draws, a draw counted as often as it was drawn
        old = np.bincount(pair, self.R[at] * multiplicity, minlength=active.size) * scale / batch
        along = np.bincount(pair, direction[pair, column] * multiplicity, minlength=active.size) / batch
        self.r2[active] += 2 * eta * old + eta**2 * along
        increment = eta / (batch * scale)
        self.A[at] += increment[pair] * multiplicity  # each (pair, column) once: a plain += adds them
        self.stamps[at] += (increment * self.scale_sum[active])[pair] * multiplicity
        step_size = eta / scale
        r2 = self.r2[active]
        outside = r2 > 1
        scale[outside] /= np.sqrt(r2[outside])
        r2[outside] = 1.0
        self.scale[active], self.r2[active] = scale, r2
        self.scale_sum[active] += scale
        direction *= step_size[:, None]
        if active.size == self.stack.n_pairs:  # in place (active is every pair, in order)
            self.R += direction
            np.multiply(self.R, scale[:, None], out=direction)
            self.R_sum += direction
        else:
            responses = self.R[active] + direction
            self.R[active] = responses
            self.R_sum[active] += responses * scale[:, None]
        tiny = active[scale < RENORMALIZE_BELOW]
        if tiny.size:
            self._renormalize(tiny)

    def _renormalize(self, pairs):
        """Fold these pairs' scales into A and R, keeping the running sums unchanged."""
        self.stamps[pairs] -= self.A[pairs] * self.scale_sum[pairs, None]  # now: minus the sum so far
        for array in (self.A, self.R):
            array[pairs] *= self.scale[pairs, None]
        self.scale[pairs] = 1.0
        self.scale_sum[pairs] = 0.0

    def responses(self, average, pairs):
        """The responses (training and holdout columns) of these pairs' models: averaged
        over each pair's steps so far, or of the last iterate."""
        if not average:
            return self.scale[pairs, None] * self.R[pairs]
        return self.R_sum[pairs] / np.maximum(1, self.n_steps[pairs])[:, None]

    def alpha(self, average, pairs):
        """``alpha`` of these pairs' models, over their columns (as :meth:`responses`)."""
        if not average:
            return self.scale[pairs, None] * self.A[pairs]
        steps = np.maximum(1, self.n_steps[pairs])[:, None]
        return (self.A[pairs] * self.scale_sum[pairs, None] - self.stamps[pairs]) / steps

    def evaluate(self, average, pairs):
        """Level and bias of these pairs' models, and their holdout errors (NaN: no holdout)."""
        responses = self.responses(average, pairs)
        level, bias = self._levels(responses, pairs)
        holdout = self.holdout[pairs]
        predicted_first = (responses + bias[:, None]) / positive_level(level)[:, None] > 0
        wrong = ((predicted_first != self.first[pairs]) & holdout).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return level, bias, wrong / holdout.sum(axis=1)

    def _levels(self, responses, pairs):
        """Level and bias of these pairs' models from their ``responses`` (a checkpoint's)."""
        level, bias, _, counts = levels_of_rows(
            responses,
            [self._of(offsets, pairs) for offsets in self.classes],
            self.stack.nu * self.n_train[pairs],
            self.checkpoint_window,
            work=self._work(pairs.size),
            ranks=self._of(self.class_ranks, pairs),
        )
        self.checkpoint_window = lowest_needed(int(counts.max()))
        return level, bias

    def coefficients(self, average, pair):
        """``alpha`` of pair ``pair``'s training rows, shape (1, n_train)."""
        return self.alpha(average, np.array([pair]))[:, self.train[pair]]


@dataclasses.dataclass(frozen=True)
class _Draws:
    """A step's draws, each distinct (pair, column) once: the pair's position in the
    active pairs (ascending), the column, and how many of the pair's ``B`` draws it got."""

    pair: np.ndarray
    column: np.ndarray
    multiplicity: np.ndarray


_BLAS_CONTROLLERS = {}  # process id -> its threadpoolctl controller (found once: it inspects the loaded libraries)


def _blas_controller():
    """This process's threadpoolctl controller."""
    from threadpoolctl import ThreadpoolController  # scikit-learn's dependency, imported on first use

    pid = os.getpid()
    if pid not in _BLAS_CONTROLLERS:
        _BLAS_CONTROLLERS[pid] = ThreadpoolController()
    return _BLAS_CONTROLLERS[pid]


class _BlasThreadLimit:
    """BLAS on one thread while any stack's steps run in this process, counted process-wide:
    BLAS's threads are a setting of the process, not of a thread, so fits that overlap (in
    threads: a grid search's jobs, two models trained at once) share one limit. The first
    to enter limits BLAS to one thread and records the threads it had; the last to leave
    restores them (each fit restoring what it found left BLAS on one thread for the rest of
    the process when two fits overlapped). Large fills (``all_threads``) likewise: the first
    sets BLAS back to the recorded threads, the last to one again while steps still run.
    Each change is made by :func:`_set_blas_threads`, from whichever thread enters or leaves."""

    def __init__(self):
        self.lock = threading.Lock()
        self.holders = 0  # stacks stepping in this process
        self.widening = 0  # large fills running on all of BLAS's threads
        self.threads = None  # BLAS's threads when the first holder entered
        self.limiter = None  # threadpoolctl's limit of the first holder: it restores the threads

    @contextlib.contextmanager
    def one_thread(self):
        """BLAS on one thread while this context and any other's overlapping it last;
        yields the threads BLAS had before the first of them."""
        with self.lock:
            if self.holders == 0:
                blas = [info["num_threads"] for info in _blas_controller().info() if info["user_api"] == "blas"]
                self.threads = max(blas, default=1)
                self.limiter = _set_blas_threads(1)
            self.holders += 1
        try:
            yield self.threads
        finally:
            with self.lock:
                self.holders -= 1
                if self.holders == 0:
                    _set_blas_threads(None, self.limiter)
                    self.limiter = None

    @contextlib.contextmanager
    def all_threads(self):
        """BLAS on the threads it had before the steps (inside :meth:`one_thread`)."""
        with self.lock:
            if self.widening == 0:
                _set_blas_threads(self.threads)
            self.widening += 1
        try:
            yield
        finally:
            with self.lock:
                self.widening -= 1
                if self.widening == 0 and self.holders:
                    _set_blas_threads(1)


def _set_blas_threads(threads, limiter=None):
    """BLAS on ``threads`` threads (threadpoolctl's limit, returned), or ``limiter``'s
    original threads again; then no thread holds OpenBLAS's limit. threadpoolctl (3.8) lets
    only the thread that last set OpenBLAS's limit set it again while that thread lives,
    unless it releases it: a fit's thread that limited BLAS would keep any other thread,
    the last fit to leave among them, from restoring it. A limit a thread holds in a
    ``threadpool_limits`` context (the caller's own) still wins: ours are then ignored."""
    if limiter is None:
        limiter = _blas_controller().limit(limits=threads, user_api="blas")
    else:
        limiter.restore_original_limits()
    from threadpoolctl import OpenBLASController

    release = getattr(OpenBLASController, "clear_controlling_thread", None)  # threadpoolctl < 3.8: no holder
    if release is not None:
        release()  # only when this thread holds it
    return limiter


_BLAS_THREADS = {}  # process id -> its _BlasThreadLimit (a forked process counts its own fits)


def _blas_thread_limit():
    """This process's :class:`_BlasThreadLimit`."""
    return _BLAS_THREADS.setdefault(os.getpid(), _BlasThreadLimit())


@contextlib.contextmanager
def _one_blas_thread(cache):
    """BLAS on one thread while a stack's steps run (:class:`_BlasThreadLimit`, shared by
    the process's fits), and ``cache.blas_threads`` set to the threads BLAS had before, for
    its large fills. A fill is mostly a few drawn rows by one class (often two rows by a
    thousand), a product too small to share out, and BLAS's threads, which wait for work
    spinning, then take the cores from the step's own work and from other processes (where
    few cores are shared with other work, the fills then cost many times their arithmetic)."""
    with _blas_thread_limit().one_thread() as threads:
        cache.blas_threads = threads
        try:
            yield
        finally:
            cache.blas_threads = None
