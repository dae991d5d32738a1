"""
The same model on the CPU and on the GPU
========================================

Every gpusvm estimator has two paths, NumPy and SciPy on a CPU, CuPy and CUDA kernels on
a GPU, and both draw their examples from one counter-based random stream: the same
``random_state`` gives the same model on either, to rounding. ``backend='numpy'`` or
``'cupy'`` picks the path for one estimator; ``'auto'`` (the default) follows
:func:`gpusvm.config_context`, then the ``GPUSVM_BACKEND`` environment variable, then
takes the GPU when CuPy sees one.

This site is built on a CPU (its build sets ``GPUSVM_BACKEND=numpy``), so below the
CuPy fit is shown but runs only where :func:`gpusvm.resolve_backend` finds a usable
GPU: run the script on a machine with a CUDA device and CuPy
(from a checkout: ``pip install -e ".[cuda12]"``) to see both curves.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpusvm
from gpusvm import PegasosSVC
from gpusvm.datasets import load_adult

X, y, X_test, y_test = load_adult()
settings = dict(C=1.0, max_iter=8, tol=None, random_state=0)

# %%
# On the CPU
# ----------

cpu = PegasosSVC(**settings, backend="numpy").fit(X, y)
print(f"numpy: test accuracy {cpu.score(X_test, y_test):.4f}, trained on {cpu.backend_!r}")

# %%
# On the GPU, where there is one
# ------------------------------
# The same estimator with ``backend='cupy'``. The data may stay on the host (it is
# copied to the device once) or already be CuPy arrays; the fitted attributes come back
# as NumPy arrays either way.

gpu = None
if gpusvm.resolve_backend("auto") == "cupy":
    gpu = PegasosSVC(**settings, backend="cupy").fit(X, y)
    print(f"cupy: test accuracy {gpu.score(X_test, y_test):.4f}")
    print("largest difference in coef_:", float(np.abs(gpu.coef_ - cpu.coef_).max()))
    print("same test predictions:", bool((gpu.predict(X_test) == cpu.predict(X_test)).all()))
else:
    print("No usable CUDA device here (or GPUSVM_BACKEND=numpy): the cupy fit is skipped.")

# %%
# A model file moves between them
# -------------------------------
# :func:`gpusvm.save` writes the fitted model without pickle; :func:`gpusvm.load` reads
# it on any machine, and ``backend='numpy'`` makes a GPU-trained model predict on the
# CPU.

trained = gpu if gpu is not None else cpu
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "adult.model"
    gpusvm.save(trained, path)
    loaded = gpusvm.load(path, backend="numpy")
print("loaded model predicts as the saved one:", bool((loaded.predict(X_test) == trained.predict(X_test)).all()))

# %%
# The figure
# ----------
# PegasosSVC records its exact primal objective after each epoch (``objective_curve_``);
# the two backends' curves lie on top of each other.

fig, ax = plt.subplots(figsize=(6, 4))
epochs = np.arange(1, len(cpu.objective_curve_) + 1)
ax.plot(epochs, cpu.objective_curve_, "o-", label="backend='numpy'")
if gpu is not None:
    ax.plot(epochs, gpu.objective_curve_, "x--", markersize=10, label="backend='cupy'")
else:
    ax.text(
        0.5,
        0.6,
        "no GPU where this ran:\nthe backend='cupy' curve is not drawn",
        transform=ax.transAxes,
        ha="center",
        color="0.4",
    )
ax.set_xlabel("epoch")
ax.set_ylabel("primal objective")
ax.set_title("PegasosSVC on Adult, C = 1, random_state = 0")
ax.legend()
fig.tight_layout()
plt.show()
