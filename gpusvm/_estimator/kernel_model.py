"""Prediction for kernel models: ``f(x) = sum_j dual_coef_[:, j] K(support_vectors_[j], x) + intercept_``."""

from __future__ import annotations


from .._backend import check_device_memory, is_device_backend, issparse
from .._instrumentation import nvtx_range
from .._validation import to_backend
from ..kernel_functions import compute_layout, kernel_block, kernel_copy, prediction_centre, squared_row_norms
from .base import scores_like_input

_PREDICT_BLOCK_ELEMENTS = 2**25  # kernel block size at prediction (256 MiB in float64)


def device_bytes_to_fit(X, n_outputs, batch_size):
    """An estimate of the device memory a kernel solver's fit needs: X itself, about six
    float64 arrays of ``n`` values per decision column (responses, counts or averages,
    scratch), and two float64 blocks of ``batch_size`` kernel rows."""
    n = X.shape[0]
    if issparse(X):
        x_bytes = X.nnz * (X.dtype.itemsize + 4) + (n + 1) * 4
    else:
        x_bytes = n * X.shape[1] * X.dtype.itemsize
    return x_bytes + 6 * 8 * n * n_outputs + 2 * 8 * batch_size * n


class KernelModelMixin:
    """``decision_function`` from ``support_vectors_``, ``dual_coef_``, ``intercept_`` and
    the kernel parameters ``kernel``, ``gamma_``, ``degree``, ``coef0``."""

    def _check_device_memory(self, X, n_classes, backend, batch_size=None):
        """On the cupy backend, refuse early a fit that cannot fit in device memory
        (``batch_size``: the fit's, None for ``self.batch_size``)."""
        if is_device_backend(backend):
            batch_size = self.batch_size if batch_size is None else batch_size
            needed = device_bytes_to_fit(X, 1 if n_classes == 2 else n_classes, batch_size)
            check_device_memory(needed, f"{type(self).__name__} on {X.shape[0]} rows x {X.shape[1]} features")

    @nvtx_range("predict.kernel", color="cyan")
    def decision_function(self, X):
        """``sum_j dual_coef_[:, j] K(support_vectors_[j], x) + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), NumPy or CuPy

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        xp, X_dev, X = self._prediction_input(X)
        support_vectors = compute_layout(to_backend(self.support_vectors_, xp))
        if not issparse(support_vectors):  # dense support vectors: dense blocks of X too, for BLAS
            X_dev = compute_layout(X_dev)
        # rbf on dense rows: both sides centred on the vectors' mean, so that rows far from
        # the origin keep their distances' digits (the kernel is invariant to translation)
        centre = prediction_centre(support_vectors, self.kernel) if not issparse(X_dev) else None
        support_vectors = kernel_copy(support_vectors, centre, X.dtype)
        dual_coef = xp.asarray(self.dual_coef_)
        intercept = xp.asarray(self.intercept_)
        scores = xp.empty((X.shape[0], dual_coef.shape[0]))
        if support_vectors.shape[0] == 0:
            scores[:] = intercept
        else:
            sv_sq_norms = squared_row_norms(support_vectors)
            chunk = max(1, _PREDICT_BLOCK_ELEMENTS // support_vectors.shape[0])
            for start in range(0, X.shape[0], chunk):
                block = kernel_block(
                    kernel_copy(X_dev[start : start + chunk], centre, X.dtype),
                    support_vectors,
                    kernel=self.kernel,
                    gamma=self.gamma_,
                    degree=self.degree,
                    coef0=self.coef0,
                    Y_sq_norms=sv_sq_norms,
                )
                scores[start : start + chunk] = block @ dual_coef.T + intercept
        return scores_like_input(scores, X)
