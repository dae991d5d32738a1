"""Mini-batch Pegasos (Shalev-Shwartz et al. 2011), one-vs-rest, on NumPy or CuPy.

Objective per class, with targets ``y`` in {-1, +1} and per-sample weights ``s``::

    lam/2 ||w||^2 + 1/n sum_i s_i max(0, 1 - y_i <w, x_i>)

Step ``t`` (1-based, counted over the model's whole life so that ``partial_fit``
continues the same schedule) draws ``k`` rows with replacement from the shared random
stream at step ``t`` and applies, for every class at once::

    eta = 1 / (lam t)
    w  <- (1 - 1/t) w + (eta / k) sum_{violators} s_i y_i x_i
    w  <- min(1, (1/sqrt(lam)) / ||w||) w                  (projection, optional)

The weights of class ``c`` are stored as ``w_c = a_c v_c`` (see ``kernels/pegasos.cu``):
the shrink is O(1) and the update touches only the batch's nonzeros.  ``||v_c||^2`` is
kept up to date so projection is O(1).  The average of the iterates from step
``average_start`` on is ``(P + B v) / n_averaged``.  The bias, when fitted, is column
``d`` of ``v``: the weight of an implicit constant feature of value 1, regularized and
projected like any other weight (as LIBLINEAR's ``intercept_scaling=1``).

References
----------
S. Shalev-Shwartz, Y. Singer, N. Srebro, A. Cotter. Pegasos: primal estimated
sub-gradient solver for SVM. Mathematical Programming 127(1), 2011.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import nvtx
import scipy.sparse as sp
from tqdm.auto import tqdm

from .._random import random_indices

# Renormalize v (v *= a, a = 1) when a falls below this; checked every few steps.
RENORMALIZE_BELOW = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-9}
RENORMALIZE_EVERY = 16


@dataclasses.dataclass
class PegasosState:
    """What a Pegasos model carries from one step (or one ``partial_fit``) to the next.

    Arrays live on the backend that trains (NumPy or CuPy).
    """

    v: object  # (n_classes, n_weights) in the data's dtype; w = scale_a * v
    scale_a: object  # (n_classes,) float64
    sq_norm_v: object  # (n_classes,) float64, ||v||^2
    avg_p: object  # (n_classes, n_weights) float64: sum of iterates = avg_p + avg_b * v
    avg_b: object  # (n_classes,) float64
    n_averaged: int = 0
    step: int = 0

    @classmethod
    def zeros(cls, n_classes, n_weights, dtype, xp):
        """A fresh model: ``w = 0``."""
        return cls(
            v=xp.zeros((n_classes, n_weights), dtype=dtype),
            scale_a=xp.ones(n_classes),
            sq_norm_v=xp.zeros(n_classes),
            avg_p=xp.zeros((n_classes, n_weights)),
            avg_b=xp.zeros(n_classes),
        )

    def copy(self):
        """A deep copy, so that a failed fit leaves the original untouched."""
        return dataclasses.replace(
            self,
            v=self.v.copy(),
            scale_a=self.scale_a.copy(),
            sq_norm_v=self.sq_norm_v.copy(),
            avg_p=self.avg_p.copy(),
            avg_b=self.avg_b.copy(),
        )

    def weights(self, averaged):
        """``(n_classes, n_weights)`` float64: the last iterate, or the average when asked and available."""
        if averaged and self.n_averaged > 0:
            return (self.avg_p + self.avg_b[:, None] * self.v) / self.n_averaged
        return self.scale_a[:, None] * self.v.astype(np.float64)


@dataclasses.dataclass(frozen=True)
class PegasosProblem:
    """The data and settings of one fit, on the training backend."""

    X: object  # (n_samples, n_features), dense C-order or CSR
    targets: object  # (n_samples, n_classes) in {-1, +1}, X's dtype
    sample_weight: object  # (n_samples,), X's dtype
    lam: float
    batch_size: int
    fit_intercept: bool
    projection: bool
    average_start: int | None  # first step whose iterate enters the average; None: no average
    seed: int

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]

    def averaging_at(self, step):
        return self.average_start is not None and step >= self.average_start


class NumpyPegasosSteps:
    """Pegasos steps on the CPU with NumPy / SciPy (the reference for the CUDA path)."""

    def __init__(self, problem, state):
        self.problem = problem
        self.state = state
        self.hinge_sum = np.zeros(state.v.shape[0])
        self.renormalize_below = RENORMALIZE_BELOW[np.dtype(state.v.dtype)]

    def step(self):
        """Advance the model by one mini-batch step."""
        problem, state = self.problem, self.state
        t = state.step + 1
        d = problem.n_features
        k = problem.batch_size
        with nvtx.annotate("pegasos.margins", color="blue"):
            rows = random_indices(problem.seed, t, k, problem.n_samples)
            X_batch = problem.X[rows]
            dots = np.asarray(X_batch @ state.v[:, :d].T, dtype=np.float64)
            if problem.fit_intercept:
                dots += state.v[:, d]
            y = problem.targets[rows].astype(np.float64)
            weight = problem.sample_weight[rows].astype(np.float64)[:, None]
            margins = y * (state.scale_a * dots)
            violating = margins < 1.0
            self.hinge_sum += (weight * np.maximum(0.0, 1.0 - margins)).sum(axis=0)
            coef = np.where(violating, (1.0 / (problem.lam * t * k)) * weight * y, 0.0)
        with nvtx.annotate("pegasos.update", color="green"):
            step_scale = 1.0 - 1.0 / t if t > 1 else 1.0  # at t = 1, w = 0 already
            state.scale_a *= step_scale
            if violating.any():
                self._add(X_batch, coef / state.scale_a, t)
            if problem.projection:
                norm_w = state.scale_a * np.sqrt(np.maximum(state.sq_norm_v, 0.0))
                radius = 1.0 / math.sqrt(problem.lam)
                over = norm_w > radius
                state.scale_a[over] *= radius / norm_w[over]
            if problem.averaging_at(t):
                state.avg_b += state.scale_a
                state.n_averaged += 1
            if t % RENORMALIZE_EVERY == 0:
                self._renormalize(problem.averaging_at(t))
        state.step = t

    def _add(self, X_batch, factor, t):
        """``v += factor.T @ X_batch`` on the touched columns; keeps ``||v||^2`` and the average."""
        problem, state = self.problem, self.state
        d = problem.n_features
        if sp.issparse(X_batch):
            columns, compact = np.unique(X_batch.indices, return_inverse=True)
            X_compact = sp.csr_matrix(
                (X_batch.data, compact, X_batch.indptr), shape=(X_batch.shape[0], columns.size)
            )
            delta = np.asarray((X_compact.T @ factor).T)
        else:
            columns = slice(0, d)
            delta = factor.T @ X_batch
        delta = delta.astype(state.v.dtype)
        self._apply(columns, delta, t)
        if problem.fit_intercept:
            self._apply(slice(d, d + 1), factor.sum(axis=0)[:, None].astype(state.v.dtype), t)

    def _apply(self, columns, delta, t):
        state = self.state
        old = state.v[:, columns]
        new = old + delta
        state.sq_norm_v += (new.astype(np.float64) ** 2 - old.astype(np.float64) ** 2).sum(axis=1)
        state.v[:, columns] = new
        if self.problem.averaging_at(t):
            state.avg_p[:, columns] -= state.avg_b[:, None] * delta

    def _renormalize(self, averaging):
        state = self.state
        tiny = state.scale_a < self.renormalize_below
        if not tiny.any():
            return
        a = state.scale_a[tiny]
        state.v[tiny] = (state.v[tiny] * a[:, None]).astype(state.v.dtype)
        state.sq_norm_v[tiny] *= a * a
        if averaging:
            state.avg_b[tiny] /= a
        state.scale_a[tiny] = 1.0

    def take_hinge_sum(self):
        """Sum of ``s * hinge`` over the rows sampled since the last call, per class (host)."""
        total, self.hinge_sum = self.hinge_sum, np.zeros_like(self.hinge_sum)
        return total


def steps_per_epoch(n_samples, batch_size):
    """Steps of one epoch: enough batches to draw ``n_samples`` rows."""
    return max(1, math.ceil(n_samples / batch_size))


def run_pegasos(problem, state, *, n_epochs, tol, n_iter_no_change, backend, verbose=0):
    """Run up to ``n_epochs`` epochs of Pegasos steps from ``state`` (not modified).

    Stops early, as scikit-learn's SGDClassifier does, when the epoch objective
    (``lam/2 ||w||^2`` plus the mean weighted hinge loss of the rows sampled during the
    epoch, summed over classes) has not improved by ``tol`` for ``n_iter_no_change``
    epochs in a row; ``tol=None`` runs every epoch.

    Returns
    -------
    state : PegasosState
    epochs_run : int
    objectives : list of float
    """
    state = state.copy()
    if backend == "cupy":
        from ._pegasos_cuda import CupyPegasosSteps as Steps
    else:
        Steps = NumpyPegasosSteps
    stepper = Steps(problem, state)
    n_steps = steps_per_epoch(problem.n_samples, problem.batch_size)
    best, stale, objectives = math.inf, 0, []
    epochs = tqdm(range(n_epochs), desc="Pegasos", unit="epoch", disable=not verbose, leave=False)
    for _ in epochs:
        with nvtx.annotate("pegasos.epoch", color="purple"):
            for _ in range(n_steps):
                stepper.step()
        hinge = stepper.take_hinge_sum().sum() / (n_steps * problem.batch_size)
        w_sq = float((np.asarray(_to_host(state.scale_a)) ** 2 * _to_host(state.sq_norm_v)).sum())
        objective = 0.5 * problem.lam * w_sq + hinge
        objectives.append(objective)
        epochs.set_postfix(objective=f"{objective:.5g}")
        if tol is not None:
            stale = stale + 1 if objective > best - tol else 0
            best = min(best, objective)
            if stale >= n_iter_no_change:
                break
    return stepper.state, len(objectives), objectives


def _to_host(array):
    return array.get() if hasattr(array, "get") else array
