"""Plain, slow reference implementations used as test oracles (no tricks, no backends)."""

import numpy as np

from gpusvm._random import random_indices


def reference_pegasos(X, Y, sample_weight, lam, batch_size, n_steps, seed, *, projection=True,
                      fit_intercept=True, average_start=None, weight_by_step=True):
    """Mini-batch Pegasos exactly as algorithms.md section 1 writes it, with a dense w
    (projection radius sqrt(mean(s) / lam), which is 1/sqrt(lam) for unit weights).

    Returns the (n_classes, n_features + fit_intercept) weights: the last iterate, or the
    average from ``average_start`` (weight t for step t, or uniform).
    """
    X = np.asarray(X, dtype=np.float64)
    Xa = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    W = np.zeros((Y.shape[1], Xa.shape[1]))
    total, weight_sum = np.zeros_like(W), 0.0
    for t in range(1, n_steps + 1):
        rows = random_indices(seed, t, batch_size, X.shape[0])
        margins = Y[rows] * (Xa[rows] @ W.T)
        coef = np.where(margins < 1, sample_weight[rows][:, None] * Y[rows], 0.0) / (lam * t * batch_size)
        W = (1 - 1 / t) * W + coef.T @ Xa[rows]
        if projection:
            norms = np.linalg.norm(W, axis=1)
            W *= np.minimum(1.0, np.sqrt(sample_weight.mean() / lam) / np.maximum(norms, 1e-300))[:, None]
        if average_start is not None and t >= average_start:
            c = float(t) if weight_by_step else 1.0
            total += c * W
            weight_sum += c
    return total / weight_sum if weight_sum else W


def reference_kernel_pegasos(K, Y, sample_weight, lam, batch_size, n_steps, seed):
    """Kernelized mini-batch Pegasos from a full kernel matrix, margins recomputed from
    the counts at every step (no incremental responses).  Returns (counts, n_steps)."""
    n = K.shape[0]
    counts = np.zeros((Y.shape[1], n))
    for t in range(1, n_steps + 1):
        rows = random_indices(seed, t, batch_size, n)
        if t > 1:
            f = (counts * Y.T) @ K[:, rows] / (lam * (t - 1) * batch_size)  # (n_classes, k)
        else:
            f = np.zeros((Y.shape[1], batch_size))
        violating = Y[rows].T * f < 1
        for position, row in enumerate(rows):
            counts[:, row] += np.where(violating[:, position], sample_weight[row], 0.0)
    return counts, n_steps
