"""gpusvm's solvers on a dask.distributed cluster (from a checkout: ``pip install -e ".[dask]"``).

The estimators take the single-node estimators' parameters and train on dask arrays or
dataframes whose chunks are NumPy or CuPy arrays or SciPy/cupyx CSR matrices, where
the chunks are: each worker's partitions become its shard, and only the rows a block
of steps draws travel (to the worker that steps). ``predict``, ``decision_function`` and
``predict_proba`` return lazy dask arrays; ``to_local()`` gives the single-node
estimator with the same fitted attributes. The backend is resolved on the workers (on
a ``LocalCUDACluster`` of dask-cuda, one GPU per worker).

- :class:`PegasosSVC`: ``mode='exact'`` (the single-node iterates) or ``'average'``
  (local epochs averaged once per epoch);
- :class:`FTRLClassifier`, :class:`TruncatedGradientClassifier`,
  :class:`FOBOSClassifier`, :class:`RDAClassifier`: exact;
- :class:`SBPClassifier`: the single-node iterates up to rounding, each worker keeping
  the responses of its rows (one round between the client and the workers a step).

A worker that leaves mid-fit costs the epoch it was in: the epoch runs again from its
checkpoint on the workers left and the model is the one an uninterrupted fit gives,
when dask can recompute the lost partitions; otherwise the error names the worker.
"""

from ._online import FOBOSClassifier, FTRLClassifier, RDAClassifier, TruncatedGradientClassifier
from ._pegasos import PegasosSVC
from ._sbp import SBPClassifier

__all__ = [
    "FOBOSClassifier",
    "FTRLClassifier",
    "PegasosSVC",
    "RDAClassifier",
    "SBPClassifier",
    "TruncatedGradientClassifier",
]
