"""Online sparse logistic regression: FTRL-Proximal, Truncated Gradient, L1-FOBOS, L1-RDA.

The per-coordinate rules of docs/algorithms.md section 3, for one-vs-rest logistic loss on
labels ``y01`` in {0, 1}.  Examples are counted ``s = 1, 2, ...`` over the model's life.

Mini-batches
------------
A batch of ``B`` examples is processed at once: all ``B`` predictions use the weights
at the start of the batch, then each touched coordinate takes one update.  The update is
the sequential algorithm's run over the ``B`` examples *with the weights held fixed*,
merged into one step:

- FTRL: ``z += sum_s g_s - sigma w`` and ``n += sum_s g_s^2``, where ``sigma =
  (sqrt(n + sum_s g_s^2) - sqrt(n)) / alpha`` (the per-example sigmas telescope);
- RDA: the sum of gradients grows by ``sum_s g_s``;
- FOBOS and TG: ``v = w - sum_s eta_s g_s``, then one shrink by the batch's total
  penalty ``sum_s eta_s l1`` (TG: over the truncation steps ``s % k == 0``, times ``k``).

So ``B = 1`` is exactly the sequential algorithm, and every hyperparameter means the same
at any batch size (``n`` sums per-example squared gradients; ``eta_s`` and RDA's ``t``
count examples).

Lazy penalties
--------------
L1-FOBOS and TG shrink every weight at every (truncation) step, also those whose
feature is absent from the example.  Repeated shrinks of an untouched weight compose
into one soft-threshold by their sum, so the solver keeps the running total of
penalties ``level = sum_s eta_s l1`` (a host scalar) and, per weight, the level it has
been shrunk to; the rest is applied when the weight is next read.  TG shrinks only
weights with ``|w| <= theta``, and a shrink never lifts ``|w|`` above ``theta``, so the
same catch-up applies to them.  The result equals the dense algorithm's (tested).

State layout
------------
Two float64 arrays of shape ``(n_classes, n_features + 1)``; column ``n_features`` is
the intercept, a coordinate whose feature is always 1 and which no penalty touches:

=========  ===================================  ==============================
rule       ``first``                            ``second``
=========  ===================================  ==============================
ftrl       ``z``                                ``n`` (sum of squared gradients)
fobos, tg  ``w`` as of its last update          the penalty level applied to it
rda        sum of gradients ``G``               unused (zeros)
=========  ===================================  ==============================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import nvtx
import scipy.sparse as sp
from scipy.special import expit

from .._backend import to_numpy
from .._instrumentation import progress_bar
from .._random import random_bits
from .._validation import canonical_csr

RULES = ("ftrl", "tg", "fobos", "rda")


def soft_threshold(values, amount, xp=np):
    """``sign(v) max(0, |v| - amount)``, elementwise."""
    return xp.sign(values) * xp.maximum(xp.abs(values) - amount, 0.0)


@dataclass(frozen=True)
class OnlineRule:
    """One update rule and its hyperparameters (those of other rules are ignored).

    Parameters
    ----------
    kind : {'ftrl', 'tg', 'fobos', 'rda'}
    l1 : float
        FTRL's ``lambda1`` (on the summed gradients); the L1 weight ``lambda`` per example
        for TG, FOBOS and RDA.
    l2 : float
        FTRL's ``lambda2``.
    alpha, beta : float
        FTRL's per-coordinate rate ``alpha / (beta + sqrt(n_i))``.
    eta0 : float
        TG and FOBOS step size ``eta_s = eta0 / sqrt(s)``.
    theta : float
        TG: only weights with ``|v| <= theta`` are shrunk.
    truncate_every : int
        TG's ``k``: truncate at examples ``s`` with ``s % k == 0``, by ``eta_s l1 k``.
    gamma : float
        RDA's ``beta_t = gamma sqrt(t)``.
    """

    kind: str
    l1: float = 0.0
    l2: float = 0.0
    alpha: float = 0.1
    beta: float = 1.0
    eta0: float = 0.1
    theta: float = math.inf
    truncate_every: int = 1
    gamma: float = 1.0

    @property
    def uses_step_sizes(self):
        """TG and FOBOS scale each example's gradient by its ``eta_s``."""
        return self.kind in ("tg", "fobos")

    def step_sizes(self, first_example, count, xp=np):
        """``eta_s`` for examples ``s = first_example + 1 ... first_example + count``."""
        examples = xp.arange(first_example + 1, first_example + count + 1, dtype=xp.float64)
        return self.eta0 / xp.sqrt(examples)

    def penalty_added(self, first_example, count):
        """The total shrink over examples ``first_example + 1 ... first_example + count``.

        FOBOS: ``sum_s eta_s l1``; TG: the same over ``s % k == 0``, times ``k``; else 0.
        """
        if not self.uses_step_sizes or self.l1 == 0.0:
            return 0.0
        if self.kind == "fobos":
            return float(self.l1 * self.step_sizes(first_example, count).sum())
        k = self.truncate_every
        first_truncation = (first_example // k + 1) * k
        steps = np.arange(first_truncation, first_example + count + 1, k, dtype=np.float64)
        return float(self.l1 * k * (self.eta0 / np.sqrt(steps)).sum())

    def _shrink(self, values, amount, xp):
        """FOBOS's soft-threshold; TG's, only where ``|v| <= theta``."""
        shrunk = soft_threshold(values, amount, xp)
        if self.kind == "tg":
            return xp.where(xp.abs(values) <= self.theta, shrunk, values)
        return shrunk

    def weights(self, state, columns, penalized, xp=np):
        """The weights at ``columns`` as of ``state.t`` examples, shape (n_classes, len(columns)).

        ``penalized`` is 1.0 for feature columns and 0.0 for the intercept's.
        """
        first, second = state.first[:, columns], state.second[:, columns]
        if self.kind == "ftrl":
            l1 = self.l1 * penalized
            denominator = (self.beta + xp.sqrt(second)) / self.alpha + self.l2 * penalized
            return xp.where(xp.abs(first) <= l1, 0.0, -(first - xp.sign(first) * l1) / denominator)
        if self.kind == "rda":
            if state.t == 0:
                return xp.zeros_like(first)
            mean_gradient = first / state.t
            l1 = self.l1 * penalized
            return xp.where(
                xp.abs(mean_gradient) <= l1, 0.0,
                -(math.sqrt(state.t) / self.gamma) * (mean_gradient - l1 * xp.sign(mean_gradient)),
            )
        return self._shrink(first, (state.level - second) * penalized, xp)

    def update(self, state, columns, penalized, weights, gradient, squared, next_level, xp=np):
        """One merged update of ``columns`` (see the module docstring), in place.

        ``weights`` are :meth:`weights` at ``columns``; ``gradient`` the batch's summed
        gradients there (times ``eta_s`` for TG and FOBOS); ``squared`` the summed squared
        per-example gradients (FTRL only).
        """
        if self.kind == "ftrl":
            n = state.second[:, columns]
            sigma = (xp.sqrt(n + squared) - xp.sqrt(n)) / self.alpha
            state.first[:, columns] += gradient - sigma * weights
            state.second[:, columns] = n + squared
        elif self.kind == "rda":
            state.first[:, columns] += gradient
        else:
            step = weights - gradient
            state.first[:, columns] = self._shrink(step, (next_level - state.level) * penalized, xp)
            state.second[:, columns] = next_level


@dataclass
class OnlineState:
    """What a model needs to continue: the per-coordinate arrays and two counters.

    ``t`` counts the examples seen; ``level`` is the running total of FOBOS/TG penalties.
    """

    first: object
    second: object
    t: int = 0
    level: float = 0.0

    @classmethod
    def zeros(cls, n_classes, n_features, xp=np):
        """A fresh model; column ``n_features`` is the intercept."""
        shape = (n_classes, n_features + 1)
        return cls(xp.zeros(shape), xp.zeros(shape))

    @property
    def n_features(self):
        return self.first.shape[1] - 1

    def copy(self):
        return replace(self, first=self.first.copy(), second=self.second.copy())

    def to(self, xp):
        """The same state with its arrays in ``xp``'s memory."""
        if xp is np:
            return replace(self, first=to_numpy(self.first), second=to_numpy(self.second))
        return replace(self, first=xp.asarray(self.first), second=xp.asarray(self.second))

    def coefficients(self, rule, xp=np):
        """All weights ``(n_classes, n_features + 1)`` as of ``t``; the last column is the intercept."""
        penalized = xp.ones(self.n_features + 1)
        penalized[-1] = 0.0
        return rule.weights(self, slice(None), penalized, xp)


@dataclass
class OnlineProblem:
    """The data of one fit or partial_fit call.

    ``labels`` holds each row's class position; with two classes there is one model
    whose positive class is position 1 (``positive_offset = 1``), else one per class.
    """

    X: object
    labels: object
    n_classes: int
    rule: OnlineRule
    batch_size: int
    fit_intercept: bool
    seed: int = 0
    # the most stored entries of a row of X, when the host knows it (saves the device a read)
    longest_row: int | None = None

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def positive_offset(self):
        return 1 if self.n_classes == 2 else 0

    @property
    def n_models(self):
        return 1 if self.n_classes == 2 else self.n_classes


def shuffled_order(seed, epoch, n_samples, xp=np):
    """Epoch ``epoch``'s permutation of the rows: a stable argsort of stream keys.

    The keys come from the shared counter-based stream, so NumPy and CuPy visit the
    rows in the same order.
    """
    keys = random_bits(seed, epoch, n_samples, xp)
    return xp.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)


