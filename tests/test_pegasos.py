import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification
from sklearn.svm import LinearSVC

from gpusvm import PegasosSVC
from gpusvm._backend import cupy_device_count
from gpusvm.datasets import load_adult
from gpusvm.solvers.pegasos import primal_objective

from .conftest import NO_DEVICE, needs_device, to_host
from .reference import reference_pegasos


def random_problem(rng, n=120, d=9, n_classes=2, density=1.0):
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    y = rng.integers(0, n_classes, size=n)
    X[np.arange(n), y % d] += 2.0  # some signal, so not everything violates forever
    return X, y


def weights_of(model):
    return np.hstack([model.coef_, model.intercept_[:, None]]) if model.fit_intercept else model.coef_


def targets_of(y, classes):
    if len(classes) == 2:
        return np.where(y == classes[1], 1.0, -1.0)[:, None]
    return np.where(y[:, None] == classes[None, :], 1.0, -1.0)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("average", [False, True, 7])
@pytest.mark.parametrize("projection", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_matches_reference(backend, rng, n_classes, average, projection, sparse):
    """The a*v representation, the fold and the averaging give the plain algorithm's w."""
    X, y = random_problem(rng, n_classes=n_classes, density=0.4 if sparse else 1.0)
    weights = rng.uniform(0.2, 2.0, size=X.shape[0])
    lam, batch, epochs, seed = float(rng.uniform(1e-4, 1e-1)), 8, 3, int(rng.integers(2**32))
    model = PegasosSVC(
        lam=lam,
        batch_size=batch,
        max_iter=epochs,
        tol=None,
        average=average,
        projection=projection,
        random_state=seed,
        backend=backend,
    )
    model.fit(sp.csr_matrix(X) if sparse else X, y, sample_weight=weights)
    expected = reference_pegasos(
        X,
        targets_of(y, np.unique(y)),
        weights,
        lam,
        batch,
        model.t_,
        seed,
        projection=projection,
        average_start=None if average is False else int(average),
        weight_by_step=average is True,
    )
    np.testing.assert_allclose(weights_of(model), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert model.t_ == epochs * int(np.ceil(X.shape[0] / batch))
    assert model.n_iter_ == epochs


def test_no_intercept_matches_reference(backend, rng):
    X, y = random_problem(rng)
    model = PegasosSVC(
        lam=0.01, batch_size=5, max_iter=2, tol=None, fit_intercept=False, random_state=3, backend=backend
    ).fit(X, y)
    expected = reference_pegasos(
        X, targets_of(y, np.unique(y)), np.ones(len(y)), 0.01, 5, model.t_, 3, fit_intercept=False, average_start=1
    )
    np.testing.assert_allclose(model.coef_, expected, rtol=1e-9, atol=1e-12)
    assert np.all(model.intercept_ == 0)


def test_float32_close_to_float64(backend, rng):
    X, y = random_problem(rng, n=300, d=20)
    kwargs = dict(lam=1e-3, batch_size=16, max_iter=4, tol=None, random_state=1, backend=backend)
    m64 = PegasosSVC(**kwargs).fit(X, y)
    m32 = PegasosSVC(**kwargs).fit(X.astype(np.float32), y)
    assert m32._state.v.dtype == np.float32
    np.testing.assert_allclose(weights_of(m32), weights_of(m64), rtol=1e-4, atol=1e-4 * np.abs(weights_of(m64)).max())


def test_dense_and_sparse_agree(rng):
    X, y = random_problem(rng, n=200, d=30, density=0.2)
    kwargs = dict(lam=1e-3, batch_size=10, max_iter=3, tol=None, random_state=4)
    dense = PegasosSVC(**kwargs).fit(X, y)
    sparse = PegasosSVC(**kwargs).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(weights_of(sparse), weights_of(dense), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(sparse.predict(X), dense.predict(sp.csr_matrix(X)))


def test_sparse_with_many_features_uses_touched_columns_only(rng):
    """Wide sparse data takes the sorted-columns path of the update; still the reference."""
    n, d = 60, 5000
    X = sp.random(n, d, density=0.002, random_state=int(rng.integers(1000)), format="csr")
    y = rng.integers(0, 2, n)
    model = PegasosSVC(lam=0.05, batch_size=4, max_iter=2, tol=None, random_state=2).fit(X, y)
    expected = reference_pegasos(
        X.toarray(), targets_of(y, np.unique(y)), np.ones(n), 0.05, 4, model.t_, 2, average_start=1
    )
    np.testing.assert_allclose(weights_of(model), expected, rtol=1e-9, atol=1e-12)


@needs_device
def test_backends_agree(rng):
    """NumPy and CuPy draw the same batches and give the same model."""
    X, y = random_problem(rng, n=500, d=40, n_classes=3, density=0.3)
    for data in (X, sp.csr_matrix(X), X.astype(np.float32)):
        kwargs = dict(lam=1e-3, batch_size=32, max_iter=3, tol=None, random_state=11)
        cpu = PegasosSVC(backend="numpy", **kwargs).fit(data, y)
        gpu = PegasosSVC(backend="cupy", **kwargs).fit(data, y)
        # float32 atomics add in another order than NumPy, which may flip a margin test
        rtol = 1e-3 if data.dtype == np.float32 else 1e-9
        scale = np.abs(weights_of(cpu)).max()
        np.testing.assert_allclose(weights_of(gpu), weights_of(cpu), rtol=rtol, atol=rtol * scale)
        assert np.mean(gpu.predict(data) == cpu.predict(data)) > 0.99


def test_partial_fit_continues_the_same_schedule(backend, rng):
    """Two partial_fit calls equal a fit of two epochs: the step counter carries over."""
    X, y = random_problem(rng, n_classes=3)
    kwargs = dict(lam=0.01, batch_size=7, random_state=5, backend=backend)
    full = PegasosSVC(max_iter=2, tol=None, **kwargs).fit(X, y)
    streamed = PegasosSVC(**kwargs)
    streamed.partial_fit(X, y, classes=np.unique(y))
    streamed.partial_fit(X, y)
    np.testing.assert_allclose(weights_of(streamed), weights_of(full), rtol=1e-12, atol=1e-12)
    assert streamed.t_ == full.t_ and streamed.n_iter_ == 1


def test_failed_partial_fit_leaves_the_model_as_it_was(backend, rng):
    X, y = random_problem(rng)
    model = PegasosSVC(lam=0.01, random_state=0, backend=backend).partial_fit(X, y, classes=[0, 1])
    before = {name: getattr(model, name).copy() for name in ("coef_", "intercept_")}
    state_v, step = model._state.v.copy(), model.t_
    bad_rows = [X.copy(), X[:, :-1], X]
    bad_rows[0][3, 2] = np.nan
    bad_labels = [y, y, np.where(y == 0, 0, 7)]
    for X_bad, y_bad in zip(bad_rows, bad_labels, strict=True):
        with pytest.raises(ValueError):
            model.partial_fit(X_bad, y_bad)
        np.testing.assert_array_equal(model.coef_, before["coef_"])
        np.testing.assert_array_equal(model.intercept_, before["intercept_"])
        np.testing.assert_array_equal(to_host(model._state.v), to_host(state_v))
        assert model.t_ == step


def test_failed_first_partial_fit_leaves_no_model():
    model = PegasosSVC()
    with pytest.raises(ValueError, match="classes must be passed"):
        model.partial_fit(np.ones((4, 2)), [0, 1, 0, 1])
    assert not hasattr(model, "coef_") and not hasattr(model, "n_features_in_")


def test_early_stopping_and_objective_curve():
    X, y = make_classification(400, 10, random_state=0)
    model = PegasosSVC(C=1.0, max_iter=500, tol=1e-3, n_iter_no_change=3, random_state=0).fit(X, y)
    assert model.n_iter_ < 500
    assert len(model.objective_curve_) == model.n_iter_
    n = X.shape[0]
    expected = primal_objective(X, np.where(y == 1, 1.0, -1.0)[:, None], np.ones(n), weights_of(model), 1.0 / n, True)
    assert model.objective_curve_[-1] == pytest.approx(expected, rel=1e-12)


def test_sample_weight_zero_rows_never_move_the_model(rng):
    """A row of weight zero contributes no sub-gradient: labels flipped there change nothing."""
    X, y = random_problem(rng)
    weights = np.ones(len(y))
    weights[:30] = 0
    flipped = y.copy()
    flipped[:30] = 1 - flipped[:30]
    kwargs = dict(lam=0.01, batch_size=6, max_iter=3, tol=None, random_state=8)
    a = PegasosSVC(**kwargs).fit(X, y, sample_weight=weights)
    b = PegasosSVC(**kwargs).fit(X, flipped, sample_weight=weights)
    np.testing.assert_allclose(weights_of(a), weights_of(b), rtol=1e-12)


def test_class_weight_balanced_equals_explicit_weights(rng):
    X, y = random_problem(rng)
    y[:90] = 0
    kwargs = dict(lam=0.01, max_iter=2, tol=None, random_state=1)
    balanced = PegasosSVC(class_weight="balanced", **kwargs).fit(X, y)
    counts = np.bincount(y)
    explicit = PegasosSVC(**kwargs).fit(X, y, sample_weight=(len(y) / (2 * counts))[y])
    np.testing.assert_allclose(weights_of(balanced), weights_of(explicit), rtol=1e-12)


def test_class_weight_moves_the_boundary_toward_the_light_class():
    X, y = make_classification(600, 5, flip_y=0.2, class_sep=0.5, random_state=3)
    plain = PegasosSVC(random_state=0).fit(X, y)
    heavy = PegasosSVC(class_weight={0: 5.0, 1: 1.0}, random_state=0).fit(X, y)
    assert np.mean(heavy.predict(X) == 0) > np.mean(plain.predict(X) == 0) + 0.1


@pytest.mark.slow
def test_adult_objective_and_accuracy_near_linearsvc():
    """On real data, at the same C, Pegasos gets within a few percent of LIBLINEAR's optimum."""
    X, y, X_test, y_test = load_adult()
    reference = LinearSVC(C=1.0, loss="hinge", dual=True, tol=1e-6, max_iter=100_000).fit(X, y)
    model = PegasosSVC(C=1.0, random_state=0, backend="numpy").fit(X, y)
    n = X.shape[0]
    targets = np.where(y == 1, 1.0, -1.0)[:, None]
    reference_weights = np.hstack([reference.coef_, reference.intercept_[:, None]])
    optimum = primal_objective(X, targets, np.ones(n), reference_weights, 1 / n, True)
    ours = primal_objective(X, targets, np.ones(n), weights_of(model), 1 / n, True)
    assert optimum <= ours < 1.1 * optimum
    assert model.score(X_test, y_test) > reference.score(X_test, y_test) - 0.01


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 30),
    d=st.integers(1, 6),
    n_classes=st.integers(2, 3),
    batch=st.integers(1, 9),
    log_lam=st.floats(-5, 1),
    sparse=st.booleans(),
    average=st.sampled_from([False, True, 3]),
    fit_intercept=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    data_seed=st.integers(0, 2**32 - 1),
)
def test_property_matches_reference(n, d, n_classes, batch, log_lam, sparse, average, fit_intercept, seed, data_seed):
    """Any small problem, any batch (larger than n too), any lambda: the plain algorithm's w."""
    data = np.random.default_rng(data_seed)
    X = data.normal(size=(n, d)) * (data.random((n, d)) < (0.5 if sparse else 1.0))
    y = np.arange(n) % n_classes  # every class present
    data.shuffle(y)
    lam = 10.0**log_lam
    model = PegasosSVC(
        lam=lam, batch_size=batch, max_iter=2, tol=None, average=average, fit_intercept=fit_intercept, random_state=seed
    )
    model.fit(sp.csr_matrix(X) if sparse else X, y)
    expected = reference_pegasos(
        X,
        targets_of(y, np.unique(y)),
        np.ones(n),
        lam,
        batch,
        model.t_,
        seed,
        fit_intercept=fit_intercept,
        average_start=None if average is False else int(average),
        weight_by_step=average is True,
    )
    got = weights_of(model)
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10 * max(1.0, np.abs(expected).max()))


