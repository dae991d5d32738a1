"""gpusvm.dask on a LocalCluster (NumPy backend): exact modes equal the single-node
estimators, averaging mode is close, predictions are lazy, and bad input, a missing
client and a lost worker give clear errors or the same model."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import gpusvm  # noqa: E402
import gpusvm.dask as gd  # noqa: E402

from .conftest import needs_device  # noqa: E402

# Slow as a whole (each starts or uses a dask cluster):
# `python -m pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

ONLINE = ["FTRLClassifier", "TruncatedGradientClassifier", "FOBOSClassifier", "RDAClassifier"]
UNEVEN = (700, 0, 1100, 450, 750)  # row chunks, one of them empty


@pytest.fixture(scope="module")
def client():
    """Two workers (threads), the default client for the module's tests."""
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def one_worker():
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster, set_as_default=False) as c,
    ):
        yield c


def blobs(n_classes=3, n=3000, d=12, seed=0, dtype=np.float64, sparse=False, spread=2.0, zero_below=1.0):
    """Gaussian classes around centers ``spread`` apart; sparse: entries under ``zero_below`` dropped."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=spread, size=(n_classes, d))
    y = rng.integers(0, n_classes, size=n)
    X = (centers[y] + rng.normal(size=(n, d))).astype(dtype)
    if sparse:
        X[np.abs(X) < zero_below] = 0.0
        X = sp.csr_matrix(X)
    return X, y


def chunked(X, y, chunks=UNEVEN, weights=None):
    """dask arrays of X and y (and weights) over row chunks summing to the rows of X."""
    chunks = tuple(chunks)
    assert sum(chunks) == X.shape[0]
    arrays = [da.from_array(X, chunks=(chunks, X.shape[1]), asarray=False), da.from_array(y, chunks=(chunks,))]
    if weights is not None:
        arrays.append(da.from_array(weights, chunks=(chunks,)))
    return arrays


def assert_same_model(distributed_model, local_model, rtol=1e-10):
    np.testing.assert_allclose(distributed_model.coef_, local_model.coef_, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(distributed_model.intercept_, local_model.intercept_, rtol=rtol, atol=1e-12)
    np.testing.assert_array_equal(distributed_model.classes_, local_model.classes_)
    assert distributed_model.t_ == local_model.t_
    assert distributed_model.n_iter_ == local_model.n_iter_


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "n_classes, dtype, sparse",
    [(2, np.float64, False), (3, np.float32, False), (3, np.float64, True), (2, np.float32, True)],
)
def test_exact_pegasos_equals_single_node(client, one_worker, workers, n_classes, dtype, sparse):
    X, y = blobs(n_classes, dtype=dtype, sparse=sparse)
    params = dict(random_state=3, max_iter=30, batch_size=16, backend="numpy")
    model = gd.PegasosSVC(**params)
    model.client = client if workers == 2 else one_worker
    model.fit(*chunked(X, y))
    local = gpusvm.PegasosSVC(**params).fit(X, y)
    assert_same_model(model, local)
    assert model.n_iter_ < 30  # stopped by tol at the same epoch
    np.testing.assert_allclose(model.objective_curve_, local.objective_curve_, rtol=1e-12)


def test_exact_pegasos_with_weights_and_balanced_classes(client):
    X, y = blobs(3)
    y[y == 2] = np.where(np.arange((y == 2).sum()) % 3 == 0, 2, 0)  # an uneven class
    weights = np.random.default_rng(1).uniform(0.5, 2.0, size=y.shape[0])
    params = dict(random_state=0, max_iter=3, tol=None, class_weight="balanced", average=50, backend="numpy")
    model = gd.PegasosSVC(**params).fit(*chunked(X, y), sample_weight=chunked(X, y, weights=weights)[2])
    assert_same_model(model, gpusvm.PegasosSVC(**params).fit(X, y, sample_weight=weights))


def test_exact_pegasos_partial_fit_continues_like_single_node(client):
    X, y = blobs(2)
    params = dict(random_state=5, backend="numpy", lam=1e-3)
    model, local = gd.PegasosSVC(**params), gpusvm.PegasosSVC(**params)
    for part in (slice(0, 1500), slice(1500, 3000)):
        model.partial_fit(*chunked(X[part], y[part], chunks=(900, 600)), classes=[0, 1])
        local.partial_fit(X[part], y[part], classes=[0, 1])
    assert_same_model(model, local)


def test_average_mode_with_one_worker_is_single_node(one_worker):
    X, y = blobs(3)
    params = dict(random_state=2, max_iter=8, tol=None, backend="numpy")
    model = gd.PegasosSVC(mode="average", **params)
    model.client = one_worker
    model.fit(*chunked(X, y))
    local = gpusvm.PegasosSVC(**params).fit(X, y)
    np.testing.assert_array_equal(model.coef_, local.coef_)
    np.testing.assert_array_equal(model.intercept_, local.intercept_)


def test_average_mode_on_shuffled_shards_is_within_five_percent(client):
    X, y = blobs(2, n=4000, d=20, seed=4)
    params = dict(random_state=0, backend="numpy")
    model = gd.PegasosSVC(mode="average", **params).fit(*chunked(X, y, chunks=(1000,) * 4))
    local = gpusvm.PegasosSVC(**params).fit(X, y)
    assert model.objective_curve_[-1] <= 1.05 * local.objective_curve_[-1]


def test_average_mode_warns_on_shards_sorted_by_label(client):
    X, y = blobs(2)
    order = np.argsort(y, kind="stable")
    with pytest.warns(UserWarning, match="class proportions differ"):
        gd.PegasosSVC(mode="average", max_iter=2, tol=None, backend="numpy").fit(
            *chunked(X[order], y[order], chunks=(1500, 1500))
        )


def overlapping(n_classes=2, n=2000, d=8, seed=0, dtype=np.float64, sparse=False):
    """Classes that overlap (SBP's covered set is then more than a few rows); sparse, with
    some rows alike (all zeros): equal responses at the water's edge, which must be
    covered together on one node and on a cluster, whatever the rounding."""
    X, y = blobs(n_classes, n, d, seed, dtype, sparse, spread=0.6, zero_below=0.8)
    if sparse:
        assert np.unique(X.toarray(), axis=0).shape[0] < n
    return X, y


def assert_same_kernel_model(distributed_model, local_model):
    np.testing.assert_array_equal(distributed_model.support_, local_model.support_)
    np.testing.assert_allclose(distributed_model.dual_coef_, local_model.dual_coef_, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(distributed_model.intercept_, local_model.intercept_, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(distributed_model.water_level_, local_model.water_level_, rtol=1e-9)
    assert distributed_model.t_ == local_model.t_
    assert distributed_model.gamma_ == pytest.approx(local_model.gamma_, rel=1e-12)
    sv = distributed_model.support_vectors_
    np.testing.assert_array_equal(
        sv.toarray() if sp.issparse(sv) else sv,
        local_model.support_vectors_.toarray() if sp.issparse(sv) else local_model.support_vectors_,
    )
    for mine, theirs in zip(distributed_model.history_, local_model.history_, strict=True):
        assert mine["steps"] == theirs["steps"]
        assert mine["holdout_error"] == theirs["holdout_error"]
        assert mine["objective"] == pytest.approx(theirs["objective"], rel=1e-9)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "n_classes, sparse, settings",
    [
        (2, False, dict()),
        (3, False, dict(validation_fraction=0.2, average=False, n_iter_no_change=3)),
        (2, True, dict(fit_intercept=False, kernel="poly", gamma=0.1, coef0=1.0)),
        (2, False, dict(nu=0.0, fit_intercept=False, validation_fraction=0.1, kernel="linear")),
        (4, True, dict(batch_size=2, max_iter=1, gamma="auto")),
        (3, False, dict(nu="auto", C=3.0)),  # the pilot's rows gathered from the workers
        (2, True, dict(nu="auto")),
    ],
)
def test_sbp_equals_single_node(client, one_worker, workers, n_classes, sparse, settings):
    X, y = overlapping(n_classes, sparse=sparse)
    # float64 kernel values: the rounding of products of other shapes is 1e-16's (float32's is 1e-7's)
    params = (
        dict(
            nu=0.05,
            batch_size=16,
            max_iter=4,
            multi_class="ovr",
            random_state=7,
            backend="numpy",
            kernel_dtype="float64",
        )
        | settings
    )
    model = gd.SBPClassifier(**params)
    model.client = client if workers == 2 else one_worker
    model.fit(*chunked(X, y, chunks=(500, 0, 700, 800)))
    local = gpusvm.SBPClassifier(**params).fit(X, y)
    assert model.nu_ == pytest.approx(local.nu_, rel=1e-9)
    assert_same_kernel_model(model, local)


def test_sbp_one_vs_one_on_a_cluster_is_a_clear_error(client):
    X, y = overlapping(3, n=600)
    with pytest.raises(ValueError, match=r"one-vs-rest only; got multi_class='ovo' for 3 classes"):
        gd.SBPClassifier(max_iter=1).fit(*chunked(X, y, chunks=(300, 300)))
    gd.SBPClassifier(max_iter=1).fit(*chunked(X, y == 0, chunks=(300, 300)))  # two classes: no pairs


def test_sbp_renormalizing_and_asking_again_keep_the_model(client, monkeypatch):
    from gpusvm.dask import _sbp as cluster_sbp
    from gpusvm.solvers.sbp import _numpy as sbp_numpy  # NumpySBPSteps reads RENORMALIZE_BELOW here

    X, y = overlapping(3, n=1200)
    params = dict(
        nu=0.05,
        batch_size=8,
        max_iter=2,
        multi_class="ovr",
        random_state=1,
        validation_fraction=0.25,
        backend="numpy",
        kernel_dtype="float64",
    )
    monkeypatch.setattr(sbp_numpy, "RENORMALIZE_BELOW", 0.99)  # fold the scale in at almost every step
    monkeypatch.setattr(cluster_sbp, "RENORMALIZE_BELOW", 0.99)
    monkeypatch.setattr(cluster_sbp, "INITIAL_LOWEST", 2)  # too few lowest at first: the workers are asked again
    model = gd.SBPClassifier(**params).fit(*chunked(X, y, chunks=(600, 600)))
    assert_same_kernel_model(model, gpusvm.SBPClassifier(**params).fit(X, y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sbp_float32_kernel_values_and_scale_gamma(client, dtype):
    """By default the workers' kernel values are float32 whatever X's dtype; the support
    vectors keep X's rows."""
    X, y = overlapping(2, dtype=dtype)
    params = dict(nu=0.02, max_iter=2, random_state=0, backend="numpy")
    model = gd.SBPClassifier(**params).fit(*chunked(X, y, chunks=(1000, 1000)))
    local = gpusvm.SBPClassifier(**params).fit(X, y)
    assert model.support_vectors_.dtype == dtype
    assert all(0 < r["kernel_rows_distinct"] <= r["kernel_rows_computed"] for r in model.history_)
    # float32 variance sums round differently: the same model to float32 precision
    assert model.gamma_ == pytest.approx(local.gamma_, rel=1e-5)
    assert (model.predict(X) == local.predict(X)).mean() > 0.995


@pytest.mark.parametrize("kernel, shift, expected", [("rbf", 1e4, "float32"), ("linear", 100.0, "float64")])
def test_sbp_kernel_copies_as_the_single_node_fit_makes_them(client, kernel, shift, expected):
    """Rows far from the origin: the workers centre theirs on the collection's means (rbf),
    or all take float64 where float32 loses the digits (linear), as the single-node fit."""
    X, y = overlapping(2)
    X = X + shift
    params = dict(nu=0.05, max_iter=2, random_state=0, backend="numpy", kernel=kernel)
    model = gd.SBPClassifier(**params).fit(*chunked(X, y, chunks=(1000, 1000)))
    local = gpusvm.SBPClassifier(**params).fit(X, y)
    assert model.kernel_dtype_ == local.kernel_dtype_ == expected
    assert (model.predict(X) == local.predict(X)).mean() > 0.995


@needs_device
def test_cupy_chunks_give_the_single_node_models(client):
    """CuPy chunks, backend resolved on the workers: Pegasos and FTRL as their single-node
    CuPy models; SBP (whose workers follow the NumPy algorithm on device arrays) as the
    single-node NumPy model, to rounding."""
    import cupy

    X, y = overlapping(3)
    dX, dy = chunked(X, y, chunks=(1000, 1000))
    dX = dX.map_blocks(cupy.asarray)
    for name, params in [
        ("PegasosSVC", dict(random_state=0, max_iter=3, tol=None)),
        ("FTRLClassifier", dict(random_state=0, max_iter=2)),
    ]:
        model = getattr(gd, name)(backend="cupy", **params).fit(dX, dy)
        assert model.backend_ == "cupy"
        assert_same_model(model, getattr(gpusvm, name)(backend="cupy", **params).fit(cupy.asarray(X), y), rtol=1e-9)
    params = dict(
        nu=0.05, max_iter=2, random_state=0, validation_fraction=0.2, multi_class="ovr", kernel_dtype="float64"
    )
    model = gd.SBPClassifier(backend="cupy", **params).fit(dX, dy)
    assert_same_kernel_model(model, gpusvm.SBPClassifier(backend="numpy", **params).fit(X, y))


def test_shards_take_contiguous_rows_and_persisted_partitions_stay(client):
    """Unpersisted partitions are computed on the worker whose shard takes them (about
    half the rows each, in order); persisted ones go to the worker holding them."""
    from gpusvm.dask._cluster import ShardSet

    X, y = blobs(2, n=4000)
    estimator = gd.PegasosSVC(backend="numpy")
    shards = ShardSet.build(client, estimator, *chunked(X, y, chunks=(1000, 500, 500, 1500, 500)), None)
    assert shards.partitions == [[0, 1, 2], [3, 4]]
    assert [summary.n_rows for summary in shards.summaries] == [2000, 2000]
    workers = sorted(client.nthreads())
    dX, dy = chunked(X, y, chunks=(1000,) * 4)
    dX, dy = dX.persist(workers=[workers[1]]), dy.persist(workers=[workers[1]])
    shards = ShardSet.build(client, estimator, dX, dy, None)
    assert shards.workers == [workers[1]] and shards.partitions == [[0, 1, 2, 3]]
    held = client.gather([client.submit(lambda shard: shard.rows, f) for f in shards.futures])
    np.testing.assert_array_equal(held[0], np.arange(4000))


def test_shards_stay_on_their_workers(client):
    """Dask knows a shard's size (else its scheduler copies shards to run tasks elsewhere),
    and an epoch's tasks leave each shard on the one worker that built it."""
    from dask.sizeof import sizeof
    from gpusvm.dask._cluster import ShardSet
    from gpusvm.dask._online import epoch_order
    from gpusvm.dask._shards import OrderedRows, rows_of_block

    X, y = blobs(2, n=20000, d=20)
    shards = ShardSet.build(client, gd.FTRLClassifier(backend="numpy"), *chunked(X, y, chunks=(5000,) * 4), None)
    sizes = client.gather([client.submit(sizeof, future) for future in shards.futures])
    assert all(size >= X.nbytes / 2 for size in sizes)
    orders = [client.submit(epoch_order, 0, 0, 20000, pure=False) for _ in shards.futures]  # placed anywhere
    parts = [
        shards.on_each(client, rows_of_block, OrderedRows(start, start + 500), per_shard=[(o,) for o in orders])
        for start in range(0, 20000, 500)
    ]
    client.gather([part for block in parts for part in block])
    holders = client.who_has(shards.futures)
    assert [sorted(holders[future.key]) for future in shards.futures] == [[worker] for worker in shards.workers]


@pytest.mark.parametrize("sparse", [False, True])
def test_stacking_a_shard_empties_its_blocks(sparse, backend):
    """The shard's X is the rows stacked, its blocks released as copied (so a worker
    never holds them twice), on the worker's backend."""
    from gpusvm._backend import to_numpy
    from gpusvm._validation import to_backend
    from gpusvm.dask._shards import stack_rows_consuming

    X, _ = blobs(2, n=300, sparse=sparse)
    blocks = [to_backend(block, backend) for block in (X[:100], X[100:101], X[101:101], X[101:])]
    stacked = stack_rows_consuming(blocks)
    assert blocks == []
    if sparse:
        assert stacked.format == "csr" and stacked.indices.dtype == np.int32
        stacked, X = stacked.toarray(), X.toarray()
    np.testing.assert_array_equal(to_numpy(stacked), X)


def test_sbp_takes_no_sample_weight_or_partial_fit(client):
    X, y = overlapping(2, n=600)
    with pytest.raises(TypeError, match="takes no sample_weight"):
        gd.SBPClassifier().fit(*chunked(X, y, chunks=(600,), weights=np.ones(600)))
    assert not hasattr(gd.SBPClassifier(), "partial_fit")
    assert hasattr(gd.PegasosSVC(), "partial_fit")


@pytest.mark.parametrize("name", ONLINE)
@pytest.mark.parametrize("n_classes, dtype, sparse", [(2, np.float64, True), (3, np.float32, False)])
def test_online_learners_equal_single_node(client, name, n_classes, dtype, sparse):
    X, y = blobs(n_classes, dtype=dtype, sparse=sparse)
    params = dict(random_state=7, max_iter=3, batch_size=100, backend="numpy")
    model = getattr(gd, name)(**params).fit(*chunked(X, y))
    local = getattr(gpusvm, name)(**params).fit(X, y)
    assert_same_model(model, local, rtol=0)
    assert model.loss_curve_ == local.loss_curve_
    for part in (slice(0, 1000), slice(1000, 3000)):  # a stream of partial_fit calls, in order
        model.partial_fit(*chunked(X[part], y[part], chunks=(333, part.stop - part.start - 333)))
        local.partial_fit(X[part], y[part])
    assert_same_model(model, local, rtol=0)


@pytest.mark.parametrize(
    "name, title, figure",
    [("PegasosSVC", "Pegasos on dask", "objective="), ("FTRLClassifier", "FTRLClassifier on dask", "loss=")],
)
def test_progress_bar_as_on_one_node(client, name, title, figure, capsys, monkeypatch):
    """verbose=1 shows the bar with the epoch's figure; 'auto' is silent on a short fit,
    and on a long one (the delay patched to 0) shows the bar and erases it."""
    X, y = blobs(2)
    params = dict(random_state=0, max_iter=2, backend="numpy")
    getattr(gd, name)(verbose=1, **params).fit(*chunked(X, y))
    err = capsys.readouterr().err
    assert f"{title}:" in err and figure in err and "step/s" in err
    getattr(gd, name)(**params).fit(*chunked(X, y))
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(gpusvm._instrumentation, "AUTO_PROGRESS_DELAY", 0.0)
    getattr(gd, name)(**params).fit(*chunked(X, y))
    err = capsys.readouterr().err
    assert f"{title}:" in err and err.endswith("\r") and err.rsplit("\r", 2)[-2].strip() == ""


def test_online_learner_with_one_worker_and_dataframes(one_worker):
    dd = pytest.importorskip("dask.dataframe")
    pandas = pytest.importorskip("pandas")
    X, y = blobs(2, n=1200)
    frame = dd.from_pandas(pandas.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]), npartitions=3)
    labels = dd.from_pandas(pandas.Series(y), npartitions=3)
    model = gd.FTRLClassifier(random_state=1, backend="numpy")
    model.client = one_worker
    model.fit(frame, labels)
    assert model.batch_size_ == 75  # batch_size='auto' by the rows, as one node's fit: 1200 // 16
    assert_same_model(model, gpusvm.FTRLClassifier(random_state=1, backend="numpy").fit(X, y), rtol=0)


