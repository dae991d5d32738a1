"""``nu='auto'``: SBP's ``nu`` read off an SVC fitted to a subsample of the training rows.

SBP's ``nu`` and SVC's ``C`` pick points on the same regularization path: the unit-norm
predictor ``w* / ||w*||`` of SVC's optimum ``w*`` solves SBP with
``nu = mean_i hinge_i(w*) / ||w*||`` (:func:`nu_of_kernel_model`). An SVC of the whole
data costs what SBP is there to save, so the pilot solves SVC's problem on a stratified
subsample of ``m`` rows (:func:`pilot_size`) with ``C * n / m``: the same per-row weight
of the slack against the norm, so the same regularization ``1 / (n C)`` as SVC with ``C``
on all ``n`` rows. A subsample's optimum fits its rows more closely than the whole
data's (fewer rows, same capacity), so this reads a ``nu`` at or below SVC's: the safe
side to miss on, since on the benchmarks' data a ``nu`` below SVC's gave SBP a test error
at or below SVC's and one above it errors above (``bench/sbp_nu.py``). Each one-vs-one
pair is read off one multiclass SVC (LIBSVM trains its pairs separately), each class of a
one-vs-rest model off its own; the model's ``nu`` is their median, as SBPClassifier
shares one ``nu`` over its problems.

The pilot is bounded (:func:`fit_pilot`): LIBSVM's SMO has no time limit, and on
features whose kernel values are badly conditioned (a degree-3 polynomial of features
near 1e4) it can run for far longer than the SBP fit it serves. It stops after
:func:`pilot_max_iter` iterations, above what ordinary pilots take (the counts measured:
``docs/benchmarks.md``, "Figures behind the code"; a pilot past the cap ends warned of),
and within ``max_seconds`` when it is given: SVC cannot be stopped on a clock, so it is
fitted with a cap that grows fourfold from try to try, each try sized by the last one's
time per iteration to the time left (the first iterations cost the most: they fill the
kernel cache), and stops where the next try would not fit. A pilot that did not converge
is the last try's: LIBSVM's dual iterate is feasible, so its ``nu`` is a model's, whose
margin errors and norm the converged one refines (it can still be far from the converged
``nu``); :class:`Pilot` says so, and the estimator warns.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC

from ..kernel_functions import kernel_block

# the most rows of the pilot SVC's subsample
PILOT_ROWS = 2_000
# data this small is its own subsample: the pilot is SVC on every row, a few milliseconds
PILOT_ALL_ROWS_BELOW = 500
# nu = 0 is hard-margin SBP, which a non-separable data set does not survive; a subsample
# can be separable where the data is not: at least a total slack of one unit (n nu >= 1)
MIN_SLACK = 1.0
# A pilot of fewer training rows reads nu off too few margins to tell the slack the data
# needs (4 rows with validation_fraction=0.5: an SVC of 2 rows, nu = MIN_SLACK / 2)
PILOT_MIN_ROWS = 20
# The pilot SVC's iteration cap: this many per pilot row, at least PILOT_MIN_MAX_ITER (see
# the module docstring: ordinary pilots stay below it)
PILOT_MAX_ITER_PER_ROW = 1_000
PILOT_MIN_MAX_ITER = 1_000_000
# Within a time limit: the first try's cap per pilot row (at least FIRST_TRY_MIN_ITER), and
# the growth of the cap from try to try (the tries before the last cost a third of it)
FIRST_TRY_ITER_PER_ROW = 10
FIRST_TRY_MIN_ITER = 1_000
TRY_GROWTH = 4
# The pilot's share of a fit's time_budget: SBP's steps have what it leaves
PILOT_TIME_SHARE = 0.25


def pilot_size(n_rows):
    """Rows of the pilot's subsample for ``n_rows`` training rows: every row below
    ``PILOT_ALL_ROWS_BELOW``, else a quarter of them (a sixteenth of SVC's kernel
    evaluations on all rows), at least ``PILOT_ALL_ROWS_BELOW``, at most ``PILOT_ROWS``."""
    if n_rows < PILOT_ALL_ROWS_BELOW:
        return n_rows
    return min(PILOT_ROWS, max(PILOT_ALL_ROWS_BELOW, n_rows // 4))


def stratified_subsample(labels, size, seed):
    """Sorted positions of ``size`` rows (about), each class's share by its count and at
    least two rows of every class that has them, drawn with ``seed``: every class is there,
    so the pilot's pairs are the model's (scikit-learn's stratified splits drop a class of
    one row, or refuse it)."""
    if size >= labels.size:
        return np.arange(labels.size)
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        take = min(rows.size, max(2, round(size * rows.size / labels.size)))
        chosen.append(rng.choice(rows, take, replace=False))
    return np.sort(np.concatenate(chosen))


def nu_of_margins(margins, norm2):
    """``nu = mean_i max(0, 1 - m_i) / ||w||`` of a binary model with margins
    ``m_i = y_i f(x_i)`` and ``||w||^2 = norm2`` (the intercept an unregularized bias,
    as SBPClassifier's); None when ``w = 0``."""
    if not norm2 > 0:
        return None
    return float(np.maximum(0.0, 1.0 - margins).mean() / np.sqrt(norm2))


def nu_of_kernel_model(dual_coef, sv_gram, sv_scores, intercept, signs):
    """:func:`nu_of_margins` of ``f(x) = sum_j dual_coef_j K(sv_j, x) + intercept`` from
    ``sv_gram`` (``K(SV, SV)``), ``sv_scores`` (``K(X, SV)`` of the rows the hinge
    averages over) and their ``signs`` ``y_i`` in {-1, +1}."""
    dual_coef = np.asarray(dual_coef, dtype=np.float64)
    return nu_of_margins(signs * (sv_scores @ dual_coef + intercept), float(dual_coef @ sv_gram @ dual_coef))


def pilot_subsample(labels, seed):
    """Positions of the pilot's rows among training rows of class positions ``labels``."""
    return stratified_subsample(labels, pilot_size(labels.size), seed)


def pilot_max_iter(n_pilot_rows):
    """The pilot SVC's iteration cap on ``n_pilot_rows`` rows (see the module docstring)."""
    return max(PILOT_MIN_MAX_ITER, PILOT_MAX_ITER_PER_ROW * n_pilot_rows)


@dataclasses.dataclass(frozen=True)
class Pilot:
    """What the pilot read: ``nu`` and each binary problem's (as :func:`pilot_nu`), the
    pilot's training rows, whether every SVC converged, the iterations of the last tries
    (the most over its problems), the cap (:func:`pilot_max_iter`) and the seconds it
    took. A pilot that did not converge within fewer iterations than the cap ran out of
    time."""

    nu: float
    problem_nus: np.ndarray
    n_rows: int
    converged: bool
    n_iter: int
    max_iter: int
    seconds: float


def pilot_nu(X_pilot, labels_pilot, n_rows, n_classes, *, one_vs_one, C, kernel, gamma, degree, coef0):
    """``nu='auto'``'s ``nu`` for ``n_rows`` training rows, from the pilot's rows
    ``X_pilot`` (host, dense or CSR; :func:`pilot_subsample`) of class positions
    ``labels_pilot`` (0 to ``n_classes - 1``): the median over the model's binary
    problems of the ``nu`` read off the pilot SVC (see the module docstring), at least
    ``MIN_SLACK / n_rows``: :func:`fit_pilot` without a time limit, its ``nu`` values only.

    Returns
    -------
    nu : float
    problem_nus : ndarray
        The ``nu`` of each binary problem (pairs in SVC's order, or classes against the
        rest), NaN where the pilot's model of it was 0.
    """
    pilot = fit_pilot(
        X_pilot,
        labels_pilot,
        n_rows,
        n_classes,
        one_vs_one=one_vs_one,
        C=C,
        kernel=kernel,
        gamma=gamma,
        degree=degree,
        coef0=coef0,
    )
    return pilot.nu, pilot.problem_nus


def fit_pilot(
    X_pilot, labels_pilot, n_rows, n_classes, *, one_vs_one, C, kernel, gamma, degree, coef0, max_seconds=None
):
    """The pilot of :func:`pilot_nu`, its SVCs capped at :func:`pilot_max_iter` iterations
    and, when ``max_seconds`` is not None, stopped within about that many seconds (the
    module docstring says how); an SVC that did not converge gives the ``nu`` of its last
    iterate. Returns a :class:`Pilot`."""
    params = {"kernel": kernel, "gamma": gamma, "degree": degree, "coef0": coef0}
    pilot_C = C * n_rows / labels_pilot.size  # the same regularization 1 / (n C) as on every row
    cap = pilot_max_iter(labels_pilot.size)
    started = time.perf_counter()
    deadline = None if max_seconds is None else started + max_seconds
    if n_classes == 2 or one_vs_one:
        svc, tried = _capped_svc(X_pilot, labels_pilot, pilot_C, params, cap, deadline)
        nus, fits = _one_vs_one_nus(svc, X_pilot, labels_pilot, params), [(svc, tried)]
    else:
        nus, fits = [], []
        for label in range(n_classes):
            signs = np.where(labels_pilot == label, 1.0, -1.0)
            # each class's share of the time, and what the classes before it left
            until = None if deadline is None else started + (deadline - started) * (label + 1) / n_classes
            svc, tried = _capped_svc(X_pilot, signs, pilot_C, params, cap, until)
            nus.append(_binary_nu(svc, X_pilot, signs, params))
            fits.append((svc, tried))
    problem_nus = np.array([np.nan if nu is None else nu for nu in nus])
    known = problem_nus[np.isfinite(problem_nus)]
    nu = float(np.median(known)) if known.size else 0.0
    return Pilot(
        nu=max(nu, MIN_SLACK / n_rows),
        problem_nus=problem_nus,
        n_rows=int(labels_pilot.size),
        converged=all(_converged(svc, tried) for svc, tried in fits),
        n_iter=max(int(np.max(svc.n_iter_)) for svc, _ in fits),
        max_iter=cap,
        seconds=time.perf_counter() - started,
    )


def _capped_svc(X, labels, C, params, cap, deadline):
    """SVC fitted with at most ``cap`` iterations and, when ``deadline`` (a
    ``time.perf_counter()`` reading) is not None, tries of growing caps until it converges
    or the next try would pass the deadline. Returns the last try's SVC and its cap."""
    tries = cap if deadline is None else min(cap, max(FIRST_TRY_MIN_ITER, FIRST_TRY_ITER_PER_ROW * labels.size))
    while True:
        began = time.perf_counter()
        with warnings.catch_warnings():  # LIBSVM's "terminated early": the estimator says it in its own words
            warnings.simplefilter("ignore", ConvergenceWarning)
            svc = SVC(C=C, max_iter=tries, **params).fit(X, labels)
        ended = time.perf_counter()
        if _converged(svc, tries) or tries >= cap or deadline is None:
            return svc, tries
        per_iteration = max(ended - began, 1e-9) / tries
        fits_in_time = int((deadline - ended) / per_iteration)
        following = min(cap, TRY_GROWTH * tries, fits_in_time)
        if following < 2 * tries:  # no time for a try that would go much further
            return svc, tries
        tries = following


def _converged(svc, max_iter):
    """Whether every binary problem of a fitted SVC stopped before ``max_iter``."""
    return bool(np.all(np.asarray(svc.n_iter_) < max_iter))


def _binary_nu(svc, X, signs, params):
    """The ``nu`` of a fitted binary SVC whose classes are ``signs`` -1 and +1."""
    scores = kernel_block(X, svc.support_vectors_, **params)  # the vectors are rows of X
    # scikit-learn's binary SVC keeps the sign of classes_[1] (+1) in dual_coef_
    return nu_of_kernel_model(_dense_dual_coef(svc)[0], scores[svc.support_], scores, svc.intercept_[0], signs)


def _one_vs_one_nus(svc, X, labels, params):
    """The ``nu`` of each pair's problem in a fitted SVC (class positions as labels),
    in SVC's pair order; a pair's first class is its positive one. Every pair's scores
    and norm come from two products, not two a pair: the pairs of many classes (letter's
    325) one by one would add a product's overhead each."""
    classes = svc.classes_
    if classes.size == 2:
        return [_binary_nu(svc, X, np.where(labels == classes[1], 1.0, -1.0), params)]
    scores = kernel_block(X, svc.support_vectors_, **params).astype(np.float64)  # one block serves every pair
    # LIBSVM's layout: support vectors grouped by class; the coefficients of class i's
    # vectors in its pair with class j sit in row j - 1 if j > i, else in row j; the
    # pair's function is positive on its first class, and intercept_ follows pair order
    starts = np.concatenate([[0], np.cumsum(svc.n_support_)])
    dual_coef = _dense_dual_coef(svc)
    pairs = [(i, j) for i in range(classes.size) for j in range(i + 1, classes.size)]
    coef = np.zeros((starts[-1], len(pairs)))  # column p: pair p's coefficients over every vector
    for p, (i, j) in enumerate(pairs):
        coef[starts[i] : starts[i + 1], p] = dual_coef[j - 1, starts[i] : starts[i + 1]]
        coef[starts[j] : starts[j + 1], p] = dual_coef[i, starts[j] : starts[j + 1]]
    first, second = (np.array(side) for side in zip(*pairs, strict=True))
    in_pair = (labels[:, None] == classes[first]) | (labels[:, None] == classes[second])  # (rows, pairs)
    signs = np.where(labels[:, None] == classes[first], 1.0, -1.0)
    margins = signs * (scores @ coef + svc.intercept_)
    hinge = (np.maximum(0.0, 1.0 - margins) * in_pair).sum(axis=0) / in_pair.sum(axis=0)
    norm2 = np.einsum("vp,vp->p", coef, scores[svc.support_] @ coef)
    return [None if not n2 > 0 else float(h / np.sqrt(n2)) for h, n2 in zip(hinge, norm2, strict=True)]


def _dense_dual_coef(svc):
    """SVC's ``dual_coef_`` as an array (a sparse matrix when it was fitted on sparse X)."""
    dual_coef = svc.dual_coef_
    return dual_coef.toarray() if scipy.sparse.issparse(dual_coef) else np.asarray(dual_coef)
