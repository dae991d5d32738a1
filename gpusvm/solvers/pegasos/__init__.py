"""Mini-batch Pegasos (Shalev-Shwartz et al. 2011), one-vs-rest, on NumPy or CuPy.

Objective per class, with targets ``y`` in {-1, +1} and per-sample weights ``s``::

    lam/2 ||w||^2 + 1/n sum_i s_i max(0, 1 - y_i <w, x_i>)

Step ``t`` (1-based, counted over the model's whole life so that ``partial_fit``
continues the same schedule) draws ``k`` rows with replacement from the shared random
stream at step ``t`` and applies, for every class at once::

    eta = 1 / (lam t)
    w  <- (1 - 1/t) w + (eta / k) sum_{violators} s_i y_i x_i
    w  <- min(1, r / ||w||) w,  r = sqrt(mean(s) / lam)     (projection, optional)

The weights of class ``c`` are stored as ``w_c = a_c v_c`` (see ``kernels/pegasos.cu``):
the shrink is O(1) and the update touches only the batch's nonzeros.  ``||v_c||^2`` is
kept up to date so projection is O(1).  The weighted average of the iterates from step
``average_start`` on is ``(P + B v) / sum(weights)``, with weight ``t`` for step ``t``
(Lacoste-Julien et al. 2012: an O(1/T) rate for this step size, with no need to know
``T`` in advance) or uniform weights.  The bias, when fitted, is column
``d`` of ``v``: the weight of an implicit constant feature of value 1, regularized and
projected like any other weight (as LIBLINEAR's ``intercept_scaling=1``).

The math, with the paper's notation: ``docs/algorithms.md``, section 1.  This folder:
the problem, the state and the NumPy steps (the reference) here, the CUDA steps in
``_cuda.py`` (``kernels/pegasos.cu``), and :func:`make_steps`, which picks one of them.

References
----------
S. Shalev-Shwartz, Y. Singer, N. Srebro, A. Cotter. Pegasos: primal estimated
sub-gradient solver for SVM. Mathematical Programming 127(1), 2011.

S. Lacoste-Julien, M. Schmidt, F. Bach. A simpler approach to obtaining an O(1/t)
convergence rate for the projected stochastic subgradient method. arXiv:1212.2002, 2012.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import nvtx
import scipy.sparse as sp

from ..._backend import get_namespace, on_device, to_numpy
from ..._instrumentation import progress_bar
from ..._random import random_index_block

# Renormalize v (v *= a, a = 1) when a falls below this, so that v stays in range.
RENORMALIZE_BELOW = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-9}
# Fold the average's B * v into P when B > FOLD_RATIO * a * (sum of weights): past
# that, P + B v cancels and loses digits (projection can shrink a by orders of
# magnitude in a few early steps, while B remembers the large early a's).
FOLD_RATIO = 16.0
# PEGASOS_FUSED_MAX_BATCH, _CLASSES and _PAIRS of kernels/pegasos.cu: what the fused
# steps' shared memory holds (see fits_fused_steps).
FUSED_MAX_BATCH, FUSED_MAX_CLASSES, FUSED_MAX_PAIRS = 1024, 64, 2048


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
    avg_weight_sum: float = 0.0
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

    def to(self, xp):
        """The same state with its arrays in ``xp``'s memory (NumPy or CuPy)."""
        move = to_numpy if xp is np else xp.asarray
        return dataclasses.replace(
            self,
            v=move(self.v),
            scale_a=move(self.scale_a),
            sq_norm_v=move(self.sq_norm_v),
            avg_p=move(self.avg_p),
            avg_b=move(self.avg_b),
        )

    def weights(self, averaged):
        """``(n_classes, n_weights)`` float64: the last iterate, or the average when asked and available."""
        if averaged and self.avg_weight_sum > 0:
            return (self.avg_p + self.avg_b[:, None] * self.v) / self.avg_weight_sum
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
    weight_by_step: bool  # average with weight t for step t (else uniform)
    seed: int
    # mean(s) over all the training rows, when X holds only some of them (gpusvm.dask)
    mean_weight: float | None = None

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]

    @functools.cached_property
    def radius(self):
        """Radius of the ball that holds the optimum: ``sqrt(mean(s) / lam)``.

        The dual bound ``||w*||^2 <= (1/lam) (1/n) sum_i s_i`` (each dual variable is at
        most ``s_i / n``); with unit weights it is Pegasos' ``1 / sqrt(lam)``.
        """
        mean_weight = self.mean_weight if self.mean_weight is not None else float(self.sample_weight.mean())
        return math.sqrt(mean_weight / self.lam)

    def step_size_over_batch(self, step):
        """``eta / k = 1 / (lam t k)`` at step ``t``: the factor of a violator's ``s_i y_i x_i``."""
        return 1.0 / (float(self.lam) * step * self.batch_size)

    @staticmethod
    def shrink(step):
        """``1 - 1/t``, the factor ``w`` is shrunk by at step ``t`` (1 at ``t = 1``, where ``w = 0``)."""
        return 1.0 - 1.0 / step if step > 1 else 1.0

    def averaging_at(self, step):
        return self.average_start is not None and step >= self.average_start

    def average_weight(self, step):
        """Weight of step ``step``'s iterate in the average (0 before it starts)."""
        if not self.averaging_at(step):
            return 0.0
        return float(step) if self.weight_by_step else 1.0

    # Array forms of the three above, for a whole schedule at once: the same float64
    # operations in the same order, so each value equals the scalar form's bit for bit.

    def step_sizes_over_batch(self, steps):
        """:meth:`step_size_over_batch` of each step of an int64 array, float64."""
        return 1.0 / (float(self.lam) * steps.astype(np.float64) * self.batch_size)

    @staticmethod
    def shrinks(steps):
        """:meth:`shrink` of each step of an int64 array (steps from 1), float64."""
        t = steps.astype(np.float64)
        return np.where(t > 1.0, 1.0 - 1.0 / t, 1.0)

    def average_weights(self, steps):
        """:meth:`average_weight` of each step of an int64 array, float64."""
        if self.average_start is None:
            return np.zeros(steps.shape)
        weight = steps.astype(np.float64) if self.weight_by_step else 1.0
        return np.where(steps >= self.average_start, weight, 0.0)


