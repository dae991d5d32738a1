"""Prediction for linear models: ``X @ coef_.T + intercept_`` on the host or the device."""

from __future__ import annotations

from .._backend import check_device_memory, is_cupy_array, is_device_backend, issparse
from .._instrumentation import nvtx_range
from .base import scores_like_input

STREAMING_WAYS_OUT = (
    "This solver needs only a mini-batch at a time: train from host memory with fit_chunks, two chunks on "
    "the device at a time (e.g. fit_chunks([(X[i:i + 100_000], y[i:i + 100_000]) for i in range(0, "
    "X.shape[0], 100_000)])), or use float32 X (half the bytes), or backend='numpy'."
)


def device_bytes_of(X, n_outputs):
    """An estimate of the device memory an in-memory linear fit needs: X (CSR with int32
    indices), a target and a weight per row and output, and the weights with their
    float64 companions (averages, accumulators)."""
    n, d = X.shape
    x_bytes = X.nnz * (X.dtype.itemsize + 4) + (n + 1) * 4 if issparse(X) else n * d * X.dtype.itemsize
    return x_bytes + 2 * n * n_outputs * X.dtype.itemsize + 3 * 8 * n_outputs * (d + 1)


class LinearModelMixin:
    """``decision_function`` from ``coef_`` and ``intercept_`` (NumPy arrays on the host)."""

    def _check_device_memory(self, X, n_outputs, backend):
        """On the cupy backend, refuse early a host X that cannot be copied to the device,
        naming ``fit_chunks``, which streams it instead."""
        if is_device_backend(backend) and not is_cupy_array(X):
            check_device_memory(
                device_bytes_of(X, n_outputs),
                f"{type(self).__name__} on {X.shape[0]} rows x {X.shape[1]} features",
                ways_out=STREAMING_WAYS_OUT,
            )

    @nvtx_range("predict.linear", color="cyan")
    def decision_function(self, X):
        """Signed distances ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), NumPy or CuPy

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        xp, X_dev, X = self._prediction_input(X)
        # coefficients in X's precision: float32 X is not copied to float64 (on the GPU, all of it)
        scores = X_dev @ xp.asarray(self.coef_, dtype=X_dev.dtype).T + xp.asarray(self.intercept_)
        return scores_like_input(xp.asarray(scores), X)
