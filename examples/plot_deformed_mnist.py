"""
MNIST8M-like digits: elastic deformations of MNIST
==================================================

:func:`gpusvm.datasets.make_deformed_mnist` makes as many rows as asked from MNIST's
60,000 training digits: row ``k`` is digit ``k % 60000`` moved by a smooth random
displacement field (Simard, Steinkraus and Platt 2003) and a small rotation, scaling,
shear and shift, all drawn from step ``k`` of gpusvm's counter-based random stream. The
same seed gives the same rows on the CPU and on a GPU, whatever the blocks they are made
in, so eight million rows can be made on the card where they are trained on.

Below: eight training digits (top row), the same digits as rows 60,000 to 60,007,
120,000 to 120,007 and so on of the default set, and at the bottom the stronger
distortion usually credited to Simard et al. (``sigma=4, alpha=34``), for comparison.
"""

import matplotlib.pyplot as plt
import numpy as np

from gpusvm.datasets import load_mnist, make_deformed_mnist

X, y, _, _ = load_mnist()
digits = (X, y)  # read once, lent to each call
shown = 8

# %%
# Rows of the set
# ---------------
# Rows ``60000 * j`` to ``60000 * j + 7`` deform the same eight digits, each time with
# other draws. ``first_row`` asks for a part of the set without making the rows before it.

rows = [X[:shown]]
for j in range(1, 5):
    deformed, labels = make_deformed_mnist(shown, first_row=60000 * j, digits=digits, backend="numpy")
    assert (labels == y[:shown]).all()
    rows.append(deformed)
strong, _ = make_deformed_mnist(shown, first_row=60000, digits=digits, alpha=34.0, sigma=4.0, backend="numpy")
rows.append(strong)
print("pixels in", float(np.min(rows)), "to", float(np.max(rows)))

# %%
# The figure
# ----------

names = ["originals", "rows 60,000+", "rows 120,000+", "rows 180,000+", "rows 240,000+", "sigma=4, alpha=34"]
fig, axes = plt.subplots(len(rows), shown, figsize=(shown * 0.9, len(rows) * 0.95))
for i, (name, images) in enumerate(zip(names, rows)):
    for j in range(shown):
        ax = axes[i, j]
        ax.imshow(images[j].reshape(28, 28), cmap="gray_r", vmin=0, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[i, 0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=8)
fig.suptitle("make_deformed_mnist: MNIST training digits and their deformations", fontsize=10)
fig.tight_layout()
plt.show()
