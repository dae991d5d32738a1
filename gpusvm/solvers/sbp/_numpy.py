"""SBP steps on the host with NumPy: the reference that the CUDA steps (``_cuda.py``)
match up to rounding."""

from __future__ import annotations

import numpy as np

from ..._instrumentation import PhaseClock
from ..._random import random_positions
from ...kernel_functions import squared_row_norms
from ._levels import LevelTracker
from ..row_cache import KernelRowCache
from ._problem import PREFETCH_MAX_COVERED, RENORMALIZE_BELOW, STEP_PHASES, HostCacheCounts, LocalModel


class NumpySBPSteps(HostCacheCounts, LocalModel):
    """SBP steps on the host: a kernel-row cache filled in blocks, BLAS products, and a
    water level from the lowest responses only.

    A step makes a few passes over the ``n`` responses (gathering the level's
    candidates, and in-place updates of the responses and their sum) plus
    work on the candidates and the drawn rows; ``phases.seconds`` records the time of
    each part (``level``, ``draw``, ``rows``, ``update``).
    """

    kernel_values_source = "cache"  # a host cache of kernel rows (the whole matrix, lazily, when all fit)

    def __init__(self, problem, cache_bytes):
        self.problem = problem
        n, k = problem.n_train, problem.n_problems
        n_total = problem.X.shape[0]
        self.labels = np.ascontiguousarray(problem.targets.T)  # (k, n)
        self.positive = self.labels > 0 if problem.fit_intercept else [None] * k
        # y_j for training columns, 1 for holdout columns: turns <u, Phi(x_j)> into a response
        self.signs = np.ones((k, n_total))
        self.signs[:, :n] = self.labels
        sq_norms = squared_row_norms(problem.X)
        self.eta0 = problem.first_step_size(sq_norms)
        self.cache = KernelRowCache(
            lambda rows: problem.kernel_rows(rows, sq_norms),
            n,
            n_total,
            problem.X.dtype,
            cache_bytes,
        )
        self.A, self.stamps = np.zeros((k, n)), np.zeros((k, n))
        # responses of the training rows then the holdout rows, up to the scale; their sum
        self.R, self.R_sum = np.zeros((k, n_total)), np.zeros((k, n_total))
        self.scale, self.r2, self.scale_sum = np.ones(k), np.zeros(k), np.zeros(k)
        self.trackers = [LevelTracker(problem.volume) for _ in range(k)]
        self.checkpoint_trackers = [LevelTracker(problem.volume) for _ in range(k)]
        self.problem_of = np.repeat(np.arange(k), problem.batch_size).reshape(k, problem.batch_size)
        self.phases = PhaseClock(STEP_PHASES)
        self.n_steps = 0

    def levels(self, responses):
        """Water level and bias of each problem's responses (k, n_train), shape (k,) each.

        Checkpoints ask for the levels of the averaged responses, which move little
        between checkpoints: the search is warm-started from the previous one's (as exact
        as a fresh search; on small problems a fresh search cost as much as a step)."""
        k = self.problem.n_problems
        level, bias = np.empty(k), np.zeros(k)
        for p in range(k):
            level[p], bias[p], _ = self.checkpoint_trackers[p].covered(responses[p], self.positive[p])
        return level, bias

    def draw(self, step):
        """``B`` rows per problem, uniformly from those at or below its level, (k, B), and
        a function giving those rows, the lowest first (they will be drawn again)."""
        problem, batch, n = self.problem, self.problem.batch_size, self.problem.n_train
        drawn = np.empty((problem.n_problems, batch), dtype=np.int64)
        covered = []
        for p in range(problem.n_problems):
            with self.phases.phase("level", "sbp.water_level", "purple"):
                # the level of scale * R is scale times the level of R with volume / scale
                _, bias, below = self.trackers[p].covered(
                    self.R[p, :n], self.positive[p], problem.volume / self.scale[p]
                )
            with self.phases.phase("draw", "sbp.draw", "yellow"):
                lanes = np.arange(p * batch, (p + 1) * batch, dtype=np.uint64)
                drawn[p] = below[random_positions(problem.seed, step, lanes, below.size)]
            covered.append((below, bias))
        return drawn, lambda: self._lowest_first(covered)

    def _lowest_first(self, covered):
        """The covered rows of every problem, by rank of height within their problem; none
        of a problem whose covered set is over ``PREFETCH_MAX_COVERED`` of the rows (early
        on, when the water covers much and moves fast, most would not be drawn)."""
        rows, ranks = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
        for p, (below, bias) in enumerate(covered):
            if below.size > PREFETCH_MAX_COVERED * self.problem.n_train:
                continue
            heights = self.R[p, below] + bias * self.labels[p, below]
            rows.append(below[np.argsort(heights, kind="stable")])
            ranks.append(np.arange(below.size))
        return np.concatenate(rows)[np.argsort(np.concatenate(ranks), kind="stable")]

    def step(self, step, eta):
        """One SBP step ``t = step`` (from 1) with step size ``eta``."""
        problem, batch = self.problem, self.problem.batch_size
        k = problem.n_problems
        problem_of = self.problem_of
        drawn, lowest_covered = self.draw(step)
        drawn_labels = self.labels[problem_of, drawn]
        with self.phases.phase("rows", "sbp.kernel_row", "orange"):
            distinct, position = np.unique(drawn, return_inverse=True)
            weights = np.zeros((k, distinct.size))
            np.add.at(weights, (problem_of, position.reshape(k, batch)), drawn_labels / batch)
            # <u, Phi(x_j)>, (k, n_train + n_holdout), float64; on a miss, the lowest
            # covered rows come along: the next draws come from them
            direction = self.cache.combine(weights, distinct, prefetch=lowest_covered)
        with self.phases.phase("update", "sbp.update", "green"):
            direction *= self.signs
            old = self.scale[:, None] * self.R[problem_of, drawn]
            self.r2 += 2 * eta * old.mean(axis=1) + eta**2 * direction[problem_of, drawn].mean(axis=1)
            increment = eta / (batch * self.scale)
            np.add.at(self.A, (problem_of, drawn), np.repeat(increment, batch).reshape(k, batch))
            np.add.at(self.stamps, (problem_of, drawn), np.repeat(increment * self.scale_sum, batch).reshape(k, batch))
            outside = self.r2 > 1
            step_size = eta / self.scale
            self.scale[outside] /= np.sqrt(self.r2[outside])
            self.r2[outside] = 1.0
            self.scale_sum += self.scale
            # in place: R += (eta / s_old) d, R_sum += s R (ufuncs: BLAS's axpy would wake
            # a second OpenBLAS thread pool, scipy's, to fight numpy's over the cores)
            direction *= step_size[:, None]
            self.R += direction
            np.multiply(self.R, self.scale[:, None], out=direction)
            self.R_sum += direction
            if (self.scale < RENORMALIZE_BELOW).any():
                self._renormalize()
        self.n_steps = step

    def _renormalize(self):
        """Fold the scale into A and R, keeping the running sums unchanged."""
        self.stamps -= self.A * self.scale_sum[:, None]  # now: minus the sum so far
        for array in (self.A, self.R):
            array *= self.scale[:, None]
        self.scale[:] = 1.0
        self.scale_sum[:] = 0.0
        self.trackers = [LevelTracker(self.problem.volume) for _ in self.trackers]  # thresholds were in R's units

    def synchronize(self):
        """Nothing to wait for: host steps are done when they return."""

    def model(self, average):
        """``alpha``, responses and holdout responses: averaged over the steps so far, or
        of the last iterate."""
        n = self.problem.n_train
        if not average:
            scale = self.scale[:, None]
            return scale * self.A, scale * self.R[:, :n], scale * self.R[:, n:]
        steps = max(1, self.n_steps)
        alpha = (self.A * self.scale_sum[:, None] - self.stamps) / steps
        return alpha, self.R_sum[:, :n] / steps, self.R_sum[:, n:] / steps