def pegasos_schedule(problem, first_step, n_steps, weight_sum, given_from=None):
    """The values of Pegasos steps ``first_step .. first_step + n_steps - 1``, for the CUDA
    steps (``gpusvm/solvers/pegasos/_cuda.py``).

    Parameters
    ----------
    problem : PegasosProblem
        Its methods give the step values, as they do to ``NumpyPegasosSteps``, so that the
        two backends take the same step sizes bit for bit.
    first_step, n_steps : int
        The steps, counted from 1 over the model's life.
    weight_sum : float
        The sum of the average's weights before ``first_step``.
    given_from : int or None
        The first step of the given rows (``GivenBatches``); None: rows are drawn.

    Returns
    -------
    ndarray of shape (n_steps, 6), float64
        One row a step, in the column order of ``PEGASOS_*`` in ``kernels/pegasos.cu``:
        ``t``, ``1 / (lam t k)``, the shrink ``1 - 1/t``, the iterate's weight in the
        average, the running sum of those weights from ``weight_sum`` (added one step after
        another, as ``NumpyPegasosSteps`` does), and the first given row (-1: drawn).
    """
    steps = np.arange(first_step, first_step + n_steps, dtype=np.int64)
    rows = np.empty((n_steps, 6))
    rows[:, 0] = steps
    rows[:, 1] = problem.step_sizes_over_batch(steps)
    rows[:, 2] = problem.shrinks(steps)
    rows[:, 3] = problem.average_weights(steps)
    running = np.empty(n_steps + 1)
    running[0] = weight_sum
    running[1:] = rows[:, 3]
    rows[:, 4] = np.cumsum(running)[1:]  # add.accumulate: sequential, from weight_sum
    rows[:, 5] = -1 if given_from is None else (steps - given_from) * problem.batch_size
    return rows


