"""Prediction for linear models: ``X @ coef_.T + intercept_`` on the host or the device."""

from __future__ import annotations

from ._estimator import scores_like_input
from ._instrumentation import nvtx_range


class LinearModelMixin:
    """``decision_function`` from ``coef_`` and ``intercept_`` (NumPy arrays on the host)."""

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
