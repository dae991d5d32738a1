"""
FTRL's sparsity path: nonzero weights against l1
================================================

:class:`gpusvm.FTRLClassifier` is FTRL-Proximal with per-coordinate learning rates
(McMahan et al. 2013): a weight is exactly zero while the running sum of its gradients
stays within ``l1``, so a larger ``l1`` gives a sparser model. This example sweeps
``l1`` on UCI Adult (123 binary features) and draws the number of nonzero weights and
the test log loss against it.

FTRL's ``l1`` acts on the *summed* gradients of the stream, as in the paper: a
per-example L1 weight ``lambda`` over ``n`` examples is ``l1 = lambda * n``. The other
online learners (:class:`gpusvm.TruncatedGradientClassifier`,
:class:`gpusvm.FOBOSClassifier`, :class:`gpusvm.RDAClassifier`) take ``l1`` per example.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import log_loss

from gpusvm import FTRLClassifier
from gpusvm.datasets import load_adult

X, y, X_test, y_test = load_adult()

# %%
# The sweep
# ---------
# Two passes over the 32,561 training rows at each ``l1``, in mini-batches of 32.

l1_values = np.concatenate([[0.0], np.geomspace(1.0, 3000.0, 8)])
nonzeros, losses = [], []
for l1 in l1_values:
    model = FTRLClassifier(
        alpha=0.1, beta=1.0, l1=l1, l2=1.0, batch_size=32, max_iter=2, random_state=0, backend="numpy"
    ).fit(X, y)
    nonzeros.append(model.n_nonzero_)
    losses.append(log_loss(y_test, model.predict_proba(X_test), labels=model.classes_))
    print(f"l1 = {l1:8.1f}: {model.n_nonzero_:3d} nonzero weights, test log loss {losses[-1]:.4f}")

# %%
# The figure
# ----------
# ``l1 = 0`` is drawn at the left edge of the logarithmic axis.

shown = np.where(l1_values > 0, l1_values, l1_values[1] / 3)
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(shown, nonzeros, "o-", color="C0")
ax.set_xscale("log")
ax.set_xticks([shown[0], 1, 10, 100, 1000], ["0", "1", "10", "100", "1000"])
ax.set_xlabel("l1 (on summed gradients)")
ax.set_ylabel("nonzero weights (of 123)", color="C0")
loss_axis = ax.twinx()
loss_axis.plot(shown, losses, "s--", color="C1")
loss_axis.set_ylabel("test log loss", color="C1")
ax.set_title("FTRLClassifier on Adult: sparsity against l1")
fig.tight_layout()
plt.show()
