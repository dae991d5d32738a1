"""One-vs-one multiclass models, laid out as scikit-learn's SVC lays them out.

A model of ``K`` classes has one binary problem per pair ``(i, j)``, ``i < j``, in the
order ``(0, 1), (0, 2), ..., (K - 2, K - 1)``; pair ``(i, j)`` trains on the rows of
those two classes, and a positive score votes for class ``i`` (as LIBSVM's).
"""

from __future__ import annotations

import itertools

import numpy as np
from sklearn.utils.multiclass import _ovr_decision_function

from .._random import splitmix64


def class_pairs(n_classes):
    """The pairs ``(i, j)`` of class positions, in SVC's order."""
    return list(itertools.combinations(range(n_classes), 2))


def pair_seed(seed, pair_number):
    """The random stream seed of pair ``pair_number``: a pure function of the fit's seed,
    so that the pairs draw independently on every backend. Below 2**32, so that it is
    also a ``random_state``: the pair's problem is the binary fit with this seed."""
    mixed = splitmix64(np.asarray([seed ^ (pair_number + 1)], dtype=np.uint64))
    return int(mixed[0]) % 2**32


def ovr_scores(pair_scores, n_classes):
    """Scores of shape (n_samples, n_classes) from the pairs' scores: each class's votes
    plus its summed confidence squashed into (-1/3, 1/3), which breaks ties without
    reversing a vote (scikit-learn's ``_ovr_decision_function``, as SVC with
    ``decision_function_shape='ovr'``)."""
    pair_scores = np.asarray(pair_scores)
    return _ovr_decision_function(pair_scores < 0, -pair_scores, n_classes)


def share(budget, part, remaining):
    """Pair ``part``'s share of what is left of a budget (seconds or kernel evaluations),
    in proportion to its rows among the rows of the pairs still to train; None: no budget."""
    if budget is None:
        return None
    return budget * part / max(1, remaining)
