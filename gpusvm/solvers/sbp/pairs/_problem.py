"""One-vs-one SBP's problems: the binary problems of several pairs of classes
(:class:`PairStack`), and the steps between their checkpoints (:func:`pair_checkpoint_steps`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ....kernel_functions import KernelSpec
from .._problem import checkpoint_interval, step_size_for

# Steps between the checkpoints of pairs stepping together, at least: a checkpoint waits
# for the device and copies to the host, so these are the shortest blocks of steps.
MIN_CHECKPOINT_STEPS = 8


@dataclasses.dataclass(frozen=True)
class PairStack:
    """The binary problems of several pairs of classes, on the host.

    Pair ``p = (a, b)`` has the rows of classes a and b: its columns are class a's
    block (its training rows, then its holdout rows), class b's block, then padding up
    to the width of the widest pair. A class's rows are ``class_rows[c]``, its training
    rows first; pair p's first class, a, is its positive one.
    """

    X: object  # (n_rows, n_features), dense or CSR: every row of the fit
    class_rows: tuple  # per class: int64 array of rows of X, training rows first
    class_train: np.ndarray  # (n_classes,) training rows of each class
    pairs: np.ndarray  # (P, 2) the classes of each pair
    seeds: np.ndarray  # (P,) uint64: each pair's stream
    nu: float
    batch_size: int
    kernel: KernelSpec
    fit_intercept: bool

    @property
    def n_pairs(self):
        return self.pairs.shape[0]

    @property
    def block_widths(self):
        """(P, 2): the rows of each pair's two classes."""
        return np.array([rows.size for rows in self.class_rows])[self.pairs]

    @property
    def width(self):
        return int(self.block_widths.sum(axis=1).max())

    @property
    def n_train(self):
        """(P,) training rows of each pair."""
        return self.class_train[self.pairs].sum(axis=1)

    @property
    def n_rows(self):
        """(P,) training and holdout rows of each pair."""
        return self.block_widths.sum(axis=1)

    def training_rows(self, pair):
        """The rows of X that pair ``pair`` trains on: its first class's training rows,
        then its second's."""
        a, b = self.pairs[pair]
        return np.concatenate([self.class_rows[a][: self.class_train[a]], self.class_rows[b][: self.class_train[b]]])

    def holdout_rows(self, pair):
        """Pair ``pair``'s holdout rows of X, its first class's, then its second's."""
        a, b = self.pairs[pair]
        return np.concatenate([self.class_rows[a][self.class_train[a] :], self.class_rows[b][self.class_train[b] :]])

    def first_step_sizes(self, sq_norms):
        """(P,) each pair's ``eta_0 = 1 / sqrt(max_i K(x_i, x_i))`` over its training rows,
        from X's squared row norms (a host array)."""
        return np.array(
            [
                step_size_for(self.kernel.largest_self_value(sq_norms[self.training_rows(p)]))
                for p in range(self.n_pairs)
            ]
        )

    def columns(self):
        """(P, W) the row of X in each column of each pair (-1: padding)."""
        columns = np.full((self.n_pairs, self.width), -1, dtype=np.int64)
        for p, (a, b) in enumerate(self.pairs):
            rows = np.concatenate([self.class_rows[a], self.class_rows[b]])
            columns[p, : rows.size] = rows
        return columns


def pair_checkpoint_steps(n_train, batch_size):
    """Each pair's steps between checkpoints: multiples of one cadence common to the pairs.

    A pair on its own checkpoints ten times an epoch
    (:func:`~gpusvm.solvers.sbp.checkpoint_interval`). Stepping together, the pairs
    checkpoint at the multiples of a common cadence, the smallest pair's own, but at
    least ``MIN_CHECKPOINT_STEPS``, so that the steps between checkpoints run as long
    blocks. A pair checkpoints at the first multiple of it at or above its own interval:
    at most ten times an epoch, and about five or more when its own interval is at least
    the common one; pairs of shorter epochs checkpoint less often, and their stopping
    rules look back over the same span of steps
    (:func:`~gpusvm.solvers.sbp.checkpoint_patience`).

    Parameters
    ----------
    n_train : ndarray of shape (n_pairs,)
        Training rows of each pair.
    batch_size : int

    Returns
    -------
    ndarray of shape (n_pairs,)
        Steps between the pair's checkpoints.
    """
    own = checkpoint_interval(np.maximum(1, -(-np.asarray(n_train) // batch_size)))
    common = max(int(own.min()), MIN_CHECKPOINT_STEPS)
    return common * -(-own // common)