def logistic_loss(margins, y01, xp=np):
    """``log(1 + exp(-m))`` for positives, ``log(1 + exp(m))`` for negatives, stably."""
    return xp.logaddexp(0.0, margins) - y01 * margins


class NumpyOnlineSteps:
    """Mini-batch steps on the CPU: SciPy sparse products, no loop over examples."""

    def __init__(self, problem, state):
        self.problem = problem
        self.state = state
        self.X = canonical_csr(problem.X) if sp.issparse(problem.X) else sp.csr_matrix(problem.X)
        self.labels = np.asarray(problem.labels)
        self.loss_sum = 0.0
        self._rows, self._labels = self.X, self.labels
        self._slot = np.empty(self.X.shape[1], dtype=np.int64)  # scratch of _distinct_columns

    def start_epoch(self, order, loss_so_far=0.0):
        """Visit the rows in ``order`` (None: as given) during the coming epoch; the epoch's
        summed loss starts at ``loss_so_far`` (``gpusvm.dask`` steps an epoch in blocks of rows)."""
        if order is None:
            self._rows, self._labels = self.X, self.labels
        else:
            self._rows, self._labels = self.X[order], self.labels[order]
        self.loss_sum = loss_so_far

    def step(self, start):
        """Process rows ``start : start + batch_size`` of the epoch's order."""
        problem, state, rule = self.problem, self.state, self.problem.rule
        stop = min(start + problem.batch_size, self._rows.shape[0])
        batch = stop - start
        indptr = self._rows.indptr[start:stop + 1]
        nonzeros = slice(indptr[0], indptr[-1])
        columns, local = self._distinct_columns(self._rows.indices[nonzeros])
        values = self._rows.data[nonzeros].astype(np.float64, copy=False)  # a view when float64
        row_of = np.repeat(np.arange(batch), np.diff(indptr))  # each nonzero's row in the batch
        n_columns, n_models = columns.shape[0], problem.n_models
        d = state.n_features
        if problem.fit_intercept:
            columns = np.append(columns, d)
        penalized = (columns < d).astype(np.float64)
        # Sums by np.bincount, one model at a time: the same order of additions as a
        # sparse product (over each row's nonzeros, and over rows per column).
        with nvtx.annotate("online.margins", color="blue"):
            weights = rule.weights(state, columns, penalized)
            margins = np.empty((batch, n_models))
            for k in range(n_models):
                margins[:, k] = np.bincount(row_of, weights=values * weights[k, local], minlength=batch)
            if problem.fit_intercept:
                margins += weights[:, -1]
            y01 = self._targets(self._labels[start:stop])
            self.loss_sum += float(logistic_loss(margins, y01).sum())
            residuals = expit(margins) - y01
        with nvtx.annotate("online.update", color="green"):
            scaled = residuals
            if rule.uses_step_sizes:
                scaled = residuals * rule.step_sizes(state.t, batch)[:, None]
            extra = int(problem.fit_intercept)
            gradient = np.empty((n_models, n_columns + extra))
            squared = np.empty_like(gradient) if rule.kind == "ftrl" else None
            for k in range(n_models):
                gradient[k, :n_columns] = np.bincount(local, weights=values * scaled[row_of, k], minlength=n_columns)
                if squared is not None:  # per-example gradients g_s, squared
                    squared[k, :n_columns] = np.bincount(local, weights=(values * residuals[row_of, k])**2,
                                                         minlength=n_columns)
            if problem.fit_intercept:
                gradient[:, -1] = scaled.sum(axis=0)
                if squared is not None:
                    squared[:, -1] = (residuals**2).sum(axis=0)
            next_level = state.level + rule.penalty_added(state.t, batch)
            rule.update(state, columns, penalized, weights, gradient, squared, next_level)
            state.t += batch
            state.level = next_level

    def run_batches(self, starts):
        """Process the batches that start at ``starts`` of the epoch's order, in that order."""
        for start in starts:
            self.step(start)

    def _distinct_columns(self, indices):
        """The distinct columns of a batch's nonzeros and each nonzero's position among them.

        Like ``np.unique(indices, return_inverse=True)`` but O(nnz) without a sort: each
        column's slot in a scratch array remembers its last occurrence in the batch.  The
        order of the columns does not change any sum (those run over rows), only labels.
        """
        occurrence = np.arange(indices.shape[0])
        self._slot[indices] = occurrence
        last = self._slot[indices]  # the last occurrence of each nonzero's column
        representatives = np.flatnonzero(last == occurrence)
        compact = np.empty(indices.shape[0], dtype=np.int64)
        compact[representatives] = np.arange(representatives.shape[0])
        return indices[representatives], compact[last]

    def _targets(self, labels):
        """``y01`` of shape (batch, n_models)."""
        problem = self.problem
        models = np.arange(problem.n_models) + problem.positive_offset
        return (labels[:, None] == models[None, :]).astype(np.float64)

    def epoch_loss_sum(self):
        """Summed logistic loss of the epoch's predictions (each made before its update)."""
        return self.loss_sum