def csr_batch(X, rows, constant_column=None):
    """The nonzeros of ``X[rows]`` for a CSR ``X``: (row position in batch, column, value).

    With ``constant_column``, each row also gets the entry ``(constant_column, 1.0)``
    (the bias feature).  Plain NumPy: SciPy's fancy row indexing builds several matrix
    objects per call, which costs more than the arithmetic of a small batch.
    """
    starts = X.indptr[rows].astype(np.int64)
    lengths = X.indptr[rows + 1] - starts
    widths = lengths + (0 if constant_column is None else 1)
    row_of = np.repeat(np.arange(rows.size), widths)
    within = np.arange(row_of.size) - np.repeat(np.cumsum(widths) - widths, widths)
    source = np.repeat(starts, widths) + within
    if constant_column is None:
        return row_of, X.indices[source], X.data[source]
    is_constant = within == np.repeat(lengths, widths)
    source = np.where(is_constant, 0, source)  # the constant's slot reads nothing real
    columns = np.where(is_constant, constant_column, X.indices[source] if X.nnz else 0)
    values = np.where(is_constant, X.dtype.type(1), X.data[source] if X.nnz else 0).astype(X.dtype)
    return row_of, columns, values


class BatchBlocks:
    """The batches of consecutive steps, drawn and gathered a block of steps at a time.

    Same rows as drawing step by step (see ``random_index_block``); gathering many
    batches at once saves the per-call overhead that dominates small CPU steps.  Sparse
    batches carry the bias as an explicit entry in column ``n_features``.
    """

    MAX_BLOCK_STEPS = 64
    MAX_BLOCK_ELEMENTS = 2**22  # dense blocks: at most 32 MiB in float64

    def __init__(self, problem):
        self.problem = problem
        self.sparse = sp.issparse(problem.X)
        k, d = problem.batch_size, problem.n_features
        by_size = self.MAX_BLOCK_ELEMENTS // (k * (1 if self.sparse else d))
        self.block_steps = int(min(self.MAX_BLOCK_STEPS, max(1, by_size)))
        self.first_step, self.rows = None, None

    def batch(self, step):
        """``(rows, batch)`` of ``step``: CSR entries ``(row_of, columns, values)`` or dense rows."""
        if self.first_step is None or not 0 <= step - self.first_step < self.block_steps:
            self._gather(step)
        s = step - self.first_step
        if not self.sparse:
            return self.rows[s], self.dense[s]
        a, b = self.bounds[s], self.bounds[s + 1]
        return self.rows[s], (self.row_of[a:b] - s * self.problem.batch_size, self.columns[a:b], self.values[a:b])

    def _draw(self, step):
        """The rows of steps ``step .. step + block_steps - 1``, shape (block_steps, batch_size)."""
        return random_index_block(
            self.problem.seed, step, self.block_steps, self.problem.batch_size, self.problem.n_samples
        )

    def _gather(self, step):
        problem = self.problem
        k = problem.batch_size
        self.first_step = step
        self.rows = self._draw(step)
        flat = self.rows.ravel()
        if self.sparse:
            bias = problem.n_features if problem.fit_intercept else None
            self.row_of, self.columns, self.values = csr_batch(problem.X, flat, bias)
            self.bounds = np.searchsorted(self.row_of, np.arange(0, flat.size + 1, k))
        else:
            self.dense = problem.X[flat].reshape(self.block_steps, k, problem.n_features)


