"""The dask side of a distributed fit: the client, the input collections, the shards on
the workers, and resuming an epoch when a worker leaves.

Nothing here schedules or communicates by itself: tasks go through dask.distributed's
client and scheduler, rows move only as task inputs from the worker that holds them.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
import warnings

import dask
import numpy as np
from dask.array import Array
from dask.core import flatten
from distributed import Client, default_client, futures_of, wait

from ._shards import add_partition, finish_shard, rows_of_block, summarize

# An epoch is run again from its checkpoint at most this many times when workers leave.
MAX_RESUMES = 3
# After a connection error, how long to wait for the scheduler to report the worker gone.
DEPARTURE_WAIT_S = 5.0
# A block of steps gathers about BLOCK_BYTES of rows, at most BLOCK_ROWS: enough steps
# per task that a task's milliseconds of overhead are small beside the steps' work, few
# enough that the blocks in flight stay small beside the data.
BLOCK_BYTES = 2**25
BLOCK_ROWS = 2**16
# Blocks gathered ahead of the one stepping, bounding the rows in flight.
PREFETCH_BLOCKS = 4
# Partitions computed ahead of the shard that takes them, per worker, while shards are built.
PARTITIONS_AHEAD = 2


def current_client(client):
    """``client``, or the current dask.distributed client, with a clear error when none."""
    if client is not None:
        if not isinstance(client, Client):
            raise TypeError(
                f"client must be a dask.distributed Client or None (the current one), got a {type(client).__name__}."
            )
        return client
    try:
        return default_client()
    except ValueError:
        raise ValueError(
            "gpusvm.dask needs a dask.distributed Client: create one first (e.g. "
            "`Client(LocalCluster())`, or `Client(LocalCUDACluster())` from dask-cuda for one GPU per "
            "worker), or set the estimator's `client` attribute."
        ) from None


def as_row_chunked_arrays(X, y, sample_weight, estimator_name):
    """X, y (and sample_weight) as dask arrays with the same known row chunks and X in
    one column chunk. Dask DataFrames and Series are converted with their partition
    lengths; anything else that is not a dask collection is refused."""
    X, y = _as_dask_array(X, "X", estimator_name), _as_dask_array(y, "y", estimator_name)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows, features); got a dask array of shape {X.shape}.")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D with one label per row; got a dask array of shape {y.shape}.")
    arrays = [X, y] + (
        [] if sample_weight is None else [_as_dask_array(sample_weight, "sample_weight", estimator_name)]
    )
    arrays = [array if not np.isnan(array.shape[0]) else array.compute_chunk_sizes() for array in arrays]
    if len({array.shape[0] for array in arrays}) != 1:
        raise ValueError(
            f"X, y and sample_weight must have the same number of rows; got {[array.shape[0] for array in arrays]!r}."
        )
    X = arrays[0] if len(arrays[0].chunks[1]) == 1 else arrays[0].rechunk({1: -1})
    rows = X.chunks[0]
    others = [array if array.chunks[0] == rows else array.rechunk({0: rows}) for array in arrays[1:]]
    return X, others[0], (others[1] if len(others) > 1 else None)


def _as_dask_array(data, name, estimator_name):
    if isinstance(data, Array):
        return data
    if hasattr(data, "to_dask_array") and hasattr(data, "npartitions"):  # dask DataFrame or Series
        return data.to_dask_array(lengths=True)
    raise TypeError(
        f"gpusvm.dask.{estimator_name} takes dask arrays or dataframes; got {name} of type "
        f"{type(data).__name__}. Use gpusvm.{estimator_name} for data in memory, or wrap it with "
        "dask.array.from_array(..., chunks=...)."
    )


class _Partitions:
    """The row partitions of a dask array: the futures of those already persisted, the
    tasks of the others."""

    def __init__(self, array):
        held = {future.key: future for future in futures_of(array)}
        self.held = [held.get(key) for key in flatten(array.__dask_keys__())]
        self.tasks = array.to_delayed().ravel()

    def future(self, client, number, worker):
        """Partition ``number``: where persisted, its future; else computed on ``worker``
        (or another when ``worker`` has left)."""
        if self.held[number] is not None:
            return self.held[number]
        return client.compute(self.tasks[number], workers=[worker], allow_other_workers=True)


def _assign_partitions(client, partitions, starts):
    """Each worker's partition numbers: a persisted partition goes to the worker holding
    it, the others in contiguous ranges of about equal rows over the workers (by address)."""
    workers = sorted(client.nthreads())
    held = [future for future in partitions.held if future is not None]
    if held:
        with client.as_current():
            wait(held)
    holders = client.who_has(held) if held else {}
    n_rows = max(1, int(starts[-1]))
    by_worker = {}
    for number, future in enumerate(partitions.held):
        found = holders.get(future.key) if future is not None else None
        middle = (starts[number] + starts[number + 1]) / 2
        worker = sorted(found)[0] if found else workers[min(len(workers) - 1, int(middle * len(workers) / n_rows))]
        by_worker.setdefault(worker, []).append(number)
    return by_worker


def _add_partitions(client, estimator, sources, starts, by_worker):
    """Each worker's :class:`~gpusvm.dask._shards.ShardPieces` (a future on it), its
    partitions added in order, at most :data:`PARTITIONS_AHEAD` in flight per worker."""
    built = dict.fromkeys(by_worker)
    waiting = {worker: collections.deque(numbers) for worker, numbers in by_worker.items()}
    adding = {worker: collections.deque() for worker in by_worker}
    while any(waiting.values()) or any(adding.values()):
        for worker in sorted(by_worker):
            while waiting[worker] and len(adding[worker]) < PARTITIONS_AHEAD:
                number = waiting[worker].popleft()
                inputs = [source.future(client, number, worker) for source in sources]
                built[worker] = client.submit(
                    add_partition,
                    built[worker],
                    estimator,
                    (number, int(starts[number])),
                    *inputs,
                    workers=[worker],
                    allow_other_workers=True,
                    pure=False,
                )
                adding[worker].append(built[worker])
        with client.as_current():
            wait([future for queue in adding.values() for future in queue], return_when="FIRST_COMPLETED")
        for queue in adding.values():  # a worker's additions finish in order: each takes the one before
            while queue and queue[0].done():
                queue.popleft()
    return built


@dataclasses.dataclass
class ShardSet:
    """One shard per worker that holds rows, built where the partitions are.

    Attributes
    ----------
    futures : list of Future
        Each worker's :class:`~gpusvm.dask._shards.Shard`, in worker order.
    summaries : list of ShardSummary
    workers : list of str
        The worker each shard was built on (for messages about lost workers).
    partitions : list of list of int
        The partition numbers in each shard.
    """

    futures: list
    summaries: list
    workers: list
    partitions: list

    @classmethod
    def build(cls, client, estimator, X, y, sample_weight):
        """Build each worker's shard from its partitions, a partition at a time.

        Persisted partitions go to the shard of the worker that holds them. The others are
        computed on the worker whose shard takes them (contiguous ranges of rows, about
        equal per worker), at most :data:`PARTITIONS_AHEAD` ahead of its shard, and released
        once added: a worker holds its shard and a few partitions, not its rows twice.
        """
        X, y, sample_weight = as_row_chunked_arrays(X, y, sample_weight, type(estimator).__name__)
        sources = [_Partitions(array) for array in [X, y] + ([sample_weight] if sample_weight is not None else [])]
        starts = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
        by_worker = _assign_partitions(client, sources[0], starts)
        built = _add_partitions(client, _local_twin(estimator), sources, starts, by_worker)
        workers = sorted(by_worker)
        futures = [
            client.submit(finish_shard, built.pop(worker), workers=[worker], allow_other_workers=True, pure=False)
            for worker in workers
        ]  # popped: the pieces go with the shard
        summaries = client.gather(
            [
                client.submit(summarize, future, workers=[worker], allow_other_workers=True, pure=False)
                for future, worker in zip(futures, workers)
            ]
        )
        keep = [i for i, summary in enumerate(summaries) if summary is not None]
        if not keep:
            raise ValueError(f"{type(estimator).__name__} got a collection with no rows.")
        shards = cls(
            [futures[i] for i in keep],
            [summaries[i] for i in keep],
            [workers[i] for i in keep],
            [by_worker[workers[i]] for i in keep],
        )
        shards._check_consistent(type(estimator).__name__)
        return shards

    def _check_consistent(self, name):
        features = {summary.n_features for summary in self.summaries}
        dtypes = {summary.dtype for summary in self.summaries}
        kinds = {summary.sparse for summary in self.summaries}
        if len(features) > 1:
            raise ValueError(f"The partitions of X do not agree on the number of features: {sorted(features)!r}.")
        if len(dtypes) > 1 or len(kinds) > 1:
            raise ValueError(
                f"The partitions of X must share one dtype and be all dense or all sparse for {name}; "
                f"got dtypes {sorted(map(str, dtypes))!r}, sparse {sorted(kinds)!r}."
            )

    @property
    def n_rows(self):
        return sum(summary.n_rows for summary in self.summaries)

    @property
    def n_features(self):
        return self.summaries[0].n_features

    @property
    def dtype(self):
        return self.summaries[0].dtype

    def classes(self):
        """The sorted labels of every shard and the number of rows of each."""
        classes = np.unique(np.concatenate([summary.classes for summary in self.summaries]))
        counts = np.zeros(classes.shape[0], dtype=np.int64)
        for summary in self.summaries:
            counts[np.searchsorted(classes, summary.classes)] += summary.class_counts
        return classes, counts

    def bytes_per_row(self):
        """The mean bytes of a row of X as stored (values, and column indices when sparse)."""
        values = sum(summary.stored_values for summary in self.summaries)
        per_value = self.dtype.itemsize + (4 if self.summaries[0].sparse else 0)
        return max(1.0, values * per_value / self.n_rows)

    def largest(self):
        """The position of the shard with the most rows: its worker steps (the fewest rows travel)."""
        return int(np.argmax([summary.n_rows for summary in self.summaries]))

    def near(self, client, position):
        """Keyword arguments of ``client.submit`` that place a task on the worker holding shard
        ``position`` now, as a preference (nothing while the shard is being recomputed
        after a worker left)."""
        holders = client.who_has([self.futures[position]]).get(self.futures[position].key, ())
        return {"workers": [sorted(holders)[0]], "allow_other_workers": True} if holders else {}

    def on_each(self, client, function, *args, per_shard=None, placements=None):
        """Futures of ``function(shard, *args, *per_shard[i])`` for every shard ``i``, each run
        on the worker holding its shard (``placements``: those of :meth:`placements`, when
        the caller has them)."""
        placements = placements or self.placements(client)
        per_shard = per_shard or [()] * len(self.futures)
        return [
            client.submit(function, shard, *args, *extra, **placement, pure=False)
            for shard, extra, placement in zip(self.futures, per_shard, placements)
        ]

    def placements(self, client):
        """:meth:`near` of every shard."""
        return [self.near(client, position) for position in range(len(self.futures))]

    def release(self):
        for future in self.futures:
            future.release()


def block_rows(shards, batch_size):
    """Rows per gathered block: whole batches, about :data:`BLOCK_BYTES`, at most :data:`BLOCK_ROWS`."""
    rows = min(BLOCK_ROWS, BLOCK_BYTES / shards.bytes_per_row())
    return max(1, int(rows) // batch_size) * batch_size


def _the_value(value):
    return value


def put(client, value, **placement):
    """A future holding ``value``, made by a task rather than by ``client.scatter``: dask
    computes a task's result again when its worker leaves, while scattered data is lost
    with its worker, and a scatter to a worker that has just died can wait without end.
    ``placement``: keyword arguments of ``client.submit``.
    """
    # One model's state sent once on purpose: not the large-graph mistake the warning is for.
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "4 GiB"}):
        return client.submit(_the_value, value, pure=False, **placement)


def step_through_blocks(client, shards, carried, selectors, step, settings, orders=None):
    """Run ``step(carried, settings, selector, *gathered)`` for each block in turn on the
    worker with the most rows (the fewest rows travel), its rows gathered from every
    shard (``rows_of_block``, with that shard's visiting order from ``orders``); up to
    :data:`PREFETCH_BLOCKS` blocks are gathered ahead. Returns the future of the last
    block's result (on its worker).
    """
    placements = shards.placements(client)
    lead = placements[shards.largest()]
    orders = [(order,) for order in orders or [None] * len(shards.futures)]
    current = put(client, carried, **lead)
    in_flight = []
    for selector in selectors:
        gathered = shards.on_each(client, rows_of_block, selector, per_shard=orders, placements=placements)
        current = client.submit(step, current, settings, selector, *gathered, **lead, pure=False)
        in_flight.append(current)
        if len(in_flight) > PREFETCH_BLOCKS:  # bound the rows gathered ahead (nothing fetched)
            with client.as_current():
                wait(in_flight.pop(0))
    return current


def _local_twin(estimator):
    """The single-node estimator with ``estimator``'s parameters, whose input checks the
    shards apply."""
    return estimator.local_class(**estimator._local_params())


@contextlib.contextmanager
def worker_loss_guard(client, shards, what, resumable=True):
    """Turn an error raised because workers left into a clear one, naming them and the
    partitions they held; other errors pass through unchanged. ``resumable``: whether
    the fit resumes epochs (the message says what to do either way).

    Yields a function that says which of the shards' workers have left.
    """

    def lost_workers():
        alive = set(client.nthreads())
        return [worker for worker in shards.workers if worker not in alive]

    try:
        yield lost_workers
    except Exception as error:
        lost = sorted(_departures_seen(lost_workers, set(), error))
        if not lost:
            raise
        held = [
            number for worker, numbers in zip(shards.workers, shards.partitions) if worker in lost for number in numbers
        ]
        advice = (
            f"gpusvm.dask resumes an epoch from its last checkpoint up to {MAX_RESUMES} times when dask "
            "can recompute the lost partitions (from a source, not from client.scatter); here it could not."
            if resumable
            else "The state on those workers is lost with them: fit again on the workers left."
        )
        raise RuntimeError(
            f"{what} failed after worker(s) {lost!r} left the cluster (they held partitions {held!r}): "
            f"{type(error).__name__}: {error}. {advice}"
        ) from error


def _departures_seen(lost_workers, known_lost, error):
    """The workers lost since ``known_lost``. A connection error (an ``OSError``, as
    dask's ``CommClosedError`` is) can reach the client before the scheduler has removed
    the worker behind it: then wait up to :data:`DEPARTURE_WAIT_S` for it to show."""
    deadline = time.monotonic() + (DEPARTURE_WAIT_S if isinstance(error, OSError) else 0)
    while True:
        newly_lost = set(lost_workers()) - known_lost
        if newly_lost or time.monotonic() >= deadline:
            return newly_lost
        time.sleep(0.1)


def run_epoch_with_resumes(client, shards, epoch_function, checkpoint, epoch):
    """Run ``epoch_function(checkpoint)``; when it fails because workers left, run it again
    from ``checkpoint`` (draws are a pure function of seed, step and lane, so the resumed
    epoch computes what the interrupted one would have), up to :data:`MAX_RESUMES` times.
    """
    with worker_loss_guard(client, shards, f"Epoch {epoch + 1}") as lost_workers:
        for attempt in range(MAX_RESUMES + 1):
            known_lost = set(lost_workers())
            try:
                return epoch_function(checkpoint)
            except Exception as error:
                newly_lost = _departures_seen(lost_workers, known_lost, error)
                if not newly_lost or attempt == MAX_RESUMES:
                    raise
                warnings.warn(
                    f"Worker(s) {sorted(newly_lost)!r} left the cluster during epoch {epoch + 1}; resuming the "
                    "epoch from its start on the workers left (the model will be the same).",
                    RuntimeWarning,
                    stacklevel=3,
                )
