"""The kernelized Stochastic Batch Perceptron (Cotter, Shalev-Shwartz and Srebro 2012).

Algorithm 1 of the paper (``docs/algorithms.md``, section 2), one-vs-rest, with mini-batches.
Per binary problem the state is ``w = sum_i alpha_i y_i Phi(x_i)``, kept through the
responses ``c_j = y_j <w, Phi(x_j)>`` of every training row, the squared norm
``r2 = ||w||^2``, and the holdout responses ``h_v = <w, Phi(x_v)>``.  Step ``t``:

1. the water level ``gamma`` of ``c`` (and with an intercept, the bias ``b``): the
   examples below it, ``c_j + y_j b <= gamma``, carry the subgradient ``p*``;
2. draw ``B`` of them uniformly (lane ``k B + b`` of the shared random stream at step
   ``t`` for problem ``k``), so each class draws from its own set;
3. step along the mean ``u = 1/B sum_b y_b Phi(x_b)`` with ``eta_t = eta_0 / sqrt(t)``:
   one combined kernel row ``g = 1/B sum_b y_b K(x_b, .)`` updates every response, and
   ``r2 += 2 eta <w, u> + eta^2 ||u||^2``, read off the old responses and ``g``;
4. project back onto the unit ball when ``r2 > 1``.

The iterates are averaged uniformly (the paper's ``alpha_bar``); the model is the
average divided by the level of the averaged responses.

Cheap bookkeeping, so a step costs one combined kernel row plus O(n):

* ``alpha = s A`` and the responses ``(c, h) = s R`` share a scale ``s``: a projection
  is O(1).  Folded into ``A`` and ``R`` when ``s`` gets tiny (``RENORMALIZE_BELOW``).
  The water level of ``s R`` is ``s`` times that of ``R`` with volume ``n nu / s``, so
  the level search reads ``R`` as it is.
* ``sum_t alpha^(t)`` is ``A S - stamps``, with ``S`` the running sum of ``s`` and
  ``stamps`` each increment of ``A`` times ``S`` before it (``A`` changes in ``B``
  places per step); the responses change everywhere anyway, and their sum ``R_sum`` is
  added up directly.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import nvtx

from .._backend import to_numpy
from .._instrumentation import PhaseClock, progress_bar
from .._random import random_positions
from ..kernel_functions import kernel_rows, squared_row_norms
from ..water_level import LevelTracker
from .row_cache import KernelRowCache

RENORMALIZE_BELOW = 1e-150
CHECKPOINTS_PER_EPOCH = 10
STEP_PHASES = ("level", "draw", "rows", "update")
PREFETCH_MAX_COVERED = 0.25


@dataclasses.dataclass(frozen=True)
class SBPProblem:
    """The data and settings of one SBP fit, on the training backend.

    ``X`` holds the training rows, then the holdout rows; kernel rows run over both, so
    that the holdout responses are kept up to date like the training ones.
    """

    X: object  # (n_train + n_holdout, n_features), dense or CSR
    n_train: int
    targets: object  # (n_train, n_problems) in {-1, +1}, float64
    holdout_labels: np.ndarray  # (n_holdout,) positions in classes_, on the host
    nu: float
    batch_size: int
    kernel: str
    gamma: float
    degree: int
    coef0: float
    fit_intercept: bool
    seed: int

    @property
    def volume(self):
        """``n nu``: the total slack (water) poured at the level."""
        return self.n_train * self.nu

    @property
    def n_problems(self):
        return self.targets.shape[1]

    @property
    def n_rows(self):
        """Training plus holdout rows: the length of a kernel row."""
        return self.X.shape[0]

    @property
    def n_holdout(self):
        return self.n_rows - self.n_train

    def kernel_rows(self, rows, sq_norms):
        """``K(X[rows], X)`` over training and holdout columns, in X's dtype."""
        return kernel_rows(self.X, rows, sq_norms, kernel=self.kernel, gamma=self.gamma, degree=self.degree,
                           coef0=self.coef0)

    def first_step_size(self, sq_norms):
        """``eta_0 = 1 / sqrt(max_i K(x_i, x_i))`` over the training rows."""
        return step_size_for(largest_self_kernel(sq_norms[: self.n_train], self.kernel, self.gamma, self.degree,
                                                 self.coef0))


def largest_self_kernel(sq_norms, kernel, gamma, degree, coef0):
    """``max_i K(x_i, x_i)`` from the rows' squared norms (0 for no rows)."""
    norms = sq_norms.astype("float64")
    if kernel == "rbf" or norms.shape[0] == 0:
        return 1.0 if norms.shape[0] else 0.0
    if kernel == "poly":
        return float(((gamma * norms + coef0) ** degree).max())
    return float(norms.max())


