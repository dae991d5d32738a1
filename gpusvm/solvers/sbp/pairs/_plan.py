"""How a fit's one-vs-one pairs train: which step together, in what order, on which steps,
with what share of the budgets (:func:`plan_pairs`, the one place of one-vs-one SBP where
the backend is chosen), and the run of such a plan (:func:`train_pairs`)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ...._backend import on_device
from ...._instrumentation import nvtx_range
from .. import SBPProblem, make_steps, run_sbp
from ...row_cache import cache_bytes
from ._compiled import use_compiled_steps
from ._numpy import NumpyPairSteps
from ._problem import PairStack, pair_checkpoint_steps
from ._run import run_pair_stack

# The work of a step of pairs stepping together on the host that does not grow with them,
# in pair columns (about a millisecond of NumPy calls a step); the stacking rule and the
# choice of compiled steps weigh padding and steps against it (docs/benchmarks.md,
# "One-vs-one stacks").
STACK_STEP_COLUMNS = 40_000


@dataclasses.dataclass(frozen=True)
class PairPlan:
    """The one-vs-one pairs of a fit and how they train.

    Pair ``p`` trains on the rows of classes ``pairs[p]``: its first class's training rows,
    then its second's, then their holdout rows in the same order. ``groups`` train one
    after another, in order; a group's pairs step together as one stack when
    ``together``, else each alone. Every pair checkpoints at ``checkpoint_every[p]`` steps
    (multiples of one cadence, :func:`pair_checkpoint_steps`) and has ``kernel_evals[p]``,
    its share by rows of ``max_kernel_evals`` (None: no such budget), fixed at the start.
    """

    pairs: list  # (a, b) class positions of each pair, in the model's order
    class_rows: tuple  # per class: its rows of X, training rows first
    class_train: np.ndarray  # (n_classes,) training rows of each class
    groups: list  # lists of pair numbers, trained in this order
    together: bool  # a group's pairs step together (one stack), else one after another
    compiled: bool  # the host's stacks step on the compiled steps
    checkpoint_every: np.ndarray  # (n_pairs,) steps between each pair's checkpoints
    kernel_evals: list | None  # each pair's budget of kernel evaluations

    @property
    def sizes(self):
        """(n_pairs,) each pair's rows, training and holdout."""
        return np.array([self.class_rows[a].size + self.class_rows[b].size for a, b in self.pairs])

    @property
    def n_train(self):
        """(n_pairs,) each pair's training rows."""
        return np.array([self.class_train[a] + self.class_train[b] for a, b in self.pairs])

    def training_rows(self, pair):
        """Pair ``pair``'s training rows of X, its first class's, then its second's."""
        a, b = self.pairs[pair]
        return np.concatenate([self.class_rows[a][: self.class_train[a]], self.class_rows[b][: self.class_train[b]]])


def class_layout(labels, n_train, n_classes):
    """Each class's rows (training rows first, as in X) and its training rows, from the
    class positions ``labels`` of X's rows, whose first ``n_train`` rows train."""
    class_rows = tuple(np.flatnonzero(labels == c) for c in range(n_classes))
    return class_rows, np.array([np.searchsorted(rows, n_train) for rows in class_rows])


def kernel_eval_shares(max_kernel_evals, sizes):
    """Each pair's share by rows of ``max_kernel_evals`` (at least one), or None."""
    if max_kernel_evals is None:
        return None
    return [max(1, int(share(max_kernel_evals, size, int(np.sum(sizes))))) for size in sizes]


def share(budget, part, remaining):
    """``part``'s share of what is left of a budget (seconds or kernel evaluations), in
    proportion to its rows among the ``remaining`` rows of the pairs still to train; None:
    no budget."""
    if budget is None:
        return None
    return budget * part / max(1, remaining)


def time_share(rules, seconds_spent, rows, rows_left):
    """The stopping rules of pairs with ``rows`` rows when ``seconds_spent`` have gone:
    their share (by rows) of the time left to the pairs still to train."""
    time_left = None if rules.time_budget is None else max(1e-9, rules.time_budget - seconds_spent)
    return dataclasses.replace(rules, time_budget=share(time_left, rows, rows_left))


def stacks_by_width(widths):
    """Pairs (positions into ``widths``, their rows) grouped to step together on the host.

    From the widest down, a group takes the pairs at least half as wide as its first, so
    that padding at most doubles its arrays. A group then joins the stack before it when
    the work its padding adds there is less than what stepping apart costs: a stack's
    step costs about ``STACK_STEP_COLUMNS`` columns' work whatever its size, and its
    pairs' steps are in proportion to their widths, so a group of widths ``w`` (the
    widest ``W2``) joins a stack of width ``W1`` when ``sum(w) (W1 - W2) / W2`` is below
    it."""
    widths = np.asarray(widths)
    order = np.argsort(widths, kind="stable")[::-1]
    groups = []
    for p in order:
        if not groups or 2 * widths[p] < widths[groups[-1][0]]:
            groups.append([])
        groups[-1].append(int(p))
    stacks = [groups[0]]
    for group in groups[1:]:
        wide, narrow = widths[stacks[-1][0]], widths[group[0]]
        if widths[group].sum() * (wide - narrow) / narrow < STACK_STEP_COLUMNS:
            stacks[-1] += group
        else:
            stacks.append(group)
    return [sorted(stack) for stack in stacks]


