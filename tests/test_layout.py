"""The package layout (issue 44): fitted models written before the move still load."""

import pickle
from pathlib import Path

import numpy as np
import pytest

import gpusvm

from .data.make_layout_fixtures import MODELS, fitted, layout_data

DATA = Path(__file__).resolve().parent / "data"


# --- models written by the code before the move still load --------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("how", ["pickle", "model file"])
def test_models_written_before_the_move_still_load(name, how):
    X, y2, y3 = layout_data()
    if how == "pickle":
        with open(DATA / f"layout_{name}.pkl", "rb") as file:
            model = pickle.load(file)
    else:
        model = gpusvm.load(DATA / f"layout_{name}.npz")
    expected = np.load(DATA / "layout_predictions.npz")
    with gpusvm.config_context(backend="numpy"):
        fresh = fitted(name, X, y2, y3)
        np.testing.assert_array_equal(model.predict(X), expected[name])
        np.testing.assert_array_equal(model.predict(X), fresh.predict(X))
        np.testing.assert_allclose(model.decision_function(X), expected[name + "_decision"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(model.decision_function(X), fresh.decision_function(X), rtol=1e-12, atol=1e-12)
