"""Online sparse logistic regression: FTRL-Proximal, Truncated Gradient, L1-FOBOS, L1-RDA.

The per-coordinate rules of docs/algorithms.md section 3, for one-vs-rest logistic loss on
labels ``y01`` in {0, 1}.  Examples are counted ``s = 1, 2, ...`` over the model's life.

Mini-batches
------------
A batch of ``B`` examples is processed at once: all ``B`` predictions use the weights
at the start of the batch, then each touched coordinate takes one update.  The update is
the sequential algorithm's run over the ``B`` examples *with the weights held fixed*,
merged into one step:

- FTRL: ``z += sum_s g_s - sigma w`` and ``n += sum_s g_s^2``, where ``sigma =
  (sqrt(n + sum_s g_s^2) - sqrt(n)) / alpha`` (the per-example sigmas telescope);
- RDA: the sum of gradients grows by ``sum_s g_s``;
- FOBOS and TG: ``v = w - sum_s eta_s g_s``, then one shrink by the batch's total
  penalty ``sum_s eta_s l1`` (TG: over the truncation steps ``s % k == 0``, times ``k``).

So ``B = 1`` is exactly the sequential algorithm, and every hyperparameter means the same
at any batch size (``n`` sums per-example squared gradients; ``eta_s`` and RDA's ``t``
count examples).

Lazy penalties
--------------
L1-FOBOS and TG shrink every weight at every (truncation) step, also those whose
feature is absent from the example.  Repeated shrinks of an untouched weight compose
into one soft-threshold by their sum, so the solver keeps the running total of
penalties ``level = sum_s eta_s l1`` (a host scalar) and, per weight, the level it has
been shrunk to; the rest is applied when the weight is next read.  TG shrinks only
weights with ``|w| <= theta``, and a shrink never lifts ``|w|`` above ``theta``, so the
same catch-up applies to them.  The result equals the dense algorithm's (tested).

State layout
------------
Two float64 arrays of shape ``(n_classes, n_features + 1)``; column ``n_features`` is
the intercept, a coordinate whose feature is always 1 and which no penalty touches:

=========  ===================================  ==============================
rule       ``first``                            ``second``
=========  ===================================  ==============================
ftrl       ``z``                                ``n`` (sum of squared gradients)
fobos, tg  ``w`` as of its last update          the penalty level applied to it
rda        sum of gradients ``G``               unused (zeros)
=========  ===================================  ==============================

This folder: the rules, the problem and the state (``_problem.py``), the NumPy steps, the
reference (``_numpy.py``), the CUDA steps (``_cuda.py``, ``kernels/online_logistic.cu``),
and here :func:`make_steps` and the driver :func:`run_online`.

References
----------
H. B. McMahan et al. Ad click prediction: a view from the trenches. KDD 2013 (FTRL-Proximal).

J. Langford, L. Li, T. Zhang. Sparse online learning via truncated gradient. JMLR 10, 2009.

J. Duchi, Y. Singer. Efficient online and batch learning using forward backward splitting.
JMLR 10, 2009 (FOBOS).

L. Xiao. Dual averaging methods for regularized stochastic learning and online
optimization. JMLR 11, 2010 (RDA).
"""

from __future__ import annotations

import nvtx

from ..._backend import on_device
from ..._instrumentation import progress_bar
from ._numpy import NumpyOnlineSteps
from ._problem import RULES, OnlineProblem, OnlineRule, OnlineState, logistic_loss, shuffled_order, soft_threshold

__all__ = [
    "RULES",
    "NumpyOnlineSteps",
    "OnlineProblem",
    "OnlineRule",
    "OnlineState",
    "logistic_loss",
    "make_steps",
    "run_online",
    "shuffled_order",
    "soft_threshold",
]


def make_steps(problem, xp, *, state):
    """The steps of ``problem`` over ``state`` (modified in place) on the array module
    ``xp``: :class:`NumpyOnlineSteps` (the reference) or ``_cuda.CupyOnlineSteps``, the
    one place where the backend is chosen."""
    if on_device(xp):
        from ._cuda import CupyOnlineSteps

        return CupyOnlineSteps(problem, state)
    return NumpyOnlineSteps(problem, state)


def run_online(problem, state, *, n_epochs, shuffle, xp, verbose=0):
    """Run ``n_epochs`` passes over ``problem.X`` from ``state`` (which is not modified).

    Returns
    -------
    state : OnlineState
    losses : list of float
        Each epoch's progressive loss: the mean over examples and one-vs-rest models of
        the logistic loss of each prediction made before the example's update.
    """
    stepper = make_steps(problem, xp, state=state.copy())
    n_samples, losses = problem.n_samples, []
    starts = range(0, n_samples, problem.batch_size)
    # the bar is closed however the loop ends
    with progress_bar(n_epochs * len(starts), f"online {problem.rule.kind}", verbose) as bar:
        for epoch in range(n_epochs):
            order = shuffled_order(problem.seed, epoch, n_samples, xp) if shuffle else None
            with nvtx.annotate("online.epoch", color="purple"):
                stepper.start_epoch(order)
                stepper.run_batches(starts)
                bar.update(len(starts))
            losses.append(stepper.epoch_loss_sum() / (n_samples * problem.n_models))
            bar.set_postfix(loss=f"{losses[-1]:.5g}")
    return stepper.state, losses
