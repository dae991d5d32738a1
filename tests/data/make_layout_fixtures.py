"""Write the fitted models that tests/test_layout.py loads: a pickle and a gpusvm.save file of
each of PegasosSVC, SBPClassifier (one-vs-one, three classes), KernelPegasosSVC and
FTRLClassifier, fitted with gpusvm 0.1.0 as it stood before issue 44 moved its modules, and
their predictions on the rows in ``layout_data.npz``.

Run from the repository root (``python tests/data/make_layout_fixtures.py``) only to write
fixtures for a format change: the point of these files is that they were written by the old
code, so that the test proves what the old code wrote still loads.
"""

import pickle
from pathlib import Path

import numpy as np

import gpusvm

HERE = Path(__file__).resolve().parent

MODELS = {
    "pegasos": lambda: gpusvm.PegasosSVC(max_iter=3, random_state=0),
    "sbp_ovo": lambda: gpusvm.SBPClassifier(max_iter=2, random_state=0),
    "kernel_pegasos": lambda: gpusvm.KernelPegasosSVC(max_iter=1, random_state=0),
    "ftrl": lambda: gpusvm.FTRLClassifier(max_iter=2, random_state=0),
}


def layout_data():
    rng = np.random.default_rng(44)
    X = rng.normal(size=(150, 5))
    y3 = np.argmax(X[:, :3] + 0.3 * rng.normal(size=(150, 3)), axis=1) * 10 + 3
    y2 = np.where(X[:, 0] + 0.3 * rng.normal(size=150) > 0, 1, 0)
    return X, y2, y3


def fitted(name, X, y2, y3):
    return MODELS[name]().fit(X, y3 if name == "sbp_ovo" else y2)


def main():
    X, y2, y3 = layout_data()
    predictions = {}
    with gpusvm.config_context(backend="numpy"):
        for name in MODELS:
            model = fitted(name, X, y2, y3)
            predictions[name] = model.predict(X)
            predictions[name + "_decision"] = model.decision_function(X)
            with open(HERE / f"layout_{name}.pkl", "wb") as file:
                pickle.dump(model, file, protocol=4)
            gpusvm.save(model, HERE / f"layout_{name}.npz")
    np.savez(HERE / "layout_predictions.npz", **predictions)


if __name__ == "__main__":
    main()
