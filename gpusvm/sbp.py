"""SBPClassifier: the kernelized Stochastic Batch Perceptron as a scikit-learn estimator."""

from __future__ import annotations

import dataclasses
import time
import warnings
from numbers import Integral, Real

import numpy as np
import nvtx
from sklearn.base import _fit_context
from sklearn.model_selection import train_test_split
from sklearn.utils._param_validation import Interval, StrOptions

from ._backend import namespace_of, on_device, to_numpy
from ._estimator.auto_nu import PILOT_MIN_ROWS, PILOT_TIME_SHARE, fit_pilot, nu_of_margins, pilot_subsample
from ._estimator.base import GPUClassifierMixin, restore_on_error
from ._estimator.convergence import warn_if_far_from_centre, warn_if_level_not_positive, warn_if_pilot_unsettled
from ._estimator.kernel_model import KernelModelMixin
from ._estimator.one_vs_one import class_pairs, ovr_scores, pair_seed
from ._instrumentation import nvtx_range
from ._random import seed_from_random_state
from ._validation import IntervalNotBool, check_is_fitted, check_X_y, one_vs_rest_targets, to_backend
from .kernel_functions import (
    KERNELS,
    KernelSpec,
    check_kernel_range,
    kernel_training_copy,
    resolve_gamma,
    row_statistics,
)
from .solvers import row_cache
from .solvers.sbp import SBPProblem, StoppingRules, make_steps, positive_level, run_sbp
from .solvers.sbp.pairs import plan_pairs, train_pairs


# validation_fraction='auto': no holdout below this many rows, and at most this many held out
AUTO_HOLDOUT_MIN_ROWS = 50_000
AUTO_HOLDOUT_MAX_ROWS = 10_000
# batch_size='auto': this batch from AUTO_BATCH * AUTO_STEPS_PER_EPOCH training rows up, below
# it the batch of an epoch of about AUTO_STEPS_PER_EPOCH steps (see the parameter's docstring)
AUTO_BATCH = 64
AUTO_STEPS_PER_EPOCH = 64


def _rows_on_backend(X, order, xp):
    """X's rows in ``order`` on the array module ``xp``'s backend, in X's dtype. A dense X is moved first and
    reordered there (NumPy's gather of MNIST's rows is slower than the copy); a CSR X is
    reordered on the host, as :func:`~gpusvm._validation.to_backend` makes it canonical
    for the device."""
    if hasattr(X, "indptr"):
        return to_backend(X[order], xp)
    return to_backend(X, xp)[xp.asarray(order)]


