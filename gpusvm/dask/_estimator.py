"""What the gpusvm.dask estimators share: the client, ``to_local``, lazy predictions."""

from __future__ import annotations

import inspect
import math

import numpy as np
from dask.array import Array
from sklearn.base import _fit_context
from sklearn.utils._available_if import available_if

from .._estimator.base import restore_on_error
from .._validation import check_is_fitted
from ._cluster import ShardSet, current_client


class DaskEstimatorMixin:
    """Mixed in before a single-node gpusvm estimator (``_local_class``): the same
    parameters and fitted attributes; ``fit`` and ``partial_fit`` take dask collections
    and train on the cluster; the prediction methods return lazy dask arrays for dask
    input (and act as the single-node estimator's for data in memory).

    The ``client`` attribute is not a parameter: it is neither cloned nor pickled, and
    None (the default) means dask's current client at fit time.
    """

    _client = None
    local_class = None  # the single-node estimator this one distributes (set by each subclass)

    @property
    def client(self):
        """The dask.distributed client to fit with (None: the current client)."""
        return self._client

    @client.setter
    def client(self, client):
        self._client = client

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_client", None)
        return state

    def _local_params(self):
        """This estimator's parameters that the single-node estimator takes."""
        names = self.local_class._get_param_names()
        return {name: value for name, value in self.get_params(deep=False).items() if name in names}

    def to_local(self):
        """The single-node estimator with this one's parameters and fitted attributes (NumPy
        arrays on the host): it predicts without a cluster, pickles small, and its
        ``partial_fit`` continues the model.

        Returns
        -------
        estimator : the matching :mod:`gpusvm` estimator
        """
        local = self.local_class(**self._local_params())
        params = set(self.get_params(deep=False))
        local.__dict__.update(
            {name: value for name, value in self.__dict__.items() if name not in params and name != "_client"}
        )
        return local

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Train from scratch on the cluster.

        Parameters
        ----------
        X : dask Array or DataFrame of shape (n_samples, n_features)
            Chunks of NumPy or CuPy arrays or of SciPy/cupyx CSR matrices.
        y : dask Array or Series of shape (n_samples,)
        sample_weight : dask Array of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        with restore_on_error(self):
            self._forget_training_state()
            warn_if_unsettled = self._fit_on_cluster(
                X,
                y,
                sample_weight,
                classes=None,
                n_epochs=self.max_iter,
                first=True,
                shuffle=getattr(self, "shuffle", False),
            )
        if warn_if_unsettled is not None:  # after the fit holds: a warning turned error keeps the model
            warn_if_unsettled(stacklevel=3)
        return self

    @available_if(lambda self: hasattr(self.local_class, "partial_fit"))
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch over the collection, continuing the model (as the single-node
        ``partial_fit``); a call that raises leaves the model as it was.

        Parameters
        ----------
        X, y, sample_weight : as in :meth:`fit`
        classes : array-like, default=None
            Every class; required on the first call.

        Returns
        -------
        self
        """
        self._validate_params()  # scikit-learn checks them at the first call only, set_params may follow
        with restore_on_error(self):
            classes = self._partial_fit_classes(classes)
            self._fit_on_cluster(
                X, y, sample_weight, classes=classes, n_epochs=1, first=not hasattr(self, "_state"), shuffle=False
            )
        return self

    def fit_chunks(self, chunks, classes=None):
        raise TypeError(
            f"gpusvm.dask.{type(self).__name__} trains from dask collections: call fit with a dask "
            f"array (e.g. dask.array.from_delayed over the chunks), or use "
            f"gpusvm.{type(self).__name__}.fit_chunks to stream them through one process."
        )

    def _fit_on_cluster(self, X, y, sample_weight, *, classes, n_epochs, first, shuffle):
        """Train on the cluster's shards of ``(X, y)``; returns what ``_train_shards`` does:
        None, or for a fit that ended unsettled its ConvergenceWarning to give (a callable
        taking ``stacklevel``)."""
        client = current_client(self.client)
        if sample_weight is not None and "sample_weight" not in inspect.signature(self.local_class.fit).parameters:
            raise TypeError(f"{type(self).__name__} takes no sample_weight (as gpusvm.{type(self).__name__}).")
        shards = ShardSet.build(client, self, X, y, sample_weight)
        try:
            if not first and shards.n_features != self.n_features_in_:
                raise ValueError(
                    f"X has {shards.n_features} features, but {type(self).__name__} is expecting "
                    f"{self.n_features_in_} features as input."
                )
            self.n_features_in_ = shards.n_features
            return self._train_shards(client, shards, classes=classes, n_epochs=n_epochs, first=first, shuffle=shuffle)
        finally:
            shards.release()

    # Predictions: lazy for dask input, single-node otherwise.

    def decision_function(self, X):
        """Decision scores; a lazy dask array for dask input (computed where its chunks are)."""
        if not _is_dask(X):
            return super().decision_function(X)
        check_is_fitted(self)
        return self._map_rows(X, "decision_function", np.float64, self._score_columns())

    def predict(self, X):
        """Class labels; a lazy dask array for dask input."""
        if not _is_dask(X):
            return super().predict(X)
        check_is_fitted(self)
        return self._map_rows(X, "predict", self.classes_.dtype, None)

    def _score_columns(self):
        return None if self.classes_.shape[0] == 2 else self.classes_.shape[0]

    def _map_rows(self, X, method, dtype, columns):
        """``to_local().<method>`` on each row chunk of X: 1-D output when ``columns`` is None."""
        X = _as_array(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (rows, features); got a dask array of shape {X.shape}.")
        if not math.isnan(X.shape[1]) and X.shape[1] != self.n_features_in_:  # now, not when computed
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        local = self.to_local()
        empty = np.empty((0,) if columns is None else (0, columns), dtype=dtype)
        if columns is None:
            return X.map_blocks(_apply, local, method, empty, drop_axis=1, dtype=dtype, meta=empty)
        return X.map_blocks(_apply, local, method, empty, chunks=(X.chunks[0], (columns,)), dtype=dtype, meta=empty)


def _apply(block, local, method, empty):
    """``local.<method>(block)``; an empty chunk gives ``empty`` (the checks refuse 0 rows)."""
    return getattr(local, method)(block) if block.shape[0] else empty


def _is_dask(data):
    return isinstance(data, Array) or (hasattr(data, "to_dask_array") and hasattr(data, "npartitions"))


def _as_array(data):
    return data if isinstance(data, Array) else data.to_dask_array(lengths=True)