def step_size_for(largest_self_kernel_value):
    """``eta_0 = 1 / sqrt(max_i K(x_i, x_i))``, 1 when that is 0."""
    value = largest_self_kernel_value
    return 1.0 / math.sqrt(value) if value > 0 else 1.0


@dataclasses.dataclass
class SBPResult:
    """The averaged model after ``n_steps`` steps, on the host."""

    alpha: np.ndarray  # (n_problems, n_columns) averaged coefficients of y_i Phi(x_i)
    level: np.ndarray  # (n_problems,) water level of the averaged responses
    bias: np.ndarray  # (n_problems,) bias of the averaged responses (0 without intercept)
    n_steps: int
    history: list
    support: np.ndarray | None = None  # the training rows of alpha's columns; None: every row


class LocalModel:
    """What ``run_sbp`` asks of the steps of one process, from their ``model`` and
    ``levels`` (the steps of gpusvm.dask answer the same questions across workers)."""

    def evaluate(self, average):
        """Level and bias of each problem's model (host arrays), and its holdout error."""
        _, responses, holdout_responses = self.model(average)
        level, bias = self.levels(responses)
        level, bias = to_numpy(level), to_numpy(bias)
        return level, bias, holdout_error(self.problem, to_numpy(holdout_responses), level, bias)

    def coefficients(self, average):
        """``alpha`` of every training row (on the host), and None for "every row"."""
        return to_numpy(self.model(average)[0]), None


class NumpySBPSteps(LocalModel):
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
            lambda rows: problem.kernel_rows(rows, sq_norms), n, n_total, problem.X.dtype, cache_bytes,
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

    @property
    def kernel_rows_computed(self):
        return self.cache.rows_computed

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
                _, bias, below = self.trackers[p].covered(self.R[p, :n], self.positive[p],
                                                          problem.volume / self.scale[p])
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


def holdout_error(problem, holdout_responses, level, bias):
    """Error rate on the holdout rows of the model ``(h + b) / level``, or None."""
    if problem.n_holdout == 0:
        return None
    return float((predicted_classes(holdout_responses, level, bias) != problem.holdout_labels).mean())


def predicted_classes(responses, level, bias):
    """Positions in ``classes_`` that the model ``(responses + b) / level`` predicts
    (responses of shape (n_problems, n), on the host)."""
    scores = (responses + bias[:, None]) / positive_level(level)[:, None]
    return (scores[0] > 0).astype(int) if scores.shape[0] == 1 else scores.argmax(axis=0)


def positive_level(level):
    """The divisor of the final model: the level where it is positive, else 1 (the
    predictor's signs are the same; only the margin-1 scaling is lost)."""
    level = np.asarray(level, dtype=float)
    return np.where(level > 0, level, 1.0)


@dataclasses.dataclass
class StoppingRules:
    """When to stop: epochs, wall-clock seconds, kernel evaluations, and either the holdout
    error (with a holdout) or the objective's gain (without one, ``tol``)."""

    max_epochs: int
    time_budget: float | None = None
    max_kernel_evals: int | None = None
    n_iter_no_change: int = 10
    tol: float | None = None

    def objective_stalled(self, history):
        """Whether the objective (the averaged model's level, which grows as SBP
        converges) gained less than ``tol`` of its size over the last
        ``n_iter_no_change`` checkpoints: ``history`` is one problem's records, oldest first."""
        if self.tol is None or len(history) <= self.n_iter_no_change:
            return False
        return bool(self.gained_too_little(history[-1 - self.n_iter_no_change]["objective"],
                                           history[-1]["objective"]))

    def gained_too_little(self, before, now):
        """Whether objectives went from ``before`` to ``now`` (scalars or arrays) by less
        than ``tol`` of their size (``tol`` not None)."""
        return now - before < self.tol * np.abs(before)


