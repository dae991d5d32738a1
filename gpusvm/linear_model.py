"""Online sparse logistic regression: FTRL-Proximal and its relatives TG, FOBOS and RDA.

Four estimators with one interface (``fit``, ``partial_fit``, ``predict_proba``, ...),
one per update rule of docs/algorithms.md section 3, so that each carries only its own
hyperparameters and its own docstring.  The rules themselves live in
``gpusvm.solvers.online_logistic``.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, Options, StrOptions

from ._backend import namespace_of, to_numpy
from ._stream.pipeline import prepared_chunk, ready_chunks
from ._stream.chunks import (
    ChunkSource,
    chunks_through_cache,
    aligned_chunks,
    check_chunk_X_y,
    check_partial_fit_lengths,
    errors_named,
)
from ._stream.label_order import LabelRuns
from ._estimator.base import GPUClassifierMixin, restore_on_error
from ._estimator.convergence import warn_if_no_better_than_a_constant
from ._instrumentation import EpochBars
from ._estimator.linear_model import LinearModelMixin
from ._random import seed_from_random_state
from ._validation import check_X_y, class_positions, to_backend
from .solvers.online_logistic import OnlineProblem, OnlineRule, OnlineState, make_steps, run_online

# batch_size='auto': a fit's epoch (of at least this many rows) has at least this many steps,
# the fewest that mended every small set of bench/online_defaults.py (docs/benchmarks.md,
# "Figures behind the code")
AUTO_STEPS_PER_EPOCH = 16

_COMMON_CONSTRAINTS = {
    "fit_intercept": ["boolean"],
    "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "shuffle": ["boolean"],
    "random_state": ["random_state"],
    "backend": GPUClassifierMixin._backend_constraint,
    "verbose": GPUClassifierMixin._verbose_constraint,
}
_POSITIVE = Interval(Real, 0, None, closed="neither")
_NON_NEGATIVE = Interval(Real, 0, None, closed="left")


def _sigmoid(scores, xp):
    """``1 / (1 + exp(-s))`` without overflow warnings."""
    return 0.5 * (1.0 + xp.tanh(0.5 * scores))


class _OnlineLogisticClassifier(LinearModelMixin, GPUClassifierMixin):
    """Fit, partial_fit and probabilities shared by the four online rules."""

    _training_state = GPUClassifierMixin._training_state + ("batch_size_",)
    _stream_batch_size = 256  # batch_size='auto' on a stream, and at most on a fit

    def _batch_size_for(self, n_rows):
        """``batch_size_`` for a call: an int ``batch_size`` as given; for 'auto', on the
        ``n_rows`` rows of a call that starts a model (``fit``, a first ``partial_fit``)
        ``n_rows // AUTO_STEPS_PER_EPOCH`` (at least 1, at most the stream batch); without
        rows (``n_rows`` None: a later ``partial_fit``, ``fit_chunks``) the batch of the
        model it continues, else the stream batch."""
        if self.batch_size != "auto":
            return int(self.batch_size)  # True is 1, as scikit-learn takes it
        if n_rows is None:
            return getattr(self, "batch_size_", self._stream_batch_size)
        return int(min(self._stream_batch_size, max(1, n_rows // AUTO_STEPS_PER_EPOCH)))

    def _rule(self):
        """The :class:`OnlineRule` with this estimator's hyperparameters."""
        raise NotImplementedError

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train from scratch for ``max_iter`` epochs.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            NumPy, SciPy CSR, CuPy or cupyx CSR; float32 or float64.
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        with restore_on_error(self):
            self._forget_training_state()
            class_counts = self._train(X, y, classes=None, n_epochs=self.max_iter, shuffle=self.shuffle)
        warn_if_no_better_than_a_constant(self, self.loss_curve_[-1], class_counts, stacklevel=3)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None):
        """Learn from one more chunk of a stream, in the order given.

        A call that raises leaves the model as it was.  The rows are learned in the
        order given, so a stream's chunks should come shuffled: on a stream sorted by
        label the model leans toward the classes seen last (see :meth:`fit_chunks`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            Every class the stream will contain: required on the first call; on later
            calls it must be the same set, or None.

        Returns
        -------
        self
        """
        self._validate_params()  # scikit-learn checks them at the first call only, set_params may follow
        check_partial_fit_lengths(X, y)
        with restore_on_error(self):
            self._train(X, y, classes=self._partial_fit_classes(classes), n_epochs=1, shuffle=False)
        return self

    def fit_chunks(self, chunks, classes=None, *, cache_file="auto"):
        """Train from scratch on a stream of ``(X, y)`` chunks, ``max_iter`` passes.

        The chunks never need to sit in memory together: a list, a generator, or a file
        read ``chunk_rows`` at a time (:class:`gpusvm.data_files.SvmlightChunks`,
        :class:`~gpusvm.data_files.NpzChunks`). Rows are visited in the order given
        (``shuffle`` does not apply), and a chunk's last rows that do not fill a
        mini-batch are carried to the next chunk, so the model equals, exactly, that of
        ``fit(X, y)`` with ``shuffle=False`` on all the rows at the same ``batch_size_``,
        and that of ``partial_fit`` over the chunks when each holds a multiple of
        ``batch_size_`` rows and the batch is the same. A stream's length is not known
        before it ends, so ``batch_size='auto'`` takes the stream batch here (1024 for
        FTRL, else 256), as ``fit`` does from 16 times that many rows up, while a first
        ``partial_fit`` sizes it by its own rows; give an int to compare with a smaller
        ``fit`` or with ``partial_fit``.

        The stream should be shuffled: the rows are taken in the order given, so a
        stream sorted or grouped by label (a file written class by class) makes a model
        that leans toward the classes seen last, far below ``fit`` on the same rows.
        When most of the first epoch's rows come in stretches of one class, far more
        than in a random order, the fit warns (a ``UserWarning``; the test is
        ``gpusvm._stream.label_order``'s).  RDA suffers most: its weights follow the
        mean of every gradient it has seen, each taken at the weights of its moment, and
        the mean keeps the gradients of a sorted start for good.

        A chunk that cannot be trained on (a label missing for a row, a value that is
        not finite, a label outside ``classes``...) is named in the error by its number
        and, from a file reader, by the file and lines it came from; the model is then
        left as it was.

        On the cupy backend the next chunk is read and checked on a worker thread while
        the current one trains, then copied to the device from pinned host memory, on a
        stream of its own, while the current chunk's steps run (two device slots used in
        turn); nothing is read back from the device until the end.  On the numpy backend
        chunks of text are parsed in turn, in the caller's thread (the parser and the steps
        both hold Python's GIL); chunks from the cache are read ahead on a worker thread.

        Parameters
        ----------
        chunks : iterable of (X, y)
            Re-iterable (a list, a reader) for ``max_iter > 1`` or when ``classes`` is
            None; a one-shot iterator is read once, and refused before it is read when
            the fit would need another pass.
        classes : array-like, default=None
            Every class of the stream; None reads them from the chunks first (one pass).
        cache_file : 'auto', str, os.PathLike or None, default='auto'
            Where a text reader's parsed chunks are kept for the passes after the first
            (:class:`gpusvm.data_files.SvmlightChunks`' ``cache_file``): 'auto' makes a
            temporary cache when the fit reads the file more than once, removed at the
            end (where the disk has no room, a warning, and the text is parsed every
            pass); a path keeps the cache there for later fits of the same file; None
            parses the text every pass. The model is the same bit for bit. Ignored
            for chunks that are not text (lists, generators, ``.npz`` files).

        Returns
        -------
        self
        """
        self._validate_params()
        with chunks_through_cache(chunks, cache_file, self.max_iter + (classes is None)) as chunks:
            return self._fit_chunks(chunks, classes)

    def _fit_chunks(self, chunks, classes):
        source = ChunkSource(chunks)
        source.check_passes(
            ["finding the classes (or pass classes=...)"] * (classes is None)
            + [f"max_iter={self.max_iter}"] * self.max_iter
        )
        # the bars from here: the wait for 'auto' counts the pass over the labels
        with restore_on_error(self), EpochBars(type(self).__name__, self.max_iter, self.verbose) as bars:
            self._forget_training_state()
            class_counts = None  # known when the classes are read off the chunks
            if classes is None:
                classes, class_counts = source.label_counts(rows_read=bars.count)
                if not classes.size:
                    raise ValueError("fit_chunks got no chunks with rows.")
            classes = self._partial_fit_classes(classes)
            backend, xp = self._fit_namespace(each_call=True)
            batch_size = self._batch_size_for(None)  # a stream: its length is not known before it ends
            checked = itertools.count()  # the first chunk checked sets n_features_in_
            epochs = (
                (epoch, chunk)
                for epoch in range(self.max_iter)
                for chunk in aligned_chunks(
                    self._checked_chunks(source.passes(f"max_iter={self.max_iter}"), classes, checked), batch_size
                )
            )
            label_runs = LabelRuns(classes.shape[0])  # the first epoch's runs of one class
            prepare = functools.partial(self._prepared_chunk, backend=backend, label_runs=label_runs)
            seed, n_models = seed_from_random_state(self.random_state), 1 if classes.shape[0] == 2 else classes.shape[0]
            state, stepper, chunk, losses, rows = None, None, None, [], 0
            with ready_chunks(epochs, prepare, backend, host_read_ahead=source.reads_arrays(), timing=bars) as ready:
                for chunk in ready:
                    if state is None:
                        state = OnlineState.zeros(n_models, chunk.X.shape[1], xp)
                    if chunk.epoch > len(losses):  # the first chunk of the next epoch
                        losses.append(stepper.epoch_loss_sum() / (rows * n_models))
                        bars.end_epoch(loss=f"{losses[-1]:.5g}")
                        stepper, rows = None, 0
                    problem = OnlineProblem(
                        X=chunk.X,
                        labels=chunk.rows["labels"],
                        n_classes=classes.shape[0],
                        rule=self._rule(),
                        batch_size=batch_size,
                        fit_intercept=self.fit_intercept,
                        seed=seed,
                        longest_row=chunk.facts["longest_row"],
                    )
                    # The epoch's loss runs on from the last chunk's (on the device, with no read).
                    loss_so_far = 0.0 if stepper is None else stepper.loss_sum
                    stepper = make_steps(problem, xp, state=state)
                    stepper.start_epoch(None, loss_so_far)
                    stepper.run_batches(range(0, chunk.n_rows, batch_size))
                    rows += chunk.n_rows
                    bars.update(chunk.epoch, chunk.n_rows)
            if state is None:
                raise ValueError("fit_chunks got no chunks with rows.")
            losses.append(stepper.epoch_loss_sum() / (rows * n_models))
            bars.end_epoch(loss=f"{losses[-1]:.5g}")
            self._set_model(state, backend, xp, classes, seed, chunk.X)
            self.n_iter_, self.loss_curve_, self.batch_size_ = self.max_iter, losses, batch_size
            if source.feature_names is not None:  # the chunks' DataFrame columns (arrays by now)
                self.feature_names_in_ = source.feature_names
        if class_counts is not None:
            warn_if_no_better_than_a_constant(self, self.loss_curve_[-1], class_counts, stacklevel=3)
        sorted_stream = label_runs.warning(type(self).__name__, f"stretches of {label_runs.window_rows} rows")
        if sorted_stream:
            warnings.warn(sorted_stream, UserWarning, stacklevel=3)
        return self

    def _checked_chunks(self, chunks, classes, checked):
        """The chunks of a pass with rows, each checked on its own (so that an error names
        it: see ``errors_named``), as ``(X, class positions)``; the first of the fit
        (``next(checked) == 0``) sets the number of features."""
        for chunk in chunks:
            if chunk[0].ndim and not chunk[0].shape[0]:
                continue  # a chunk without rows (ChunkSource has checked that it has no labels)
            with errors_named(chunk):
                X, y = check_chunk_X_y(self, *chunk, reset=next(checked) == 0)
                labels = class_positions(y, classes).astype(np.int32)
            yield X, labels

    def _prepared_chunk(self, item, number, *, backend, label_runs):
        """One streamed chunk made ready (see ``fit_chunks``; checked by
        ``_checked_chunks``).  The first epoch's chunks count in ``label_runs`` (chunks
        are prepared in order, one at a time)."""
        epoch, (X, labels) = item
        if epoch == 0:
            label_runs.add(labels)
        return prepared_chunk(X, {"labels": labels}, backend, epoch)

    def _train(self, X, y, *, classes, n_epochs, shuffle):
        first = not hasattr(self, "classes_")
        # Each call trains where `backend` says: the state moves to it, so a model
        # trained on a GPU can continue on a CPU and back.
        backend, xp = self._fit_namespace(each_call=True)
        X, y = check_X_y(self, X, y, reset=first)
        if classes is None:  # fit: the classes of y
            classes = self._classes_for_fit(y)
        batch_size = self._batch_size_for(X.shape[0] if first else None)  # 'auto' by the rows that start the model
        labels = class_positions(y, classes)
        n_models = 1 if classes.shape[0] == 2 else classes.shape[0]
        self._check_device_memory(X, n_models, backend)
        state = OnlineState.zeros(n_models, X.shape[1], xp) if first else self._state.to(xp)
        seed = seed_from_random_state(self.random_state) if first else self._seed
        problem = OnlineProblem(
            X=to_backend(X, xp),
            labels=xp.asarray(labels, dtype=np.int32),
            n_classes=classes.shape[0],
            rule=self._rule(),
            batch_size=batch_size,
            fit_intercept=self.fit_intercept,
            seed=seed,
        )
        state, losses = run_online(problem, state, n_epochs=n_epochs, shuffle=shuffle, xp=xp, verbose=self.verbose)
        self._set_model(state, backend, xp, classes, seed, X)
        self.n_iter_, self.loss_curve_, self.batch_size_ = n_epochs, losses, batch_size
        return np.bincount(labels, minlength=classes.shape[0])  # the rows of each class

    def _set_model(self, state, backend, xp, classes, seed, X):
        """The fitted attributes from ``state`` (one copy from the device), checked finite on X."""
        weights = to_numpy(state.coefficients(self._rule(), xp))
        self.backend_, self.classes_, self._state, self._seed = backend, classes, state, seed
        self.coef_ = np.ascontiguousarray(weights[:, :-1])
        self.intercept_ = weights[:, -1].copy()
        self.n_nonzero_ = int(np.count_nonzero(self.coef_))
        self.t_ = state.t
        self._check_finite_model(X)

    def predict_proba(self, X):
        """Class probabilities: the logistic model's for two classes; for more, each
        one-vs-rest probability divided by their sum (as LogisticRegression's 'ovr').

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        xp = namespace_of(scores)
        if scores.ndim == 1:
            positive = _sigmoid(scores, xp)
            return xp.stack([1.0 - positive, positive], axis=1)
        probabilities = _sigmoid(scores, xp)
        return probabilities / probabilities.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        probabilities = self.predict_proba(X)
        return namespace_of(probabilities).log(probabilities)


class FTRLClassifier(_OnlineLogisticClassifier):
    """Logistic regression by FTRL-Proximal with per-coordinate learning rates.

    McMahan et al.'s Algorithm 1: per coordinate, state ``z_i`` and ``n_i`` (the sum of
    squared gradients), rate ``alpha / (beta + sqrt(n_i))``, and the closed-form weight
    ``w_i = 0`` if ``|z_i| <= l1``, else ``-(z_i - sign(z_i) l1) / ((beta + sqrt(n_i)) /
    alpha + l2)``. Only the coordinates present in a batch are touched, and the L1 term
    gives exact zeros. Two classes train one model; more train one per class
    (one-vs-rest) on the same batches.

    Parameters
    ----------
    alpha : float, default=0.1
        Learning-rate scale (> 0).
    beta : float, default=1.0
        Learning-rate smoothing (>= 0); 1 is the paper's usual choice.
    l1 : float, default=1.0
        ``lambda1``. FTRL applies it to the *summed* gradients, so it is on the scale of a
        penalty ``l1 ||w||_1`` added to the summed (not mean) loss of the stream: for a
        per-example weight ``lambda`` over ``n`` examples, ``l1 = lambda * n``.
    l2 : float, default=1.0
        ``lambda2``, on the same scale; it shrinks weights but does not change sparsity.
    fit_intercept : bool, default=True
        Learn an intercept: a weight on a constant feature of value 1, updated by the
        same rule but never penalized.
    batch_size : int or 'auto', default='auto'
        Examples processed at once. All predictions of a batch use the weights at its
        start; then every touched coordinate takes one update that equals the sequential
        rule run over the batch with those weights held fixed (see
        ``gpusvm.solvers.online_logistic``). ``batch_size=1`` is the classic online
        algorithm; larger batches are faster, above all on a GPU. 'auto'
        (``batch_size_``) is 1024 from 16,384 rows up; on fewer, ``n // 16`` (at least 1),
        an epoch of at least 16 steps, since an epoch of one or two batches barely moves
        the weights. ``n`` is the rows of the call that starts the model (``fit``, or the
        first ``partial_fit``), and later ``partial_fit`` calls keep its batch;
        ``fit_chunks`` takes 1024, its stream's length unknown before it ends. The
        values are by measurement (``bench/online_defaults.py``): 1024 reaches the test
        log loss of small batches in a fraction of their time from a few thousand rows
        up, and on a few hundred rows 'auto' ends at a far lower log loss than 1024 (the
        figures: ``docs/benchmarks.md``, "Figures behind the code").
    max_iter : int, default=5
        Epochs (passes over the data) run by ``fit``. ``partial_fit`` makes one pass.
    shuffle : bool, default=True
        Visit the rows of each ``fit`` epoch in a fresh random order (``partial_fit``
        keeps the order given, as a stream).
    random_state : int, RandomState or None, default=None
        Seed of the counter-based random stream: an int gives the same order on every
        backend.
    backend : {'auto', 'numpy', 'cupy'}, default='auto'
        Where to train; see :func:`gpusvm.config_context`.
    verbose : 'auto' or int, default='auto'
        A progress bar with the progressive loss on long fits ('auto': once a fit has
        taken 5 seconds, erased when it ends), always (1) or never (0).

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        The weights after the last example (one-vs-rest rows for three or more classes).
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_nonzero_ : int
        Number of nonzero entries of ``coef_``: the sparsity the L1 penalty bought.
    n_iter_ : int
        Epochs run by the last call (1 for ``partial_fit``).
    t_ : int
        Examples seen over the model's life; with the per-coordinate state (kept with
        the model and pickled with it) ``partial_fit`` continues exactly where it stopped.
    loss_curve_ : list of float
        Per epoch of the last call, the progressive logistic loss: the mean over examples
        (and one-vs-rest models) of the loss of each prediction made before the example
        was learned from.
    batch_size_ : int
        The batch size of the last call (``batch_size``, with 'auto' resolved).
    backend_ : {'numpy', 'cupy'}
    n_features_in_ : int

    See Also
    --------
    TruncatedGradientClassifier, FOBOSClassifier, RDAClassifier : the survey's relatives.

    References
    ----------
    H. B. McMahan et al., "Ad Click Prediction: a View from the Trenches", KDD 2013.

    Examples
    --------
    >>> from sklearn.feature_extraction import FeatureHasher
    >>> from gpusvm import FTRLClassifier
    >>> records = [{"country": "fr", "device": "ios"}, {"country": "us", "device": "web"}] * 50
    >>> X = FeatureHasher(n_features=2**10, input_type="dict").transform(records)
    >>> y = [1, 0] * 50
    >>> FTRLClassifier(random_state=0, backend="numpy").fit(X, y).predict(X[:2]).tolist()
    [1, 0]
    """

    _stream_batch_size = 1024
    _parameter_constraints = {
        "alpha": [_POSITIVE],
        "beta": [_NON_NEGATIVE],
        "l1": [_NON_NEGATIVE],
        "l2": [_NON_NEGATIVE],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(
        self,
        alpha=0.1,
        beta=1.0,
        l1=1.0,
        l2=1.0,
        fit_intercept=True,
        batch_size="auto",
        max_iter=5,
        shuffle=True,
        random_state=None,
        backend="auto",
        verbose="auto",
    ):
        self.alpha = alpha
        self.beta = beta
        self.l1 = l1
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    def _rule(self):
        return OnlineRule("ftrl", l1=self.l1, l2=self.l2, alpha=self.alpha, beta=self.beta)


class TruncatedGradientClassifier(_OnlineLogisticClassifier):
    """Logistic regression by Truncated Gradient (Langford, Li and Zhang).

    SGD with step ``eta_s = eta0 / sqrt(s)``; at every ``truncate_every``-th example the
    weights with ``|v| <= theta`` are pulled toward 0 by ``eta_s * l1 * truncate_every``
    (and stop at 0). ``theta = inf`` with ``truncate_every = 1`` is L1-FOBOS; ``l1 *
    truncate_every = theta / eta_s`` is simple truncation. Absent features are truncated
    too (lazily, when next read), as in the dense algorithm.

    Parameters
    ----------
    eta0 : float, default=0.5
        Step-size scale (> 0).
    l1 : float, default=1e-4
        The gravity ``g``: an L1 weight per example, on the scale of ``lambda`` in
        ``mean loss + lambda ||w||_1`` (LogisticRegression's ``1 / (C n_samples)``).
    theta : float, default=inf
        Only weights with ``|v| <= theta`` are truncated.
    truncate_every : int, default=1
        ``K``: truncate every ``K`` examples, by ``K`` times the gravity.
    batch_size : int or 'auto', default='auto'
        As in :class:`FTRLClassifier`, with 256 in place of 1024 (from 4,096 rows up on
        a fit): this rule's step size is one per example rather than per coordinate, and
        256 gives the test log loss of small batches in a fraction of their time, where
        1024 loses some of it (``bench/online_defaults.py``; ``docs/benchmarks.md``,
        "Figures behind the code").
    fit_intercept, max_iter, shuffle, random_state, backend, verbose
        As in :class:`FTRLClassifier`.

    Attributes
    ----------
    coef_, intercept_, classes_, n_nonzero_, n_iter_, t_, loss_curve_, batch_size_, backend_, n_features_in_
        As in :class:`FTRLClassifier`.

    References
    ----------
    J. Langford, L. Li and T. Zhang, "Sparse Online Learning via Truncated Gradient",
    JMLR 10, 2009.
    """

    _parameter_constraints = {
        "eta0": [_POSITIVE],
        "l1": [_NON_NEGATIVE],
        "theta": [_NON_NEGATIVE, Options(Real, {np.inf})],
        "truncate_every": [Interval(Integral, 1, None, closed="left")],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(
        self,
        eta0=0.5,
        l1=1e-4,
        theta=np.inf,
        truncate_every=1,
        fit_intercept=True,
        batch_size="auto",
        max_iter=5,
        shuffle=True,
        random_state=None,
        backend="auto",
        verbose="auto",
    ):
        self.eta0 = eta0
        self.l1 = l1
        self.theta = theta
        self.truncate_every = truncate_every
        self.fit_intercept = fit_intercept
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    def _rule(self):
        return OnlineRule("tg", l1=self.l1, eta0=self.eta0, theta=self.theta, truncate_every=self.truncate_every)


class FOBOSClassifier(_OnlineLogisticClassifier):
    """Logistic regression by L1-FOBOS (Duchi and Singer's forward-backward splitting).

    Each example: a gradient step ``v = w - eta_s g`` with ``eta_s = eta0 / sqrt(s)``,
    then the L1 proximal step ``w = sign(v) max(0, |v| - eta_s l1)`` on every weight
    (absent features lazily, when next read). The half-step rate ``eta_{s+1/2}`` is
    taken equal to ``eta_s``, as in the survey.

    Parameters
    ----------
    eta0 : float, default=0.5
        Step-size scale (> 0).
    l1 : float, default=1e-4
        L1 weight per example, on the scale of ``lambda`` in ``mean loss + lambda
        ||w||_1`` (LogisticRegression's ``1 / (C n_samples)``).
    batch_size : int or 'auto', default='auto'
        As in :class:`FTRLClassifier`, with 256 in place of 1024 (from 4,096 rows up on
        a fit): this rule's step size is one per example rather than per coordinate, and
        256 gives the test log loss of small batches in a fraction of their time, where
        1024 loses some of it (``bench/online_defaults.py``; ``docs/benchmarks.md``,
        "Figures behind the code").
    fit_intercept, max_iter, shuffle, random_state, backend, verbose
        As in :class:`FTRLClassifier`.

    Attributes
    ----------
    coef_, intercept_, classes_, n_nonzero_, n_iter_, t_, loss_curve_, batch_size_, backend_, n_features_in_
        As in :class:`FTRLClassifier`.

    References
    ----------
    J. Duchi and Y. Singer, "Efficient Online and Batch Learning using Forward Backward
    Splitting", JMLR 10, 2009.
    """

    _parameter_constraints = {
        "eta0": [_POSITIVE],
        "l1": [_NON_NEGATIVE],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(
        self,
        eta0=0.5,
        l1=1e-4,
        fit_intercept=True,
        batch_size="auto",
        max_iter=5,
        shuffle=True,
        random_state=None,
        backend="auto",
        verbose="auto",
    ):
        self.eta0 = eta0
        self.l1 = l1
        self.fit_intercept = fit_intercept
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    def _rule(self):
        return OnlineRule("fobos", l1=self.l1, eta0=self.eta0)


class RDAClassifier(_OnlineLogisticClassifier):
    """Logistic regression by L1-RDA (Xiao's regularized dual averaging).

    Keeps the mean gradient ``gbar_i`` of every coordinate over the ``t`` examples seen;
    ``w_i = 0`` when ``|gbar_i| <= l1``, else ``-(sqrt(t) / gamma) (gbar_i - l1
    sign(gbar_i))``. Its threshold does not decay with ``t``, so it is the sparsest of
    the four at the same ``l1``.

    Parameters
    ----------
    gamma : float, default=1.0
        ``beta_t = gamma sqrt(t)`` (> 0); larger is more conservative.
    l1 : float, default=1e-4
        L1 weight per example, on the scale of ``lambda`` in ``mean loss + lambda
        ||w||_1``.
    batch_size : int or 'auto', default='auto'
        As in :class:`FTRLClassifier`, with 256 in place of 1024 (from 4,096 rows up on
        a fit): this rule's step size is one per example rather than per coordinate, and
        256 gives the test log loss of small batches in a fraction of their time, where
        1024 loses some of it (``bench/online_defaults.py``; ``docs/benchmarks.md``,
        "Figures behind the code").
    fit_intercept, max_iter, shuffle, random_state, backend, verbose
        As in :class:`FTRLClassifier`.

    Attributes
    ----------
    coef_, intercept_, classes_, n_nonzero_, n_iter_, t_, loss_curve_, batch_size_, backend_, n_features_in_
        As in :class:`FTRLClassifier`.

    References
    ----------
    L. Xiao, "Dual Averaging Methods for Regularized Stochastic Learning and Online
    Optimization", JMLR 11, 2010.
    """

    _parameter_constraints = {
        "gamma": [_POSITIVE],
        "l1": [_NON_NEGATIVE],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(
        self,
        gamma=1.0,
        l1=1e-4,
        fit_intercept=True,
        batch_size="auto",
        max_iter=5,
        shuffle=True,
        random_state=None,
        backend="auto",
        verbose="auto",
    ):
        self.gamma = gamma
        self.l1 = l1
        self.fit_intercept = fit_intercept
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    def _rule(self):
        return OnlineRule("rda", l1=self.l1, gamma=self.gamma)