class GivenBatches(BatchBlocks):
    """The batches of steps ``given_from, given_from + 1, ...`` when ``problem.X`` holds
    their rows already, in draw order (``batch_size`` rows a step): ``gpusvm.dask`` draws
    the rows from the shared stream where the data live and gathers them here."""

    def __init__(self, problem, given_from):
        super().__init__(problem)
        self.given_from = given_from
        self.block_steps = problem.n_samples // problem.batch_size

    def _draw(self, step):
        if step != self.given_from:
            raise ValueError(f"The gathered rows start at step {self.given_from}; step {step} was asked for.")
        k = self.problem.batch_size
        return np.arange(self.block_steps * k, dtype=np.int64).reshape(self.block_steps, k)


class NumpyPegasosSteps:
    """Pegasos steps on the CPU with NumPy (the reference for the CUDA path).

    With ``given_from``, ``problem.X`` holds the rows of the steps from ``given_from`` on
    in draw order (:class:`GivenBatches`) instead of the whole training set.
    """

    def __init__(self, problem, state, given_from=None):
        self.problem = problem
        self.state = state
        self.sparse = sp.issparse(problem.X)
        self.batches = BatchBlocks(problem) if given_from is None else GivenBatches(problem, given_from)
        self.renormalize_below = RENORMALIZE_BELOW[np.dtype(state.v.dtype)]

    def step(self):
        """Advance the model by one mini-batch step."""
        problem, state = self.problem, self.state
        t = state.step + 1
        k = problem.batch_size
        with nvtx.annotate("pegasos.margins", color="blue"):
            rows, batch = self.batches.batch(t)
            dots = self._dots(batch, k)
            y = problem.targets[rows].astype(np.float64)
            weight = problem.sample_weight[rows].astype(np.float64)[:, None]
            violating = y * (state.scale_a * dots) < 1.0
            coef = np.where(violating, problem.step_size_over_batch(t) * weight * y, 0.0)
        with nvtx.annotate("pegasos.update", color="green"):
            state.scale_a *= problem.shrink(t)
            if violating.any():
                self._add(batch, coef / state.scale_a, t)
            if problem.projection:
                norm_w = state.scale_a * np.sqrt(np.maximum(state.sq_norm_v, 0.0))
                radius = problem.radius
                over = norm_w > radius
                state.scale_a[over] *= radius / norm_w[over]
            average_weight = problem.average_weight(t)
            if average_weight:
                state.avg_b += average_weight * state.scale_a
                state.avg_weight_sum += average_weight
            self._maintain()
        state.step = t

    def run_steps(self, n_steps):
        """Advance the model by ``n_steps`` mini-batch steps."""
        for _ in range(n_steps):
            self.step()

    def _dots(self, batch, k):
        """``<v_c, x_i>`` (plus the bias weight) for the batch rows, float64, shape (k, n_classes)."""
        v = self.state.v
        if self.sparse:  # the bias is an entry of the batch
            row_of, columns, values = batch
            products = values * v[:, columns]
            # float64 even when the batch has no entries (bincount of nothing is int64)
            return np.stack([np.bincount(row_of, products[c], minlength=k) for c in range(v.shape[0])], axis=1).astype(
                np.float64
            )
        d = self.problem.n_features
        dots = np.asarray(batch @ v[:, :d].T, dtype=np.float64)
        if self.problem.fit_intercept:
            dots += v[:, d]
        return dots

    def _add(self, batch, factor, t):
        """``v += factor.T @ X_batch`` on the touched columns; keeps ``||v||^2`` and the average."""
        problem, state = self.problem, self.state
        d = problem.n_features
        if self.sparse:
            row_of, columns, values = batch
            width = state.v.shape[1]
            if width <= 4 * columns.size:  # few features: all columns costs less than a sort
                touched, compact = slice(0, width), columns
            else:
                touched, compact = np.unique(columns, return_inverse=True)
                width = touched.size
            delta = np.stack(
                [np.bincount(compact, factor[row_of, c] * values, minlength=width) for c in range(factor.shape[1])]
            )
            self._apply(touched, delta.astype(state.v.dtype), t)
            return
        self._apply(slice(0, d), (factor.T @ batch).astype(state.v.dtype), t)
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

    def _maintain(self):
        """Fold ``P += B v`` and renormalize ``v *= a`` for the classes that need it."""
        state = self.state
        due = (state.scale_a < self.renormalize_below) | (
            state.avg_b > FOLD_RATIO * state.scale_a * state.avg_weight_sum
        )
        if not due.any():
            return
        a = state.scale_a[due]
        state.avg_p[due] += state.avg_b[due][:, None] * state.v[due]
        state.avg_b[due] = 0.0
        state.v[due] = (state.v[due] * a[:, None]).astype(state.v.dtype)
        state.sq_norm_v[due] *= a * a
        state.scale_a[due] = 1.0


