"""SBPClassifier on a dask cluster: the single-node iterates, with the responses sharded.

A kernel SBP step touches every response: it pours the slack onto all ``n`` of them
(the water level), draws from those it covers, and adds the drawn rows' kernel rows to
all of them. So the responses stay where their rows are (one dask actor per worker,
:mod:`gpusvm.dask._sbp_shard`), and the client coordinates each step:

1. **Level.** The level and the bias depend only on each class's lowest responses (up
   to a little past the covered count ``k*``). Each worker sends its lowest ``m`` of each
   class, ``m`` from the previous step's ``k*`` as ``LevelTracker`` chooses its window;
   the client merges them (every response of a class below the smallest of the workers'
   cutoffs is there) and solves the level among them (``covered_among_lowest``). When
   they do not settle it, ``m`` doubles and the workers send again (early on, when the
   water covers most rows, that is every row).
2. **Draw.** The covered rows, by key (a row's place among the training rows), are the
   single-node ``below``; the draws of the shared random stream pick the same rows.
3. **Rows.** The X rows of keys drawn for the first time come from their workers (one
   extra round, rare once the covered set settles) and are kept: on the client for the
   model's support vectors, on every worker for its kernel-row cache.
4. **Update.** One message to every worker: the drawn keys, weights and step size. Each
   adds the kernel rows' combination to its responses and answers with the direction at
   the drawn rows it holds (for ``||w||^2``) and its next lowest responses.

A step is one round between the client and the workers (milliseconds:
``docs/user_guide/dask.md``, "Measured"), plus a round for new rows: worth it where a
step's ``B n`` kernel evaluations dominate, that is at the sizes that need a cluster.
The client holds ``O(support vectors)`` rows and the coefficients, never X.

What is exact: the model equals the single-node one for the same data, parameters and
seed up to rounding: with ``kernel_dtype='float64'``, the same support vectors, and
coefficients that differ by about 1e-15 (with the default float32 kernel values, the
products below round at float32's 1e-7, and the runs part sooner). Equal responses at
a class's edge are covered together whatever the rounding of the level
(``water_level._bias_and_edges``). A step's sum of its drawn kernel rows is the row
cache's sparse product on both sides (``KernelRowCache.combine``), added in the
order of the drawn keys whatever the threads; the kernel values themselves come from
BLAS products of different shapes on the client's node and on each worker, which may
round differently. When two responses lie within that rounding at a class's edge, the
covered set can differ, and from there the runs are two SBP runs of equal standing
(seen once on Adult, before the sums moved into the cache: ``docs/user_guide/dask.md``).
A worker that leaves mid-fit ends the fit with an error naming it: the responses it held
are lost, and recomputing them costs as much as fitting again.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import sbp
from .._backend import resolve_backend
from .._estimator.auto_nu import pilot_subsample
from .._instrumentation import PhaseClock
from .._random import random_positions, seed_from_random_state
from ..kernel_functions import RowMoments, float32_or_float64, statistics_of
from ..solvers.sbp import (
    PREFETCH_MAX_COVERED,
    RENORMALIZE_BELOW,
    STEP_PHASES,
    positive_level,
    run_sbp,
    step_size_for,
)
from ..solvers.sbp._levels import covered_among_lowest, lowest_needed
from ._cluster import worker_loss_guard
from ._estimator import DaskEstimatorMixin
from ._sbp_shard import Pending, RowStore, SBPShardState, ShardSettings, StepMessage
from ._shards import stack_rows

# Each class's lowest responses asked of every worker at the first step.
INITIAL_LOWEST = 1024
# When drawn rows must be fetched, the lowest covered rows not kept yet come along, up to
# this many batches per problem (they are the next steps' draws: fewer fetch rounds), from
# problems whose covered set is at most PREFETCH_MAX_COVERED of the rows (early on, when
# the water covers much and moves fast, most would not be drawn).
PREFETCH_BATCHES = 4


@dataclasses.dataclass(frozen=True)
class ClusterSBPProblem:
    """The sizes and settings ``run_sbp`` reads, for a fit whose rows are on the workers."""

    n_train: int
    n_holdout: int
    n_problems: int
    batch_size: int
    nu: float
    seed: int

    @property
    def volume(self):
        return self.n_train * self.nu

    @property
    def n_rows(self):
        return self.n_train + self.n_holdout


@dataclasses.dataclass
class Lowest:
    """One problem's lowest responses gathered from the workers: every response of each
    class below that class's threshold."""

    values: np.ndarray
    keys: np.ndarray
    positive: np.ndarray | None  # the class of each value; None without a bias
    thresholds: list

    @classmethod
    def merge(cls, parts_per_worker, fit_intercept):
        """From each worker's ``[(values, keys, cutoff) per class]``."""
        values, keys, positive, thresholds = [], [], [], []
        for c in range(len(parts_per_worker[0])):
            parts = [worker[c] for worker in parts_per_worker]
            threshold = min(part[2] for part in parts)
            class_values = np.concatenate([part[0] for part in parts])
            keep = class_values < threshold  # below every worker's cutoff: none of the class is missing
            values.append(class_values[keep])
            keys.append(np.concatenate([part[1] for part in parts])[keep])
            positive.append(np.full(int(keep.sum()), c == 0))
            thresholds.append(threshold)
        return cls(
            np.concatenate(values),
            np.concatenate(keys),
            np.concatenate(positive) if fit_intercept else None,
            thresholds,
        )

    def scaled(self, factor):
        """The same responses times ``factor`` (what the workers' renormalization does)."""
        return Lowest(self.values * factor, self.keys, self.positive, [t * factor for t in self.thresholds])


