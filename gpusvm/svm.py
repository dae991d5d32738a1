"""Support vector classifiers: linear Pegasos and kernelized Pegasos."""

from __future__ import annotations

import functools
import time
import warnings
from numbers import Integral, Real

import numpy as np
import nvtx
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from ._backend import to_numpy
from ._stream.pipeline import prepared_chunk, ready_chunks
from ._stream.chunks import ChunkSource, chunks_through_cache, check_chunk_X_y, check_partial_fit_lengths, errors_named
from ._stream.label_order import LabelRuns
from ._estimator.base import GPUClassifierMixin, restore_on_error
from ._estimator.convergence import warn_if_worse_than_zero_weights
from ._instrumentation import EpochBars
from ._estimator.kernel_model import KernelModelMixin
from ._estimator.linear_model import LinearModelMixin
from ._random import seed_from_random_state
from ._validation import (
    IntervalNotBool,
    check_linear_model_width,
    check_X_y,
    class_positions,
    one_vs_rest_targets,
    to_backend,
)
from .kernel_functions import KERNELS, KernelSpec, check_kernel_range, kernel_training_copy, resolve_gamma
from .solvers.kernel_pegasos import KernelPegasosProblem, dual_coefficients, run_kernel_pegasos
from .solvers.online_logistic import shuffled_order
from .solvers.row_cache import memory_headroom_bytes
from .solvers.pegasos import (
    NoImprovementStop,
    PegasosProblem,
    PegasosState,
    ProgressiveObjective,
    make_steps,
    run_pegasos,
    steps_per_epoch,
)

# The chunk order of PegasosSVC.fit_chunks comes from the model's seed xor this, so
# that it is a random stream of its own, apart from the steps' draws.
_CHUNK_ORDER_STREAM = 0x9E3779B97F4A7C15


def _regularization(lam, C, n_samples):
    """Pegasos' lambda: ``lam``, or ``1 / (C n)`` so that the objective is LinearSVC's over ``C n``."""
    return float(lam) if lam is not None else 1.0 / (float(C) * n_samples)  # a Python float whatever C was