@pytest.mark.parametrize(
    "estimator",
    [
        gd.PegasosSVC(random_state=0, max_iter=3, backend="numpy"),
        gd.FTRLClassifier(random_state=0, backend="numpy"),
        gd.SBPClassifier(random_state=0, max_iter=1, multi_class="ovr", backend="numpy"),
    ],
)
def test_predictions_are_lazy_and_match_to_local(client, estimator):
    X, y = blobs(3)
    dX, dy = chunked(X, y)
    model = estimator.fit(dX, dy)
    local = model.to_local()
    assert type(local) is getattr(gpusvm, type(model).__name__)
    methods = ["predict", "decision_function"] + (["predict_proba"] if hasattr(local, "predict_proba") else [])
    for method in methods:
        lazy = getattr(model, method)(dX)
        assert isinstance(lazy, da.Array)
        # kernel products over a chunk's rows may round differently from those over all rows
        np.testing.assert_allclose(lazy.compute(), getattr(local, method)(X), rtol=1e-13, atol=1e-15)
        np.testing.assert_array_equal(getattr(model, method)(X), getattr(local, method)(X))  # in memory too
    restored = pickle.loads(pickle.dumps(model))
    assert "_client" not in restored.__dict__
    np.testing.assert_array_equal(restored.predict(X), local.predict(X))


