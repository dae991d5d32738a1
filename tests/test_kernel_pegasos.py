import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits, make_classification, make_moons
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from gpusvm import KernelPegasosSVC, PegasosSVC

from .conftest import needs_device
from .reference import reference_kernel_pegasos


@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("n_classes", [2, 3, 6])
def test_counts_match_reference(backend, rng, batch_size, n_classes):
    """Incremental responses give the same counts as recomputing every margin from scratch
    (with 6 classes most steps move some of the classes' responses and not others)."""
    n = 80
    X = rng.normal(size=(n, 5))
    y = rng.integers(0, n_classes, n)
    weights = rng.uniform(0.5, 1.5, n)
    gamma, lam, seed = 0.3, 0.02, int(rng.integers(2**32))
    model = KernelPegasosSVC(
        lam=lam,
        gamma=gamma,
        batch_size=batch_size,
        max_iter=3,
        fit_intercept=False,
        average=False,
        random_state=seed,
        backend=backend,
    ).fit(X, y, sample_weight=weights)
    classes = np.unique(y)
    Y = np.where(y == classes[1], 1.0, -1.0)[:, None] if n_classes == 2 else np.where(y[:, None] == classes, 1.0, -1.0)
    counts, steps = reference_kernel_pegasos(rbf_kernel(X, gamma=gamma), Y, weights, lam, batch_size, model.t_, seed)
    expected = counts * Y.T / (lam * steps * batch_size)
    support = np.flatnonzero((counts != 0).any(axis=0))
    np.testing.assert_array_equal(model.support_, support)
    np.testing.assert_allclose(model.dual_coef_, expected[:, support], rtol=1e-12)


@pytest.mark.parametrize("average", [False, True])
def test_linear_kernel_equals_linear_pegasos_without_projection(backend, rng, average):
    """The kernel algorithm is the linear one in feature space: same batches, same w and b,
    for the last iterate and for the step-weighted average."""
    X = rng.normal(size=(150, 6))
    y = (X[:, 0] + 0.5 * rng.normal(size=150) > 0).astype(int)
    common = dict(lam=0.01, batch_size=5, max_iter=2, average=average, random_state=3, backend=backend)
    kernel = KernelPegasosSVC(kernel="linear", **common).fit(X, y)
    linear = PegasosSVC(projection=False, tol=None, **common).fit(X, y)
    w = kernel.dual_coef_ @ kernel.support_vectors_
    np.testing.assert_allclose(w, linear.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kernel.intercept_, linear.intercept_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kernel.decision_function(X), linear.decision_function(X), rtol=1e-9, atol=1e-10)


def test_prediction_uses_only_support_vectors(rng):
    X, y = make_moons(200, noise=0.2, random_state=0)
    model = KernelPegasosSVC(C=10, gamma=2.0, max_iter=3, random_state=0).fit(X, y)
    assert 0 < len(model.support_) < len(y)
    K = rbf_kernel(X, model.support_vectors_, gamma=2.0)
    np.testing.assert_allclose(model.decision_function(X), K @ model.dual_coef_[0] + model.intercept_[0], rtol=1e-10)


def test_accuracy_near_svc(rng):
    X, y = make_moons(400, noise=0.25, random_state=1)
    X_test, y_test = make_moons(400, noise=0.25, random_state=2)
    svc = SVC(C=10, gamma=1.0).fit(X, y)
    model = KernelPegasosSVC(C=10, gamma=1.0, max_iter=10, random_state=0).fit(X, y)
    assert model.score(X_test, y_test) > svc.score(X_test, y_test) - 0.03