def host_pair_work(stacks, widths, pair_train, batch_size, max_epochs):
    """The work of one-vs-one ``stacks`` stepping on the host, in pair columns stepped (the
    measure of ``STACK_STEP_COLUMNS``), at most: each stack's steps (``max_epochs`` of its
    widest training set) times its pairs' columns, padded to its widest, and that
    constant. ``widths``: each pair's rows; ``pair_train``: its training rows."""
    work = 0
    for stack in stacks:
        steps = max_epochs * -(-int(pair_train[stack].max()) // batch_size)
        work += steps * (STACK_STEP_COLUMNS + len(stack) * int(widths[stack].max()))
    return work


def train_pairs(plan, X, settings, seeds, rules, xp, *, kernel_cache, cache_size, average=True, verbose=0):
    """Train the pairs of ``plan`` on the rows of ``X`` (on ``xp``'s backend).

    Each group of the plan has its share (by rows) of the time left when it starts.

    Parameters
    ----------
    plan : PairPlan
    X : array or CSR matrix on ``xp``'s backend
        Every row of the fit, in the order the plan's rows index.
    settings : dict
        What every pair's problem shares: :class:`~gpusvm.solvers.sbp.SBPProblem`'s ``nu``,
        ``batch_size``, ``fit_intercept`` and kernel fields.
    seeds : sequence of int
        Each pair's random stream.
    rules : StoppingRules
        The fit's; ``max_kernel_evals`` is replaced by the plan's shares.
    xp : array module
    kernel_cache, cache_size :
        The estimator's settings of the device's kernel values and of the host's row cache.
    average, verbose :
        As :func:`~gpusvm.solvers.sbp.run_sbp`'s.

    Returns
    -------
    results : list of SBPResult, one per pair
    history : list of dict
        The pairs' history records, each with its ``pair`` and the seconds since the first
        group started.
    """
    options = {"kernel_cache": kernel_cache, "cache_size": cache_size, "average": average, "verbose": verbose}
    started, rows_left = time.perf_counter(), int(plan.sizes.sum())
    results, histories = [None] * len(plan.pairs), [None] * len(plan.pairs)
    for group in plan.groups:
        group_rows = int(plan.sizes[group].sum())
        offset = time.perf_counter() - started
        budget = time_share(rules, offset, group_rows, rows_left)
        rows_left -= group_rows
        if plan.together:
            group_results = _train_stack(plan, group, X, settings, seeds, budget, xp, options)
        else:
            group_results = [_train_alone(plan, p, X, settings, seeds[p], budget, xp, options) for p in group]
        for p, result in zip(group, group_results, strict=True):
            results[p] = result
            histories[p] = [
                {**record, "seconds": record["seconds"] + offset, "pair": [int(c) for c in plan.pairs[p]]}
                for record in result.history
            ]
    return results, [record for history in histories for record in history]


def _train_stack(plan, group, X, settings, seeds, rules, xp, options):
    """The SBP runs of the ``group``'s pairs stepping together (one result each)."""
    stack = PairStack(
        X=X,
        class_rows=plan.class_rows,
        class_train=plan.class_train,
        pairs=np.array([plan.pairs[p] for p in group]),
        seeds=np.array([seeds[p] for p in group], dtype=np.uint64),
        **settings,
    )
    widest = max(rows.size for rows in plan.class_rows)  # the cache's rows: a row's blocks over every class
    host_bytes = cache_bytes(options["cache_size"], X.shape[0] * len(plan.class_rows) * widest * X.dtype.itemsize)
    steps = make_pair_steps(
        stack, xp, kernel_cache=options["kernel_cache"], cache_bytes=host_bytes, compiled=plan.compiled
    )
    return run_pair_stack(
        stack,
        steps,
        rules,
        checkpoint_every=plan.checkpoint_every[group],
        kernel_evals=None if plan.kernel_evals is None else np.array([plan.kernel_evals[p] for p in group]),
        average=options["average"],
        verbose=options["verbose"],
    )


def _train_alone(plan, pair, X, settings, seed, rules, xp, options):
    """The SBP run of pair ``pair`` on its own, on its rows of X laid out as the plan
    says, checkpointing at its multiple of the common cadence."""
    (a, b), (train_a, train_b) = plan.pairs[pair], plan.class_train[list(plan.pairs[pair])]
    rows_a, rows_b = plan.class_rows[a], plan.class_rows[b]
    rows = np.concatenate([rows_a[:train_a], rows_b[:train_b], rows_a[train_a:], rows_b[train_b:]])
    first = np.repeat([True, False, True, False], [train_a, train_b, rows_a.size - train_a, rows_b.size - train_b])
    n_train = train_a + train_b
    problem = SBPProblem(
        X=X[xp.asarray(rows)],
        n_train=n_train,
        targets=xp.asarray(np.where(first[:n_train], 1.0, -1.0)[:, None]),
        holdout_labels=first[n_train:].astype(int),
        seed=seed,
        **settings,
    )
    host_bytes = cache_bytes(options["cache_size"], n_train * rows.size * X.dtype.itemsize)
    steps = make_steps(problem, xp, kernel_cache=options["kernel_cache"], cache_bytes=host_bytes)
    own_rules = dataclasses.replace(
        rules, max_kernel_evals=None if plan.kernel_evals is None else plan.kernel_evals[pair]
    )
    return run_sbp(
        problem,
        steps,
        own_rules,
        checkpoint_every=int(plan.checkpoint_every[pair]),
        average=options["average"],
        verbose=options["verbose"],
    )


@nvtx_range("sbp.stepper", "yellow")
def make_pair_steps(stack, xp, *, kernel_cache, cache_bytes, compiled):
    """The steps of the one-vs-one pairs of ``stack``, stepping together, on the array
    module ``xp``: on the host :class:`~gpusvm.solvers.sbp.pairs._compiled.CompiledPairSteps`
    when ``compiled`` (:func:`~gpusvm.solvers.sbp.pairs._compiled.use_compiled_steps` decides
    it), else :class:`~gpusvm.solvers.sbp.pairs._numpy.NumpyPairSteps` (the reference, the
    same model bit for bit); on a device :class:`~gpusvm.solvers.sbp.pairs._cuda.CupyPairSteps`."""
    if on_device(xp):
        from ._cuda import CupyPairSteps

        return CupyPairSteps(stack, kernel_cache=kernel_cache)
    if compiled:
        from ._compiled import CompiledPairSteps

        return CompiledPairSteps(stack, cache_bytes=cache_bytes)
    return NumpyPairSteps(stack, cache_bytes=cache_bytes)


def pairs_step_together(xp, n_train, n_rows, dtype, kernel_cache, slots):
    """Whether one-vs-one pairs step together on the array module ``xp``: always on the
    host; on a device, when ``kernel_cache`` holds the kernel matrix of the ``n_train``
    training rows by all ``n_rows`` rows, or a cache of twice the ``slots`` rows that
    all pairs draw in a step (:func:`~gpusvm.solvers.sbp.pairs._cuda.pair_kernel_values`)."""
    if not on_device(xp):
        return True
    from ._cuda import pair_kernel_values

    return pair_kernel_values(n_train, n_rows, dtype, kernel_cache, slots) is not None


def plan_pairs(labels, n_train, pairs, batch_size, rules, xp, *, kernel_cache, dtype):
    """How the one-vs-one ``pairs`` of a fit train (:class:`PairPlan`).

    On the host the pairs step together in stacks of similar widths
    (:func:`stacks_by_width`), on the compiled steps when their work is large enough
    (:func:`~gpusvm.solvers.sbp.pairs._compiled.use_compiled_steps`); on a device all of
    them step together when ``kernel_cache`` holds the kernel matrix or a cache of twice a
    step's rows (:func:`pairs_step_together`), else they train one after another.

    Parameters
    ----------
    labels : ndarray of shape (n_rows,)
        The class position of each row of X; its first ``n_train`` rows train.
    n_train : int
    pairs : list of (int, int)
        The class positions of each pair.
    batch_size : int
    rules : StoppingRules
        The fit's: its epochs and its ``max_kernel_evals``, shared out by rows.
    xp : array module
    kernel_cache : the estimator's setting
    dtype : X's dtype (the kernel values')

    Returns
    -------
    PairPlan
    """
    class_rows, class_train = class_layout(labels, n_train, 1 + max(max(pair) for pair in pairs))
    sizes = np.array([class_rows[a].size + class_rows[b].size for a, b in pairs])
    pair_train = np.array([class_train[a] + class_train[b] for a, b in pairs])
    together = pairs_step_together(xp, n_train, labels.size, dtype, kernel_cache, len(pairs) * batch_size)
    if not together:
        groups = [[p] for p in range(len(pairs))]
    elif on_device(xp):
        groups = [list(range(len(pairs)))]
    else:
        groups = stacks_by_width(sizes)
    compiled = (
        together
        and not on_device(xp)
        and use_compiled_steps(host_pair_work(groups, sizes, pair_train, batch_size, rules.max_epochs))
    )
    return PairPlan(
        pairs=[tuple(int(c) for c in pair) for pair in pairs],
        class_rows=class_rows,
        class_train=class_train,
        groups=groups,
        together=together,
        compiled=compiled,
        checkpoint_every=pair_checkpoint_steps(pair_train, batch_size),
        kernel_evals=kernel_eval_shares(rules.max_kernel_evals, sizes),
    )
