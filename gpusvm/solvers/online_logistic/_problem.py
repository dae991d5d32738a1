"""The online logistic problem, its update rules and its state: what the NumPy steps
(``_numpy.py``) and the CUDA steps (``_cuda.py``) share."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..._backend import to_numpy
from ..._random import random_bits
from ..._validation import check_linear_model_width
from ..row_cache import memory_headroom_bytes


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
                xp.abs(mean_gradient) <= l1,
                0.0,
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
        """A fresh model; column ``n_features`` is the intercept. Refused (``MemoryError``)
        before anything is allocated when the model's arrays over the features, with the
        steps' and the coefficients' on the host, would not fit in the memory the process
        may still take (:func:`~gpusvm._validation.check_linear_model_width`): the fitted
        coefficients are host arrays on either backend."""
        check_linear_model_width(n_features, n_classes, memory_headroom_bytes())
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