class ClusterSBPSteps:
    """SBP steps over the workers' actors, for ``run_sbp`` (see the module docstring).

    The scalars of the state (scale, ``||w||^2``, the running sum of scales) and the
    coefficients of the drawn rows live here, as in ``NumpySBPSteps``; the responses live
    on the workers.
    """

    def __init__(self, problem, actors, train_classes, n_classes, fit_intercept, eta0):
        k = problem.n_problems
        self.problem, self.actors, self.eta0 = problem, actors, eta0
        self.train_classes = train_classes  # position in classes_ of each training row, by key
        self.n_classes, self.fit_intercept = n_classes, fit_intercept
        self.class_sizes = [self._class_sizes(p) for p in range(k)]
        self.scale, self.r2, self.scale_sum = np.ones(k), np.zeros(k), np.zeros(k)
        self.slot_of, self.slot_keys = {}, []  # each drawn key's column in A and stamps
        self.A, self.stamps = np.zeros((k, 64)), np.zeros((k, 64))
        self.store, self.kept = RowStore(), np.zeros(problem.n_train, dtype=bool)  # X rows here, by key
        self.counts = np.full(k, INITIAL_LOWEST)
        self.covered_counts = [None] * k
        self.lowest, self.pending = None, None
        self.problem_of = np.repeat(np.arange(k), problem.batch_size).reshape(k, problem.batch_size)
        self.phases = PhaseClock(STEP_PHASES)
        self.n_steps, self.kernel_rows_computed, self.kernel_rows_distinct = 0, 0, 0
        self.drawn_ever = np.zeros(problem.n_train, dtype=bool)  # without caches: the rows computed
        self.kernel_values_source = None  # the workers' row caches ('cache') or rows computed ('products')

    def _class_sizes(self, p):
        if not self.fit_intercept:
            return [self.problem.n_train]
        positive = int(np.count_nonzero(self.train_classes == (1 if self.n_classes == 2 else p)))
        return [positive, self.problem.n_train - positive]

    def labels(self, keys):
        """The targets ``y`` in {-1, +1} of training rows ``keys``, shape (k, len(keys))."""
        positions = self.train_classes[keys]
        if self.n_classes == 2:
            return np.where(positions == 1, 1.0, -1.0)[None, :]
        return np.where(positions[None, :] == np.arange(self.n_classes)[:, None], 1.0, -1.0)

    # --- talking to the workers ----------------------------------------------------------

    def _call_all(self, method, *args):
        return call_all(self.actors, method, *args)

    def _take_pending(self):
        """The previous step's scale, sent once (the workers apply it on receipt)."""
        pending, self.pending = self.pending, None
        return pending

    def _ask_lowest(self, counts, source="current"):
        steps = max(1, self.n_steps)
        answers = self._call_all("lowest", counts, self._take_pending(), source, steps, self.scale)
        return [
            Lowest.merge([answer[p] for answer in answers], self.fit_intercept) for p in range(self.problem.n_problems)
        ]

    # --- the step ------------------------------------------------------------------------

    def step(self, step, eta):
        """One SBP step ``t = step`` (from 1) with step size ``eta``."""
        problem, batch = self.problem, self.problem.batch_size
        k = problem.n_problems
        with self.phases.phase("level", "sbp.water_level", "purple"):
            if self.lowest is None:
                self.lowest = self._ask_lowest(self.counts)
            covered = self._covered(problem.volume / self.scale, "current", remember=True)
        with self.phases.phase("draw", "sbp.draw", "yellow"):
            drawn = np.empty((k, batch), dtype=np.int64)
            old = np.empty((k, batch))
            for p, (keys, values, _) in enumerate(covered):
                lanes = np.arange(p * batch, (p + 1) * batch, dtype=np.uint64)
                at = random_positions(problem.seed, step, lanes, keys.size)
                drawn[p], old[p] = keys[at], values[at]
            distinct, position = np.unique(drawn, return_inverse=True)
            drawn_labels = np.stack([self.labels(drawn[p])[p] for p in range(k)])
            weights = np.zeros((k, distinct.size))
            np.add.at(weights, (self.problem_of, position.reshape(k, batch)), drawn_labels / batch)
        with self.phases.phase("rows", "sbp.kernel_row", "orange"):
            new_keys, new_rows = self._fetch_new_rows(distinct, [lowest_first for _, _, lowest_first in covered])
        with self.phases.phase("update", "sbp.update", "green"):
            message = StepMessage(
                self._take_pending(), new_keys, new_rows, distinct, weights, eta / self.scale, drawn, self.counts.copy()
            )
            answers = self._call_all("step", message)
            at_drawn = np.zeros((k, batch))
            for owned, values, _, _ in answers:
                at_drawn[owned] = values[owned]
            self._update_scalars(eta, drawn, old, at_drawn)
            self.lowest = [Lowest.merge([answer[2][p] for answer in answers], self.fit_intercept) for p in range(k)]
            cached = [answer[3] for answer in answers if answer[3] is not None]
            if cached:  # each worker's counts so far
                self.kernel_rows_computed = max(count for count, _ in cached)
                self.kernel_rows_distinct = max(count for _, count in cached)
            else:
                self.kernel_rows_computed += distinct.size
                self.drawn_ever[distinct] = True
                self.kernel_rows_distinct = int(np.count_nonzero(self.drawn_ever))
            self.kernel_values_source = "cache" if cached else "products"
            if self.pending.renormalize:
                self._renormalize()
        self.n_steps = step

    def _update_scalars(self, eta, drawn, old_responses, direction_at_drawn):
        """``||w||^2``, the coefficients' increments, the projection: as ``NumpySBPSteps.step``."""
        k, batch = drawn.shape
        old = self.scale[:, None] * old_responses
        self.r2 += 2 * eta * old.mean(axis=1) + eta**2 * direction_at_drawn.mean(axis=1)
        slots = self._slots(drawn)
        increment = eta / (batch * self.scale)
        np.add.at(self.A, (self.problem_of, slots), np.repeat(increment, batch).reshape(k, batch))
        np.add.at(self.stamps, (self.problem_of, slots), np.repeat(increment * self.scale_sum, batch).reshape(k, batch))
        outside = self.r2 > 1
        self.scale[outside] /= np.sqrt(self.r2[outside])
        self.r2[outside] = 1.0
        self.scale_sum += self.scale
        self.pending = Pending(self.scale.copy(), bool((self.scale < RENORMALIZE_BELOW).any()))

    def _renormalize(self):
        """Fold the scale into A (here) and R (the workers, on the pending message)."""
        self.stamps -= self.A * self.scale_sum[:, None]
        self.A *= self.scale[:, None]
        self.lowest = [lowest.scaled(self.scale[p]) for p, lowest in enumerate(self.lowest)]
        self.scale[:] = 1.0
        self.scale_sum[:] = 0.0

    def _covered(self, volumes, source, remember=False):
        """Per problem, the covered keys (ascending), their responses and the keys again,
        lowest first; or, with ``source`` other than 'current', the ``(level, bias)`` of
        each problem."""
        k = self.problem.n_problems
        counts = self.counts.copy()
        lowest = self.lowest if source == "current" else self._ask_lowest(counts, source)
        answers = [None] * k
        while True:
            for p in range(k):
                if answers[p] is None:
                    previous = self.covered_counts[p] if source == "current" else None
                    answers[p] = covered_among_lowest(
                        lowest[p].values,
                        lowest[p].positive,
                        lowest[p].thresholds,
                        self.class_sizes[p],
                        volumes[p],
                        previous=previous,
                    )
            failed = [p for p in range(k) if answers[p] is None]
            if not failed:
                break
            for p in failed:  # not enough of the lowest: twice as many from every worker
                if counts[p] >= max(self.class_sizes[p]):
                    raise RuntimeError(f"The water level of problem {p} was not found among all its responses.")
                counts[p] = min(2 * counts[p], max(self.class_sizes[p]))
            lowest = self._ask_lowest(counts, source)
            answers = [None] * k  # every problem's lowest were sent again: solve each on its new ones
        if source != "current":
            return [(level, bias) for _, level, bias, _ in answers]
        covered = []
        for p, (count, _, bias, is_covered) in enumerate(answers):
            keys, values = lowest[p].keys[is_covered], lowest[p].values[is_covered]
            order = np.argsort(keys)
            heights = (
                values
                if lowest[p].positive is None
                else values + bias * np.where(lowest[p].positive[is_covered], 1.0, -1.0)
            )
            covered.append((keys[order], values[order], keys[np.argsort(heights, kind="stable")]))
            if remember:
                self.covered_counts[p] = count
                self.counts[p] = lowest_needed(count if count is not None else int(is_covered.sum()))
        self.lowest = lowest
        return covered

    def _slots(self, drawn):
        """Columns of ``drawn`` keys in A and stamps (new keys get new columns)."""
        for key in np.unique(drawn):
            if int(key) not in self.slot_of:
                self.slot_of[int(key)] = len(self.slot_keys)
                self.slot_keys.append(int(key))
        if len(self.slot_keys) > self.A.shape[1]:
            grown = max(2 * self.A.shape[1], len(self.slot_keys))
            self.A = np.pad(self.A, ((0, 0), (0, grown - self.A.shape[1])))
            self.stamps = np.pad(self.stamps, ((0, 0), (0, grown - self.stamps.shape[1])))
        return np.vectorize(self.slot_of.__getitem__, otypes=[np.int64])(drawn)

    def _fetch_new_rows(self, keys, lowest_first):
        """The X rows of ``keys`` not kept yet, and of the lowest covered rows not kept yet
        (see :data:`PREFETCH_BATCHES`), from the workers that hold them."""
        new = keys[~self.kept[keys]]
        if new.size == 0:
            return new, None
        budget = PREFETCH_BATCHES * self.problem.batch_size
        ahead = [
            candidates[~self.kept[candidates]][:budget]
            for candidates in lowest_first
            if candidates.size <= PREFETCH_MAX_COVERED * self.problem.n_train
        ]
        new = np.unique(np.concatenate([new] + ahead))
        answers = [answer for answer in self._call_all("training_rows", new) if answer[1] is not None]
        held = np.concatenate([answer[0] for answer in answers])
        rows = stack_rows([answer[1] for answer in answers])
        order = np.argsort(held)  # ascending, as ``new``
        rows = rows[order]
        self.store.add(new, rows)
        self.kept[new] = True
        return new, rows

    def synchronize(self):
        """Nothing to wait for: every step's answers are in when it returns."""

    # --- what run_sbp asks at checkpoints and at the end --------------------------------

    def evaluate(self, average):
        """Level and bias of each problem's model and its holdout error, from the workers."""
        problem = self.problem
        source = "average" if average else "last"
        volumes = np.full(problem.n_problems, problem.volume)
        levels = self._covered(volumes, source)
        level = np.array([answer[0] for answer in levels])
        bias = np.array([answer[1] for answer in levels])
        error = None
        if problem.n_holdout:
            wrong = self._call_all("holdout_wrong", level, bias, None, source, max(1, self.n_steps), self.scale)
            error = float(sum(wrong) / problem.n_holdout)
        return level, bias, error

    def coefficients(self, average):
        """``alpha`` of the rows drawn so far, by key, and those keys."""
        n = len(self.slot_keys)
        A, stamps = self.A[:, :n], self.stamps[:, :n]
        alpha = (A * self.scale_sum[:, None] - stamps) / max(1, self.n_steps) if average else self.scale[:, None] * A
        keys = np.array(self.slot_keys, dtype=np.int64)
        order = np.argsort(keys)
        return alpha[:, order], keys[order]


