"""scikit-learn's tooling end to end with every estimator, on both backends: Pipeline,
GridSearchCV in two processes, clone, pickling, and probabilities from the SVMs through
CalibratedClassifierCV (scikit-learn 1.9's replacement for SVC(probability=True))."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
)

from .conftest import to_host

# Each estimator with small settings and a parameter to search over.
GRIDS = {
    PegasosSVC: ({"max_iter": 5}, {"C": [0.1, 1.0]}),
    KernelPegasosSVC: ({"max_iter": 1}, {"gamma": [0.05, 0.2]}),
    SBPClassifier: ({"max_iter": 2, "batch_size": 8}, {"nu": [1e-2, 1e-1]}),
    FTRLClassifier: ({"max_iter": 2}, {"l1": [0.0, 0.5]}),
    TruncatedGradientClassifier: ({"max_iter": 2}, {"l1": [0.0, 1e-4]}),
    FOBOSClassifier: ({"max_iter": 2}, {"l1": [0.0, 1e-4]}),
    RDAClassifier: ({"max_iter": 2}, {"l1": [0.0, 1e-3]}),
}


def data(n_classes=2, n=240):
    X, y = make_classification(
        n_samples=n, n_features=8, n_informative=5, n_classes=n_classes, class_sep=1.5, random_state=0
    )
    return X * 10 + 3, y  # a scale that the pipeline's scaler removes


@pytest.mark.parametrize("Estimator", GRIDS, ids=lambda cls: cls.__name__)
def test_pipeline_grid_search_in_two_processes_clone_and_pickle(Estimator, backend):
    settings, grid = GRIDS[Estimator]
    X, y = data()
    pipeline = make_pipeline(StandardScaler(), Estimator(**settings, random_state=0, backend=backend))
    name = type(pipeline.steps[-1][1]).__name__.lower()
    search = GridSearchCV(pipeline, {f"{name}__{key}": values for key, values in grid.items()}, cv=3, n_jobs=2)
    search.fit(X, y)
    assert search.score(X, y) > 0.8
    assert search.best_estimator_[-1].backend_ == backend

    copy = clone(search.best_estimator_)
    assert copy.get_params()[f"{name}__backend"] == backend and not hasattr(copy[-1], "classes_")
    restored = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(to_host(restored.decision_function(X)), to_host(search.decision_function(X)))


@pytest.mark.parametrize("Estimator", [PegasosSVC, KernelPegasosSVC, SBPClassifier], ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_calibrated_probabilities_from_the_svms(Estimator, n_classes, backend):
    settings, _ = GRIDS[Estimator]
    X, y = data(n_classes, n=300)
    X = StandardScaler().fit_transform(X)
    model = CalibratedClassifierCV(Estimator(**settings, random_state=0, backend=backend), ensemble=False)
    model.fit(X[:200], y[:200])
    probabilities = model.predict_proba(X[200:])
    assert probabilities.shape == (100, n_classes)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    prior = np.bincount(y[:200], minlength=n_classes) / 200
    assert log_loss(y[200:], probabilities) < 0.7 * log_loss(y[200:], np.tile(prior, (100, 1)))
    assert model.calibrated_classifiers_[0].estimator.backend_ == backend


@pytest.mark.parametrize("Estimator", list(GRIDS))
def test_a_dataframe_fit_and_its_model_file_warn_of_nothing(Estimator, tmp_path):
    """gpusvm's own checks on validated rows (the model's finite scores, a loaded file's
    probe row) do not raise scikit-learn's 'X does not have valid feature names' at the
    user, who gave a DataFrame; their own unnamed rows still get it."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from gpusvm import load, save

    pd = pytest.importorskip("pandas")
    X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    frame = pd.DataFrame(X, columns=list("abcd"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)  # (60 rows, an epoch of 1 step: true, not this test's)
        model = Estimator(**GRIDS[Estimator][0]).fit(frame, y)
        if hasattr(model, "partial_fit"):
            model.partial_fit(frame, y)
        save(model, tmp_path / "model")
        load(tmp_path / "model").predict(frame)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        model.predict(X)