def test_to_local_continues_with_partial_fit(client):
    X, y = blobs(2)
    model = gd.FTRLClassifier(random_state=0, max_iter=1, shuffle=False, backend="numpy").fit(*chunked(X, y))
    local = model.to_local().partial_fit(X, y)
    reference = gpusvm.FTRLClassifier(random_state=0, max_iter=1, shuffle=False, backend="numpy")
    reference.fit(X, y).partial_fit(X, y)
    assert_same_model(local, reference, rtol=0)


def test_client_is_not_a_parameter(client):
    from sklearn.base import clone

    model = gd.PegasosSVC(mode="average")
    model.client = client
    assert "client" not in model.get_params()
    assert clone(model).client is None
    assert clone(model).get_params()["mode"] == "average"


def test_single_node_estimators_warn_on_dask_input(client):
    X, y = blobs(2, n=300)
    dX, dy = chunked(X, y, chunks=(300,))
    with pytest.warns(UserWarning, match="gpusvm.dask.PegasosSVC"):
        gpusvm.PegasosSVC(max_iter=1, backend="numpy").fit(dX, dy)
    with pytest.warns(UserWarning, match="dask collection"):
        gpusvm.SBPClassifier(max_iter=1, backend="numpy").fit(dX, dy)


def test_bad_input_is_refused_clearly(client):
    X, y = blobs(2, n=600)
    with pytest.raises(TypeError, match="takes dask arrays or dataframes; got X of type ndarray"):
        gd.PegasosSVC().fit(X, y)
    bad = X.copy()
    bad[450, 3] = np.nan
    with pytest.raises(ValueError, match=r"Partition 1 \(rows 300 to 599\).*NaN"):
        gd.PegasosSVC(backend="numpy").fit(*chunked(bad, y, chunks=(300, 300)))
    with pytest.raises(ValueError, match="same number of rows"):
        gd.FTRLClassifier().fit(da.from_array(X, chunks=300), da.from_array(y[:500], chunks=250))
    with pytest.raises(ValueError, match="number of classes has to be greater than one"):
        gd.FTRLClassifier(backend="numpy").fit(*chunked(X, np.zeros(600, dtype=int), chunks=(300, 300)))
    with pytest.raises(TypeError, match="takes no sample_weight"):
        gd.FTRLClassifier().fit(*chunked(X, y, chunks=(600,), weights=np.ones(600)))
    with pytest.raises(ValueError, match="mode"):
        gd.PegasosSVC(mode="fast").fit(*chunked(X, y, chunks=(600,)))


