"""Fits that end unsettled say so, as scikit-learn's do (ConvergenceWarning), and fits
that settle do not: the measured cases of gpusvm/_estimator/convergence.py."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from gpusvm import FOBOSClassifier, FTRLClassifier, PegasosSVC, RDAClassifier, TruncatedGradientClassifier
from gpusvm._estimator.convergence import constant_log_loss


def raw_and_scaled(loader):
    X, y = loader(return_X_y=True)
    return X, StandardScaler().fit_transform(X), y


def convergence_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = fit()
    return model, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


@pytest.mark.parametrize("loader", [load_wine, load_breast_cancer])
def test_pegasos_on_raw_features_warns_that_its_model_is_worse_than_none_and_scaled_it_does_not(loader):
    raw, scaled, y = raw_and_scaled(loader)
    model, caught = convergence_warnings(lambda: PegasosSVC(random_state=0).fit(raw, y))
    n_models = model.coef_.shape[0]
    assert model.objective_curve_[-1] > n_models  # the zero weights' objective: every hinge 1
    assert len(caught) == 1 and caught[0].filename == __file__  # named at the user's call
    message = str(caught[0].message)
    assert message.startswith(f"PegasosSVC's objective after {model.n_iter_} epochs, ")
    assert f"above that of the zero weights, {n_models:.4g}" in message
    assert f"the largest |x| here is {np.abs(raw).max():.3g}" in message and "StandardScaler" in message
    assert convergence_warnings(lambda: PegasosSVC(random_state=0).fit(scaled, y))[1] == []


def test_pegasos_fit_chunks_warns_too():
    raw, _, y = raw_and_scaled(load_wine)
    chunks = [(raw[i : i + 60], y[i : i + 60]) for i in range(0, len(y), 60)]
    _, caught = convergence_warnings(lambda: PegasosSVC(random_state=0).fit_chunks(chunks))
    assert len(caught) == 1 and caught[0].filename == __file__


@pytest.mark.parametrize("Estimator", [FTRLClassifier, TruncatedGradientClassifier, RDAClassifier])
def test_online_learners_on_raw_features_warn_that_they_are_no_better_than_a_constant(Estimator):
    """Breast cancer's raw features: every row given one class (loss growing to hundreds)."""
    raw, scaled, y = raw_and_scaled(load_breast_cancer)
    model, caught = convergence_warnings(lambda: Estimator(random_state=0).fit(raw, y))
    assert model.loss_curve_[-1] > constant_log_loss(np.bincount(y))
    assert len(caught) == 1 and caught[0].filename == __file__
    assert str(caught[0].message).startswith(f"{Estimator.__name__}'s last epoch's log loss, ")
    _, caught = convergence_warnings(
        lambda: Estimator(random_state=0).fit_chunks([(raw[:300], y[:300]), (raw[300:], y[300:])])
    )
    assert len(caught) == 1 and caught[0].filename == __file__
    assert convergence_warnings(lambda: Estimator(random_state=0).fit(scaled, y))[1] == []


def test_the_constant_log_loss_is_the_entropy_of_the_class_frequencies():
    assert constant_log_loss([50, 50]) == pytest.approx(np.log(2))
    assert constant_log_loss([90, 10]) == pytest.approx(-(0.1 * np.log(0.1) + 0.9 * np.log(0.9)))
    three = [-(p * np.log(p) + (1 - p) * np.log(1 - p)) for p in (0.5, 0.25, 0.25)]  # one-vs-rest models
    assert constant_log_loss([2, 1, 1]) == pytest.approx(np.mean(three))
    assert constant_log_loss([5, 0, 5]) == pytest.approx(np.mean([np.log(2), 0.0, np.log(2)]))


@pytest.mark.parametrize("rows", [100, 15])
def test_auto_batches_are_not_blamed(rows):
    """With batch_size='auto' a fit's epoch has at least 16 steps (or batch 1 below 16 rows),
    so the warning blames the raw scale, never the batch the user did not choose."""
    raw, _, y = raw_and_scaled(load_breast_cancer)
    both = np.concatenate([np.flatnonzero(y == 0)[: rows // 2], np.flatnonzero(y == 1)[: rows - rows // 2]])
    X, y = raw[both], y[both]
    _, caught = convergence_warnings(lambda: FOBOSClassifier(random_state=0).fit(X, y))
    assert len(caught) == 1 and str(caught[0].message).count("smaller batch_size") == 0
    assert "Scale the features" in str(caught[0].message)
