"""SBP on one worker: the responses of the rows it holds, moved by each step's drawn rows,
and the lowest of them sent back for the water level (a dask actor per worker).

The worker keeps, for each one-vs-rest problem, the responses ``R`` of its training rows
and then of its holdout rows (up to the coordinator's shared scale, as
``NumpySBPSteps``), their running sum, and a kernel-row cache over its own columns. A
step message carries the drawn rows (their X rows only the first time a row is drawn),
their weights and the step size; the worker adds ``step_size * signs * (weights @
K(drawn, X))`` to its responses, exactly as the single-node step does to its columns, and
answers with the new direction at the drawn rows it holds (the coordinator needs it for
``||w||^2``) and each class's lowest responses. The running sum waits for the next message,
which carries the scale after the projection.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._backend import is_device_backend, namespace_of, to_numpy
from .._validation import one_vs_rest_targets, to_backend
from ..kernel_functions import (
    KernelSpec,
    RowMoments,
    centred_moments,
    check_kernel_range,
    kernel_block,
    kernel_copy,
    squared_row_norms,
)
from ..solvers.row_cache import KernelRowCache, cache_bytes
from ..solvers.sbp import predicted_classes
from ._shards import stack_rows

# A row store merges its blocks into one when it holds more than this many.
MAX_STORE_BLOCKS = 64


class RowStore:
    """X rows by training key, added a block at a time: the rows drawn so far (the
    support vectors), kept where they are needed again."""

    def __init__(self):
        self.blocks, self.where = [], {}  # where: key -> (block, position in it)

    def add(self, keys, rows):
        """Keep ``rows`` (dense or CSR, one per key) under ``keys`` (new keys only)."""
        number = len(self.blocks)
        self.blocks.append(rows)
        self.where.update((int(key), (number, position)) for position, key in enumerate(keys))
        if len(self.blocks) > MAX_STORE_BLOCKS:
            self._merge()

    def rows(self, keys):
        """The rows of ``keys``, in that order."""
        located = np.array([self.where[int(key)] for key in keys], dtype=np.int64).reshape(-1, 2)
        pieces, order = [], []
        for number in np.unique(located[:, 0]):
            at = np.flatnonzero(located[:, 0] == number)
            block = self.blocks[number]
            positions = located[at, 1]
            pieces.append(block[positions if namespace_of(block) is np else namespace_of(block).asarray(positions)])
            order.append(at)
        rows = stack_rows(pieces)
        order = np.argsort(np.concatenate(order), kind="stable")
        if np.array_equal(order, np.arange(order.size)):
            return rows
        return rows[order if namespace_of(rows) is np else namespace_of(rows).asarray(order)]

    def _merge(self):
        keys = np.array(sorted(self.where, key=self.where.get), dtype=np.int64)  # block by block, in order
        self.blocks = [stack_rows(self.blocks)]
        self.where = {int(key): (0, position) for position, key in enumerate(keys)}


@dataclasses.dataclass(frozen=True)
class ShardSettings:
    """What every worker's SBP state is built from: small, sent once."""

    classes: np.ndarray
    holdout_rows: np.ndarray  # ascending indices in the collection of the holdout rows
    n_train: int  # training rows of the whole collection
    kernel: str
    degree: int
    coef0: float
    fit_intercept: bool
    cache_size: object  # SBPClassifier's: megabytes, or 'auto' (a share of the worker's memory)
    kernel_dtype: str


@dataclasses.dataclass(frozen=True)
class Pending:
    """The scale after a step's projection: the workers add ``scale * R`` to the running
    sum, then fold the scale into ``R`` if ``renormalize``."""

    scale: np.ndarray
    renormalize: bool


@dataclasses.dataclass(frozen=True)
class StepMessage:
    """One step, as the coordinator sends it to every worker."""

    pending: Pending | None
    new_keys: np.ndarray  # keys drawn for the first time ...
    new_rows: object  # ... and their X rows (None when there are none)
    keys: np.ndarray  # the distinct drawn keys, ascending
    weights: np.ndarray  # (k, len(keys)): sum of y_b / B over each problem's draws of a key
    step_size: np.ndarray  # (k,): eta / scale before the projection
    drawn: np.ndarray  # (k, B): each problem's drawn keys
    counts: np.ndarray  # (k,): the lowest responses of each class to send back


