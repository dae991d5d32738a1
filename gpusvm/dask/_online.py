"""The online logistic learners (FTRL-Proximal, Truncated Gradient, FOBOS, RDA) on a
dask cluster, exactly: the single-node model for the same seed.

An online learner visits the rows in one order (each ``fit`` epoch a permutation from
the shared random stream, or the given order), a mini-batch at a time, and each batch
reads the weights the previous one wrote. The shards send a block's rows in visiting
order to the worker that steps (the one with the most rows), which runs the single-node
steps over them; each worker computes an epoch's permutation itself (a pure function
of seed and epoch), so only the rows travel.

The per-coordinate design (coordinates sharded over the workers, one combine of the
batch's partial margins per batch) would need every batch's rows split by column and
sent to every worker, and one round per batch; with the default batches of 256 to 1024
rows a round costs more than the batch's work (``bench/dask_scaling.py``), and the
models here fit one worker (two float64 values per coordinate and class: 256 MiB at
2^24 hashed features).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .. import linear_model
from .._backend import get_namespace, resolve_backend, to_numpy
from .._estimator.convergence import warn_if_no_better_than_a_constant
from .._instrumentation import progress_bar
from .._validation import check_is_fitted, class_positions, to_backend
from .._random import seed_from_random_state
from ..solvers.online_logistic import OnlineProblem, OnlineRule, OnlineState, make_steps, shuffled_order
from ._cluster import block_rows, run_epoch_with_resumes, step_through_blocks
from ._estimator import DaskEstimatorMixin
from ._shards import OrderedRows, assemble_block


@dataclasses.dataclass(frozen=True)
class OnlineSettings:
    """What a block's steps need but the rows and the state."""

    classes: np.ndarray
    rule: OnlineRule
    batch_size: int
    fit_intercept: bool
    seed: int
    backend: str


# Tasks (run on the workers).


def epoch_order(seed, epoch, n_samples):
    """Epoch ``epoch``'s visiting order (computed on each worker that needs it)."""
    return shuffled_order(seed, epoch, n_samples)


def steps_on_gathered_rows(carried, settings, selector, *gathered):
    """The batches of one block (an :class:`OrderedRows`), on the rows its shards sent in
    visiting order (runs on the stepping worker). ``carried`` is (state, summed loss of
    the epoch so far)."""
    state, loss_sum = carried
    X, y, _ = assemble_block(gathered)
    xp = get_namespace(resolve_backend(settings.backend))  # this worker's, once a task
    problem = OnlineProblem(
        X=to_backend(X, xp),
        labels=xp.asarray(class_positions(y, settings.classes), dtype=np.int32),
        n_classes=settings.classes.shape[0],
        rule=settings.rule,
        batch_size=settings.batch_size,
        fit_intercept=settings.fit_intercept,
        seed=settings.seed,
    )
    stepper = make_steps(problem, xp, state=state.copy().to(xp))  # a task must not change its input
    stepper.start_epoch(None, loss_so_far=loss_sum)  # one running sum, added in the single-node order
    stepper.run_batches(range(0, X.shape[0], settings.batch_size))
    return stepper.state, stepper.epoch_loss_sum()


def carried_on_host(carried):
    state, loss_sum = carried
    return state.to(np), loss_sum