class SBPClassifier(KernelModelMixin, GPUClassifierMixin):
    """Kernel SVM trained by the Stochastic Batch Perceptron (Cotter et al., 2012).

    SBP solves the SVM problem in its slack-constrained form: among predictors of norm
    at most 1 in the kernel's feature space, find the one with the largest margin
    ``gamma`` when the examples may share a total slack of ``n * nu``::

        max_{||w|| <= 1, xi >= 0, sum_i xi_i <= n nu}  min_i  y_i (<w, Phi(x_i)> + b) + xi_i

    Each step pours the slack onto the current responses (the "water level"), draws
    examples from those it covers, and adds their kernel rows to every response: ``n``
    kernel evaluations per drawn example, and no growing support set to gather.  The
    model is the average of the iterates, divided by its level so that the margin is 1
    as in SVC.

    **nu and C.** Both pick a point on the same regularization path. If ``w*`` is the
    optimum of SVC with parameter ``C`` (margin 1), then ``w* / ||w*||`` solves SBP with
    ``nu = mean_i hinge_i(w*) / ||w*||``: the average slack of the unit-norm predictor.
    Larger ``nu`` means more slack, a softer margin: a smaller ``C``. The right ``nu``
    depends on the data (by orders of magnitude across the benchmarks' sets:
    ``docs/user_guide/choosing_a_solver.md``), so by default (``nu='auto'``) it is read
    off a pilot: SVC with ``C`` on a stratified subsample of a quarter of the training
    rows (at least 500, at most 2,000), its ``C`` scaled by rows over subsample rows so
    that it weighs the slack against the norm as ``SVC(C)`` on every row does (module
    ``gpusvm._estimator.auto_nu``). A subsample fits its own rows more closely, so
    the pilot's ``nu`` is at or below that of ``SVC(C)`` on all the rows; on the
    benchmarks' data that side gave test errors at or below SVC's
    (``bench/sbp_nu.py``). The pilot runs on the host whatever the backend (the
    same ``nu`` on both) and its time is part of the fit's: it stops after
    ``auto_nu.pilot_max_iter`` iterations (1,000 a row, at least 10^6, far above what
    ordinary pilots take) and within a quarter of ``time_budget`` when one is set. A pilot
    that stops so before converging (a kernel whose values are badly conditioned, such as
    a polynomial of features near 1e4) gives the ``nu`` of its last iterate, with a
    ``ConvergenceWarning``; one of fewer than 20 training rows, a ``UserWarning``: both
    say to set ``nu`` by hand. To match a given SVC, read ``nu`` off it
    (:func:`nu_from_svc`) and set it: a ``nu`` set by hand is used as it is, and ``C``
    is then unused.

    **A model that does not separate.** With ``nu > 0`` the optimum's water level is at
    least ``nu`` (the zero predictor's), so a model whose level is at or below 0 has not
    gone far enough (SBP is slow on features far from 0: centre and scale them); with
    ``nu = 0`` (no slack) the level also stays there where the classes do not separate.
    ``tol`` never stops such a model, and a fit that ends with one (on ``max_iter``,
    ``time_budget`` or ``max_kernel_evals``) warns (``ConvergenceWarning``), saying what
    to change.

    **Kernel values in float32 where they keep their digits.** By default
    (``kernel_dtype='auto'``) the training copy of X, and so the kernel values (the row
    cache, a device's kernel matrix, cache or products), are float32 unless float32
    would lose the digits that tell the rows apart: the cache then holds twice the rows,
    which are computed and read at half the bytes (timings: ``bench/sbp_kernel.py
    --float32``). For rbf a dense X is centred first (the kernel is invariant to
    translation, so the model is the same), which keeps float32 accurate on rows far
    from the origin; for the linear and poly kernels, and sparse X, a bound on float32's
    relative error (``gpusvm/kernel_functions/_precision.py``) above 1e-4 picks float64.
    A step's sum of its drawn rows is summed in float32 on the host, in float64 on a
    GPU; the responses, the water level, the averages and the coefficients stay float64.
    'float32' and 'float64' force the dtype ('float32' warns where the bound is above
    1e-4); the dtype used is ``kernel_dtype_``. Prediction uses ``support_vectors_``, X's
    own rows.

    Parameters
    ----------
    nu : float or 'auto', default='auto'
        Average slack allowed to a unit-norm predictor, at least 0. 'auto' reads it off
        a pilot SVC with ``C`` (see above), at least ``1 / n_train`` (one unit of slack
        in all: a subsample can be separable where the data is not); the value used is
        ``nu_``. In a multiclass model ``nu`` is the median of its binary problems'.
    C : float, default=1.0
        SVC's ``C`` that ``nu='auto'`` matches (larger: a harder margin); unused when
        ``nu`` is a number.
    kernel : {'rbf', 'linear', 'poly'}, default='rbf'
    gamma : {'scale', 'auto'} or float, default='scale'
        As in SVC; the Gaussian kernel ``exp(-||x - x'||^2 / (2 sigma^2))`` is
        ``gamma = 1 / (2 sigma^2)``.
    degree : int, default=3
    coef0 : float, default=0.0
    fit_intercept : bool, default=True
        An unregularized bias (the paper's section 3.6): the level and the bias are
        found together at every step.
    max_iter : int, default=5
        Maximum number of epochs; an epoch is ``ceil(n_train / batch_size_)`` steps. The
        default is by measurement (``bench/sbp_defaults.py``): on the benchmarks'
        multiclass sets some pair's level keeps growing by more than ``tol`` an epoch, so
        those fits run every epoch, and 5 epochs already end at SVC's test error (the
        figures: ``docs/benchmarks.md``, "Figures behind the code").
    batch_size : int or 'auto', default='auto'
        Examples drawn per step. 1 is the paper's algorithm. With ``B > 1`` the step
        goes along the mean of the ``B`` drawn examples' feature vectors, with the same
        step size ``eta_0 / sqrt(t)``: the ``B`` kernel rows are one matrix product, a
        step costs ``B n`` kernel evaluations, and an epoch has ``B`` times fewer steps.
        'auto' (``batch_size_``) is 64 from 4,096 training rows up, else
        ``ceil(n_train / 64)``: an epoch of about 64 steps. 64 is by measurement
        (``bench/sbp_kernel.py``): a step's fixed cost (the water level, a few passes
        over the responses) is shared by 64 examples, and on the benchmark's data batch
        64 reached SVC's test error in less time than batch 1 almost everywhere. Below
        that, SBP's accuracy follows its steps rather than its epochs, and five epochs
        of batch 64 are too few steps (``bench/sbp_small.py``; the figures:
        ``docs/benchmarks.md``, "Figures behind the code").
    average : bool, default=True
        Return the average of the iterates (the paper's predictor); False returns the
        last iterate, divided by its own level.
    validation_fraction : float or 'auto', default='auto'
        Share of the training rows held out (stratified) to measure the error at each
        checkpoint (ten per epoch). 0 trains on every row and stops on ``tol``,
        ``max_iter``, ``time_budget`` or ``max_kernel_evals``. When the holdout would have
        fewer rows than there are classes, or a class has a single row, no holdout is used.
        'auto' holds out nothing below ``AUTO_HOLDOUT_MIN_ROWS`` (50,000) rows (in a
        one-vs-one model: in its largest pair), else a tenth of the rows, at most
        ``AUTO_HOLDOUT_MAX_ROWS`` (10,000). The threshold is by measurement
        (``bench/sbp_defaults.py``): below it the holdout is too small to stop on (an
        error measured on a few thousand rows, or on a pair's tenth, is too coarse), and
        training on every row with ``tol`` ends closer to SVC's test error; above it a
        holdout stops sooner at the same error (the figures: ``docs/benchmarks.md``,
        "Figures behind the code").
    n_iter_no_change : int, default=10
        The checkpoints (10 = one epoch) the stopping rules look back over: with a
        holdout, stop when its error has not improved on its best for this many
        checkpoints in a row; without one, see ``tol``. The pairs of a one-vs-one model
        checkpoint together, at multiples of a common cadence of at least 8 steps (a
        pair at most ten times an epoch, about five to ten when its epoch is over 70
        steps, fewer when shorter): a pair's rules then look back over the span of steps
        of ``n_iter_no_change`` of its own ten-an-epoch checkpoints, rounded up to whole
        checkpoints.
    tol : float or None, default=1e-2
        Without a holdout, stop when the objective (the averaged model's level, which
        grows as SBP converges) has gained less than ``tol`` of its size over the last
        ``n_iter_no_change`` checkpoints (as SGDClassifier's ``tol`` without early
        stopping, here relative). Its size counts as at least 0.03 times the largest
        response of a unit-norm model (1 for the rbf kernel): a level near zero, of
        classes that barely separate at this ``nu``, would otherwise never gain little
        enough relative to itself and run every epoch. It waits while a model's level
        is at or below 0 (not yet a separator: see above). None runs ``max_iter`` epochs.
        Unused with a holdout. In a one-vs-one model each pair stops on its own objective.
        The default is by measurement on KEEL magic: a larger ``tol`` stops further above
        SVC's test error, a smaller one takes longer than SVC (the figures:
        ``docs/benchmarks.md``, "Figures behind the code").
    time_budget : float, default=None
        Stop after this many seconds (checked after every step; on cupy, after every
        block of up to 128 steps, which are issued together): anytime training. In a
        one-vs-one model, the pairs (on the host, the stacks of pairs stepping together)
        share the time left in turn, by rows. The pilot of ``nu='auto'`` takes at most
        a quarter of it, and SBP's steps what the pilot leaves.
    max_kernel_evals : int, default=None
        Stop before the step that would pass this many kernel evaluations, counted as
        the algorithm asks for them: ``problems * batch_size_ * n`` per step, with ``n``
        the training plus holdout rows and no credit for the row cache (``problems`` is
        1 for two classes). At least one step is taken. A one-vs-one model gives each
        pair its share by rows.
    multi_class : {'ovo', 'ovr'}, default='ovo'
        How more than two classes are trained. 'ovo' (as SVC): one binary problem per
        pair of classes, on those two classes' rows, each with its own holdout share,
        budget share and random stream; ``predict`` counts the votes. 'ovr': one problem
        per class against the rest, all stepping together over every row. The default is
        by measurement (``bench/sbp_one_vs_one.py``): a pair's kernel rows run over two
        classes' rows instead of all, so one-vs-one reaches SVC's test error several times
        sooner on the benchmarks' multiclass sets (the figures: ``docs/benchmarks.md``,
        "Figures behind the code").
        All pairs step together (each as its own binary problem): on the numpy backend
        in stacks of similar widths, on cupy in each launch when ``kernel_cache`` holds
        the fit's kernel matrix or a cache of twice a step's rows (else one pair after
        another). ``nu`` is shared by every problem (as NuSVC's).
    decision_function_shape : {'ovr', 'ovo'}, default='ovr'
        As SVC's, for a one-vs-one model of more than two classes: 'ovr' gives
        ``(n_samples, n_classes)`` scores (votes plus squashed summed confidences, which
        break ties), 'ovo' the pairs' own scores, ``(n_samples, n_pairs)``. A one-vs-rest
        model only has the 'ovr' shape.
    cache_size : float or 'auto', default='auto'
        Megabytes of kernel rows kept on the host (the numpy backend), as SVC's
        ``cache_size``. SBP draws from the few examples below the level, so most rows
        are reused; when all rows fit this is the full kernel matrix, filled lazily.
        'auto': a quarter of the memory available when the fit starts (psutil's reading,
        else Linux's ``MemAvailable``, else ``os.sysconf``'s free pages, else 1024 MB,
        and at most what the process's ``ulimit -v`` and cgroup memory limit leave it),
        at most the whole kernel matrix (``n_train * n_rows * itemsize`` of
        ``kernel_dtype``): a cache that holds every row computes each row once, and
        three quarters stay for X, the steps and the rest of the machine. Whatever the
        size, the cache stops growing if the host's available memory falls below 10% of
        its total (parallel fits, each sized when it starts). A one-vs-one model on the
        host keeps its pairs' rows in one cache, of at least two batches of rows per
        pair (with 'auto', at most every row's block over every class). When rows were
        computed more than three times over on average because more were needed than
        the cache holds, ``fit`` warns (``UserWarning``), saying what to set;
        ``history_`` has the counts.
    kernel_cache : 'auto', float or int, default='auto'
        Device memory for the whole kernel matrix on the cupy backend: a float in
        [0, 1] is a fraction of the device's free memory when the fit starts ('auto':
        0.5; free memory counts what CuPy's pool holds unused), an int is bytes (0:
        never). The rule, with ``B`` that budget in bytes and ``itemsize`` that of
        ``kernel_dtype`` (4 for float32, 8 for float64):

        * ``n_train * n_rows * itemsize <= B`` (``n_train`` training rows by all
          ``n_rows`` rows, holdout included; about ``n**2 * itemsize``): the matrix is
          computed once at the start (blocks of rows by matrix products, in
          ``kernel_dtype``, accumulated in float64) and a step
          reads only its drawn rows;
        * else, when ``B >= 2 * problems * batch_size_ * n_rows * itemsize`` (twice a
          step's drawn rows): a cache of kernel rows there, with ``cache_size``'s
          semantics (one host synchronisation a step);
        * else every step computes its drawn rows' kernel values from X.

        So 'auto' decides by the card: with 80 GB free (budget 40 GB) the matrix fits
        up to 100,000 float32 rows (100,000**2 * 4 bytes = 40 GB) or 70,710 float64
        rows; with 141 GB free (budget 70.5 GB), up to 132,759 float32 or 93,874
        float64 rows. A card has less free than its size (the CUDA context, X and the
        state come first), so near those sizes one card keeps the matrix and another
        computes rows, and their times differ for that reason, not speed alone: give
        an int to decide the same way on every card, and read where the kernel values
        came from in ``history_``'s ``kernel_values_source``. 60,000 float32 rows
        (MNIST) take 14.4 GB. A one-vs-one model's pairs read the matrix of the fit's
        training rows by all its rows (the same rule, with the cache holding twice the
        rows all pairs draw in a step); with neither they train one after another, each
        with its own.
    kernel_dtype : {'auto', 'float32', 'float64'}, default='auto'
        The dtype of the kernel values (the training copy of X is cast to it); see
        **Kernel values in float32 where they keep their digits** above.
    random_state : int, RandomState or None, default=None
        Seeds the shared random stream: the same int draws the same examples on the
        numpy and cupy backends.
    backend : {'auto', 'numpy', 'cupy'}, default='auto'
    verbose : 'auto' or int, default='auto'
        A progress bar (with the holdout error when rows are held out) on long
        fits ('auto': once a fit has taken 5 seconds, erased when it ends), always
        (1) or never (0).

    Attributes
    ----------
    Below, ``n_models`` is 1 for two classes, ``n_classes`` for a one-vs-rest model and
    ``n_classes * (n_classes - 1) / 2`` for a one-vs-one model (one row per pair, in
    SVC's order ``(0, 1), (0, 2), ...``; a positive score votes for the pair's first
    class, as LIBSVM's).

    support_ : ndarray of shape (n_SV,)
        Indices (into the X given to ``fit``) of rows with a nonzero coefficient.
    support_vectors_ : ndarray or sparse matrix of shape (n_SV, n_features)
    dual_coef_ : ndarray of shape (n_models, n_SV)
        ``alpha_bar_j y_j / level``; a pair's row is 0 at the other classes' vectors.
    intercept_ : ndarray of shape (n_models,)
        ``b / level``.
    n_support_ : ndarray of shape (n_classes,)
        Support vectors of each class.
    water_level_ : ndarray of shape (n_models,)
        The level (margin of the unit-norm predictor) of the returned model; at or below
        0, the model does not separate its training rows, and ``fit`` warned.
    history_ : list of dict
        One record per checkpoint: ``steps``, ``kernel_evals``, ``kernel_rows_computed``
        (rows actually computed, after the cache), ``kernel_values_source`` (where the
        steps read their kernel values: 'matrix', the whole kernel matrix resident on the
        device; 'cache', a cache of kernel rows, on the device in ``kernel_cache`` or on
        the numpy backend in ``cache_size``; 'products', the drawn rows computed from X
        at every step: see ``kernel_cache``), ``seconds``, ``objective`` (the
        level of the averaged model, the mean over classes) and ``holdout_error``. In a
        one-vs-one model the pairs' records follow one another, each with its ``pair``
        of class positions; its steps, kernel evaluations, objective and holdout error
        are the pair's own, and its seconds count from the start of the fit (on the
        numpy backend the pairs step together, so their records interleave in time, and
        ``kernel_rows_computed`` counts the kernel rows over one class's rows that all
        the pairs stepping together have computed, since a row's part over its own
        class serves every pair of that class; on cupy, when the pairs step together,
        the rows of the fit's kernel matrix, or of its cache, that all pairs have
        computed). ``kernel_rows_distinct`` counts the distinct rows (or class blocks)
        among those computed: ``kernel_rows_computed`` over it is how many times over the
        cache recomputed a row.
    nu_ : float
        The ``nu`` of the fit: ``nu``, or the pilot's for ``nu='auto'``.
    batch_size_ : int
        The batch of the fit: ``batch_size``, or what 'auto' gives.
    classes_, gamma_, backend_, n_features_in_
    t_ : int
        Steps taken (over all pairs of a one-vs-one model).
    n_iter_ : float
        Epochs run, fractional (the most any pair ran, in a one-vs-one model).
    """

    _parameter_constraints = {
        "nu": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        "C": [Interval(Real, 0, None, closed="neither")],
        "kernel": [StrOptions(set(KERNELS))],
        "gamma": [StrOptions({"scale", "auto"}), Interval(Real, 0, None, closed="neither")],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "average": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="left"), StrOptions({"auto"})],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "time_budget": [Interval(Real, 0, None, closed="neither"), None],
        "max_kernel_evals": [Interval(Integral, 1, None, closed="left"), None],
        "multi_class": [StrOptions({"ovo", "ovr"})],
        "decision_function_shape": [StrOptions({"ovo", "ovr"})],
        "cache_size": [StrOptions({"auto"}), IntervalNotBool(Real, 0, None, closed="neither")],
        "kernel_cache": [
            StrOptions({"auto"}),
            Interval(Real, 0, 1, closed="both"),
            Interval(Integral, 0, None, closed="left"),
        ],
        "kernel_dtype": [StrOptions({"auto", "float32", "float64"})],
        "random_state": ["random_state"],
        "backend": GPUClassifierMixin._backend_constraint,
        "verbose": GPUClassifierMixin._verbose_constraint,
    }

    def __init__(
        self,
        nu="auto",
        C=1.0,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        fit_intercept=True,
        max_iter=5,
        batch_size="auto",
        average=True,
        validation_fraction="auto",
        n_iter_no_change=10,
        tol=1e-2,
        time_budget=None,
        max_kernel_evals=None,
        multi_class="ovo",
        decision_function_shape="ovr",
        cache_size="auto",
        kernel_cache="auto",
        kernel_dtype="auto",
        random_state=None,
        backend="auto",
        verbose="auto",
    ):
        self.nu = nu
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.average = average
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.time_budget = time_budget
        self.max_kernel_evals = max_kernel_evals
        self.multi_class = multi_class
        self.decision_function_shape = decision_function_shape
        self.cache_size = cache_size
        self.kernel_cache = kernel_cache
        self.kernel_dtype = kernel_dtype
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train on X, y.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), NumPy or CuPy
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        with restore_on_error(self):
            self.__dict__.pop("backend_", None)
            backend, xp = self._fit_namespace()
            with nvtx.annotate("sbp.prepare", color="blue"):  # checks, the copy to the backend, gamma, nu
                X, y = check_X_y(self, X, y, reset=True)
                classes = self._classes_for_fit(y)
                seed = seed_from_random_state(self.random_state)
                train, holdout = self._split(y, classes, seed)
                order = np.concatenate([train, holdout])
                self.batch_size_ = resolve_batch_size(self.batch_size, train.size)
                self._check_device_memory(X, classes.size, backend, self.batch_size_)
                X_rows = _rows_on_backend(X, order, xp)
                gamma = resolve_gamma(self.gamma, X_rows[: train.size])  # the training rows come first
                if self.kernel != "rbf":  # past fit and its _fit_context
                    warn_if_far_from_centre(self, row_statistics(X_rows[: train.size]), stacklevel=3)
                X_dev, kernel_dtype = kernel_training_copy(  # X_rows is the fit's own copy (reordered)
                    X_rows, kernel_dtype=self.kernel_dtype, overwrite_x=True, **self._kernel(gamma).keywords
                )
                del X_rows  # a device's memory holds one copy of X's rows
                self.kernel_dtype_ = kernel_dtype.name
                check_kernel_range(
                    X_dev,
                    **self._kernel(gamma).keywords,
                    gamma_setting=self.gamma,
                    dtype_parameter="kernel_dtype",
                )
                labels = np.searchsorted(classes, y[order])  # class positions, in X_dev's row order
                pilot_started = time.perf_counter()
                self.nu_ = self._resolve_nu(X_dev, labels[: train.size], classes, gamma, seed, xp)
                rules = self._rules_after_pilot(self._stopping_rules(), time.perf_counter() - pilot_started)
            if self._trains_one_vs_one(classes):
                results = self._fit_pairs(
                    X, X_dev, order, labels, classes, train.size, gamma=gamma, seed=seed, rules=rules, xp=xp
                )
            else:
                targets = one_vs_rest_targets(y[train], classes)
                result = self._solve(X_dev, train.size, targets, labels[train.size :], gamma, seed, rules, xp)
                self._set_model(result, X, y, train, targets, classes)
                results = [result]
                self.t_ = result.n_steps
                self.n_iter_ = result.n_steps / max(1, -(-train.size // self.batch_size_))
            self.backend_, self.classes_, self.gamma_ = backend, classes, gamma
            self._check_finite_model(X)
        self._warn_if_cache_thrashed(results, xp)
        return self

    def __setstate__(self, state):
        """Pickles from before ``kernel_dtype`` get the one their fit used (X's dtype),
        and fitted ones from before ``kernel_dtype_`` that of their ``kernel_dtype``; from
        before ``C``, SVC's 1.0 (their ``nu`` is a number, so ``C`` is unused)."""
        if "kernel_dtype" not in state:
            state = {**state, "kernel_dtype": kernel_dtype_before_the_parameter(state)}
        if "support_vectors_" in state and "kernel_dtype_" not in state:  # fitted before 'auto': as it was set
            state = {**state, "kernel_dtype_": state["kernel_dtype"]}
        state = {"C": 1.0, **state}
        super().__setstate__(state)

    def _trains_one_vs_one(self, classes):
        return self.multi_class == "ovo" and classes.size > 2

    def _resolve_nu(self, X_dev, train_labels, classes, gamma, seed, xp):
        """``nu`` as set, or for ``nu='auto'`` read off a pilot SVC with this ``C`` on a
        subsample of the training rows (the first rows of ``X_dev``, of class positions
        ``train_labels``; :mod:`._estimator.auto_nu`)."""
        if self.nu != "auto":
            return float(self.nu)
        rows = pilot_subsample(train_labels, seed)
        X_pilot = to_numpy(X_dev[xp.asarray(rows)])
        # its warnings point past fit and its _fit_context
        return self._pilot_nu(X_pilot, train_labels[rows], train_labels.size, classes, gamma, stacklevel=5)

    def _pilot_nu(self, X_pilot, pilot_labels, n_train, classes, gamma, stacklevel=2):
        """``nu='auto'``'s ``nu`` from the pilot's rows (on the host), within
        ``PILOT_TIME_SHARE`` of ``time_budget``; its warnings (a pilot that did not
        converge, or of too few rows) point at the frame ``stacklevel`` up, this method
        being 1 (as for ``warnings.warn``)."""
        time_limit = None if self.time_budget is None else PILOT_TIME_SHARE * self.time_budget
        pilot = fit_pilot(
            X_pilot,
            pilot_labels,
            n_train,
            classes.size,
            one_vs_one=self._trains_one_vs_one(classes),
            C=self.C,
            max_seconds=time_limit,
            **self._kernel(gamma).keywords,
        )
        warn_if_pilot_unsettled(self, pilot, PILOT_MIN_ROWS, time_limit, stacklevel=stacklevel)
        return pilot.nu

    @staticmethod
    def _rules_after_pilot(rules, spent):
        """``rules`` with the ``spent`` seconds of ``nu='auto'``'s pilot taken out of
        ``time_budget``: the pilot's time is the fit's."""
        if rules.time_budget is None or not spent:
            return rules
        return dataclasses.replace(rules, time_budget=max(1e-9, rules.time_budget - spent))

    def _kernel(self, gamma):
        """The kernel, ``gamma`` resolved."""
        return KernelSpec(self.kernel, gamma, self.degree, self.coef0)

    def _problem_settings(self, gamma):
        """What every SBP problem of the fit shares: ``nu_``, the batch, the kernel, the bias."""
        return {
            "nu": self.nu_,
            "batch_size": self.batch_size_,
            "fit_intercept": self.fit_intercept,
            "kernel": self._kernel(gamma),
        }

    def _solve(self, X_dev, n_train, targets, holdout_labels, gamma, seed, rules, xp):
        """One SBP run on ``X_dev`` (its first ``n_train`` rows train, the rest are held out)."""
        problem = SBPProblem(
            X=X_dev,
            n_train=n_train,
            targets=xp.asarray(targets),
            holdout_labels=holdout_labels,
            seed=seed,
            **self._problem_settings(gamma),
        )
        return run_sbp(
            problem,
            self._steps(problem, xp),
            rules,
            average=self.average,
            verbose=self.verbose,
        )

    def _fit_pairs(self, X, X_dev, order, labels, classes, n_train, *, gamma, seed, rules, xp):
        """One binary SBP per pair of classes on those classes' rows (:mod:`._estimator.one_vs_one`),
        trained as :func:`.solvers.sbp.pairs.plan_pairs` plans. Returns the pairs' results
        (``SBPResult``)."""
        pairs = class_pairs(classes.size)
        plan = plan_pairs(
            labels, n_train, pairs, self.batch_size_, rules, xp, kernel_cache=self.kernel_cache, dtype=X_dev.dtype
        )
        results, history = train_pairs(
            plan,
            X_dev,
            self._problem_settings(gamma),
            [pair_seed(seed, p) for p in range(len(pairs))],
            rules,
            xp,
            kernel_cache=self.kernel_cache,
            cache_size=self.cache_size,
            average=self.average,
            verbose=self.verbose,
        )
        self._set_pair_model(plan, results, X, order, labels, classes, history)
        return results

    @nvtx_range("sbp.model", "red")
    def _set_pair_model(self, plan, results, X, order, labels, classes, history):
        """Support vectors (the union of the pairs') and one coefficient row per pair."""
        columns = [np.flatnonzero((result.alpha != 0).any(axis=0)) for result in results]
        used_rows = [plan.training_rows(p)[used] for p, used in enumerate(columns)]
        support = np.unique(np.concatenate(used_rows))
        divisors = np.array([positive_level(result.level)[0] for result in results])
        dual_coef = np.zeros((len(results), support.size))
        for number, (result, used, rows) in enumerate(zip(results, columns, used_rows, strict=True)):
            signs = np.where(labels[rows] == plan.pairs[number][0], 1.0, -1.0)
            dual_coef[number, np.searchsorted(support, rows)] = result.alpha[0, used] * signs / divisors[number]
        self.support_ = order[support]
        self.support_vectors_ = to_numpy(X[self.support_])
        self.dual_coef_ = dual_coef
        self.intercept_ = np.array([result.bias[0] for result in results]) / divisors
        self.water_level_ = np.array([result.level[0] for result in results])
        self.history_ = history
        self.n_support_ = np.bincount(labels[support], minlength=classes.size)
        self.t_ = sum(result.n_steps for result in results)
        epochs = [
            result.n_steps / max(1, -(-n_train // self.batch_size_))
            for n_train, result in zip(plan.n_train, results, strict=True)
        ]
        self.n_iter_ = max(epochs)
        names = classes.tolist()  # Python's values: 1, not np.int64(1)
        named = [f"the pair of classes {names[a]!r} and {names[b]!r}" for a, b in plan.pairs]
        # past nvtx_range, _fit_pairs, fit and its _fit_context
        warn_if_level_not_positive(self, self.water_level_, epochs, named, X=X, stacklevel=6)

    def decision_function(self, X):
        """Scores of the rows of X: for two classes and one-vs-rest models,
        ``sum_j dual_coef_[:, j] K(support_vectors_[j], x) + intercept_``; for a one-vs-one model, as SVC's with
        this ``decision_function_shape``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), NumPy or CuPy

        Returns
        -------
        ndarray of shape (n_samples,), (n_samples, n_classes) or (n_samples, n_pairs)
        """
        scores = super().decision_function(X)
        if (
            self.dual_coef_.shape[0] == 1
            or not self._trains_one_vs_one(self.classes_)
            or self.decision_function_shape == "ovo"
        ):
            return scores
        votes = ovr_scores(to_numpy(scores), self.classes_.size)
        return namespace_of(scores).asarray(votes)

    def _split(self, y, classes, seed):
        """Indices of the training rows and of the stratified holdout rows."""
        everything = np.arange(y.shape[0])
        largest_problem = y.shape[0]
        if self._trains_one_vs_one(classes):  # a pair's problem: its two largest classes' rows
            largest_problem = int(np.sort(np.unique(y, return_counts=True)[1])[-2:].sum())
        n_holdout = self._holdout_size(y.shape[0], largest_problem)
        smallest_class = np.unique(y, return_counts=True)[1].min()
        # a stratified split needs every class in both parts
        if n_holdout < classes.size or y.shape[0] - n_holdout < classes.size or smallest_class < 2:
            return everything, everything[:0]
        train, holdout = train_test_split(everything, test_size=n_holdout, stratify=y, random_state=seed % 2**32)
        return np.sort(train), np.sort(holdout)

    def _stopping_rules(self):
        return StoppingRules(
            max_epochs=self.max_iter,
            time_budget=self.time_budget,
            max_kernel_evals=self.max_kernel_evals,
            n_iter_no_change=self.n_iter_no_change,
            tol=self.tol,
        )

    def _holdout_size(self, n_rows, largest_problem=None):
        """Rows to hold out under ``validation_fraction`` ('auto': see the class docstring;
        none when the largest problem, of ``largest_problem`` rows, is small)."""
        if self.validation_fraction != "auto":
            return int(self.validation_fraction * n_rows)
        if (n_rows if largest_problem is None else largest_problem) < AUTO_HOLDOUT_MIN_ROWS:
            return 0
        return min(AUTO_HOLDOUT_MAX_ROWS, n_rows // 10)

    def _steps(self, problem, xp):
        cache_bytes = self._cache_bytes(problem.n_train, problem.X.shape[0], problem.X.dtype)
        return make_steps(problem, xp, kernel_cache=self.kernel_cache, cache_bytes=cache_bytes)

    def _cache_bytes(self, n_rows, n_columns, dtype):
        """The host row cache's bytes under ``cache_size``, for a cache of at most
        ``n_rows`` rows of ``n_columns`` values in ``dtype`` (:func:`row_cache.cache_bytes`)."""
        return row_cache.cache_bytes(self.cache_size, n_rows * n_columns * np.dtype(dtype).itemsize)

    def _warn_if_cache_thrashed(self, results, xp):
        """One ``UserWarning`` a fit when a kernel row cache of ``results`` thrashed
        (``RowCacheUse.thrashed``): about the worst one, and what to set. Called by
        ``fit``, so that the warning points at the caller of ``fit``."""
        thrashed = [result.row_cache for result in results if result.row_cache and result.row_cache.thrashed]
        if thrashed:
            worst = max(thrashed, key=lambda use: use.rows_computed / use.rows_distinct)
            if on_device(xp):
                message = worst.warning("kernel_cache", self.kernel_cache, "bytes")
            else:
                message = worst.warning("cache_size", self.cache_size, "MB")
            warnings.warn(message, UserWarning, stacklevel=4)  # past fit and its _fit_context

    @nvtx_range("sbp.model", "red")
    def _set_model(self, result, X, y, train, targets, classes):
        """Support vectors and coefficients of the averaged model, scaled to margin 1."""
        divisor = positive_level(result.level)
        support = np.flatnonzero((result.alpha != 0).any(axis=0))
        self.support_ = train[support]
        self.support_vectors_ = to_numpy(X[self.support_])
        self.dual_coef_ = result.alpha[:, support] * targets[support].T / divisor[:, None]
        self.intercept_ = result.bias / divisor
        self.water_level_ = result.level
        self.history_ = result.history
        self.n_support_ = np.bincount(np.searchsorted(classes, y[self.support_]), minlength=classes.size)
        epochs = result.n_steps / max(1, -(-train.size // self.batch_size_))
        named = ["the model"] if classes.size == 2 else [f"class {c!r} against the rest" for c in classes.tolist()]
        # past nvtx_range, fit and its _fit_context
        warn_if_level_not_positive(self, result.level, [epochs] * len(named), named, X=X, stacklevel=5)


def kernel_dtype_before_the_parameter(attributes):
    """The ``kernel_dtype`` of a model saved before the parameter existed, from its fitted
    ``attributes``: its kernel values were in X's dtype, which ``support_vectors_`` keeps
    ('auto' for an unfitted model: the default)."""
    support_vectors = attributes.get("support_vectors_")
    if support_vectors is None:
        return "auto"
    return "float32" if support_vectors.dtype == np.float32 else "float64"


def resolve_batch_size(batch_size, n_train):
    """The batch of a fit on ``n_train`` training rows: ``batch_size``, or for 'auto'
    ``AUTO_BATCH`` from ``AUTO_BATCH * AUTO_STEPS_PER_EPOCH`` rows up, else
    ``ceil(n_train / AUTO_STEPS_PER_EPOCH)``: an epoch of about that many steps."""
    if batch_size != "auto":
        return int(batch_size)
    return int(min(AUTO_BATCH, max(1, -(-n_train // AUTO_STEPS_PER_EPOCH))))


def nu_from_svc(svc, X, y):
    """The ``nu`` at which SBP solves the same problem as a fitted binary SVC.

    ``nu = mean_i max(0, 1 - y_i f(x_i)) / ||w||`` with ``f`` the SVC's decision
    function and ``||w||^2 = dual_coef K(SV, SV) dual_coef^T`` (the paper's recipe). The
    intercept counts as an unregularized bias, as SBPClassifier's.

    Parameters
    ----------
    svc : fitted binary kernel model
        scikit-learn's :class:`~sklearn.svm.SVC`, gpusvm's :class:`~gpusvm.svm.KernelPegasosSVC`
        or :class:`SBPClassifier`, or any model with ``dual_coef_``,
        ``support_vectors_``, ``classes_``, ``decision_function``, a ``kernel`` of
        'linear', 'rbf' or 'poly' and its ``gamma_`` (or SVC's ``_gamma``).
    X, y : the data it was fitted on (or a sample of it); y with the model's two classes.

    Returns
    -------
    float
    """
    from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

    from .kernel_functions import kernel_block

    check_is_fitted(svc)
    X = check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32))
    y = column_or_1d(y)
    check_consistent_length(X, y)
    classes = np.asarray(svc.classes_)
    if classes.size != 2:
        raise ValueError(f"nu_from_svc needs a model of two classes, got one of {classes.size}.")
    unknown = np.setdiff1d(np.unique(y), classes)
    if unknown.size:
        raise ValueError(
            f"y contains labels {unknown.tolist()!r} that are not the model's classes {classes.tolist()!r}."
        )
    if svc.kernel not in KERNELS:
        raise ValueError(f"nu_from_svc needs a {', '.join(map(repr, KERNELS))} kernel; the model's is {svc.kernel!r}.")
    gamma = svc.gamma_ if hasattr(svc, "gamma_") else svc._gamma  # gpusvm's models, else SVC's private name
    signs = np.where(y == classes[1], 1.0, -1.0)
    margins = signs * to_numpy(svc.decision_function(X))
    gram = kernel_block(
        svc.support_vectors_, svc.support_vectors_, kernel=svc.kernel, gamma=gamma, degree=svc.degree, coef0=svc.coef0
    )
    nu = nu_of_margins(margins, float((svc.dual_coef_ @ gram @ svc.dual_coef_.T).item()))
    if nu is None:
        raise ValueError("nu_from_svc needs a model with a nonzero weight vector; this one's dual_coef_ gives w = 0.")
    return nu