def online_stepper(problem, state, xp):
    """The backend's stepper over ``state`` (modified in place)."""
    if xp is np:
        return NumpyOnlineSteps(problem, state)
    from ._online_logistic_cuda import CupyOnlineSteps

    return CupyOnlineSteps(problem, state)


def run_online(problem, state, *, n_epochs, shuffle, xp, verbose=0):
    """Run ``n_epochs`` passes over ``problem.X`` from ``state`` (which is not modified).

    Returns
    -------
    state : OnlineState
    losses : list of float
        Each epoch's progressive loss: the mean over examples and one-vs-rest models of
        the logistic loss of each prediction made before the example's update.
    """
    stepper = online_stepper(problem, state.copy(), xp)
    n_samples, losses = problem.n_samples, []
    starts = range(0, n_samples, problem.batch_size)
    bar = progress_bar(n_epochs * len(starts), f"online {problem.rule.kind}", verbose)
    for epoch in range(n_epochs):
        order = shuffled_order(problem.seed, epoch, n_samples, xp) if shuffle else None
        with nvtx.annotate("online.epoch", color="purple"):
            stepper.start_epoch(order)
            stepper.run_batches(starts)
            bar.update(len(starts))
        losses.append(stepper.epoch_loss_sum() / (n_samples * problem.n_models))
        bar.set_postfix(loss=f"{losses[-1]:.5g}")
    bar.close()
    return stepper.state, losses