@pytest.mark.parametrize("load", [load_digits, load_breast_cancer], ids=["digits", "breast_cancer"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_defaults_near_svc(load, seed):
    """KernelPegasosSVC() with nothing set stays within 2 points of SVC() on standardized
    data, whatever the seed (the classic defaults, 2 epochs of batch 1 and the last
    iterate, were 3 to 4 points below on digits and 9 on breast cancer with seed 1)."""
    X, y = load(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        StandardScaler().fit_transform(X), y, test_size=0.5, random_state=0, stratify=y
    )
    svc = SVC().fit(X_train, y_train).score(X_test, y_test)
    model = KernelPegasosSVC(random_state=seed).fit(X_train, y_train)
    assert model.score(X_test, y_test) >= svc - 0.02


@pytest.mark.parametrize("sparse", [False, True])
def test_the_host_row_cache_gives_the_same_model_and_warns_when_it_thrashes(rng, sparse):
    """Kernel rows kept (the violators come back epoch after epoch) or computed again at
    every step: the same model, bit for bit; a cache of one row says what to set."""
    X = rng.normal(size=(200, 6)) * (rng.random((200, 6)) < (0.5 if sparse else 1.0))
    X = sp.csr_matrix(X) if sparse else X
    y = rng.integers(0, 4, 200)
    common = dict(max_iter=10, random_state=5, backend="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default cache keeps every row: no warning
        kept = KernelPegasosSVC(**common).fit(X, y)
    with pytest.warns(UserWarning, match=r"cache_size=1e-06 kept 1 rows .* Set cache_size to at least 1 \(MB\)"):
        computed = KernelPegasosSVC(cache_size=1e-6, **common).fit(X, y)
    np.testing.assert_array_equal(kept.support_, computed.support_)
    np.testing.assert_array_equal(kept.dual_coef_, computed.dual_coef_)


@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
def test_sparse_and_float32_inputs(kernel):
    X, y = make_classification(120, 8, random_state=0)
    common = dict(kernel=kernel, max_iter=2, random_state=0, degree=2)
    dense = KernelPegasosSVC(**common).fit(X, y)
    sparse = KernelPegasosSVC(**common).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.dual_coef_, dense.dual_coef_, rtol=1e-9)
    assert sp.issparse(sparse.support_vectors_)
    single = KernelPegasosSVC(**common).fit(X.astype(np.float32), y)
    assert np.mean(single.predict(X) == dense.predict(X)) > 0.97


@needs_device
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_backends_agree(dtype, rng):
    """Same draws, same violations: the same support and counts. float32 input gives
    float32 kernel values on both backends (so the decisions agree to float32 rounding)."""
    X = rng.normal(size=(300, 10)).astype(dtype)
    y = rng.integers(0, 3, 300)
    scores_tolerance = 1e-8 if dtype == np.float64 else 1e-4
    for data in (X, sp.csr_matrix(X * (rng.random(X.shape) < 0.4))):
        common = dict(C=5.0, batch_size=8, max_iter=2, random_state=9)
        cpu = KernelPegasosSVC(backend="numpy", **common).fit(data, y)
        gpu = KernelPegasosSVC(backend="cupy", **common).fit(data, y)
        np.testing.assert_array_equal(gpu.support_, cpu.support_)
        np.testing.assert_allclose(gpu.dual_coef_, cpu.dual_coef_, rtol=1e-12)
        # near 0 a decision is a cancellation: its rounding is X's eps times the sum of |coef|
        cancellation = np.finfo(dtype).eps * np.abs(cpu.dual_coef_).sum(axis=1).max()
        np.testing.assert_allclose(
            gpu.decision_function(data), cpu.decision_function(data), rtol=scores_tolerance, atol=cancellation
        )


@needs_device
@pytest.mark.parametrize("kernel_cache", ["auto", 0])
def test_device_kernel_matrix_or_computed_rows_give_the_host_model(rng, kernel_cache):
    """A step's rows read from the resident kernel matrix, or computed from X: the host's
    draws, violations and counts either way."""
    X = rng.normal(size=(60, 4))
    y = rng.integers(0, 3, 60)
    common = dict(C=5.0, batch_size=4, max_iter=2, random_state=9)
    cpu = KernelPegasosSVC(backend="numpy", **common).fit(X, y)
    gpu = KernelPegasosSVC(backend="cupy", kernel_cache=kernel_cache, **common).fit(X, y)
    np.testing.assert_array_equal(gpu.support_, cpu.support_)
    np.testing.assert_allclose(gpu.dual_coef_, cpu.dual_coef_, rtol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernel_cache", ["auto", 0])
def test_device_steps_in_blocks_give_the_host_model(step_block_mode, rng, kernel_cache, sparse):
    """Steps issued in blocks (three steps a block) and replayed, as recorded or as a CUDA
    graph, with the kernel matrix resident or rows computed each step (direct launches):
    the host's draws, violations and counts."""
    X = rng.normal(size=(62, 4)) * (rng.random((62, 4)) < (0.5 if sparse else 1.0))
    X = sp.csr_matrix(X) if sparse else X
    y = rng.integers(0, 3, 62)
    common = dict(C=5.0, batch_size=4, max_iter=2, random_state=9)  # 32 steps: 10 blocks of 3, one of 2
    cpu = KernelPegasosSVC(backend="numpy", **common).fit(X, y)
    gpu = KernelPegasosSVC(backend="cupy", kernel_cache=kernel_cache, **common).fit(X, y)
    np.testing.assert_array_equal(gpu.support_, cpu.support_)
    np.testing.assert_allclose(gpu.dual_coef_, cpu.dual_coef_, rtol=1e-12)
    assert gpu.kernel_values_source_ == {"auto": "matrix", 0: "products"}[kernel_cache]
    assert cpu.kernel_values_source_ == "products"


@needs_device
def test_device_csr_input_with_64_bit_indices_gives_the_host_model(rng):
    """A cupyx CSR X with int64 indices (CuPy 14 keeps SciPy's) is read with the int32
    indices the kernels take: the host's model, rows computed from X at each step."""
    import cupy
    import cupyx.scipy.sparse as cusparse

    from gpusvm._validation import to_backend

    X = sp.csr_matrix(rng.normal(size=(62, 5)) * (rng.random((62, 5)) < 0.5))
    y = rng.integers(0, 3, 62)
    X_device = cusparse.csr_matrix(X)
    X_device.indices, X_device.indptr = X_device.indices.astype(np.int64), X_device.indptr.astype(np.int64)
    on_device = to_backend(X_device, "cupy")
    assert on_device.indices.dtype == on_device.indptr.dtype == np.int32
    assert X_device.indices.dtype == np.int64  # the caller's matrix is left as it was
    np.testing.assert_array_equal(cupy.asnumpy(on_device.indices), X.indices)
    common = dict(C=5.0, batch_size=4, max_iter=2, random_state=9)
    cpu = KernelPegasosSVC(backend="numpy", **common).fit(X, y)
    gpu = KernelPegasosSVC(backend="cupy", kernel_cache=0, **common).fit(X_device, y)
    np.testing.assert_array_equal(gpu.support_, cpu.support_)
    np.testing.assert_allclose(gpu.dual_coef_, cpu.dual_coef_, rtol=1e-12)


def test_the_model_says_where_its_kernel_values_came_from():
    """On the host a step computes its violators' kernel rows (a device may read the
    resident matrix instead: see kernel_cache)."""
    X, y = make_moons(40, random_state=0)
    assert KernelPegasosSVC(max_iter=1, backend="numpy").fit(X, y).kernel_values_source_ == "products"


def test_kernel_cache_is_refused_with_its_value():
    X, y = make_moons(40, random_state=0)
    with pytest.raises(ValueError, match="'kernel_cache' parameter of KernelPegasosSVC.*Got 2.5"):
        KernelPegasosSVC(kernel_cache=2.5).fit(X, y)
