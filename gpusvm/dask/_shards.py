"""Training rows on the workers that hold them: one shard per worker, and the gathers
that bring a block's rows to the worker that steps.

A shard is the concatenation of one worker's partitions (in partition order), with
each row's global index: the row's place in the dask collection, so that a draw ``g``
of the shared random stream names the same row as it does in ``X.compute()`` on a
single node. It is built a partition at a time (:func:`add_partition`, then
:func:`finish_shard`) on the worker that holds or computes the partitions, so no rows
of X move, and the worker holds its shard and a few partitions, never its rows twice.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
from dask.sizeof import sizeof
from sklearn.base import clone

from .._backend import is_cupy_array, issparse, namespace_of, resolve_backend, to_numpy
from .._random import random_index_block
from .._validation import check_X_y, check_weights, to_backend


@dataclasses.dataclass
class Shard:
    """The rows of one worker.

    Attributes
    ----------
    X : ndarray or CSR matrix, validated, on the worker's backend (NumPy/SciPy or CuPy/cupyx)
    y : ndarray of labels, on the host
    sample_weight : ndarray of float64, on the host
    rows : ndarray of int64
        Each row's index in the whole collection, ascending.
    """

    X: object
    y: np.ndarray
    sample_weight: np.ndarray
    rows: np.ndarray

    @property
    def n_rows(self):
        return self.rows.shape[0]


@sizeof.register(Shard)
def _sizeof_shard(shard):
    # Dask places tasks and reports memory by their inputs' sizes: without this a shard
    # would look free to move, and the scheduler would copy it to run a task elsewhere.
    return int(sizeof(shard.X) + shard.y.nbytes + shard.sample_weight.nbytes + shard.rows.nbytes)


@dataclasses.dataclass(frozen=True)
class ShardSummary:
    """What the client needs to know of a shard: small, sent back once."""

    n_rows: int
    n_features: int
    dtype: np.dtype
    sparse: bool
    classes: np.ndarray
    class_counts: np.ndarray
    stored_values: int  # nonzeros of a sparse X, else rows times features


@dataclasses.dataclass
class ShardPieces:
    """One worker's validated partitions so far, on its backend: a shard being built.

    ``add_partition`` returns a new one (it shares the earlier pieces); ``finish_shard``
    empties it as it copies, so the worker never holds its rows twice.
    """

    pieces: list  # of (X, y, sample_weight, rows), in partition order


@sizeof.register(ShardPieces)
def _sizeof_pieces(built):
    return int(sum(sizeof(piece[0]) + sum(array.nbytes for array in piece[1:]) for piece in built.pieces))


def add_partition(built, estimator, partition, X, y, weights=None):
    """``built`` (a :class:`ShardPieces`, or None for the first) with one partition more
    (runs on the worker that builds the shard).

    Parameters
    ----------
    built : ShardPieces or None
    estimator : the single-node estimator whose input checks apply (cloned, not fitted)
    partition : (partition number, first global row)
    X, y, weights : the partition's arrays (weights None when not given)
    """
    pieces = [] if built is None else list(built.pieces)
    number, first_row = partition
    if X.shape[0] == 0:
        return ShardPieces(pieces)
    last = first_row + X.shape[0] - 1
    try:
        X, y = check_X_y(clone(estimator), X, np.asarray(to_numpy(y)).ravel(), reset=True)
        weights = check_weights(weights, X.shape[0])
    except ValueError as error:
        raise ValueError(f"Partition {number} (rows {first_row} to {last}): {error}") from error
    # on the worker's backend once, so no epoch copies the shard to the device again
    X = to_backend(X, resolve_backend(estimator.backend))
    pieces.append((X, y, weights, np.arange(first_row, last + 1, dtype=np.int64)))
    return ShardPieces(pieces)


def finish_shard(built):
    """The :class:`Shard` of the pieces (None when they hold no rows); empties ``built``,
    whose only holder is the build that drops it next."""
    if built is None or not built.pieces:
        return None
    pieces = built.pieces
    y = np.concatenate([piece[1] for piece in pieces])
    weights = np.concatenate([piece[2] for piece in pieces])
    rows = np.concatenate([piece[3] for piece in pieces])
    blocks = [piece[0] for piece in pieces]
    pieces.clear()
    return Shard(X=stack_rows_consuming(blocks), y=y, sample_weight=weights, rows=rows)


def summarize(shard):
    """The :class:`ShardSummary` of a shard (None for a worker with no rows)."""
    if shard is None:
        return None
    classes, counts = np.unique(shard.y, return_counts=True)
    return ShardSummary(
        n_rows=shard.n_rows,
        n_features=shard.X.shape[1],
        dtype=np.dtype(shard.X.dtype),
        sparse=issparse(shard.X),
        classes=classes,
        class_counts=counts,
        stored_values=int(shard.X.nnz if issparse(shard.X) else shard.X.size),
    )


def stack_rows(blocks):
    """The rows of ``blocks`` (all dense or all CSR, one backend) one under another."""
    if len(blocks) == 1:
        return blocks[0]
    if issparse(blocks[0]):
        if is_cupy_array(blocks[0]):
            import cupyx.scipy.sparse as cusparse

            return cusparse.vstack(blocks).tocsr()
        return sp.vstack(blocks, format="csr")
    return namespace_of(blocks[0]).concatenate(blocks)


def stack_rows_consuming(blocks):
    """:func:`stack_rows`, emptying the list ``blocks`` as it copies them, so that the
    memory held at once is the result and one block (not every block twice)."""
    if len(blocks) == 1:
        return blocks.pop()
    xp = namespace_of(blocks[0])
    n_rows, n_columns, dtype = sum(block.shape[0] for block in blocks), blocks[0].shape[1], blocks[0].dtype
    if not issparse(blocks[0]):
        stacked, at = xp.empty((n_rows, n_columns), dtype=dtype), 0
        while blocks:
            block = blocks.pop(0)
            stacked[at : at + block.shape[0]] = block
            at += block.shape[0]
        return stacked
    nnz = sum(int(block.nnz) for block in blocks)
    index_dtype = np.int32 if max(nnz, n_columns) <= np.iinfo(np.int32).max else np.int64
    data, indices = xp.empty(nnz, dtype=dtype), xp.empty(nnz, dtype=index_dtype)
    indptr = xp.empty(n_rows + 1, dtype=index_dtype)
    indptr[0], row, at = 0, 0, 0
    while blocks:
        block = blocks.pop(0)
        start, stop = int(block.indptr[0]), int(block.indptr[-1])
        data[at : at + stop - start] = block.data[start:stop]
        indices[at : at + stop - start] = block.indices[start:stop]
        indptr[row + 1 : row + 1 + block.shape[0]] = block.indptr[1:] - start + at
        row, at = row + block.shape[0], at + stop - start
    return _csr_matrix_class(xp)((data, indices, indptr), shape=(n_rows, n_columns))


def _csr_matrix_class(xp):
    if xp is np:
        return sp.csr_matrix
    import cupyx.scipy.sparse as cusparse

    return cusparse.csr_matrix


# Which global rows a block needs, in the order its steps use them.


@dataclasses.dataclass(frozen=True)
class DrawnRows:
    """The rows Pegasos draws at steps ``first_step .. first_step + n_steps - 1``."""

    seed: int
    first_step: int
    n_steps: int
    batch_size: int
    n_samples: int

    def indices(self, order=None):
        return random_index_block(self.seed, self.first_step, self.n_steps, self.batch_size, self.n_samples).ravel()


@dataclasses.dataclass(frozen=True)
class OrderedRows:
    """Positions ``start:stop`` of an epoch's visiting order (all rows in order when the
    order, passed to :meth:`indices`, is None)."""

    start: int
    stop: int

    def indices(self, order=None):
        if order is None:
            return np.arange(self.start, self.stop, dtype=np.int64)
        return order[self.start : self.stop]


def rows_of_block(shard, selector, order=None):
    """The rows of a block that this shard holds (runs on its worker).

    Returns
    -------
    None, or (positions in the block, X rows, labels, sample weights)
    """
    if shard is None:
        return None
    wanted = selector.indices(order)
    local = np.minimum(np.searchsorted(shard.rows, wanted), shard.n_rows - 1)
    mine = np.flatnonzero(shard.rows[local] == wanted)
    if mine.size == 0:
        return None
    local = local[mine]
    rows = local if not is_cupy_array(shard.X) else namespace_of(shard.X).asarray(local)
    return mine, shard.X[rows], shard.y[local], shard.sample_weight[local]


def assemble_block(gathered):
    """The block's rows in step order from the shards' parts (each from
    :func:`rows_of_block`): ``(X, labels, sample_weight)``."""
    parts = [part for part in gathered if part is not None]
    positions = np.concatenate([part[0] for part in parts])
    order = np.argsort(positions, kind="stable")
    X = stack_rows([part[1] for part in parts])
    if order.size > 1 and not np.array_equal(order, np.arange(order.size)):
        X = X[order if not is_cupy_array(X) else namespace_of(X).asarray(order)]
    y = np.concatenate([part[2] for part in parts])[order]
    weights = np.concatenate([part[3] for part in parts])[order]
    return X, y, weights
