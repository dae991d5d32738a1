"""PegasosSVC on a dask cluster: the iterates of the single-node solver, or local epochs
averaged once per epoch.

``mode="exact"``
    Every shard derives a block of steps' mini-batches from the shared random stream (no
    communication) and sends the rows it holds to the worker that steps (the one with
    the most rows), which runs the single-node stepper over them. The model is
    PegasosSVC's for the same seed, to the last bit of the steps (only the epoch
    objective, a sum over shards, rounds differently). The step is where it runs; rows
    travel, about one epoch's draws per epoch, and the objective after each epoch is
    computed on every shard in parallel.
``mode="average"``
    Each worker runs an epoch of steps drawn from its own rows from the current model;
    the models are averaged, weighted by rows, once per epoch (Zinkevich et al. 2010).
    Not the single-node iterates, and only as good as the shards are alike: rows sorted
    by label give shards of one class and a poor average, so a fit warns when the
    shards' class proportions differ.

Why blocks of steps rather than one combine of subgradients per step: a Pegasos step
does microseconds of work, and a round between workers costs milliseconds
(``docs/user_guide/dask.md``, "Measured"), so one round per step would cost far more than
one per block of a thousand steps, for the same rows moved (a step's combined subgradient has as many entries as its
rows have nonzeros).

References
----------
M. Zinkevich, M. Weimer, A. Smola, L. Li. Parallelized stochastic gradient descent. NIPS 2010.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.class_weight import compute_sample_weight

from .. import svm
from .._backend import get_namespace, namespace_of, resolve_backend
from .._estimator.convergence import warn_if_worse_than_zero_weights
from .._instrumentation import progress_bar
from .._random import seed_from_random_state
from .._validation import (
    check_some_weight,
    class_positions,
    class_weight_per_sample,
    one_vs_rest_targets,
    to_backend,
)
from ..solvers.pegasos import (
    NoImprovementStop,
    PegasosProblem,
    PegasosState,
    make_steps,
    steps_per_epoch,
    weighted_hinge_sum,
)
from ._cluster import block_rows, put, run_epoch_with_resumes, step_through_blocks
from ._estimator import DaskEstimatorMixin
from ._shards import DrawnRows, assemble_block

# Below this ratio of a class's smallest to largest share among the shards, warn.
SHARD_BALANCE = 0.5
# Worker i's local epochs in mode="average" draw from the seed xor i times this.
_WORKER_STREAM = 0xD1B54A32D192ED03


@dataclasses.dataclass(frozen=True)
class PegasosSettings:
    """Everything a step needs but the rows and the state: small, sent with each task."""

    classes: np.ndarray
    class_weight: dict | None
    lam: float
    batch_size: int
    fit_intercept: bool
    projection: bool
    average_start: int | None
    weight_by_step: bool
    seed: int
    mean_weight: float
    backend: str

    def problem(self, X, y, sample_weight, seed=None):
        """The single-node problem over these rows (labels and raw weights on the host), on
        this worker's backend, and that backend's array module (resolved once a task)."""
        xp = get_namespace(resolve_backend(self.backend))
        X = to_backend(X, xp)
        weights = sample_weight
        if self.class_weight is not None:
            weights = weights * compute_sample_weight(self.class_weight, y)
        return PegasosProblem(
            X=X,
            targets=xp.asarray(one_vs_rest_targets(y, self.classes), dtype=X.dtype),
            sample_weight=xp.asarray(weights, dtype=X.dtype),
            lam=self.lam,
            batch_size=self.batch_size,
            fit_intercept=self.fit_intercept,
            projection=self.projection,
            average_start=self.average_start,
            weight_by_step=self.weight_by_step,
            seed=self.seed if seed is None else seed,
            mean_weight=self.mean_weight,
        ), xp


# Tasks (run on the workers).


def steps_on_gathered_rows(state, settings, selector, *gathered):
    """The steps of one block (a :class:`DrawnRows`) on the rows its shards sent, in draw
    order (runs on the stepping worker); the state stays on that worker's backend."""
    X, y, weights = assemble_block(gathered)
    problem, xp = settings.problem(X, y, weights)
    # a copy: a task must not change its input (dask may run it again, threads share it)
    stepper = make_steps(problem, xp, state=state.copy().to(xp), given_from=selector.first_step)
    stepper.run_steps(X.shape[0] // settings.batch_size)
    return stepper.state


def local_epoch(shard, state, settings, worker_seed):
    """mode="average": one epoch of steps drawn from this shard's rows alone."""
    problem, xp = settings.problem(shard.X, shard.y, shard.sample_weight, seed=worker_seed)
    stepper = make_steps(problem, xp, state=state.copy().to(xp))
    stepper.run_steps(steps_per_epoch(shard.n_rows, settings.batch_size))
    return stepper.state.to(np)


def shard_hinge_sum(shard, settings, weights):
    """This shard's part of the epoch objective."""
    problem, _ = settings.problem(shard.X, shard.y, shard.sample_weight)
    weights = namespace_of(problem.X).asarray(weights)
    return weighted_hinge_sum(problem.X, problem.targets, problem.sample_weight, weights, settings.fit_intercept)


def state_on_host(state):
    return state.to(np)


def average_states(states, n_rows):
    """The row-weighted mean of the workers' models, and of their averages of iterates."""
    if len(states) == 1:
        return states[0]
    shares = np.asarray(n_rows, dtype=np.float64) / float(sum(n_rows))
    weights = sum(share * state.scale_a[:, None] * state.v.astype(np.float64) for share, state in zip(shares, states))
    merged = PegasosState.zeros(weights.shape[0], weights.shape[1], states[0].v.dtype, np)
    merged.v[...] = weights
    merged.sq_norm_v[...] = (merged.v.astype(np.float64) ** 2).sum(axis=1)
    merged.step = max(state.step for state in states)
    weight_sum = float(sum(share * state.avg_weight_sum for share, state in zip(shares, states)))
    if weight_sum > 0:
        mean_average = sum(
            share * state.weights(averaged=True) for share, state in zip(shares, states) if state.avg_weight_sum > 0
        )
        merged.avg_p[...] = mean_average * weight_sum
        merged.avg_weight_sum = weight_sum
    return merged


class PegasosSVC(DaskEstimatorMixin, svm.PegasosSVC):
    """:class:`gpusvm.PegasosSVC` trained on a dask cluster.

    Parameters
    ----------
    mode : {'exact', 'average'}, default='exact'
        'exact': the single-node iterates for the same seed (how:
        :doc:`/user_guide/dask`); 'average': local epochs on each worker's rows,
        averaged once per epoch, which needs shards of like class proportions (a fit
        warns otherwise: shuffle the rows across partitions once, e.g. by
        ``dask.array.shuffle``, before fitting).
    C, lam, batch_size, max_iter, projection, average, fit_intercept, tol, n_iter_no_change,
    class_weight, random_state, backend, verbose
        As in :class:`gpusvm.PegasosSVC`. ``backend`` is resolved on the workers ('auto':
        CuPy on a worker with a GPU), not on the client.

    Attributes
    ----------
    coef_, intercept_, classes_, n_iter_, t_, lam_, objective_curve_, backend_, n_features_in_
        As in :class:`gpusvm.PegasosSVC`; ``backend_`` is the stepping worker's.
    client : distributed.Client or None
        Not a parameter (neither cloned nor pickled); None: the current client.

    Examples
    --------
    >>> from distributed import Client, LocalCluster                  # doctest: +SKIP
    >>> import dask.array as da                                        # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2))                     # doctest: +SKIP
    >>> X = da.random.random((100_000, 20), chunks=10_000)             # doctest: +SKIP
    >>> y = (X[:, 0] > 0.5).astype(int)                                # doctest: +SKIP
    >>> model = PegasosSVC(random_state=0).fit(X, y)                   # doctest: +SKIP
    >>> model.predict(X[:5]).compute()                                 # doctest: +SKIP
    """

    local_class = svm.PegasosSVC
    _parameter_constraints = {**svm.PegasosSVC._parameter_constraints, "mode": [StrOptions({"exact", "average"})]}

    def __init__(
        self,
        C=1.0,
        lam=None,
        batch_size=64,
        max_iter=1000,
        projection=True,
        average=True,
        fit_intercept=True,
        tol=1e-3,
        n_iter_no_change=5,
        class_weight=None,
        random_state=None,
        backend="auto",
        verbose="auto",
        mode="exact",
    ):
        super().__init__(
            C=C,
            lam=lam,
            batch_size=batch_size,
            max_iter=max_iter,
            projection=projection,
            average=average,
            fit_intercept=fit_intercept,
            tol=tol,
            n_iter_no_change=n_iter_no_change,
            class_weight=class_weight,
            random_state=random_state,
            backend=backend,
            verbose=verbose,
        )
        self.mode = mode

    def _train_shards(self, client, shards, *, classes, n_epochs, first, shuffle):
        fit = classes is None  # partial_fit passes the classes
        found, counts = shards.classes()
        if first:
            classes = self._classes_for_fit(found) if classes is None else classes
        else:
            classes = self.classes_
            self._check_same_intercept()
        class_positions(found, classes)  # refuses labels not in classes
        settings, state = self._settings_and_state(client, shards, classes, counts, found, first)
        if self.mode == "average":
            self._warn_if_unlike(shards, found)
        stop, objectives = NoImprovementStop(self.tol if n_epochs > 1 else None, self.n_iter_no_change), []
        epoch_steps = steps_per_epoch(shards.n_rows, settings.batch_size)
        run = self._exact_epoch if self.mode == "exact" else self._average_epoch

        def epoch_and_objective(start):  # the objective's round resumes with the epoch too
            trained = run(client, shards, settings, start)
            return trained, self._objective(client, shards, settings, trained)

        with progress_bar(n_epochs * epoch_steps, "Pegasos on dask", self.verbose) as bar:
            for epoch in range(n_epochs):
                state, objective = run_epoch_with_resumes(client, shards, epoch_and_objective, state, epoch)
                objectives.append(objective)
                bar.update(epoch_steps)
                bar.set_postfix(objective=f"{objective:.5g}")
                if stop(objective, state.step):
                    break
        weights = state.weights(averaged=self.average is not False)
        d = shards.n_features
        self.backend_ = client.submit(
            resolve_backend, self.backend, **self._stepper(client, shards), pure=False
        ).result()  # the stepping worker's
        self.classes_, self._state, self.lam_, self._seed = classes, state, settings.lam, settings.seed
        self.coef_ = np.ascontiguousarray(weights[:, :d])
        self.intercept_ = weights[:, d].copy() if self.fit_intercept else np.zeros(weights.shape[0])
        self.n_iter_, self.t_, self.objective_curve_ = len(objectives), state.step, objectives
        if not (np.isfinite(self.coef_).all() and np.isfinite(self.intercept_).all()):
            raise ValueError(
                "PegasosSVC learned a model with NaN or infinite values: its arithmetic overflowed. "
                "Scale the features, e.g. with sklearn.preprocessing.StandardScaler."
            )
        # a fit's ConvergenceWarning, as one node's, for fit to give once the model holds (the
        # zero weights' objective: every hinge 1, at the mean weight)
        zero_objective = self.coef_.shape[0] * settings.mean_weight
        return (
            functools.partial(warn_if_worse_than_zero_weights, self, objectives, zero_objective, None) if fit else None
        )

    def _settings_and_state(self, client, shards, classes, counts, found, first):
        class_weight = self.class_weight
        if class_weight == "balanced":  # scikit-learn's n / (n_classes * count), from the shards' counts
            class_weight = dict(zip(found.tolist(), shards.n_rows / (found.shape[0] * counts.astype(np.float64))))
        if class_weight is not None:  # checked as single-node PegasosSVC checks it
            check_some_weight(class_weight_per_sample(class_weight, found) * (counts > 0), self.class_weight)
        seed = seed_from_random_state(self.random_state) if first else self._seed
        lam = svm._regularization(self.lam, self.C, shards.n_rows) if first else self.lam_
        settings = PegasosSettings(
            classes=classes,
            class_weight=class_weight,
            lam=lam,
            batch_size=self.batch_size,
            fit_intercept=self.fit_intercept,
            projection=self.projection,
            average_start=None if self.average is False else int(self.average),
            weight_by_step=self.average is True,
            seed=seed,
            mean_weight=1.0,
            backend=self.backend,
        )
        sums = client.gather(shards.on_each(client, _weight_sum, settings))
        settings = dataclasses.replace(settings, mean_weight=float(sum(sums)) / shards.n_rows)
        n_models = 1 if classes.shape[0] == 2 else classes.shape[0]
        state = (
            PegasosState.zeros(n_models, shards.n_features + int(self.fit_intercept), shards.dtype, np)
            if first
            else self._state.to(np)
        )
        return settings, state

    def _stepper(self, client, shards):
        """Where the steps run: the worker with the most rows (the fewest rows travel)."""
        return shards.near(client, shards.largest())

    def _exact_epoch(self, client, shards, settings, state):
        n, k = shards.n_rows, settings.batch_size
        last = state.step + steps_per_epoch(n, k)
        block_steps = block_rows(shards, k) // k
        selectors = [
            DrawnRows(settings.seed, first, min(block_steps, last + 1 - first), k, n)
            for first in range(state.step + 1, last + 1, block_steps)
        ]
        final = step_through_blocks(client, shards, state, selectors, steps_on_gathered_rows, settings)
        return client.submit(state_on_host, final, pure=False).result()

    def _average_epoch(self, client, shards, settings, state):
        start = put(client, state)
        worker_seeds = [(settings.seed ^ (position * _WORKER_STREAM),) for position in range(len(shards.futures))]
        states = client.gather(shards.on_each(client, local_epoch, start, settings, per_shard=worker_seeds))
        return average_states(states, [summary.n_rows for summary in shards.summaries])

    def _objective(self, client, shards, settings, state):
        """The epoch objective of the weights the model returns: the shards' hinge sums added
        in worker order."""
        weights = state.weights(averaged=settings.average_start is not None)
        shared = put(client, weights)
        sums = client.gather(shards.on_each(client, shard_hinge_sum, settings, shared))
        return float(0.5 * settings.lam * (weights**2).sum() + float(sum(sums)) / shards.n_rows)

    def _warn_if_unlike(self, shards, found):
        """mode="average" needs shards alike: warn when a class's share differs by more than
        a factor 2 between shards."""
        shares = np.zeros((len(shards.summaries), found.shape[0]))
        for i, summary in enumerate(shards.summaries):
            shares[i, np.searchsorted(found, summary.classes)] = summary.class_counts / summary.n_rows
        if len(shards.summaries) > 1 and (shares.min(axis=0) < SHARD_BALANCE * shares.max(axis=0)).any():
            warnings.warn(
                "PegasosSVC(mode='average') averages models trained on each worker's rows, but the workers' class "
                f"proportions differ (per worker: {np.round(shares, 3).tolist()!r} for classes {found.tolist()!r}): "
                "the average can be much worse than one model. Shuffle the rows across partitions once before "
                "fitting, or use mode='exact'.",
                UserWarning,
                stacklevel=4,
            )


def _weight_sum(shard, settings):
    """The sum of this shard's sample weights as the steps see them (times the class
    weights, in X's dtype), for the projection radius ``sqrt(mean(s) / lam)``."""
    weights = shard.sample_weight
    if settings.class_weight is not None:
        weights = weights * compute_sample_weight(settings.class_weight, shard.y)
    return float(weights.astype(shard.X.dtype).astype(np.float64).sum())