class SBPClassifier(DaskEstimatorMixin, sbp.SBPClassifier):
    """:class:`gpusvm.SBPClassifier` trained on a dask cluster, with the responses of each
    worker's rows kept on that worker (how: :doc:`/user_guide/dask`).

    The model equals the single-node one for the same parameters and seed, up to
    rounding. The parameters and attributes are :class:`gpusvm.SBPClassifier`'s;
    ``backend`` is resolved on the workers and ``cache_size`` is each worker's kernel-row
    cache (over its own columns; 'auto': a quarter of that worker's available memory, at
    most its rows' whole matrix). With ``kernel_dtype`` other than X's, each worker keeps
    a copy of its rows in ``kernel_dtype`` beside X's own (which the support vectors
    keep), and the client sees no warning of a thrashing worker cache: read
    ``history_``'s ``kernel_rows_computed`` and ``kernel_rows_distinct``. ``client`` (not
    a parameter, neither cloned nor pickled) is the dask.distributed client to use; None means the current one.

    The client gathers the labels (to split off the holdout as the single-node estimator
    does), the X rows of the support vectors, and each step's lowest responses: early in a
    fit, while the water covers most rows, that is every response. It never holds X.
    """

    local_class = sbp.SBPClassifier

    def _train_shards(self, client, shards, *, classes, n_epochs, first, shuffle):
        y = _collection_labels(client, shards)
        classes = self._classes_for_fit(y)
        if self._trains_one_vs_one(classes):
            raise ValueError(
                f"gpusvm.dask.SBPClassifier trains one-vs-rest only; got multi_class={self.multi_class!r} for "
                f"{classes.size} classes. Pass multi_class='ovr'."
            )
        seed = seed_from_random_state(self.random_state)
        train, holdout = self._split(y, classes, seed)
        self.batch_size_ = sbp.resolve_batch_size(self.batch_size, train.size)
        settings = ShardSettings(
            classes=classes,
            holdout_rows=holdout,
            n_train=train.size,
            kernel=self.kernel,
            degree=self.degree,
            coef0=self.coef0,
            fit_intercept=self.fit_intercept,
            cache_size=self.cache_size,
            kernel_dtype=self.kernel_dtype,
        )
        actor_futures = [
            client.submit(SBPShardState, future, settings, actor=True, **shards.near(client, i))
            for i, future in enumerate(shards.futures)
        ]
        try:  # as the current client: the actors' handles find the client they talk through
            with client.as_current(), worker_loss_guard(client, shards, "SBPClassifier's fit", resumable=False):
                actors = [future.result() for future in actor_futures]
                shards.release()  # the actors hold the rows now (one copy, not two)
                gamma = _cluster_gamma(self.gamma, actors, shards.n_features)
                centre, kernel_dtype = self._cluster_kernel_dtype(actors, gamma)
                self.kernel_dtype_ = kernel_dtype.name
                eta0 = step_size_for(max(call_all(actors, "prepare", gamma, centre, kernel_dtype)))
                train_labels = np.searchsorted(classes, y[train])
                self.nu_ = self._cluster_nu(actors, train_labels, classes, gamma, seed)
                problem = ClusterSBPProblem(
                    n_train=train.size,
                    n_holdout=holdout.size,
                    n_problems=1 if classes.size == 2 else classes.size,
                    batch_size=self.batch_size_,
                    nu=self.nu_,
                    seed=seed,
                )
                steps = ClusterSBPSteps(problem, actors, train_labels, classes.size, self.fit_intercept, eta0)
                result = run_sbp(problem, steps, self._stopping_rules(), average=self.average, verbose=self.verbose)
        finally:
            for future in actor_futures:
                future.release()
        self._set_cluster_model(result, steps, y, train, classes)
        self.backend_ = client.submit(resolve_backend, self.backend, pure=False).result()
        self.classes_, self.gamma_ = classes, gamma
        self.t_ = result.n_steps
        self.n_iter_ = result.n_steps / max(1, -(-train.size // self.batch_size_))
        self._check_finite_model(self.support_vectors_)

    def _cluster_kernel_dtype(self, actors, gamma):
        """``(centre, dtype)`` of the workers' kernel copies, as the single-node fit's
        :func:`~gpusvm.kernel_functions.kernel_training_copy` picks them for all the rows."""
        moments = RowMoments.total(call_all(actors, "row_moments"))
        centre = moments.column_means() if self.kernel == "rbf" and not moments.sparse else None
        if self.kernel_dtype == "float64":
            return centre, np.dtype(np.float64)
        about_mean = None
        if not moments.sparse:
            parts = call_all(actors, "centred_moments", moments.column_means())
            about_mean = (sum(part[0] for part in parts), max(part[1] for part in parts))
        statistics = statistics_of(moments, about_mean, centre is not None)
        return centre, float32_or_float64(statistics, self.kernel_dtype, **self._kernel(gamma).keywords)

    def _cluster_nu(self, actors, train_labels, classes, gamma, seed):
        """``nu`` as set, or for ``nu='auto'`` read off the pilot SVC of the single-node
        estimator, on the same subsample of the training rows, gathered from the workers."""
        if self.nu != "auto":
            return float(self.nu)
        keys = pilot_subsample(train_labels, seed)
        answers = [answer for answer in call_all(actors, "training_rows", keys) if answer[1] is not None]
        held = np.concatenate([answer[0] for answer in answers])
        X_pilot = stack_rows([answer[1] for answer in answers])[np.argsort(held)]  # in the order of keys
        return self._pilot_nu(X_pilot, train_labels[keys], train_labels.size, classes, gamma)

    def _set_cluster_model(self, result, steps, y, train, classes):
        """As the single-node ``_set_model``, from the drawn rows' coefficients and X rows."""
        divisor = positive_level(result.level)
        nonzero = (result.alpha != 0).any(axis=0)
        keys = result.support[nonzero]
        self.support_ = train[keys]
        self.support_vectors_ = steps.store.rows(keys)
        self.dual_coef_ = result.alpha[:, nonzero] * steps.labels(keys) / divisor[:, None]
        self.intercept_ = result.bias / divisor
        self.water_level_ = result.level
        self.history_ = result.history
        self.n_support_ = np.bincount(np.searchsorted(classes, y[self.support_]), minlength=classes.size)


def call_all(actors, method, *args):
    """``method(*args)`` on every worker's actor at once; their answers in worker order."""
    futures = [getattr(actor, method)(*args) for actor in actors]
    return [future.result() for future in futures]


def _labels_of(shard):
    return (shard.rows, shard.y) if shard is not None else None


def _collection_labels(client, shards):
    """Every row's label, in the collection's order (small beside X: one value a row)."""
    parts = [part for part in client.gather(shards.on_each(client, _labels_of)) if part is not None]
    rows = np.concatenate([part[0] for part in parts])
    return np.concatenate([part[1] for part in parts])[np.argsort(rows, kind="stable")]


def _cluster_gamma(gamma, actors, n_features):
    """``gamma`` as ``resolve_gamma`` gives it on the training rows, from sums over the workers
    (for 'scale': the variance by two passes on dense X, by sums of squares on sparse X, as
    the single-node estimator computes it)."""
    if not isinstance(gamma, str):
        return float(gamma)
    if gamma == "auto":
        return 1.0 / n_features
    sums = call_all(actors, "element_sums")
    count = sum(part[0] for part in sums)
    mean = sum(part[1] for part in sums) / count
    if sums[0][2] is not None:  # sparse
        variance = sum(part[2] for part in sums) / count - mean**2
    else:
        variance = sum(call_all(actors, "squared_deviations", mean)) / count
    return 1.0 / (n_features * variance) if variance > 0 else 1.0