def primal_objective(X, targets, sample_weight, weights, lam, fit_intercept):
    """``sum_c [lam/2 ||w_c||^2 + 1/n sum_i s_i max(0, 1 - y_ic <w_c, x_i>)]``, on X's backend.

    ``weights`` has shape (n_classes, n_features + fit_intercept); the bias, when there
    is one, is the last column and is regularized like the rest.
    """
    hinge_sum = weighted_hinge_sum(X, targets, sample_weight, weights, fit_intercept)
    return float(0.5 * lam * (weights**2).sum() + hinge_sum / X.shape[0])


def weighted_hinge_sum(X, targets, sample_weight, weights, fit_intercept, to_float=True):
    """``sum_c sum_i s_i max(0, 1 - y_ic <w_c, x_i>)`` over the rows of X (a float, or a
    0-d array on X's backend when not ``to_float``): the loss part of
    :func:`primal_objective`, which ``gpusvm.dask`` sums over its shards."""
    d = X.shape[1]
    # in X's dtype: a float64 right-hand side would make SciPy and CuPy copy a float32 X
    scores = (X @ weights[:, :d].T.astype(X.dtype)).astype(np.float64)
    if fit_intercept:
        scores = scores + weights[:, d]
    hinge = (1.0 - targets * scores).clip(0.0, None)
    total = (sample_weight[:, None] * hinge).sum()
    return float(total) if to_float else total


class ProgressiveObjective:
    """The objective of a streamed epoch, each chunk's rows measured once, when the chunk
    arrives and before its steps, with the weights the model would return then.

    For the chunks ``j`` of an epoch (``n_j`` rows; ``N`` in all) and ``w_j`` the
    weights (the average, when averaging) before chunk ``j``'s steps::

        1/N sum_j [ n_j lam/2 sum_c ||w_jc||^2 + sum_{i in j} sum_c s_i max(0, 1 - y_ic <w_jc, x_i>) ]

    That is :func:`primal_objective` over all the rows, except that a row is measured
    with the weights of the moment its chunk comes: progressive validation at chunk
    granularity (as Vowpal Wabbit's average loss, measured on each example before it
    trains on it), which needs no pass of its own, since the chunk is in memory for its
    steps anyway, and costs one product ``X_j w_j`` a chunk, as ``fit``'s exact
    objective costs one ``X w`` an epoch.  It measures the weights the model returns and
    every row, so it falls and flattens with ``fit``'s objective, a fraction of an epoch
    behind it.  The sums stay on the training backend (no read from the device) until
    :meth:`value`.
    """

    def __init__(self, lam, fit_intercept, averaged, xp):
        self.lam, self.fit_intercept, self.averaged = lam, fit_intercept, averaged
        self.sums, self.rows = xp.zeros(2), 0  # the loss sum, and n_j-weighted sum of ||w_j||^2

    def add(self, X, targets, sample_weight, state):
        """Measure chunk ``(X, targets, sample_weight)`` with ``state``'s weights (before its steps)."""
        weights = state.weights(self.averaged)
        self.sums[0] += weighted_hinge_sum(X, targets, sample_weight, weights, self.fit_intercept, to_float=False)
        self.sums[1] += X.shape[0] * (weights**2).sum()
        self.rows += X.shape[0]

    def value(self):
        """The epoch's objective (one read from the device)."""
        hinge_sum, sq_norm_sum = (float(total) for total in to_numpy(self.sums))
        return (0.5 * self.lam * sq_norm_sum + hinge_sum) / self.rows