def test_sparse_rows_without_nonzeros(backend):
    """Batches made only of empty rows (found by the property test) still step correctly."""
    X = sp.csr_matrix(np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]))
    y = np.array([0, 1, 1, 0])
    model = PegasosSVC(lam=1.0, batch_size=1, max_iter=3, tol=None, random_state=0, backend=backend).fit(X, y)
    expected = reference_pegasos(
        X.toarray(), targets_of(y, np.unique(y)), np.ones(4), 1.0, 1, model.t_, 0, average_start=1
    )
    np.testing.assert_allclose(weights_of(model), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("sparse", [False, True])
def test_blocks_of_steps_replayed_give_the_direct_model(step_block_mode, rng, monkeypatch, sparse):
    """The launches of a block of steps, replayed with the arguments of their first run
    (as a CUDA graph replays them), train the model that direct launches train: no launch
    argument changes from step to step, and the blocks' position counter advances."""
    import gpusvm._device.step_blocks as step_blocks

    X, y = random_problem(rng, n=50, n_classes=3, density=0.5 if sparse else 1.0)
    X = sp.csr_matrix(X) if sparse else X
    settings = dict(lam=0.05, batch_size=4, max_iter=2, tol=None, average=True, random_state=5, backend="cupy")
    replayed = PegasosSVC(**settings).fit(X, y)  # 13 steps an epoch: blocks of 3, 3, 3, 3 and 1
    replayed.partial_fit(X[:9], y[:9])
    monkeypatch.setattr(step_blocks, "default_mode", lambda: "direct")
    direct = PegasosSVC(**settings).fit(X, y)
    direct.partial_fit(X[:9], y[:9])
    np.testing.assert_allclose(weights_of(replayed), weights_of(direct), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", ["direct", "replay"])
@pytest.mark.parametrize(
    ("sparse", "n_classes", "fit_intercept", "average", "batch", "d"),
    [
        (False, 3, True, True, 4, 9),
        (True, 3, True, True, 4, 9),
        (True, 2, False, False, 4, 9),
        (True, 3, True, True, 48, 9),  # rows in groups of 16 lanes, pairs in groups of 4, a round partly idle
        (False, 2, True, True, 48, 40),  # rows longer than their group: entries past the first read
        (False, 2, True, True, 1000, 9),  # a lane a row
    ],
)
def test_device_fused_steps_give_the_reference_and_the_direct_model(
    rng, monkeypatch, mode, sparse, n_classes, fit_intercept, average, batch, d
):
    """``pegasos_fused_steps`` (one launch a block of steps, ``GPUSVM_FUSED_STEPS``) takes
    the steps of the per-step launches: the reference's model, and the direct launches'
    to rounding, across blocks, partial blocks, partial_fit, lane groups of every width
    and the maintenance (at batch 4, lam = 1e-3 folds the average a few times)."""
    import gpusvm._device.step_blocks as step_blocks

    if cupy_device_count() == 0:
        pytest.skip(NO_DEVICE)
    from gpusvm.solvers.pegasos import _cuda as _pegasos_cuda

    fused_lengths = []  # the steps each fused launch runs
    launch_fused = _pegasos_cuda.CupyPegasosSteps._launch_fused
    monkeypatch.setattr(
        _pegasos_cuda.CupyPegasosSteps,
        "_launch_fused",
        lambda self, length, launch: (fused_lengths.append(length), launch_fused(self, length, launch)),
    )
    X_dense, y = random_problem(rng, n=50, d=d, n_classes=n_classes, density=0.5 if sparse else 1.0)
    X = sp.csr_matrix(X_dense) if sparse else X_dense
    settings = dict(
        lam=1e-3,
        batch_size=batch,
        max_iter=2,
        tol=None,
        average=average,
        fit_intercept=fit_intercept,
        random_state=5,
        backend="cupy",
    )
    monkeypatch.setattr(step_blocks, "BLOCK_STEPS", 3)  # at batch 4, 13 steps an epoch: blocks of 3, 3, 3, 3, 1
    monkeypatch.setattr(step_blocks, "default_mode", lambda: mode)
    monkeypatch.setattr(step_blocks, "fused_steps_default", lambda batch_size=None: True)
    fused = PegasosSVC(**settings).fit(X, y)
    steps = -(-X.shape[0] // batch)
    epoch_blocks = [3] * (steps // 3) + ([steps % 3] if steps % 3 else [])
    # direct: every block is a fused launch; replay: the first block of each length, run then recorded
    assert fused_lengths == (
        epoch_blocks * 2 if mode == "direct" else [length for length in dict.fromkeys(epoch_blocks) for _ in range(2)]
    )
    expected = reference_pegasos(
        X_dense,
        targets_of(y, np.unique(y)),
        np.ones(len(y)),
        1e-3,
        batch,
        fused.t_,
        5,
        fit_intercept=fit_intercept,
        average_start=1 if average else None,
    )
    np.testing.assert_allclose(weights_of(fused), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    fused.partial_fit(X[:9], y[:9])
    monkeypatch.setattr(step_blocks, "fused_steps_default", lambda batch_size=None: False)
    fused_lengths.clear()
    direct = PegasosSVC(**settings).fit(X, y).partial_fit(X[:9], y[:9])
    assert fused_lengths == []
    # the sums of a margin and of a weight's updates are taken in another order: rounding apart
    direct_weights = weights_of(direct)
    np.testing.assert_allclose(weights_of(fused), direct_weights, rtol=1e-11, atol=1e-12 * np.abs(direct_weights).max())


def test_fused_steps_limits_are_the_kernels():
    """The launcher's limits on fused steps are the shared-memory sizes the kernel declares."""
    from gpusvm._device.cuda_modules import cuda_source_dir
    from gpusvm.solvers import pegasos

    source = (cuda_source_dir() / "pegasos.cu").read_text()
    declared = {name: int(value) for name, value in re.findall(r"#define PEGASOS_FUSED_(MAX_\w+) (\d+)", source)}
    assert declared == {
        "MAX_BATCH": pegasos.FUSED_MAX_BATCH,
        "MAX_CLASSES": pegasos.FUSED_MAX_CLASSES,
        "MAX_PAIRS": pegasos.FUSED_MAX_PAIRS,
    }
    assert pegasos.fits_fused_steps(1024, 2) and pegasos.fits_fused_steps(32, 64)
    assert not pegasos.fits_fused_steps(2048, 1) and not pegasos.fits_fused_steps(64, 65)
    assert not pegasos.fits_fused_steps(1024, 3)


def schedule_step_by_step(problem, first_step, n_steps, weight_sum, given_from):
    """The CUDA steps' schedule from the scalar methods NumpyPegasosSteps calls, one step at a time."""
    rows = np.empty((n_steps, 6))
    for i, t in enumerate(range(first_step, first_step + n_steps)):
        average_weight = problem.average_weight(t)
        weight_sum += average_weight
        given_first_row = -1 if given_from is None else (t - given_from) * problem.batch_size
        rows[i] = (t, problem.step_size_over_batch(t), problem.shrink(t), average_weight, weight_sum, given_first_row)
    return rows


@pytest.mark.parametrize(
    "first_step, weight_sum, given_from",
    [
        (1, 0.0, None),
        (2, 1.0, None),
        (37, 12345.678, 37),
        (1_000_003, 5.3e11, 999_990),
    ],
)
@pytest.mark.parametrize(
    "lam, batch_size, average_start, weight_by_step",
    [
        (1e-4, 64, 1, True),
        (0.37, 1, 1, False),
        (1.0 / 32561, 1024, None, False),
        (3e-7, 7, 25, True),
        (2.5, 256, 1_000_010, False),
    ],
)
def test_schedule_equals_the_scalar_step_values(
    lam, batch_size, average_start, weight_by_step, first_step, weight_sum, given_from
):
    """The CUDA steps' schedule, computed for all steps at once, holds the values the NumPy
    steps compute one step at a time, bit for bit (the running weight sum included)."""
    from gpusvm.solvers.pegasos import PegasosProblem, pegasos_schedule

    problem = PegasosProblem(
        X=np.zeros((3, 2)),
        targets=np.ones((3, 1)),
        sample_weight=np.ones(3),
        lam=lam,
        batch_size=batch_size,
        fit_intercept=True,
        projection=True,
        average_start=average_start,
        weight_by_step=weight_by_step,
        seed=0,
    )
    for n_steps in (0, 1, 5000):
        schedule = pegasos_schedule(problem, first_step, n_steps, weight_sum, given_from)
        expected = schedule_step_by_step(problem, first_step, n_steps, weight_sum, given_from)
        assert schedule.shape == (n_steps, 6) and schedule.dtype == np.float64
        assert np.array_equal(schedule, expected)


@pytest.mark.parametrize("sparse", [False, True])
def test_steps_on_given_rows_match_drawn_steps(backend, rng, sparse, monkeypatch):
    """gpusvm.dask's stepper over rows gathered in draw order (``given_from``) takes the
    steps the drawing stepper takes over all the rows; on CuPy also with fused steps."""
    import gpusvm._device.step_blocks as step_blocks
    from gpusvm._backend import get_namespace
    from gpusvm._random import random_index_block
    from gpusvm._validation import to_backend
    from gpusvm.solvers.pegasos import PegasosProblem, PegasosState, make_steps

    X, y = random_problem(rng, n=150, d=7, n_classes=3, density=0.5 if sparse else 1.0)
    X = sp.csr_matrix(X) if sparse else X
    targets, weights = targets_of(y, np.unique(y)), rng.uniform(0.5, 2.0, size=y.shape[0])
    xp = get_namespace(backend)
    batch, first, n_steps, seed = 6, 4, 9, 11

    def problem(rows):
        return PegasosProblem(
            X=to_backend(X[rows], backend),
            targets=xp.asarray(targets[rows]),
            sample_weight=xp.asarray(weights[rows]),
            lam=0.02,
            batch_size=batch,
            fit_intercept=True,
            projection=True,
            average_start=1,
            weight_by_step=True,
            seed=seed,
            mean_weight=float(weights.mean()),
        )

    def stepped(stepper):
        for _ in range(n_steps):
            stepper.step()
        return to_host(stepper.state.weights(averaged=True))

    start = PegasosState.zeros(3, X.shape[1] + 1, np.float64, xp)
    start.step = first - 1
    drawn = stepped(make_steps(problem(np.arange(X.shape[0])), xp, state=start.copy()))
    gathered_rows = random_index_block(seed, first, n_steps, batch, X.shape[0]).ravel()
    given = stepped(make_steps(problem(gathered_rows), xp, state=start.copy(), given_from=first))
    if backend == "numpy":
        np.testing.assert_array_equal(given, drawn)
        return
    np.testing.assert_allclose(given, drawn, rtol=1e-12, atol=1e-14)  # float64 atomics add in any order
    monkeypatch.setattr(step_blocks, "fused_steps_default", lambda batch_size=None: True)
    given_fused = stepped(make_steps(problem(gathered_rows), xp, state=start.copy(), given_from=first))
    np.testing.assert_allclose(given_fused, drawn, rtol=1e-11, atol=1e-12 * np.abs(drawn).max())  # sums reordered


@pytest.mark.parametrize("sparse", [False, True])
def test_progressive_objective_is_the_primal_objective_of_the_weights_each_chunk_meets(backend, rng, sparse):
    """A streamed epoch's objective: each chunk's rows measured with the weights of its
    moment (the average when averaging), weighted by rows; with the same weights for
    every chunk, the exact primal objective over all the rows."""
    from gpusvm._backend import get_namespace
    from gpusvm._validation import to_backend
    from gpusvm.solvers.pegasos import PegasosState, ProgressiveObjective

    X, y = random_problem(rng, n=90, d=7, n_classes=3, density=0.5 if sparse else 1.0)
    X = sp.csr_matrix(X) if sparse else X
    targets, weights = targets_of(y, np.unique(y)), rng.uniform(0.5, 2.0, size=y.shape[0])
    xp, lam = get_namespace(backend), 0.05
    states = []
    for _ in range(2):
        state = PegasosState.zeros(3, X.shape[1] + 1, np.float64, xp)
        state.v, state.scale_a = xp.asarray(rng.normal(size=(3, X.shape[1] + 1))), xp.asarray(rng.uniform(0.5, 2, 3))
        state.avg_p, state.avg_b = xp.asarray(rng.normal(size=(3, X.shape[1] + 1))), xp.asarray(rng.uniform(0, 1, 3))
        state.avg_weight_sum = 3.0
        states.append(state)
    parts = [slice(0, 50), slice(50, 90)]

    def measured(chunk_states, averaged):
        progress = ProgressiveObjective(lam, True, averaged, xp)
        for rows, state in zip(parts, chunk_states):
            progress.add(to_backend(X[rows], backend), xp.asarray(targets[rows]), xp.asarray(weights[rows]), state)
        return progress.value()

    def exact(state, rows, averaged):
        return primal_objective(X[rows], targets[rows], weights[rows], to_host(state.weights(averaged)), lam, True)

    for averaged in (False, True):
        assert measured([states[0]] * 2, averaged) == pytest.approx(exact(states[0], slice(0, 90), averaged), rel=1e-12)
        expected = (50 * exact(states[0], parts[0], averaged) + 40 * exact(states[1], parts[1], averaged)) / 90
        assert measured(states, averaged) == pytest.approx(expected, rel=1e-12)


def test_the_stopping_rule_waits_a_thousand_steps_as_well_as_its_epochs():
    from gpusvm.solvers.pegasos import PATIENCE_STEPS, NoImprovementStop

    flat = [1.0] + [2.0] * 400  # the best first, then no gain
    by_epochs = NoImprovementStop(1e-3, 5)
    assert [by_epochs(value) for value in flat].index(True) == 5  # steps not given: epochs alone
    few_steps = NoImprovementStop(1e-3, 5)  # epochs of 7 steps (400 rows, batch 64)
    stops = [few_steps(value, 7 * epoch) for epoch, value in enumerate(flat, 1)]
    assert stops.index(True) + 1 == 1 + -(-PATIENCE_STEPS // 7)  # 1,000 steps after the best epoch
    many_steps = NoImprovementStop(1e-3, 5)  # epochs of 509 steps (Adult): five epochs are more
    assert [many_steps(value, 509 * epoch) for epoch, value in enumerate(flat, 1)].index(True) == 5
    assert not any(NoImprovementStop(None, 5)(value, 10**9) for value in flat)


def test_a_few_hundred_rows_are_trained_to_near_their_optimum_at_the_defaults():
    """400 Adult rows, epochs of 7 steps: the rule used to stop at epoch 7 with the
    objective at 1.57, worse than the zero weights' 1; 1,000 epochs reach 0.30."""
    X, y, _, _ = load_adult()
    model = PegasosSVC(random_state=0).fit(X[:400], y[:400])
    assert model.objective_curve_[-1] < 0.35 and model.n_iter_ < model.max_iter