class PegasosSVC(LinearModelMixin, GPUClassifierMixin):
    """Linear SVM trained by mini-batch Pegasos, on the GPU (CuPy) or the CPU (NumPy).

    Minimizes, per class (one-vs-rest, all classes trained together on the same
    batches)::

        lam/2 ||w||^2 + 1/n sum_i s_i max(0, 1 - y_i (<w, x_i> + b))

    which, with ``lam = 1 / (C n)``, is LinearSVC's ``1/2 ||w||^2 + C sum_i hinge_i``
    divided by ``C n``.

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularization strength, as in LinearSVC; used when ``lam`` is None.
    lam : float, default=None
        Pegasos' lambda. None means ``1 / (C * n_samples)`` (for ``partial_fit``, the
        ``n_samples`` of the first call).
    batch_size : int, default=64
        Rows drawn (uniformly, with replacement) per step: the ``k`` of Pegasos. The
        step size counts steps, so a larger batch makes more progress per step, up to
        about 1,024 rows, while on a CPU a step costs in proportion to its rows; on a
        GPU a small step costs about the same whatever its rows. The default is the
        batch that reached 1% of the optimum first on a CPU (the benchmark report's
        ``bench/pegasos_steps.py``).
    max_iter : int, default=1000
        Maximum number of epochs; an epoch is ``ceil(n_samples / batch_size)`` steps.
    projection : bool, default=True
        Project onto the ball of radius ``1/sqrt(lam)`` after each step.
    average : bool or int, default=True
        Return an average of the iterates instead of the last one. True: the average
        weighted by step number (weight ``t`` for step ``t``; Lacoste-Julien, Schmidt
        and Bach 2012), which converges at the O(1/T) rate of suffix averaging without
        knowing ``T``. An int ``m``: the uniform average from step ``m`` on (steps count
        over the model's life, like SGDClassifier's ``average``). False: the last iterate,
        which is noisy when ``lam`` is small.
    fit_intercept : bool, default=True
        Fit a bias ``b``. It is the weight of a constant feature of value 1, so it is
        regularized and projected with ``w`` (as LinearSVC with ``intercept_scaling=1``).
    tol : float or None, default=1e-3
        Stop when the primal objective (``lam/2 ||w||^2`` plus the mean weighted hinge
        loss, summed over classes; computed exactly after each epoch for the weights
        the model returns) has not improved by ``tol`` for ``n_iter_no_change`` epochs
        and at least 1,000 steps (a few hundred rows make epochs of a few steps, whose
        objective swings: five of them ended fits at a chance point)
        (:meth:`~gpusvm.svm.PegasosSVC.fit_chunks`: the same rule on the progressive objective, which needs no
        pass of its own). None: run ``max_iter`` epochs. A fit whose objective ends above
        that of the zero weights warns (``ConvergenceWarning``): scale the features.
    n_iter_no_change : int, default=5
    class_weight : dict, 'balanced' or None, default=None
        Multiplies the sample weights by a weight per class.
    random_state : int, RandomState or None, default=None
        Seed of the counter-based random stream; an int draws the same batches on
        every backend.
    backend : {'auto', 'numpy', 'cupy'}, default='auto'
        Where to train. 'auto' follows :func:`gpusvm.config_context`, then the
        ``GPUSVM_BACKEND`` variable, then picks CuPy when a CUDA device is present.
    verbose : 'auto' or int, default='auto'
        'auto' shows a progress bar over the steps, with the objective, once a fit has
        taken 5 seconds, and erases it when the fit ends; 1 shows it from the start and
        leaves it on screen; 0 shows nothing.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_iter_ : int
        Epochs run by the last ``fit`` (1 for ``partial_fit``).
    t_ : int
        Steps taken over the model's life.
    lam_ : float
        The lambda used.
    objective_curve_ : list of float
        The epoch objective after each epoch of the last call (of :meth:`~gpusvm.svm.PegasosSVC.fit_chunks`:
        the progressive objective).
    backend_ : {'numpy', 'cupy'}
    n_features_in_ : int

    Examples
    --------
    >>> from gpusvm import PegasosSVC
    >>> from gpusvm.datasets import load_adult
    >>> X, y, X_test, y_test = load_adult()
    >>> model = PegasosSVC(C=1.0, random_state=0).fit(X, y)   # doctest: +SKIP
    >>> round(model.score(X_test, y_test), 2)                  # doctest: +SKIP
    0.84
    """

    _training_state = GPUClassifierMixin._training_state + ("lam_",)

    _parameter_constraints = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "lam": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "projection": ["boolean"],
        "average": ["boolean", Interval(Integral, 1, None, closed="left")],
        "fit_intercept": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "random_state": ["random_state"],
        "backend": GPUClassifierMixin._backend_constraint,
        "verbose": GPUClassifierMixin._verbose_constraint,
    }

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
    ):
        self.C = C
        self.lam = lam
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.projection = projection
        self.average = average
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.class_weight = class_weight
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Train from scratch.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            NumPy, SciPy CSR, CuPy or cupyx CSR; float32 stays float32.
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        with restore_on_error(self):
            self._forget_training_state()
            X_checked, zero_objective = self._train(
                X, y, sample_weight, classes=None, n_epochs=self.max_iter, tol=self.tol
            )
        warn_if_worse_than_zero_weights(self, self.objective_curve_, zero_objective, X_checked, stacklevel=3)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch over ``(X, y)``, continuing the current model.

        Parameters
        ----------
        X, y, sample_weight : as in :meth:`fit`
        classes : array-like, default=None
            All the classes; required on the first call, then None or the same set.

        Returns
        -------
        self
        """
        self._validate_params()  # scikit-learn checks them at the first call only, set_params may follow
        check_partial_fit_lengths(X, y)
        with restore_on_error(self):
            self._train(X, y, sample_weight, classes=self._partial_fit_classes(classes), n_epochs=1, tol=None)
        return self

    def fit_chunks(self, chunks, classes=None, *, cache_file="auto"):
        """Train from scratch on a stream of ``(X, y)`` chunks, with at most two chunks in
        memory (on the device, with the cupy backend) at a time, until the progressive
        objective stops improving or ``max_iter`` epochs.

        An epoch visits every chunk once and takes ``ceil(rows / batch_size)`` steps in
        each, drawn (uniformly, with replacement) from that chunk's rows alone: the
        sampling of Pegasos within each chunk, not over all ``n`` rows. A chunk of fewer
        rows than ``batch_size`` takes one step whose batch is its rows, each once
        (drawing ``batch_size`` rows from fewer would repeat them, at the cost of a full
        batch), so that a chunk costs in proportion to its rows. When the source
        can read a chunk on its own (a list, :class:`gpusvm.data_files.SvmlightChunks`,
        :class:`~gpusvm.data_files.NpzChunks`), the chunks come in a fresh random order
        every epoch (from the shared random stream); otherwise in the order given.
        Either way a step sees one chunk, so the rows should be shuffled before they are
        cut into chunks: chunks of one class each (a file sorted by label) make steps of
        one class, and a model far below a fit on the same rows shuffled.  When most of
        the first epoch's rows come in chunks (or runs of small chunks) of one class, far
        more than in a random order, the fit warns (a ``UserWarning``; see
        ``gpusvm._stream.label_order``).  Chunks without rows are skipped. ``lam``
        is ``1 / (C n)`` over all the rows, and ``class_weight='balanced'`` weighs each
        class by ``n / (n_classes * rows of the class)`` over the whole stream, as a fit
        on the concatenated chunks would (both counted in a first pass when needed).

        Stopping: ``tol`` and ``n_iter_no_change`` mean what they mean in :meth:`fit`
        (stop once the epoch's objective has not improved on the best by ``tol`` for
        ``n_iter_no_change`` epochs), applied to the *progressive* objective, which costs
        no pass of its own: the primal objective of the weights the model would return,
        each chunk's rows measured when the chunk comes, before its steps
        (``gpusvm.solvers.pegasos.ProgressiveObjective``); ``objective_curve_``
        holds it, one value an epoch.  It differs from :meth:`fit`'s exact objective only
        in that a chunk is measured with the weights of its moment in the epoch, so it
        runs a little above it.  An epoch is judged when the next one's first chunk
        arrives, so a fit that stops has read one chunk more than it trained on.

        On the cupy backend the next chunk is read and checked on a worker thread while
        the current one trains, then copied to the device from pinned host memory, on a
        stream of its own, while the current chunk's steps run (two device slots used in
        turn); the host reads the device once an epoch (the progressive objective's two
        sums).  On the numpy backend chunks of text are parsed in turn, in the caller's
        thread (the parser and the steps both hold Python's GIL); chunks from the cache
        are read ahead on a worker thread.

        A chunk that cannot be trained on (a label missing for a row, a value that is
        not finite, a label outside ``classes``...) is named in the error by its number
        and, from a file reader, by the file and lines it came from; a file that changes
        while the fit reads it is refused.  Either way the model is left as it was.

        Parameters
        ----------
        chunks : iterable of (X, y)
            Re-iterable (a list, a reader) unless ``max_iter=1``, ``classes`` and ``lam``
            are all given and ``class_weight`` is not 'balanced'; a one-shot iterator
            that would need more than one pass is refused before it is read.
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
        started = time.monotonic()  # a reader's scan of its file, below, counts in the wait for 'auto'
        self._validate_params()
        with chunks_through_cache(chunks, cache_file, self.max_iter + (classes is None)) as chunks:
            return self._fit_chunks(chunks, classes, started)

    def _fit_chunks(self, chunks, classes, started):
        source = ChunkSource(chunks)
        balanced = isinstance(self.class_weight, str) and self.class_weight == "balanced"
        counting = [
            what
            for what, needed in (
                ("finding the classes (or pass classes=...)", classes is None),
                ("counting the rows of each class (for class_weight='balanced')", balanced),
                ("counting the rows (for lam = 1 / (C n))", self.lam is None and not source.knows_n_rows()),
            )
            if needed
        ]
        source.check_passes(counting[:1] + [f"max_iter={self.max_iter}"] * self.max_iter)
        # the epochs' length when the reader tells it (asked only where lam needs it anyway:
        # the question may cost a reader a scan of its file)
        known_rows = source.n_rows() if self.lam is None and source.knows_n_rows() else None
        bars = EpochBars("PegasosSVC", self.max_iter, self.verbose, known_rows, started)
        with restore_on_error(self), bars:
            self._forget_training_state()
            stream_classes, counts = (
                source.label_counts(" and ".join(counting), rows_read=bars.count) if counting else (None, None)
            )
            n_rows = int(counts.sum()) if counts is not None else known_rows  # known when lam needs it
            bars.rows_per_epoch = n_rows
            if n_rows == 0:
                raise ValueError("fit_chunks got no chunks with rows.")
            classes = self._partial_fit_classes(stream_classes if classes is None else classes)
            class_weight = self._stream_class_weight(classes, stream_classes, counts) if balanced else self.class_weight
            lam = _regularization(self.lam, self.C, n_rows if self.lam is None else 1)
            seed = seed_from_random_state(self.random_state)
            backend, xp = self._fit_namespace()
            epochs = (
                (epoch, chunk) for epoch in range(self.max_iter) for chunk in self._epoch_chunks(source, epoch, seed)
            )
            dtype = {}  # the first chunk's, which later chunks are cast to
            label_runs = LabelRuns(classes.shape[0])  # the first epoch's chunks of one class
            prepare = functools.partial(
                self._prepared_chunk,
                classes=classes,
                class_weight=class_weight,
                dtype=dtype,
                backend=backend,
                label_runs=label_runs,
            )
            state, chunk, progress, objectives = None, None, None, []
            stop = NoImprovementStop(self.tol, self.n_iter_no_change)
            with ready_chunks(epochs, prepare, backend, host_read_ahead=source.reads_arrays(), timing=bars) as ready:
                for chunk in ready:
                    if chunk.epoch > len(objectives):  # the first chunk of the next epoch: the last one is over
                        objectives.append(progress.value())
                        bars.end_epoch(objective=f"{objectives[-1]:.5g}")
                        if stop(objectives[-1], state.step):
                            break
                        progress = None
                    if state is None:
                        n_models = chunk.rows["targets"].shape[1]
                        check_linear_model_width(chunk.X.shape[1], n_models, memory_headroom_bytes())
                        state = PegasosState.zeros(
                            chunk.rows["targets"].shape[1],
                            chunk.X.shape[1] + int(self.fit_intercept),
                            chunk.X.dtype,
                            xp,
                        )
                    if progress is None:
                        progress = ProgressiveObjective(lam, self.fit_intercept, self.average is not False, xp)
                    targets, sample_weight = chunk.rows["targets"], chunk.rows["sample_weight"]
                    # No read from the device: the next chunk's copy overlaps this chunk's measure and steps.
                    progress.add(chunk.X, targets, sample_weight, state)
                    self._chunk_steps(chunk, targets, sample_weight, lam, seed, state, xp)
                    bars.update(chunk.epoch, chunk.n_rows)
                else:
                    if progress is not None:
                        objectives.append(progress.value())
                        bars.end_epoch(objective=f"{objectives[-1]:.5g}")
            bars.close()
            if state is None:
                raise ValueError("fit_chunks got no chunks with rows.")
            self._set_model(state, backend, classes, lam, seed, chunk.X)
            self.n_iter_, self.objective_curve_ = len(objectives), objectives
            if source.feature_names is not None:  # the chunks' DataFrame columns (arrays by now)
                self.feature_names_in_ = source.feature_names
        # (the zero weights' objective with unit sample weights: the classes' count)
        warn_if_worse_than_zero_weights(self, self.objective_curve_, self.coef_.shape[0], None, stacklevel=3)
        sorted_stream = label_runs.warning(
            type(self).__name__, f"chunks, or runs of chunks of at least {label_runs.window_rows} rows,"
        )
        if sorted_stream:
            warnings.warn(sorted_stream, UserWarning, stacklevel=3)
        return self

    def _chunk_steps(self, chunk, targets, sample_weight, lam, seed, state, xp):
        """The steps of one streamed chunk: ``ceil(rows / batch_size)`` drawn from its rows,
        or, for a chunk of fewer rows than a batch, one step of its rows, each once (the
        given rows of ``GivenBatches``), which costs in proportion to them."""
        n_rows, batch_size = chunk.n_rows, int(self.batch_size)
        mean_weight = chunk.facts["mean_weight"]
        if n_rows >= batch_size:
            problem = self._problem(chunk.X, targets, sample_weight, lam, seed, mean_weight=mean_weight)
            make_steps(problem, xp, state=state).run_steps(steps_per_epoch(n_rows, batch_size))
            return
        problem = self._problem(chunk.X, targets, sample_weight, lam, seed, mean_weight=mean_weight, batch_size=n_rows)
        make_steps(problem, xp, state=state, given_from=state.step + 1).run_steps(1)

    @staticmethod
    def _stream_class_weight(classes, stream_classes, counts):
        """``class_weight='balanced'`` over the whole stream: scikit-learn's
        ``n_samples / (n_classes * np.bincount(y))`` from the counts of the first pass."""
        rows = dict(zip(stream_classes.tolist(), counts.tolist()))
        missing = [label for label in classes.tolist() if not rows.get(label)]
        if missing:
            raise ValueError(
                f"class_weight='balanced' needs rows of every class, but the chunks have none of "
                f"class {missing[0]!r} (classes={classes.tolist()!r})."
            )
        n_rows = sum(rows[label] for label in classes.tolist())
        return {label: n_rows / (len(classes) * rows[label]) for label in classes.tolist()}

    def _prepared_chunk(self, item, number, *, classes, class_weight, dtype, backend, label_runs):
        """One streamed chunk checked and made ready (see ``fit_chunks``): the first one
        sets the number of features and the dtype, later ones follow.  The first epoch's
        chunks count in ``label_runs`` (chunks are prepared in order, one at a time)."""
        epoch, chunk = item
        with errors_named(chunk):
            X, y = check_chunk_X_y(self, *chunk, reset=number == 0)
            if X.dtype != dtype.setdefault("X", X.dtype):  # no copy=False: cupyx sparse lacks it before CuPy 14.2
                X = X.astype(dtype["X"])
            if class_weight is None:  # check_weights(None)'s ones, without its call (a third of a small chunk's cost)
                targets, weights = one_vs_rest_targets(y, classes), np.ones(y.shape[0])
            else:
                targets, weights = self._targets_and_weights(y, None, classes, class_weight=class_weight)
        if epoch == 0:
            label_runs.add(class_positions(y, classes), whole=True)  # steps draw from the chunk in any order
        return prepared_chunk(
            X,
            {"targets": targets.astype(X.dtype), "sample_weight": weights.astype(X.dtype)},
            backend,
            epoch,
            mean_weight=float(weights.mean()),
        )

    def _epoch_chunks(self, source, epoch, seed):
        """The chunks of one streamed epoch: in a random order when the source allows it
        (a stream of its own, apart from the steps' draws)."""
        if source.random_access():
            chunks = (
                source.chunk(int(index))
                for index in shuffled_order(seed ^ _CHUNK_ORDER_STREAM, epoch, len(source.chunks))
            )
        else:
            chunks = source.passes(f"max_iter={self.max_iter}")
        yield from (chunk for chunk in chunks if chunk[0].shape[0] or len(chunk[1]))  # chunks without rows are skipped

    def _train(self, X, y, sample_weight, *, classes, n_epochs, tol):
        first = not hasattr(self, "classes_")
        backend, xp = self._fit_namespace()
        X, y = check_X_y(self, X, y, reset=first)
        if first:
            classes = self._classes_for_fit(y) if classes is None else classes
        else:
            classes = self.classes_
            self._check_same_intercept()
            if X.dtype != self._state.v.dtype:  # no copy=False: cupyx sparse astype lacks it before CuPy 14.2
                X = X.astype(self._state.v.dtype)
        targets, weights = self._targets_and_weights(y, sample_weight, classes)
        self._check_device_memory(X, targets.shape[1], backend)
        if first:  # before the weights over X's columns are allocated
            check_linear_model_width(X.shape[1], targets.shape[1], memory_headroom_bytes())
        lam = _regularization(self.lam, self.C, X.shape[0]) if first else self.lam_
        seed = seed_from_random_state(self.random_state) if first else self._seed
        X = to_backend(X, xp)
        n_classes = targets.shape[1]
        state = (
            self._state.to(xp)
            if not first
            else PegasosState.zeros(n_classes, X.shape[1] + int(self.fit_intercept), X.dtype, xp)
        )
        problem = self._problem(X, xp.asarray(targets, dtype=X.dtype), xp.asarray(weights, dtype=X.dtype), lam, seed)
        state, epochs, objectives = run_pegasos(
            problem,
            state,
            n_epochs=n_epochs,
            tol=tol,
            n_iter_no_change=self.n_iter_no_change,
            xp=xp,
            verbose=self.verbose,
        )
        self._set_model(state, backend, classes, lam, seed, X)
        self.n_iter_, self.objective_curve_ = epochs, objectives
        return X, n_classes * float(np.mean(weights))  # the checked X, the zero weights' objective

    def _problem(self, X, targets, sample_weight, lam, seed, mean_weight=None, batch_size=None):
        """The :class:`PegasosProblem` of X and its one-vs-rest targets and weights, on X's
        backend (with ``batch_size`` in place of the estimator's when given)."""
        return PegasosProblem(
            X=X,
            targets=targets,
            sample_weight=sample_weight,
            lam=lam,
            batch_size=int(self.batch_size if batch_size is None else batch_size),  # True is 1, as scikit-learn has it
            fit_intercept=self.fit_intercept,
            projection=self.projection,
            average_start=None if self.average is False else int(self.average),
            weight_by_step=self.average is True,
            seed=seed,
            mean_weight=mean_weight,
        )

    def _set_model(self, state, backend, classes, lam, seed, X):
        """The fitted attributes from ``state`` (one copy from the device), checked finite on X."""
        weights_matrix = to_numpy(state.weights(averaged=self.average is not False))
        d = weights_matrix.shape[1] - int(self.fit_intercept)
        self.backend_, self.classes_, self._state, self.lam_, self._seed = backend, classes, state, lam, seed
        self.coef_ = np.ascontiguousarray(weights_matrix[:, :d])
        self.intercept_ = weights_matrix[:, d].copy() if self.fit_intercept else np.zeros(weights_matrix.shape[0])
        self.t_ = state.step
        self._check_finite_model(X)

    def _check_same_intercept(self):
        """partial_fit continues the weights it has: it cannot add or drop the bias."""
        has_bias = self._state.v.shape[1] == self.n_features_in_ + 1
        if has_bias != self.fit_intercept:
            raise ValueError(
                f"fit_intercept={self.fit_intercept!r}, but the model was trained with "
                f"fit_intercept={has_bias!r}: partial_fit continues the weights it has and cannot "
                f"{'add' if self.fit_intercept else 'drop'} the intercept. Set fit_intercept={has_bias!r} "
                "again, or call fit to train anew."
            )


class KernelPegasosSVC(KernelModelMixin, GPUClassifierMixin):
    """Kernel SVM trained by kernelized mini-batch Pegasos (integer violation counts).

    Minimizes ``lam/2 ||w||^2 + 1/n sum_i s_i hinge_i`` in the kernel's feature space,
    one-vs-rest; ``lam = 1 / (C n)`` when ``lam`` is None, so ``C`` matches SVC's.
    The model is ``f(x) = sum_j dual_coef_[j] K(support_vectors_[j], x) + intercept_``,
    over the examples drawn at least once while violating the margin.

    Parameters
    ----------
    C : float, default=1.0
    lam : float, default=None
    kernel : {'rbf', 'linear', 'poly'}, default='rbf'
    gamma : {'scale', 'auto'} or float, default='scale'
        As in SVC: ``'scale'`` is ``1 / (n_features * X.var())``.
    degree : int, default=3
    coef0 : float, default=0.0
    batch_size : int, default=8
        Rows per step (``k``); 1 is the classic algorithm. Batch 8 shares a step's
        fixed cost among 8 rows: on a CPU ten epochs of it cost less than five epochs
        of batch 1 (the figures: ``docs/benchmarks.md``, "Figures behind the code"),
        and on a GPU, where a small step costs about one launch, they are a quarter of
        the steps.
    max_iter : int, default=10
        Epochs of ``ceil(n_samples / batch_size)`` steps. Each epoch costs about
        ``(violators) * n_samples`` kernel evaluations. Kernel Pegasos approaches SVC's
        test error slowly: at these defaults within a couple of points of it on the
        benchmarks' sets, closer with more epochs (``bench/sbp_defaults.py``; the
        figures: ``docs/benchmarks.md``).
    average : bool, default=True
        True returns the average of the iterates weighted by step number, as
        PegasosSVC's ``average=True``, at no extra cost. False returns the last iterate
        (the classic algorithm), whose test error swings from epoch to epoch by a point
        or more on small data, and with the seed. On large data the last iterate can end
        below the average (``bench/mnist_kernel.py``; ``docs/benchmarks.md``, "Figures
        behind the code").
    fit_intercept : bool, default=True
        Adds 1 to the kernel: a regularized bias, as the linear PegasosSVC's.
    class_weight : dict, 'balanced' or None, default=None
    kernel_cache : 'auto', float or int, default='auto'
        Device memory for the whole kernel matrix on the cupy backend, as
        SBPClassifier's: a float in [0, 1] is a fraction of the free memory when the fit
        starts ('auto': 0.5), an int is bytes (0: never). When ``n_samples**2 *
        itemsize`` (X's: 4 for float32, 8 for float64) fits, the matrix is computed
        once, in X's dtype, and a step reads its drawn rows; otherwise a step computes
        them from X (``kernel_values_source_`` says which). So 'auto' decides by the
        card: with 80 GB free (budget 40 GB) up to 100,000 float32 or 70,710 float64
        rows, with 141 GB free (70.5 GB) up to 132,759 float32 or 93,874 float64 rows;
        free memory is below the card's size, so near those sizes two cards can decide
        differently. Give an int to decide the same way on every card.
    cache_size : float or 'auto', default='auto'
        Megabytes of kernel rows kept on the host (the numpy backend), as SVC's
        ``cache_size``: the violators drawn at a step are the support vectors, drawn
        again epoch after epoch, so a row kept is computed once. 'auto': a quarter of
        the memory available when the fit starts, at most the whole kernel matrix
        (``n_samples**2 * itemsize`` of X's dtype), as SBPClassifier's. Whatever the
        size, the cache stops growing if the host's available memory falls below 10%
        of its total (parallel fits, each sized when it starts). ``fit`` warns when the
        cache thrashes (rows computed more than three times over).
    random_state : int, RandomState or None, default=None
    backend : {'auto', 'numpy', 'cupy'}, default='auto'
    verbose : 'auto' or int, default='auto'
        As PegasosSVC's: a progress bar over the steps on long fits ('auto'), always
        (1) or never (0).

    Attributes
    ----------
    support_ : ndarray of shape (n_SV,)
        Indices of the training rows with a nonzero count in some class.
    support_vectors_ : ndarray or sparse matrix of shape (n_SV, n_features)
    dual_coef_ : ndarray of shape (n_classes_or_1, n_SV)
        With ``average=True``, ``((T + 1) alpha - stamps) * y / (lam k T (T + 1) / 2)``
        (``stamps``: each increment of ``alpha`` times its step); with ``average=False``,
        ``alpha * y / (lam T k)``.
    intercept_ : ndarray of shape (n_classes_or_1,)
    kernel_values_source_ : {'matrix', 'products'}
        Where the steps read their kernel values: 'matrix', the whole kernel matrix
        resident on the device (``kernel_cache``); 'products', kernel rows computed from
        X as the steps need them (always on the numpy backend, through the host row
        cache of ``cache_size``).
    classes_, n_iter_, t_, lam_, gamma_, backend_, n_features_in_
    """

    _parameter_constraints = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "lam": [Interval(Real, 0, None, closed="neither"), None],
        "kernel": [StrOptions(set(KERNELS))],
        "gamma": [StrOptions({"scale", "auto"}), Interval(Real, 0, None, closed="neither")],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "average": ["boolean"],
        "fit_intercept": ["boolean"],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "kernel_cache": [
            StrOptions({"auto"}),
            Interval(Real, 0, 1, closed="both"),
            Interval(Integral, 0, None, closed="left"),
        ],
        "cache_size": [StrOptions({"auto"}), IntervalNotBool(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "backend": GPUClassifierMixin._backend_constraint,
        "verbose": GPUClassifierMixin._verbose_constraint,
    }

    def __init__(
        self,
        C=1.0,
        lam=None,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        batch_size=8,
        max_iter=10,
        average=True,
        fit_intercept=True,
        class_weight=None,
        kernel_cache="auto",
        cache_size="auto",
        random_state=None,
        backend="auto",
        verbose="auto",
    ):
        self.C = C
        self.lam = lam
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.average = average
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.kernel_cache = kernel_cache
        self.cache_size = cache_size
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    def __setstate__(self, state):
        """Pickles from before ``cache_size`` get its default (their fit computed every row)."""
        super().__setstate__({"cache_size": "auto", **state})

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Train from scratch; arguments as in :meth:`PegasosSVC.fit`."""
        with restore_on_error(self):
            self.__dict__.pop("backend_", None)
            backend, xp = self._fit_namespace()
            with nvtx.annotate("kernel_pegasos.prepare", color="blue"):  # checks, the copy to the backend, gamma
                X, y = check_X_y(self, X, y, reset=True)
                classes = self._classes_for_fit(y)
                targets, weights = self._targets_and_weights(y, sample_weight, classes)
                self._check_device_memory(X, classes.size, backend)
                X_dev = to_backend(X, xp)
                gamma = resolve_gamma(self.gamma, X_dev)
                kernel = KernelSpec(self.kernel, gamma, self.degree, self.coef0)
                # in X's dtype, centred for rbf (float32 distances keep their digits far from the origin)
                X_dev, _ = kernel_training_copy(X_dev, kernel_dtype=X.dtype.name, parameter=None, **kernel.keywords)
                check_kernel_range(X_dev, **kernel.keywords, gamma_setting=self.gamma)
            lam = _regularization(self.lam, self.C, X.shape[0])
            problem = KernelPegasosProblem(
                X=X_dev,
                targets=xp.asarray(targets),
                sample_weight=xp.asarray(weights),
                lam=lam,
                batch_size=int(self.batch_size),  # True is 1, as scikit-learn takes it
                kernel=kernel,
                fit_intercept=self.fit_intercept,
                seed=seed_from_random_state(self.random_state),
            )
            counts, stamps, n_steps, source, row_cache = run_kernel_pegasos(
                problem,
                n_epochs=self.max_iter,
                xp=xp,
                verbose=self.verbose,
                kernel_cache=self.kernel_cache,
                cache_size=self.cache_size,
            )
            with nvtx.annotate("kernel_pegasos.model", color="red"):
                counts, stamps = to_numpy(counts), to_numpy(stamps)
                support = np.flatnonzero((counts != 0).any(axis=0))
                dual_coef = dual_coefficients(
                    counts[:, support],
                    stamps[:, support],
                    targets[support],
                    lam,
                    self.batch_size,
                    n_steps,
                    self.average,
                )
            self.backend_, self.classes_, self.lam_, self.gamma_ = backend, classes, lam, gamma
            self.support_ = support
            self.support_vectors_ = to_numpy(X[support])
            self.dual_coef_ = dual_coef
            self.intercept_ = dual_coef.sum(axis=1) if self.fit_intercept else np.zeros(dual_coef.shape[0])
            self.n_iter_, self.t_ = self.max_iter, n_steps
            self.kernel_values_source_ = source
            self._check_finite_model(X)
        if row_cache is not None and row_cache.thrashed:
            warnings.warn(row_cache.warning("cache_size", self.cache_size, "MB"), UserWarning, stacklevel=3)
        return self