class SBPShardState:
    """One worker's SBP responses (a dask actor; see the module docstring).

    Parameters
    ----------
    shard : Shard
        The worker's rows (its X moves to the worker's backend when built).
    settings : ShardSettings
    """

    def __init__(self, shard, settings):
        self.settings = settings
        holdout = np.isin(shard.rows, settings.holdout_rows)
        train, held = np.flatnonzero(~holdout), np.flatnonzero(holdout)
        X = shard.X
        if held.size and held[0] < train.size:  # training columns first, as the single-node X
            order = np.concatenate([train, held])
            X = X[order if namespace_of(X) is np else namespace_of(X).asarray(order)]
        # X's rows until prepare() makes the kernel's copy (centred for rbf, in the kernel's
        # dtype); the support vectors keep X's rows
        self.X, self.given_X, self.xp = X, X, namespace_of(X)
        self.backend = "numpy" if self.xp is np else "cupy"
        self.n_train = train.size
        # a training row's key: its place among the collection's training rows
        self.keys = shard.rows[train] - np.searchsorted(settings.holdout_rows, shard.rows[train])
        classes = settings.classes
        k = 1 if classes.size == 2 else classes.size
        targets = one_vs_rest_targets(shard.y[train], classes) if train.size else np.zeros((0, k))
        self.holdout_labels = np.searchsorted(classes, shard.y[held])
        labels = np.ascontiguousarray(targets.T)  # (k, n_train here)
        self.class_columns = [
            [np.flatnonzero(labels[p] > 0), np.flatnonzero(labels[p] < 0)] if settings.fit_intercept else [None]
            for p in range(k)
        ]
        signs = np.ones((k, X.shape[0]))
        signs[:, : train.size] = labels
        xp = self.xp
        self.signs = xp.asarray(signs)
        self.R, self.R_sum = xp.zeros((k, X.shape[0])), xp.zeros((k, X.shape[0]))
        self.store = RowStore()
        self.cache, self.kernel, self.sq_norms, self.centre = None, None, None, None

    # --- before the steps ---------------------------------------------------------------

    def element_sums(self):
        """Count, sum and sum of squares of the training rows' entries (for gamma='scale')."""
        X = self.X[: self.n_train]
        count = self.n_train * X.shape[1]
        if hasattr(X, "indptr"):
            return count, float(X.sum()), float(X.multiply(X).sum())
        return count, float(X.sum()), None

    def squared_deviations(self, mean):
        """The sum of ``(x - mean)^2`` over the dense training entries (the variance's second pass)."""
        X = self.X[: self.n_train]
        return float(((X - mean) ** 2).sum())

    def row_moments(self):
        """:class:`~gpusvm.kernel_functions.RowMoments` of the rows here (training and held out)."""
        return RowMoments.of(self.given_X)

    def centred_moments(self, centre):
        """:func:`~gpusvm.kernel_functions.centred_moments` of the rows here (dense X)."""
        return centred_moments(self.given_X, centre)

    def prepare(self, gamma, centre, dtype):
        """Make the kernel's copy of the rows here (less ``centre`` unless None, in ``dtype``),
        check the kernel on it, set up the row cache; returns ``max K(x_i, x_i)`` over the
        training rows here."""
        s = self.settings
        self.centre = None if centre is None else self.xp.asarray(centre)
        self.X = kernel_copy(self.given_X, self.centre, dtype)
        self.kernel = KernelSpec(s.kernel, gamma, s.degree, s.coef0)
        check_kernel_range(self.X, **self.kernel.keywords, dtype_parameter="kernel_dtype")
        self.sq_norms = squared_row_norms(self.X)
        if not is_device_backend(self.backend):  # on a device, rows are computed each step (no device cache here yet)
            row_bytes = self.X.shape[0] * self.X.dtype.itemsize
            budget = cache_bytes(s.cache_size, s.n_train * row_bytes)
            self.cache = KernelRowCache(self._compute_rows, s.n_train, self.X.shape[0], self.X.dtype, budget)
        return self.kernel.largest_self_value(to_numpy(self.sq_norms[: self.n_train]))

    # --- the steps -----------------------------------------------------------------------

    def lowest(self, counts, pending=None, source="current", steps=1, scale=None):
        """Each problem's and class's ``counts[p]`` lowest responses here (see :meth:`_lowest`).

        ``source``: 'current' (``R`` as kept, up to the scale), 'average' (``R_sum / steps``)
        or 'last' (``scale * R``).
        """
        self._apply(pending)
        if source == "average":
            return self._lowest(self.R_sum, counts, lambda values, p: values / steps)
        if source == "last":
            return self._lowest(self.R, counts, lambda values, p: scale[p] * values)
        return self._lowest(self.R, counts)

    def step(self, message):
        """Apply one step; returns ``(owned, direction at the drawn rows, lowest, (rows computed,
        distinct rows computed) by the cache)``."""
        self._apply(message.pending)
        xp = self.xp
        if message.new_rows is not None:
            self.store.add(message.new_keys, to_backend(message.new_rows, self.backend))
        direction = self._combination(message.weights, message.keys)  # (k, columns here)
        direction *= self.signs
        owned, at_drawn = self._at_keys(direction, message.drawn)
        direction *= xp.asarray(message.step_size)[:, None]
        self.R += direction
        rows_computed = (self.cache.rows_computed, self.cache.rows_distinct) if self.cache is not None else None
        return owned, at_drawn, self._lowest(self.R, message.counts), rows_computed

    def holdout_wrong(self, level, bias, pending=None, source="average", steps=1, scale=None):
        """Holdout rows here that the model ``(h + b) / level`` misclassifies."""
        self._apply(pending)
        if self.holdout_labels.size == 0:
            return 0
        held = (
            self.R_sum[:, self.n_train :] / steps
            if source == "average"
            else self.xp.asarray(scale)[:, None] * self.R[:, self.n_train :]
        )
        return int((predicted_classes(to_numpy(held), level, bias) != self.holdout_labels).sum())

    def training_rows(self, keys):
        """``(keys held here, their X rows on the host)`` of the wanted ``keys``."""
        owned, positions = self._columns_of(keys)
        if not owned.any():
            return keys[:0], None
        at = positions[owned]
        rows = self.given_X[self.xp.asarray(at)]
        return keys[owned], to_backend(rows, "numpy")

    # --- helpers -------------------------------------------------------------------------

    def _apply(self, pending):
        """The running sum of the last step (``R_sum += scale R``) and its renormalization."""
        if pending is None:
            return
        scale = self.xp.asarray(pending.scale)[:, None]
        self.R_sum += self.R * scale
        if pending.renormalize:
            self.R *= scale

    def _combination(self, weights, keys):
        """``weights @ K(x_keys, X here)``, float64: from the row cache on the host, as
        ``NumpySBPSteps`` sums it (the same rounding)."""
        if self.cache is not None:
            return self.cache.combine(weights, keys)
        rows = self._compute_rows(keys)
        weights = self.xp.asarray(weights)
        return weights @ rows if keys.size > 1 else weights * rows

    def _compute_rows(self, keys):
        """``K(x_key, X here)`` for each key, from the stored X rows, in X's dtype."""
        rows = kernel_copy(self.store.rows(keys), self.centre, self.X.dtype)  # as the rows here
        return kernel_block(
            rows,
            self.X,
            **self.kernel.keywords,
            X_sq_norms=squared_row_norms(rows),
            Y_sq_norms=self.sq_norms,
        )

    def _columns_of(self, keys):
        """Which ``keys`` are training rows here, and their columns (where they are)."""
        if self.n_train == 0:
            return np.zeros(keys.shape, dtype=bool), np.zeros(keys.shape, dtype=np.int64)
        positions = np.minimum(np.searchsorted(self.keys, keys), self.n_train - 1)
        return self.keys[positions] == keys, positions

    def _at_keys(self, values, drawn):
        """``values[p, column of drawn[p, b]]`` for the drawn keys held here: (mask, values)."""
        owned, positions = self._columns_of(drawn)
        problems = np.broadcast_to(np.arange(drawn.shape[0])[:, None], drawn.shape)
        picked = np.zeros(drawn.shape)
        if owned.any():
            xp = self.xp
            picked[owned] = to_numpy(values[xp.asarray(problems[owned]), xp.asarray(positions[owned])])
        return owned, picked

    def _lowest(self, responses, counts, transform=None):
        """For each problem, for each class (positive then negative; one class without a
        bias): ``(values, keys, cutoff)``, the class's ``counts[p]`` lowest responses here
        (after ``transform``) with their keys, and a value at or below every response of
        the class not sent (+inf when all were sent)."""
        answer = []
        for p, columns_of_classes in enumerate(self.class_columns):
            per_class = []
            for columns in columns_of_classes:
                values = responses[p, : self.n_train] if columns is None else responses[p, self.xp.asarray(columns)]
                if transform is not None:
                    values = transform(values, p)
                per_class.append(self._lowest_of(values, columns, int(counts[p])))
            answer.append(per_class)
        return answer

    def _lowest_of(self, values, columns, count):
        keys = self.keys if columns is None else self.keys[columns]
        if count >= values.shape[0]:
            return to_numpy(values), keys, np.inf
        part = self.xp.argpartition(values, count)[: count + 1]
        picked, part = to_numpy(values[part]), to_numpy(part)
        return picked[:count], keys[part[:count]], float(picked[count])
