"""A least-recently-used cache of kernel-matrix rows, on the host.

The Stochastic Batch Perceptron draws its rows from the examples below the water level,
a small set that changes slowly, so the same rows come back again and again: a cache
turns most steps from ``n * d`` work (a kernel row) into ``n`` (a read).  When every row
fits, the cache is the full kernel matrix, filled only where it is used.  A step needs
only a weighted sum of its rows (:meth:`KernelRowCache.combine`): one sparse product
reads them where they lie, without gathering them first.

Rows are computed in blocks: on a miss, rows the caller expects to need soon come along
(up to ``BLOCK_BYTES``), so that one matrix product (BLAS-3, at compute speed) replaces
many row-at-a-time products (each a pass over X, at memory speed).  A miss of more rows
than a block holds is computed in several products of at most a block each, so that a
product's memory stays bounded however many rows a call asks for.  Prefetching earns
its room: the rows prefetched so far stay within twice those of them later asked for
(plus ``PREFETCH_START``), so when the caller's guesses are poor (early in SBP, while the
water moves fast) few rows are wasted, and when they are good the blocks grow to full size.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import sparse

# Memory of one block of rows computed together on a miss (rows asked for plus prefetched),
# and the most one product of rows takes.
BLOCK_BYTES = 8 * 2**20
# Rows prefetched in all stay within twice those of them used since, plus this many: a
# wasted prefetch costs at most about as much as the rows it served.
PREFETCH_START = 16
# cache_size='auto': this share of the memory the process may still take (the host's available
# memory, at most what its address-space and cgroup limits leave), and the megabytes assumed
# available when neither psutil nor sysconf can tell the host's.
AUTO_CACHE_SHARE = 0.25
AVAILABLE_MEMORY_UNKNOWN_MB = 1024
# A cache thrashes when it computed its rows more than this many times over on average.
THRASH_RECOMPUTES = 3
# A host cache stops taking fresh slots once the host's available memory falls below this
# share of its total, and evicts from then on: parallel fits (a grid search's jobs), each
# sized at its start, would otherwise fill their caches together, into swap or the OOM
# killer. The available memory is read at the first fresh slot, then each time this many
# bytes of fresh slots have been taken.
MEMORY_FLOOR_SHARE = 0.10
MEMORY_CHECK_BYTES = 256 * 2**20


class KernelRowCache:
    """Rows ``K(x_i, Z)`` of a fixed kernel matrix, computed on demand and kept.

    Parameters
    ----------
    compute_rows : callable
        ``compute_rows(indices) -> array of shape (len(indices), n_columns)``.
    n_rows, n_columns : int
        Shape of the whole matrix.
    dtype : dtype
        Dtype of the rows.
    max_bytes : int
        Memory for kept rows; at least one row is always kept.
    empty : callable, default=numpy.empty
        Allocates the store, ``empty(shape, dtype=dtype)``: ``cupy.empty`` keeps the rows
        on a device (their bookkeeping stays on the host).
    block_bytes : int, default=BLOCK_BYTES
        Memory of one call of ``compute_rows``: rows prefetched on a miss fill its block
        up to this, and a miss of more rows than a block holds is computed in several
        calls of at most ``product_rows`` rows each.
    product_row_bytes : int, optional
        Memory one row takes while ``compute_rows`` computes it: its row of the result
        plus its share of the product's temporaries. None: the row's own bytes (the
        result alone).
    on_host : bool, default=True
        Whether the store is host memory: then the cache stops growing when the host's
        available memory falls below ``MEMORY_FLOOR_SHARE`` of its total (the store's
        pages are taken as its slots are first written).

    Attributes
    ----------
    capacity : int
        Rows the store holds.
    grow_limit : int
        Slots the cache fills before it evicts: ``capacity``, or the slots in use when
        the host's memory ran low (``memory_bound``).
    product_rows : int
        The most rows one call of ``compute_rows`` computes (``block_bytes`` over
        ``product_row_bytes``).
    block_rows : int
        The most rows computed on a miss with those prefetched: ``product_rows``, and at
        most half the cache.
    rows_computed : int
        Rows computed so far, recomputations included.
    rows_distinct : int
        Distinct rows computed so far (``ever_computed``, a mask of the rows, counts
        them): ``rows_computed`` over this is how many times over a row was computed.
    """

    def __init__(
        self,
        compute_rows,
        n_rows,
        n_columns,
        dtype,
        max_bytes,
        empty=np.empty,
        block_bytes=BLOCK_BYTES,
        product_row_bytes=None,
        on_host=True,
    ):
        self.compute_rows = compute_rows
        self.row_bytes = row_bytes = max(1, n_columns * np.dtype(dtype).itemsize)
        self.capacity = self.grow_limit = int(min(n_rows, max(1, max_bytes // row_bytes)))
        self.memory_check_rows = max(1, MEMORY_CHECK_BYTES // row_bytes) if on_host else None
        self.next_memory_check = 0 if on_host else None  # slots in use at which memory is read next
        self.memory_bound = False
        self.product_rows = int(max(1, block_bytes // (row_bytes if product_row_bytes is None else product_row_bytes)))
        # prefetch at most half the cache per miss, so a small cache does not evict what it serves
        self.block_rows = int(max(1, min(self.product_rows, self.capacity // 2)))
        self.store = empty((self.capacity, n_columns), dtype=dtype)
        self.slot_of_row = np.full(n_rows, -1, dtype=np.int64)
        self.row_in_slot = np.full(self.capacity, -1, dtype=np.int64)
        self.last_used = np.full(self.capacity, -1, dtype=np.int64)
        self.n_used = 0  # slots filled so far (they fill in order)
        self.clock = 0
        self.rows_computed = 0
        self.ever_computed = np.zeros(n_rows, dtype=bool)
        self.prefetched_slot = np.zeros(self.capacity, dtype=bool)  # filled by prefetch, not yet asked for
        self.prefetched = 0  # rows prefetched so far
        self.prefetch_used = 0  # of those, rows later asked for

    def rows(self, indices, prefetch=None, order=None):
        """The rows of distinct ``indices`` (int array), shape ``(len(indices), n_columns)``;
        with ``order``, the rows of ``indices[order]`` (repeats allowed), gathered in
        one copy.

        ``prefetch``, a callable returning row indices, most wanted first, is called on
        a miss: the first of its rows not yet kept are computed in the same block, up to
        ``block_rows`` in all and as many as prefetching has earned, and kept (they are
        not returned).
        """
        if indices.size > self.capacity:  # more than the cache holds: no caching this time
            self.clock += 1
            self.rows_computed += indices.size
            self.ever_computed[indices] = True
            computed = self.compute_rows(indices)
            return computed if order is None else computed[order]
        slots = self.slots(indices, prefetch)
        return self.store[slots if order is None else slots[order]]

    def slots(self, indices, prefetch=None):
        """The slots of ``store`` holding the rows of distinct ``indices`` (at most
        ``capacity`` of them), computing the missing ones (``prefetch``: as :meth:`rows`).
        For a product with the rows where they lie, without gathering them."""
        self.clock += 1
        slots = self.slot_of_row[indices]
        hit = slots >= 0
        self.last_used[slots[hit]] = self.clock  # hits are now the most recent: never evicted below
        self.prefetch_used += int(np.count_nonzero(self.prefetched_slot[slots[hit]]))
        self.prefetched_slot[slots[hit]] = False
        missing = indices[~hit]
        if missing.size:
            asked = missing.size
            room = min(self.block_rows, self.grow_limit - indices.size)  # never evict this call's hits
            earned = 2 * self.prefetch_used + PREFETCH_START - self.prefetched
            if prefetch is not None and min(room - asked, earned) > 0:
                missing = np.concatenate([missing, self._not_kept(prefetch(), missing, min(room - asked, earned))])
            new_slots = self._free_slots(missing.size)
            evicted = self.row_in_slot[new_slots]
            self.slot_of_row[evicted[evicted >= 0]] = -1
            self._fill(missing, new_slots)
            self.rows_computed += missing.size
            self.ever_computed[missing] = True
            self.slot_of_row[missing] = new_slots
            self.row_in_slot[new_slots] = missing
            self.last_used[new_slots] = self.clock
            self.prefetched_slot[new_slots] = False
            self.prefetched_slot[new_slots[asked:]] = True
            self.prefetched += missing.size - asked
            slots = self.slot_of_row[indices]
        return slots

    @property
    def rows_distinct(self):
        return int(np.count_nonzero(self.ever_computed))

    def use(self):
        """What the cache has done so far: a :class:`RowCacheUse`."""
        kept = self.grow_limit if self.memory_bound else self.capacity
        return RowCacheUse(self.rows_computed, self.rows_distinct, kept, self.row_bytes, self.memory_bound)

    def combine(self, weights, indices, prefetch=None):
        """``weights @ K[indices]``, float64 of shape ``(len(weights), n_columns)``, for
        distinct ``indices`` (``prefetch``: as :meth:`rows`), summed in the order of
        ``indices`` (see :func:`weighted_row_sums`)."""
        weights = np.atleast_2d(weights)
        if indices.size > self.capacity:
            return weights @ self.rows(indices).astype(np.float64, copy=False)
        slots = self.slots(indices, prefetch)
        if weights.shape[0] == 1:
            return weighted_row_sums(self.store, weights[0], slots, np.array([0, slots.size]))
        nonzero = weights != 0  # one-vs-rest: each problem weighs only its own draws
        row_starts = np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))])
        return weighted_row_sums(
            self.store, weights[nonzero], np.broadcast_to(slots, weights.shape)[nonzero], row_starts
        )

    def _fill(self, indices, slots):
        """Compute the rows of ``indices`` into ``store[slots]``, ``product_rows`` at a
        time: a miss of many rows (a step's drawn rows, all new) never makes one product
        larger than a block."""
        for start in range(0, indices.size, self.product_rows):
            stop = start + self.product_rows
            self._fill_block(indices[start:stop], slots[start:stop])

    def _fill_block(self, indices, slots):
        """Compute the rows of ``indices`` (at most ``product_rows``) into
        ``store[slots]`` (a subclass may compute them its own way). A block computed apart
        and then copied, which measured faster than computing in place in the store
        (``docs/benchmarks.md``, "Figures behind the code")."""
        self.store[slots] = self.compute_rows(indices)

    def _not_kept(self, candidates, asked, count):
        """The first ``count`` distinct rows of ``candidates`` (in the caller's order of
        preference) that are neither kept nor ``asked``."""
        candidates = candidates[(self.slot_of_row[candidates] < 0) & ~np.isin(candidates, asked)]
        _, first = np.unique(candidates, return_index=True)
        return candidates[np.sort(first)[:count]]

    def _free_slots(self, count):
        """``count`` slots to fill: unused ones first (up to ``grow_limit``), then the
        least recently used."""
        filled = self.n_used
        if self.next_memory_check is not None and self.next_memory_check <= filled < self.capacity:
            self._check_host_memory()
        fresh = max(0, min(count, self.grow_limit - filled))
        evicted = np.empty(0, dtype=np.int64)
        if fresh < count:  # rows used at this clock are hits of the current call: keep them
            candidates = np.flatnonzero(self.last_used[:filled] < self.clock)
            # past the memory floor a call may ask for more rows than it may evict: those
            # take fresh slots still (within capacity, as they always fit; prefetched rows
            # never need them, as the prefetch fits in grow_limit)
            fresh = max(fresh, count - candidates.size)
            if count > fresh:
                evicted = candidates[np.argpartition(self.last_used[candidates], count - fresh - 1)[: count - fresh]]
        self.n_used += fresh
        self.grow_limit = max(self.grow_limit, self.n_used)
        return np.concatenate([np.arange(filled, filled + fresh), evicted])

    def _check_host_memory(self):
        """Stop growing (``memory_bound``) when the host's available memory is below
        ``MEMORY_FLOOR_SHARE`` of its total; else read it again ``MEMORY_CHECK_BYTES`` on."""
        if host_memory_low():
            self.grow_limit, self.memory_bound, self.next_memory_check = self.n_used, True, None
        else:
            self.next_memory_check = self.n_used + self.memory_check_rows


@dataclasses.dataclass(frozen=True)
class RowCacheUse:
    """How a row cache of ``capacity`` rows of ``row_bytes`` was used: rows computed, and
    distinct rows among them."""

    rows_computed: int
    rows_distinct: int
    capacity: int
    row_bytes: int
    memory_bound: bool = False  # it stopped growing at capacity rows: the host's memory ran low

    @property
    def thrashed(self):
        """Rows computed more than ``THRASH_RECOMPUTES`` times over on average, because more
        distinct rows were needed than the cache holds."""
        return self.rows_distinct > self.capacity and self.rows_computed > THRASH_RECOMPUTES * self.rows_distinct

    def warning(self, parameter, value, unit):
        """The message of a thrashing cache sized by ``parameter=value`` (its ``unit``:
        'MB' or 'bytes'): what it holds, how often rows were recomputed, what to set."""
        scale = 2**20 if unit == "MB" else 1
        needed = -(-self.rows_distinct * self.row_bytes // scale)
        if self.memory_bound:
            return (
                f"The kernel row cache thrashed: it stopped growing at {self.capacity} rows "
                f"({self.capacity * self.row_bytes / 2**20:.3g} MB) of the {self.rows_distinct} distinct rows the fit "
                f"needed, when the host's available memory fell below {MEMORY_FLOOR_SHARE:.0%} of its total, so it "
                f"computed rows {self.rows_computed / self.rows_distinct:.1f} times over on average "
                f"({self.rows_computed} rows). Free memory, or run fewer fits at once."
            )
        return (
            f"The kernel row cache thrashed: {parameter}={value!r} kept {self.capacity} rows "
            f"({self.capacity * self.row_bytes / 2**20:.3g} MB) of the {self.rows_distinct} distinct rows the fit "
            f"needed, so it computed rows {self.rows_computed / self.rows_distinct:.1f} times over on average "
            f"({self.rows_computed} rows). Set {parameter} to at least {needed} ({unit}) to keep them all."
        )


def available_memory_bytes():
    """:func:`memory_headroom_bytes`, with ``AVAILABLE_MEMORY_UNKNOWN_MB`` for the host's
    available memory where it cannot be read. Every automatic cache is sized from this: the
    host's memory alone let a process under a limit size a cache it could not allocate
    (``MemoryError``), or one that got it killed."""
    host = read_available_memory_bytes()
    return _least(AVAILABLE_MEMORY_UNKNOWN_MB * 2**20 if host is None else host, *_process_headrooms())


def memory_headroom_bytes():
    """The memory this process may still take: the least of the host's available memory
    (:func:`read_available_memory_bytes`), its address-space headroom
    (:func:`address_space_headroom_bytes`: ``ulimit -v``) and its control group's
    (:func:`cgroup_headroom_bytes`: a container's memory limit); None when none can be read."""
    return _least(read_available_memory_bytes(), *_process_headrooms())


def _process_headrooms():
    """What this process's own limits leave it: its address space's, its cgroup's (None: no limit)."""
    return address_space_headroom_bytes(), cgroup_headroom_bytes()


def _least(*readings):
    """The least of the readings that are known (not None), at least 0; None when none is."""
    known = [reading for reading in readings if reading is not None]
    return max(0, min(known)) if known else None


def address_space_headroom_bytes():
    """What ``RLIMIT_AS`` (``ulimit -v``) leaves this process: the limit less its virtual
    size now (Linux's ``/proc/self/statm``, else psutil's), or None without a limit (or
    where ``resource`` is missing). An allocation fails past the limit however much memory
    is free, and a process's virtual size counts what it maps, touched or not."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit == resource.RLIM_INFINITY or limit < 0:
        return None
    size = _virtual_size_bytes()
    return limit if size is None else limit - size


def _virtual_size_bytes(path="/proc/self/statm"):
    """This process's virtual memory size: the first field of Linux's ``statm`` (pages),
    else psutil's ``vms``, else None."""
    try:
        with open(path) as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.Process().memory_info().vms)


# A cgroup v1 limit at least this large is no limit ("unlimited" reads as 2^63 rounded to pages).
CGROUP_NO_LIMIT = 2**60


def cgroup_headroom_bytes(root="/sys/fs/cgroup", membership="/proc/self/cgroup"):
    """What this process's control group, and every group above it, leaves it: the least of
    each memory limit less the group's usage (less its inactive file pages, which the
    kernel reclaims before it fails an allocation), from cgroup v2's ``memory.max`` and
    ``memory.current`` or v1's ``memory.limit_in_bytes`` and ``memory.usage_in_bytes``
    under ``root``; None without a limit, or off Linux. The group's path in
    ``membership`` is looked up under ``root``, then, where a container shows only its own
    part of the tree, ``root`` itself."""
    try:
        with open(membership) as lines:
            entries = [line.rstrip("\n").split(":", 2) for line in lines]
    except OSError:
        return None
    headrooms = []
    for entry in entries:
        if len(entry) != 3:
            continue
        _, controllers, path = entry
        if controllers == "":  # cgroup v2: the unified tree
            files = (root, "memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):  # cgroup v1: the memory controller's tree
            files = (
                os.path.join(root, "memory"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            )
        else:
            continue
        headrooms += _cgroup_tree_headrooms(path, *files)
    return min(headrooms) if headrooms else None


def _cgroup_tree_headrooms(path, tree, limit_name, usage_name, inactive_name):
    """The headroom (limit less working set) of each limited group from ``path`` up to the
    top of ``tree``; the top alone when ``path`` is not found there."""
    directory = os.path.join(tree, path.lstrip("/"))
    if not os.path.isdir(directory):
        directory = tree
    headrooms = []
    while True:
        limit = _read_cgroup_number(os.path.join(directory, limit_name))
        usage = _read_cgroup_number(os.path.join(directory, usage_name))
        if limit is not None and limit < CGROUP_NO_LIMIT and usage is not None:
            inactive = _cgroup_stat(os.path.join(directory, "memory.stat"), inactive_name) or 0
            headrooms.append(limit - max(0, usage - inactive))
        parent = os.path.dirname(directory)
        if os.path.normpath(directory) == os.path.normpath(tree) or parent == directory:
            return headrooms
        directory = parent


def _read_cgroup_number(path):
    """The number in a cgroup file; None for 'max' (no limit) or when it cannot be read."""
    try:
        with open(path) as file:
            text = file.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def _cgroup_stat(path, name):
    """The value of ``name`` in a cgroup's ``memory.stat``, or None."""
    try:
        with open(path) as stat:
            for line in stat:
                key, _, value = line.partition(" ")
                if key == name:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def read_available_memory_bytes():
    """The host's available memory: psutil's reading when psutil is installed, else
    Linux's ``MemAvailable``, else the free pages that ``sysconf`` counts (fewer: the
    page cache is not free), else None."""
    try:
        import psutil
    except ImportError:
        pass
    else:
        return int(psutil.virtual_memory().available)
    available = _meminfo_available_bytes()
    if available is not None:
        return available
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def host_memory_low():
    """Whether the host's available memory is below ``MEMORY_FLOOR_SHARE`` of its total;
    False when either cannot be read."""
    available, total = read_available_memory_bytes(), total_memory_bytes()
    return available is not None and total is not None and available < MEMORY_FLOOR_SHARE * total


def total_memory_bytes():
    """The host's physical memory (psutil's, else ``sysconf``'s), or None when neither
    can tell."""
    try:
        import psutil
    except ImportError:
        pass
    else:
        return int(psutil.virtual_memory().total)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def _meminfo_available_bytes(path="/proc/meminfo"):
    """``MemAvailable`` of Linux's ``/proc/meminfo`` in bytes, or None elsewhere."""
    try:
        with open(path) as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def cache_bytes(cache_size, full_bytes):
    """Bytes of a host row cache for ``cache_size``: megabytes (a number, as SVC's
    ``cache_size``), or 'auto': ``AUTO_CACHE_SHARE`` of the memory this process may still
    take (:func:`available_memory_bytes`, read now), at most ``full_bytes``, all the rows
    the cache could ever hold. A quarter leaves the rest to X, the steps' arrays and
    the other processes, while a cache that holds every row computes each once."""
    if cache_size == "auto":
        return int(min(full_bytes, AUTO_CACHE_SHARE * available_memory_bytes()))
    return int(cache_size * 2**20)


def weighted_row_sums(store, weights, slots, row_starts):
    """``sum_j weights[j] * store[slots[j]]`` over ``j`` in ``row_starts[r]:row_starts[r + 1]``
    for each output row ``r``, float64 of shape ``(len(row_starts) - 1, store.shape[1])``.

    Sparse products that read the rows where they lie in the store, summing each output
    row in the order of its entries; a large product is split by output rows over the
    cores (the same sums). The sums are in the store's dtype: a float32 store (float32 X)
    is read at half the bytes, and its sums of a step's drawn rows carry float32 rounding
    like the kernel values they add (what they are added to stays float64).
    """
    n_out = len(row_starts) - 1
    weights = weights.astype(store.dtype)
    if weights.size <= SUMMED_ROW_BY_ROW:  # a few rows: cheaper than building the sparse matrix
        out = np.zeros((n_out, store.shape[1]), dtype=store.dtype)
        for r in range(n_out):
            for j in range(row_starts[r], row_starts[r + 1]):
                out[r] += weights[j] * store[slots[j]]
        return out.astype(np.float64, copy=False)
    out = np.empty((n_out, store.shape[1]), dtype=store.dtype)
    chunks = min(n_out, _PRODUCT_THREADS, max(1, int(weights.size) * store.shape[1] // THREADED_PRODUCT_MIN))
    bounds = np.searchsorted(row_starts, np.linspace(0, row_starts[-1], chunks + 1)[1:-1])  # even nonzeros
    pieces = np.concatenate([[0], bounds, [n_out]])

    def product(first, last):
        start, stop = row_starts[first], row_starts[last]
        part = sparse.csr_matrix(
            (weights[start:stop], slots[start:stop], row_starts[first : last + 1] - start),
            shape=(last - first, store.shape[0]),
        )
        out[first:last] = part @ store

    if chunks > 1:  # scipy's product releases the GIL: threads share the cores
        list(_thread_pool().map(product, pieces[:-1], pieces[1:]))
    else:
        product(0, n_out)
    return out.astype(np.float64, copy=False)


# Sums of at most this many rows are added up one row at a time.
SUMMED_ROW_BY_ROW = 4
# A product of at least this many multiply-adds (about a millisecond) is split over threads.
THREADED_PRODUCT_MIN = 2**20
_PRODUCT_THREADS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
_POOLS = {}  # process id -> its pool: a forked process has none of its parent's threads


def _thread_pool():
    """This process's threads for the split products, started on first use."""
    pid = os.getpid()
    if pid not in _POOLS:
        _POOLS[pid] = ThreadPoolExecutor(_PRODUCT_THREADS, thread_name_prefix="gpusvm-product")
    return _POOLS[pid]