def checkpoint_interval(steps_per_epoch):
    """Steps between a problem's checkpoints: ten an epoch at most (scalar or array)."""
    return np.maximum(1, -(-steps_per_epoch // CHECKPOINTS_PER_EPOCH))


def checkpoint_patience(n_iter_no_change, own_every, checkpoint_every):
    """Checkpoints the stopping rules look back over when a problem checkpoints every
    ``checkpoint_every`` steps instead of its own ``own_every``
    (:func:`checkpoint_interval`): the span of ``n_iter_no_change`` of its own
    checkpoints, rounded up to whole checkpoints (scalars or arrays)."""
    return -(-n_iter_no_change * own_every // checkpoint_every)


def run_sbp(problem, steps, rules, *, checkpoint_every=None, average=True, verbose=0):
    """Run SBP steps until a stopping rule fires; checkpoint ten times per epoch.

    ``steps`` is a ``NumpySBPSteps``, a ``CupySBPSteps`` or gpusvm.dask's steps: it has
    ``eta0``, ``step`` (or ``run_steps`` and ``block_steps``: blocks of steps between
    which the clock is read), ``synchronize``, ``evaluate``, ``coefficients``,
    ``kernel_rows_computed`` and ``kernel_values_source`` ('matrix', 'cache' or
    'products', as :func:`gpusvm._kernel_matrix_cuda.kernel_values_source` names
    them); ``average`` picks the model that checkpoints evaluate and that is returned.
    ``checkpoint_every`` (None: :func:`checkpoint_interval`) sets
    other steps between checkpoints, as a one-vs-one pair's
    (:func:`~gpusvm.solvers.sbp_pairs.pair_checkpoint_steps`); the stopping rules then
    look back over the same span of steps (:func:`checkpoint_patience`).  Returns an
    :class:`SBPResult`.
    """
    n_train, batch = problem.n_train, problem.batch_size
    steps_per_epoch = max(1, math.ceil(n_train / batch))
    own_every = int(checkpoint_interval(steps_per_epoch))
    if checkpoint_every is not None and checkpoint_every != own_every:
        patience = int(checkpoint_patience(rules.n_iter_no_change, own_every, checkpoint_every))
        rules = dataclasses.replace(rules, n_iter_no_change=patience)
    checkpoint_every = own_every if checkpoint_every is None else int(checkpoint_every)
    evals_per_step = problem.n_problems * batch * problem.n_rows
    max_steps = rules.max_epochs * steps_per_epoch
    if rules.max_kernel_evals is not None:
        max_steps = min(max_steps, max(1, rules.max_kernel_evals // evals_per_step))
    history, best_error, checkpoints_since_best = [], math.inf, 0
    started = time.perf_counter()

    def elapsed():
        steps.synchronize()  # launches are asynchronous: count the work queued so far
        return time.perf_counter() - started

    bar = progress_bar(max_steps, "SBP", verbose)
    block_steps = getattr(steps, "block_steps", 1)  # steps issued together; the clock is read between
    t = 0
    while t < max_steps:
        count = min(block_steps, checkpoint_every - t % checkpoint_every, max_steps - t)
        run_step_block(steps, t + 1, count)
        t += count
        bar.update(count)
        out_of_time = rules.time_budget is not None and elapsed() >= rules.time_budget
        if t % checkpoint_every and t < max_steps and not out_of_time:
            continue
        record, level, bias = checkpoint(steps, average, t, evals_per_step * t, elapsed())
        history.append(record)
        if record["holdout_error"] is None:
            stalled = rules.objective_stalled(history)
        else:
            stalled = False
            bar.set_postfix(holdout_error=f"{record['holdout_error']:.4f}", refresh=False)
            if record["holdout_error"] < best_error:
                best_error, checkpoints_since_best = record["holdout_error"], 0
            else:
                checkpoints_since_best += 1
        if out_of_time or stalled or checkpoints_since_best >= rules.n_iter_no_change:
            break
    bar.close()
    alpha, support = steps.coefficients(average)
    return SBPResult(alpha=alpha, level=level, bias=bias, n_steps=t, history=history, support=support)


def step_schedule(first, count, eta0):
    """Rows ``(t, eta_0 / sqrt(t))`` for ``t = first .. first + count - 1``."""
    t = np.arange(first, first + count, dtype=np.float64)
    return np.column_stack([t, eta0 / np.sqrt(t)])


def run_step_block(steps, first, count):
    """Steps ``first .. first + count - 1``: one block of a schedule when ``steps`` takes
    one (``run_steps``, the GPU's), else one ``step`` after another."""
    if hasattr(steps, "run_steps"):
        steps.run_steps(step_schedule(first, count, steps.eta0))
        return
    for t in range(first, first + count):
        steps.step(t, steps.eta0 / math.sqrt(t))


def checkpoint(steps, average, n_steps, kernel_evals, seconds):
    """A history record (the model's level, the objective, and its holdout error), and the
    model's level and bias per problem."""
    with nvtx.annotate("sbp.checkpoint", color="cyan"):
        level, bias, error = steps.evaluate(average)
    return history_record(steps, n_steps, kernel_evals, seconds, np.mean(level), error), level, bias


def history_record(steps, n_steps, kernel_evals, seconds, objective, holdout_error):
    """One ``history_`` record: the counts so far, where the steps read their kernel
    values (``steps.kernel_values_source``), the objective (the level of the averaged
    model) and the holdout error (None: no holdout)."""
    return {
        "steps": int(n_steps),
        "kernel_evals": int(kernel_evals),
        "kernel_rows_computed": int(steps.kernel_rows_computed),
        "kernel_values_source": steps.kernel_values_source,
        "seconds": seconds,
        "objective": float(objective),
        "holdout_error": holdout_error,
        "phase_seconds": dict(steps.phases.seconds) if hasattr(steps, "phases") else None,
    }