class NoImprovementStop:
    """scikit-learn's SGDClassifier rule: stop once an epoch's objective has not improved
    on the best so far by ``tol`` for ``n_iter_no_change`` epochs in a row (``tol=None``:
    never)."""

    def __init__(self, tol, n_iter_no_change):
        self.tol, self.n_iter_no_change = tol, n_iter_no_change
        self.best, self.stale = math.inf, 0

    def __call__(self, objective):
        """Whether to stop after an epoch whose objective is ``objective``."""
        if self.tol is None:
            return False
        self.stale = self.stale + 1 if objective > self.best - self.tol else 0
        self.best = min(self.best, objective)
        return self.stale >= self.n_iter_no_change


def fits_fused_steps(batch_size, n_classes):
    """Whether the CUDA path's fused steps (``pegasos_fused_steps``) can take a problem's
    steps: its shared memory holds a step's coefficients, rows and class scalars."""
    return (
        batch_size <= FUSED_MAX_BATCH and n_classes <= FUSED_MAX_CLASSES and batch_size * n_classes <= FUSED_MAX_PAIRS
    )


def steps_per_epoch(n_samples, batch_size):
    """Steps of one epoch: enough batches to draw ``n_samples`` rows."""
    return max(1, math.ceil(n_samples / batch_size))


def make_steps(problem, state, xp, given_from=None):
    """The steps of ``problem`` over ``state`` (modified in place) on the array module
    ``xp``: :class:`NumpyPegasosSteps` (the reference) or ``_cuda.CupyPegasosSteps``, the
    one place where the backend is chosen; see :class:`NumpyPegasosSteps` for ``given_from``."""
    if on_device(xp):
        from ._cuda import CupyPegasosSteps

        return CupyPegasosSteps(problem, state, given_from)
    return NumpyPegasosSteps(problem, state, given_from)


def pegasos_stepper(problem, state, backend, given_from=None):
    """:func:`make_steps` on the array module of a resolved ``backend`` name."""
    return make_steps(problem, state, get_namespace(backend), given_from)


def run_pegasos(problem, state, *, n_epochs, tol, n_iter_no_change, backend, verbose=0):
    """Run up to ``n_epochs`` epochs of Pegasos steps from ``state`` (not modified).

    After each epoch the exact primal objective (:func:`primal_objective`, summed over
    classes) of the weights the model would return is computed in one pass over X.
    Like scikit-learn's SGDClassifier, training stops when it has not improved by
    ``tol`` for ``n_iter_no_change`` epochs in a row; ``tol=None`` runs every epoch.

    Returns
    -------
    state : PegasosState
    epochs_run : int
    objectives : list of float
    """
    stepper = pegasos_stepper(problem, state.copy(), backend)
    n_steps = steps_per_epoch(problem.n_samples, problem.batch_size)
    averaged = problem.average_start is not None
    stop, objectives = NoImprovementStop(tol, n_iter_no_change), []
    bar = progress_bar(n_epochs * n_steps, "Pegasos", verbose)
    for _ in range(n_epochs):
        with nvtx.annotate("pegasos.epoch", color="purple"):
            stepper.run_steps(n_steps)
            bar.update(n_steps)
        with nvtx.annotate("pegasos.objective", color="red"):
            objective = primal_objective(
                problem.X,
                problem.targets,
                problem.sample_weight,
                stepper.state.weights(averaged),
                problem.lam,
                problem.fit_intercept,
            )
        objectives.append(objective)
        bar.set_postfix(objective=f"{objective:.5g}")
        if stop(objective):
            break
    bar.close()
    return stepper.state, len(objectives), objectives