class _DaskOnlineClassifier(DaskEstimatorMixin):
    """Training on the cluster, shared by the four rules."""

    def _train_shards(self, client, shards, *, classes, n_epochs, first, shuffle):
        fit = classes is None  # partial_fit passes the classes
        batch_size = self._batch_size_for(shards.n_rows if first else None)  # 'auto' as on one node
        found, class_counts = shards.classes()
        if first:
            classes = self._classes_for_fit(found) if classes is None else classes
        class_positions(found, classes)  # refuses labels not in classes
        n_models = 1 if classes.shape[0] == 2 else classes.shape[0]
        state = OnlineState.zeros(n_models, shards.n_features) if first else self._state.to(np)
        settings = OnlineSettings(
            classes=classes,
            rule=self._rule(),
            batch_size=batch_size,
            fit_intercept=self.fit_intercept,
            seed=seed_from_random_state(self.random_state) if first else self._seed,
            backend=self.backend,
        )
        losses = []
        epoch_batches = -(-shards.n_rows // batch_size)
        with progress_bar(n_epochs * epoch_batches, f"{type(self).__name__} on dask", self.verbose) as bar:
            for epoch in range(n_epochs):
                state, loss_sum = run_epoch_with_resumes(
                    client,
                    shards,
                    lambda start: self._epoch(client, shards, settings, start, epoch, shuffle),
                    state,
                    epoch,
                )
                losses.append(loss_sum / (shards.n_rows * n_models))
                bar.update(epoch_batches)
                bar.set_postfix(loss=f"{losses[-1]:.5g}")
        weights = to_numpy(state.coefficients(settings.rule))
        self.backend_ = client.submit(resolve_backend, self.backend, pure=False).result()
        self.classes_, self._state, self._seed = classes, state, settings.seed
        self.coef_ = np.ascontiguousarray(weights[:, :-1])
        self.intercept_ = weights[:, -1].copy()
        self.n_nonzero_ = int(np.count_nonzero(self.coef_))
        self.n_iter_, self.t_, self.loss_curve_, self.batch_size_ = n_epochs, state.t, losses, batch_size
        if not (np.isfinite(self.coef_).all() and np.isfinite(self.intercept_).all()):
            raise ValueError(
                f"{type(self).__name__} learned a model with NaN or infinite values: its arithmetic "
                "overflowed. Scale the features, e.g. with sklearn.preprocessing.StandardScaler."
            )
        # a fit's ConvergenceWarning, as one node's, for fit to give once the model holds
        return functools.partial(warn_if_no_better_than_a_constant, self, losses[-1], class_counts) if fit else None

    def _epoch(self, client, shards, settings, carried_state, epoch, shuffle):
        n = shards.n_rows
        block = block_rows(shards, settings.batch_size)  # whole batches: they fall where they would on one node
        orders = (
            [
                client.submit(epoch_order, settings.seed, epoch, n, **placement, pure=False)
                for placement in shards.placements(client)
            ]
            if shuffle
            else None
        )
        selectors = [OrderedRows(start, min(n, start + block)) for start in range(0, n, block)]
        final = step_through_blocks(
            client, shards, (carried_state, 0.0), selectors, steps_on_gathered_rows, settings, orders
        )
        return client.submit(carried_on_host, final, pure=False).result()

    def predict_proba(self, X):
        """Class probabilities; a lazy dask array for dask input."""
        if not hasattr(X, "__dask_graph__"):
            return super().predict_proba(X)
        check_is_fitted(self)
        return self._map_rows(X, "predict_proba", np.float64, self.classes_.shape[0])


def _distributed(local, doc):
    """The dask twin of a single-node online estimator (the same parameters)."""
    return type(
        local.__name__, (_DaskOnlineClassifier, local), {"__doc__": doc, "__module__": __name__, "local_class": local}
    )


_DOC = """:class:`gpusvm.{name}` trained on a dask cluster, exactly: the model equals the single-node
    one for the same parameters and seed (``fit`` with its shuffled epochs, ``partial_fit``
    in the order given), to the last bit (how: :doc:`/user_guide/dask`).

    Parameters and attributes are :class:`gpusvm.{name}`'s; ``backend`` is resolved on the
    workers. ``client`` (not a parameter, neither cloned nor pickled) is the
    dask.distributed client to use; None means the current one.
    """

FTRLClassifier = _distributed(linear_model.FTRLClassifier, _DOC.format(name="FTRLClassifier"))
TruncatedGradientClassifier = _distributed(
    linear_model.TruncatedGradientClassifier, _DOC.format(name="TruncatedGradientClassifier")
)
FOBOSClassifier = _distributed(linear_model.FOBOSClassifier, _DOC.format(name="FOBOSClassifier"))
RDAClassifier = _distributed(linear_model.RDAClassifier, _DOC.format(name="RDAClassifier"))
