"""Plain, slow reference implementations used as test oracles (no tricks, no backends)."""

import numpy as np

from gpusvm._random import random_indices


def reference_pegasos(
    X,
    Y,
    sample_weight,
    lam,
    batch_size,
    n_steps,
    seed,
    *,
    projection=True,
    fit_intercept=True,
    average_start=None,
    weight_by_step=True,
):
    """Mini-batch Pegasos exactly as docs/algorithms.md section 1 writes it, with a dense w
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


def reference_sbp(K, n_train, targets, nu, batch_size, fit_intercept, seed, n_steps):
    """The SBP of docs/algorithms.md section 2 (Algorithm 1) with B draws per step, written
    plainly: dense alpha, c and h, explicit projection, sort-based water levels.

    ``K`` is the kernel matrix of the training rows against training then holdout rows.
    Returns the uniform averages of alpha (k, n), c (k, n) and h (k, n_holdout).
    """
    from gpusvm._random import random_positions
    from gpusvm.water_level import find_gamma_and_bias_sorted, find_gamma_sorted

    n, k, B = n_train, targets.shape[1], batch_size
    volume = n * nu
    eta0 = 1 / np.sqrt(np.diag(K[:, :n]).max())
    alpha, c, h = np.zeros((k, n)), np.zeros((k, n)), np.zeros((k, K.shape[1] - n))
    r2 = np.zeros(k)
    sums = [np.zeros_like(alpha), np.zeros_like(c), np.zeros_like(h)]
    for t in range(1, n_steps + 1):
        eta = eta0 / np.sqrt(t)
        for p in range(k):
            y = targets[:, p]
            if fit_intercept:
                gamma, b = find_gamma_and_bias_sorted(y, c[p], volume)
            else:
                gamma, b = (c[p].min() if volume == 0 else find_gamma_sorted(c[p], volume)), 0.0
            heights = c[p] + y * b
            below = np.flatnonzero(heights <= max(gamma, heights.min()))
            lanes = np.arange(p * B, (p + 1) * B, dtype=np.uint64)
            drawn = below[random_positions(seed, t, lanes, below.size)]
            u = (y[drawn][:, None] * K[drawn]).mean(axis=0)  # <u, Phi(x_j)> for every column j
            r2[p] += 2 * eta * c[p, drawn].mean() + eta**2 * (y[drawn] * u[drawn]).mean()
            np.add.at(alpha[p], drawn, eta / B)
            c[p] += eta * y * u[:n]
            h[p] += eta * u[n:]
            if r2[p] > 1:
                r = np.sqrt(r2[p])
                alpha[p] /= r
                c[p] /= r
                h[p] /= r
                r2[p] = 1.0
        for total, value in zip(sums, (alpha, c, h), strict=True):
            total += value
    return [total / n_steps for total in sums]


def reference_online_logistic(kind, X, y01, epoch_orders, params, fit_intercept=True, batch_size=1):
    """The per-example algorithms of docs/algorithms.md section 3, with a dense w.

    Every coordinate is updated at every example (FOBOS and TG shrink absent features
    too); the intercept is an extra feature of value 1 that no penalty touches.  RDA
    keeps the running mean gradient ``gbar`` as the seed writes it.

    ``epoch_orders`` lists each epoch's row order; batches restart with each epoch.
    ``batch_size > 1`` predicts a whole batch with the weights at its start, then:
    FTRL and RDA run their sequential updates over the batch with those weights held
    fixed; FOBOS and TG take the summed step ``w - sum_s eta_s g_s`` and one shrink by
    the batch's summed penalty.  ``batch_size=1`` is the plain sequential algorithm.

    Returns the final weights, shape (n_features + 1,), the intercept last.
    """
    d = X.shape[1]
    l1 = params.get("l1", 0.0)
    penalized = np.append(np.ones(d), 0.0)
    z, n_sq, gbar, w = np.zeros(d + 1), np.zeros(d + 1), np.zeros(d + 1), np.zeros(d + 1)

    def ftrl_weights():
        lam1, lam2 = l1 * penalized, params["l2"] * penalized
        out = np.zeros(d + 1)
        for j in range(d + 1):
            if abs(z[j]) > lam1[j]:
                rate = (params["beta"] + np.sqrt(n_sq[j])) / params["alpha"]
                out[j] = -(z[j] - np.sign(z[j]) * lam1[j]) / (rate + lam2[j])
        return out

    t = 0
    batches = [
        order[start : start + batch_size] for order in epoch_orders for start in range(0, len(order), batch_size)
    ]
    for rows in batches:
        if kind == "ftrl":
            w = ftrl_weights()
        xs = [np.append(X[i], 1.0 if fit_intercept else 0.0) for i in rows]
        gradients = [(1.0 / (1.0 + np.exp(-(w @ x))) - y01[i]) * x for i, x in zip(rows, xs, strict=True)]
        step, shrink = np.zeros(d + 1), 0.0
        for g in gradients:
            t += 1
            eta = params.get("eta0", 0.0) / np.sqrt(t)
            if kind == "ftrl":
                for j in range(d + 1):
                    if g[j] != 0.0:
                        sigma = (np.sqrt(n_sq[j] + g[j] ** 2) - np.sqrt(n_sq[j])) / params["alpha"]
                        z[j] += g[j] - sigma * w[j]
                        n_sq[j] += g[j] ** 2
            elif kind == "rda":
                gbar = (t - 1) / t * gbar + g / t
            else:
                step += eta * g
                if kind == "fobos":
                    shrink += eta * l1
                elif t % params["truncate_every"] == 0:
                    shrink += eta * l1 * params["truncate_every"]
        if kind in ("fobos", "tg"):
            v = w - step
            shrunk = np.sign(v) * np.maximum(np.abs(v) - shrink * penalized, 0.0)
            w = shrunk if kind == "fobos" else np.where(np.abs(v) <= params["theta"], shrunk, v)
        elif kind == "rda":
            lam = l1 * penalized
            w = np.where(np.abs(gbar) <= lam, 0.0, -(np.sqrt(t) / params["gamma"]) * (gbar - lam * np.sign(gbar)))
    return ftrl_weights() if kind == "ftrl" else w
