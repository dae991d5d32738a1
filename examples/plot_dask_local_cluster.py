"""
gpusvm.dask on a LocalCluster of two workers
============================================

:mod:`gpusvm.dask` trains on dask collections where their chunks are: each worker's
partitions become its shard, and only the rows a block of steps draws travel. Its
``PegasosSVC(mode='exact')`` gives the single-node model for the same seed, bit for bit
on the NumPy backend; ``mode='average'`` instead runs an epoch on each worker's own rows
and averages the models once per epoch (Zinkevich et al. 2010), a different algorithm.

This example starts a :class:`distributed.LocalCluster` of two workers (threads of this
process, so that it runs anywhere; a real cluster has worker processes or machines, and
with dask-cuda's ``LocalCUDACluster`` one GPU per worker), trains both modes on a
sample of UCI Adult split into four partitions, and draws their objective per epoch
beside the single-node estimator's.
"""

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

import gpusvm
import gpusvm.dask
from gpusvm.datasets import load_adult

X, y, X_test, y_test = load_adult()
X, y = X[:8000], y[:8000]
settings = dict(C=1.0, max_iter=6, tol=None, random_state=0, backend="numpy")

# %%
# The cluster and the data
# ------------------------
# ``asarray=False`` keeps the chunks as SciPy CSR matrices.

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
client = Client(cluster)
dX = da.from_array(X, chunks=(2000, X.shape[1]), asarray=False)
dy = da.from_array(y, chunks=2000)
print(client)

# %%
# Single node, and the two modes on the cluster
# ---------------------------------------------
# The estimators use the current client.

single = gpusvm.PegasosSVC(**settings).fit(X, y)
exact = gpusvm.dask.PegasosSVC(**settings, mode="exact").fit(dX, dy)
average = gpusvm.dask.PegasosSVC(**settings, mode="average").fit(dX, dy)

print("exact mode, the single-node coefficients:", np.array_equal(exact.coef_, single.coef_))
for name, model in [("single node", single), ("dask, exact", exact), ("dask, average", average)]:
    print(f"{name:14s} test accuracy {model.score(X_test, y_test):.4f}")

# ``predict`` on a dask collection is lazy, computed where the chunks are;
# ``to_local()`` gives a plain gpusvm.PegasosSVC.
labels = exact.predict(dX)
print(type(labels).__name__, labels.compute()[:10])
print("to_local():", type(exact.to_local()))

client.close()
cluster.close()

# %%
# The figure
# ----------

fig, ax = plt.subplots(figsize=(6, 4))
epochs = np.arange(1, settings["max_iter"] + 1)
ax.plot(epochs, single.objective_curve_, "o-", label="gpusvm.PegasosSVC (single node)")
ax.plot(epochs, exact.objective_curve_, "x--", markersize=10, label="gpusvm.dask, mode='exact'")
ax.plot(epochs, average.objective_curve_, "s-", label="gpusvm.dask, mode='average'")
ax.set_xlabel("epoch")
ax.set_ylabel("primal objective")
ax.set_title("PegasosSVC on 8,000 Adult rows, 2 workers")
ax.legend()
fig.tight_layout()
plt.show()
