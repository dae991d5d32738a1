"""SBPClassifier's ``nu='auto'``: the pilot SVC on a subsample (gpusvm._estimator.auto_nu),
against SVCs fitted pair by pair and nu_from_svc, and the same nu on both backends."""

import itertools

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_classification
from sklearn.svm import SVC

from gpusvm import SBPClassifier, nu_from_svc
from gpusvm._estimator import auto_nu

PARAMS = {"kernel": "rbf", "gamma": 0.2, "degree": 3, "coef0": 0.0}


def noisy_classes(n_rows, n_classes, seed=0):
    """Overlapping classes: every pair's SVC has margin errors, so its nu is well above 0."""
    X, y = make_classification(
        n_samples=n_rows,
        n_features=6,
        n_informative=4,
        n_redundant=0,
        n_classes=n_classes,
        n_clusters_per_class=1,
        flip_y=0.05,
        random_state=seed,
    )
    return X, y


def test_one_multiclass_svc_gives_each_pair_the_nu_of_its_own_svc():
    X, y = noisy_classes(600, 4)
    svc = SVC(C=0.5, tol=1e-8, **PARAMS).fit(X, y)
    nus = auto_nu._one_vs_one_nus(svc, X, y, PARAMS)
    for (i, j), nu in zip(itertools.combinations(range(4), 2), nus, strict=True):
        rows = np.isin(y, [i, j])
        first = (y[rows] == i).astype(int)  # the pair's first class is its positive one
        pair_svc = SVC(C=0.5, tol=1e-8, **PARAMS).fit(X[rows], first)
        assert nu == pytest.approx(nu_from_svc(pair_svc, X[rows], first), rel=1e-4)


def test_small_data_is_its_own_subsample_and_gets_svcs_nu():
    X, y = noisy_classes(300, 2)
    assert auto_nu.pilot_size(300) == 300
    assert auto_nu.pilot_size(1_000) == auto_nu.PILOT_ALL_ROWS_BELOW
    assert auto_nu.pilot_size(10**6) == auto_nu.PILOT_ROWS
    rows = auto_nu.pilot_subsample(y, seed=3)
    assert np.array_equal(rows, np.arange(300))
    nu, problem_nus = auto_nu.pilot_nu(X[rows], y[rows], 300, 2, one_vs_one=False, C=2.0, **PARAMS)
    svc = SVC(C=2.0, **PARAMS).fit(X, y)
    assert problem_nus.shape == (1,)
    assert nu == pytest.approx(nu_from_svc(svc, X, y), rel=1e-6)


def test_pilot_c_keeps_the_regularization_of_every_row():
    """On a subsample of m of n rows the pilot's C is C n / m; on every row it is C."""
    X, y = noisy_classes(3_000, 2)
    rows = auto_nu.pilot_subsample(y, seed=0)
    assert rows.size == auto_nu.pilot_size(3_000) == 750  # a quarter
    nu, _ = auto_nu.pilot_nu(X[rows], y[rows], y.size, 2, one_vs_one=False, C=0.25, **PARAMS)
    scaled = SVC(C=0.25 * y.size / rows.size, **PARAMS).fit(X[rows], y[rows])
    assert nu == pytest.approx(nu_from_svc(scaled, X[rows], y[rows]), rel=1e-6)


def test_one_vs_rest_pilot_reads_each_class_against_the_rest():
    X, y = noisy_classes(300, 3)
    nu, problem_nus = auto_nu.pilot_nu(X, y, 300, 3, one_vs_one=False, C=1.0, **PARAMS)
    expected = [nu_from_svc(SVC(**PARAMS).fit(X, y == c), X, y == c) for c in range(3)]
    assert problem_nus == pytest.approx(expected, rel=1e-6)
    assert nu == pytest.approx(np.median(expected), rel=1e-6)


def test_separable_subsample_floors_nu_at_one_unit_of_slack():
    X, y = make_blobs(n_samples=400, centers=[[-6, 0], [6, 0]], cluster_std=0.5, random_state=0)
    nu, _ = auto_nu.pilot_nu(X, y, 400, 2, one_vs_one=False, C=100.0, **PARAMS)
    assert nu == auto_nu.MIN_SLACK / 400


def test_stratified_subsample_keeps_every_class_and_its_share():
    labels = np.repeat([0, 1, 2], [5_000, 900, 3])
    rows = auto_nu.stratified_subsample(labels, 1_000, seed=7)
    counts = np.bincount(labels[rows], minlength=3)
    assert counts[0] == pytest.approx(1_000 * 5_000 / 5_903, abs=1)
    assert counts[1] == pytest.approx(1_000 * 900 / 5_903, abs=1)
    assert counts[2] == 2  # at least two of a class that has them
    assert np.array_equal(rows, np.sort(rows))
    assert np.array_equal(rows, auto_nu.stratified_subsample(labels, 1_000, seed=7))
    assert not np.array_equal(rows, auto_nu.stratified_subsample(labels, 1_000, seed=8))


def test_default_nu_is_read_off_the_pilot_and_a_set_nu_is_kept():
    X, y = noisy_classes(700, 3)
    auto = SBPClassifier(max_iter=1, random_state=0).fit(X, y)
    rows = auto_nu.pilot_subsample(np.searchsorted(auto.classes_, y), 0)
    assert 0 < auto.nu_ < 1
    assert auto.nu == "auto"
    set_by_hand = SBPClassifier(nu=0.03, max_iter=1, random_state=0).fit(X, y)
    assert set_by_hand.nu_ == 0.03
    # a larger C is a harder margin: a smaller nu
    harder = SBPClassifier(C=50.0, max_iter=1, random_state=0).fit(X, y)
    assert harder.nu_ < auto.nu_
    assert rows.size == auto_nu.pilot_size(700)


def test_c_is_validated_with_its_name():
    X, y = noisy_classes(100, 2)
    with pytest.raises(ValueError, match="'C' parameter"):
        SBPClassifier(C=0.0).fit(X, y)
    with pytest.raises(ValueError, match="'nu' parameter"):
        SBPClassifier(nu="big").fit(X, y)


def test_auto_nu_is_the_same_on_both_backends(backend):
    X, y = noisy_classes(120, 3, seed=1)
    settings = dict(max_iter=1, batch_size=16, random_state=4)  # a few steps: the pilot is what is tested
    numpy_model = SBPClassifier(backend="numpy", **settings).fit(X, y)
    model = SBPClassifier(backend=backend, **settings).fit(X, y)
    assert model.nu_ == pytest.approx(numpy_model.nu_, rel=1e-6)