def test_failed_partial_fit_leaves_the_model_as_it_was(client):
    X, y = blobs(2, n=600)
    model = gd.FTRLClassifier(random_state=0, backend="numpy").partial_fit(
        *chunked(X, y, chunks=(600,)), classes=[0, 1]
    )
    before = model.coef_.copy()
    with pytest.raises(ValueError, match="not in classes"):
        model.partial_fit(*chunked(X, y + 5, chunks=(600,)))
    np.testing.assert_array_equal(model.coef_, before)
    assert model.t_ == 600


def test_no_client_is_a_clear_error():
    """In a fresh process: this module's fixtures keep a default client in this one."""
    import subprocess
    import sys

    script = (
        "import numpy as np, dask.array as da, gpusvm.dask as gd\n"
        "X = da.from_array(np.eye(4), chunks=2); y = da.from_array(np.array([0, 1, 0, 1]), chunks=2)\n"
        "gd.PegasosSVC().fit(X, y)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "ValueError: gpusvm.dask needs a dask.distributed Client" in result.stderr


@pytest.fixture(scope="module")
def process_cluster():
    """Three worker processes (what pickles crosses them), with nannies that restart a killed worker."""
    with (
        distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        yield cluster, client


def test_worker_processes_give_the_single_node_model(process_cluster):
    _, client = process_cluster
    X, y = blobs(3, sparse=True)
    for distributed_model, local in [
        (
            gd.PegasosSVC(random_state=1, max_iter=4, tol=None, backend="numpy"),
            gpusvm.PegasosSVC(random_state=1, max_iter=4, tol=None, backend="numpy"),
        ),
        (gd.RDAClassifier(random_state=1, backend="numpy"), gpusvm.RDAClassifier(random_state=1, backend="numpy")),
    ]:
        distributed_model.client = client
        assert_same_model(distributed_model.fit(*chunked(X, y)), local.fit(X, y), rtol=0)
    X, y = overlapping(3, sparse=True)
    params = dict(
        random_state=1, max_iter=2, validation_fraction=0.2, multi_class="ovr", backend="numpy", kernel_dtype="float64"
    )
    model = gd.SBPClassifier(**params)
    model.client = client
    assert_same_kernel_model(
        model.fit(*chunked(X, y, chunks=(700, 700, 600))), gpusvm.SBPClassifier(**params).fit(X, y)
    )


def test_a_worker_lost_mid_sbp_fit_is_a_clear_error(process_cluster):
    """SBP's responses live on the workers: losing one ends the fit, naming it."""
    import os
    import signal
    import threading

    _, client = process_cluster
    X, y = overlapping(2, n=6000)
    dX, dy = client.persist(chunked(X, y, chunks=(2000,) * 3))
    with client.as_current():
        distributed.wait(distributed.futures_of(dX) + distributed.futures_of(dy))
    holders = client.who_has(distributed.futures_of(dX))
    victim = sorted(next(iter(holders.values())))[0]
    victim_pid = client.run(os.getpid, workers=[victim])[victim]
    model = gd.SBPClassifier(batch_size=1, max_iter=50, tol=None, random_state=0, backend="numpy")  # runs past the kill
    model.client = client
    timer = threading.Timer(3.0, os.kill, (victim_pid, signal.SIGKILL))
    timer.start()
    with pytest.raises(RuntimeError, match=rf"SBPClassifier's fit failed after worker\(s\) \['{victim}'\] left"):
        model.fit(dX, dy)
    timer.join()
    assert not hasattr(model, "support_")


def test_a_worker_lost_mid_fit_gives_the_same_model(process_cluster):
    """A worker killed while the fit runs: the epoch resumes (or dask recomputes its
    partitions) on the workers left, and the model is the uninterrupted one."""
    import os
    import signal
    import threading
    import time

    cluster, client = process_cluster
    X, y = blobs(2, n=20000, d=20)
    params = dict(random_state=0, max_iter=12, tol=None, batch_size=4, backend="numpy")
    dX, dy = client.persist(chunked(X, y, chunks=(5000,) * 4))
    started = time.perf_counter()
    reference = gd.PegasosSVC(**params)
    reference.client = client
    reference.fit(dX, dy)
    duration = time.perf_counter() - started
    holders = client.who_has(distributed.futures_of(dX))
    held = {worker: sum(worker in found for found in holders.values()) for worker in client.nthreads()}
    victim = max(sorted(held), key=held.get)  # the stepping worker: it holds the most rows
    victim_pid = client.run(os.getpid, workers=[victim])[victim]
    fitting, killed_mid_fit = threading.Event(), []

    def kill():
        os.kill(victim_pid, signal.SIGKILL)
        killed_mid_fit.append(fitting.is_set())

    timer = threading.Timer(duration / 3, kill)
    model = gd.PegasosSVC(**params)
    model.client = client
    fitting.set()
    timer.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "resuming the epoch" when the kill cost one
        model.fit(dX, dy)
    fitting.clear()
    timer.join()
    assert killed_mid_fit == [True]
    assert victim not in client.nthreads()
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    np.testing.assert_array_equal(model.intercept_, reference.intercept_)


def test_a_worker_lost_before_an_epochs_objective_leaves_the_model_unchanged(process_cluster, monkeypatch):
    """The kill lands just before the round that sums the epoch's objective (a CI run once
    failed there: the weights went out by ``client.scatter``, which failed or hung on the
    dead worker). Sent as a task, dask recomputes what the worker held (or the epoch
    resumes), and the model is the uninterrupted one."""
    import os
    import signal

    _, client = process_cluster
    X, y = blobs(2, n=4000, d=10)
    params = dict(random_state=0, max_iter=3, tol=None, backend="numpy")
    dX, dy = client.persist(chunked(X, y, chunks=(1000,) * 4))
    reference = gd.PegasosSVC(**params)
    reference.client = client
    reference.fit(dX, dy)
    holders = client.who_has(distributed.futures_of(dX))
    victim = sorted(next(iter(holders.values())))[0]
    victim_pid = client.run(os.getpid, workers=[victim])[victim]
    objective, calls = gd.PegasosSVC._objective, []

    def objective_after_a_kill(self, *args):
        calls.append(len(calls))
        if len(calls) == 2:  # after epoch 2's steps, before its objective
            os.kill(victim_pid, signal.SIGKILL)
        return objective(self, *args)

    monkeypatch.setattr(gd.PegasosSVC, "_objective", objective_after_a_kill)
    model = gd.PegasosSVC(**params)
    model.client = client
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "resuming the epoch" if the loss cost one
        model.fit(dX, dy)
    assert len(calls) >= 3 and victim not in client.nthreads()
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    np.testing.assert_array_equal(model.intercept_, reference.intercept_)


def test_predicting_before_fit_is_a_not_fitted_error():
    from sklearn.exceptions import NotFittedError

    X, y = blobs(2, n=60)
    dX, _ = chunked(X, y, chunks=(60,))
    for name in ONLINE + ["PegasosSVC", "SBPClassifier"]:
        model = getattr(gd, name)()
        for method in ("predict", "decision_function") + (("predict_proba",) if name in ONLINE else ()):
            for data in (dX, X):
                with pytest.raises(NotFittedError, match=f"This {name} instance is not fitted yet"):
                    getattr(model, method)(data)


@pytest.mark.parametrize(
    "name, params", [("FTRLClassifier", {}), ("PegasosSVC", {"max_iter": 3}), ("SBPClassifier", {"max_iter": 2})]
)
def test_saving_a_dask_estimator_saves_its_single_node_twin(client, tmp_path, name, params):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match=f"This {name} instance is not fitted yet"):
        gpusvm.save(getattr(gd, name)(), tmp_path / "m")
    X, y = blobs(2, n=600)
    model = getattr(gd, name)(random_state=0, backend="numpy", **params).fit(*chunked(X, y, chunks=(300, 300)))
    gpusvm.save(model, tmp_path / "m")
    loaded = gpusvm.load(tmp_path / "m")
    assert type(loaded) is getattr(gpusvm, name)
    np.testing.assert_array_equal(loaded.decision_function(X), model.to_local().decision_function(X))


def test_a_wrong_width_or_client_is_refused_before_any_work(client):
    X, y = blobs(2, n=600)
    model = gd.FTRLClassifier(max_iter=1, backend="numpy").fit(*chunked(X, y, chunks=(300, 300)))
    with pytest.raises(ValueError, match="X has 5 features, but FTRLClassifier is expecting 12 features as input"):
        model.predict(da.from_array(X[:, :5], chunks=(300, 5)))  # at the call, not when computed
    bogus = gd.FTRLClassifier()
    bogus.client = "tcp://127.0.0.1:8786"
    with pytest.raises(TypeError, match="client must be a dask.distributed Client or None"):
        bogus.fit(*chunked(X, y, chunks=(300, 300)))


@pytest.mark.parametrize("name", ["PegasosSVC", "FTRLClassifier"])
def test_fits_that_end_unsettled_warn_as_on_one_node(client, name):
    """Raw breast cancer features: the same ConvergenceWarning as one node's fit, named at
    the caller's line; scaled, none (gpusvm/_estimator/convergence.py)."""
    X, y = load_breast_cancer(return_X_y=True)
    for data, expected in ((X, 1), (StandardScaler().fit_transform(X), 0)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = getattr(gd, name)(random_state=0, backend="numpy").fit(*chunked(data, y, chunks=(300, 269)))
            local = getattr(gpusvm, name)(random_state=0, backend="numpy").fit(data, y)
        found = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
        assert len(found) == 2 * expected and all(w.filename == __file__ for w in found)
        if expected:
            # the dask fit's, then one node's (which can quote the largest |x| of X in memory)
            assert str(found[0].message).split(":")[0] == str(found[1].message).split(":")[0]
        assert_same_model(model, local, rtol=0)
    with warnings.catch_warnings():  # the warning as an error: the fit happened, as on one node
        warnings.simplefilter("error", ConvergenceWarning)
        model, local = getattr(gd, name)(random_state=0, backend="numpy"), clone(local)
        with pytest.raises(ConvergenceWarning):
            model.fit(*chunked(X, y, chunks=(300, 269)))
        with pytest.raises(ConvergenceWarning):
            local.fit(X, y)
    assert_same_model(model, local, rtol=0)
