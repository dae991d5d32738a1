"""Training from chunks that never sit in memory together: the file readers, the streamed
fits (exact for the online learners), the memory bound, and the command line."""

import io
import tracemalloc
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
    load,
)
from gpusvm._backend import check_device_memory
from gpusvm._stream.pipeline import prepared_chunk, read_ahead
from gpusvm._estimator.kernel_model import device_bytes_to_fit
from gpusvm._estimator.linear_model import device_bytes_of
from gpusvm.cli import main
from gpusvm.data_files import NpzChunks, SvmlightChunks

from .conftest import assert_same_result, to_host
from .simulated_streams import load_on_simulated_device

ONLINE = [FTRLClassifier, TruncatedGradientClassifier, FOBOSClassifier, RDAClassifier]


def sparse_data(n=1500, d=40, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    scores = X @ rng.normal(size=(d, n_classes)) + 0.3 * rng.normal(size=(n, n_classes))
    return X, scores.argmax(axis=1) * 10 + 1


def chunks_of(X, y, rows):
    return [(X[i:i + rows], y[i:i + rows]) for i in range(0, X.shape[0], rows)]


# --- the readers ---------------------------------------------------------------------


@pytest.mark.parametrize("zero_based", [False, True])
def test_svmlight_chunks_read_what_scikit_learn_reads(tmp_path, zero_based):
    X, y = sparse_data()
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=zero_based, comment="written for a test")
    reader = SvmlightChunks(path, chunk_rows=400)
    expected_X, expected_y = load_svmlight_file(str(path), zero_based=zero_based, n_features=X.shape[1])
    for _ in range(2):  # re-iterable: a fresh pass each time
        parts = list(reader)
        np.testing.assert_array_equal(sp.vstack([X for X, _ in parts]).toarray(), expected_X.toarray())
        np.testing.assert_array_equal(np.concatenate([y for _, y in parts]), expected_y)
    assert (reader.n_rows, reader.n_features, reader.zero_based, len(reader)) == (1500, 40, zero_based, 4)
    np.testing.assert_array_equal(reader[2][0].toarray(), parts[2][0].toarray())  # random access
    wider = SvmlightChunks(path, chunk_rows=400, n_features=50)
    assert next(iter(wider))[0].shape[1] == 50  # (the header comments count as rows of chunk 0)


def test_svmlight_chunks_name_a_bad_file(tmp_path):
    path = tmp_path / "bad.svm"
    path.write_text("1 1:0.5\n" * 10 + "this is not svmlight\n")
    with pytest.raises(ValueError, match="bad.svm is not a LIBSVM/svmlight file: line 11 'this is not svmlight'"):
        list(SvmlightChunks(path, chunk_rows=10))
    with pytest.raises(ValueError, match="chunk_rows must be at least 1, got 0"):
        SvmlightChunks(path, chunk_rows=0)
    path.write_text("1 0:0.5 3:1\n-1 2:1\n")
    with pytest.raises(ValueError, match="uses feature index 0.*zero_based=False"):
        list(SvmlightChunks(path, chunk_rows=1, n_features=3, zero_based=False))


def save_npz_with_labels(path, X, y):
    sp.save_npz(path, X)
    with zipfile.ZipFile(path, "a") as archive:
        stream = io.BytesIO()
        np.lib.format.write_array(stream, y)
        archive.writestr("y.npy", stream.getvalue())


def test_npz_chunks_stream_dense_sparse_and_shards(tmp_path):
    X, y = sparse_data()
    np.savez(tmp_path / "dense.npz", X=X.toarray(), y=y)
    np.savez_compressed(tmp_path / "compressed.npz", X=X.toarray().astype(np.float32), y=y)
    save_npz_with_labels(tmp_path / "sparse.npz", X, y)
    for name in ("dense.npz", "compressed.npz", "sparse.npz"):
        reader = NpzChunks(tmp_path / name, chunk_rows=400)
        parts = list(reader)
        assert [part[0].shape[0] for part in parts] == [400, 400, 400, 300]
        np.testing.assert_allclose(sp.vstack([sp.csr_matrix(X) for X, _ in parts]).toarray(), X.toarray(),
                                   rtol=1e-7)
        np.testing.assert_array_equal(np.concatenate([y for _, y in parts]), y)
        np.testing.assert_allclose(sp.csr_matrix(reader[3][0]).toarray(), X[1200:].toarray(), rtol=1e-7)
    shards = NpzChunks([tmp_path / "dense.npz", tmp_path / "sparse.npz"], chunk_rows=1000)
    assert (shards.n_rows, shards.n_features, len(shards)) == (3000, 40, 4)


def test_npz_chunks_name_a_damaged_file(tmp_path):
    X, y = sparse_data()
    np.savez(tmp_path / "whole.npz", X=X.toarray(), y=y)
    (tmp_path / "cut.npz").write_bytes((tmp_path / "whole.npz").read_bytes()[:2000])
    with pytest.raises(ValueError, match="cut.npz is not a readable .npz file"):
        list(NpzChunks(tmp_path / "cut.npz"))
    np.savez(tmp_path / "fortran.npz", X=np.asfortranarray(X.toarray()), y=y)
    with pytest.raises(ValueError, match="Fortran order"):
        list(NpzChunks(tmp_path / "fortran.npz"))


# --- streamed fits -----------------------------------------------------------------


@pytest.mark.parametrize("Estimator", ONLINE)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_online_streamed_fit_equals_fit_without_shuffle_and_partial_fit(Estimator, n_classes, backend):
    X, y = sparse_data(n_classes=n_classes)
    settings = dict(batch_size=64, max_iter=3, random_state=0, backend=backend)
    in_memory = Estimator(shuffle=False, **settings).fit(X, y)
    streamed = Estimator(**settings).fit_chunks(chunks_of(X, y, 700))  # 700 rows: batches cross chunks
    assert_same_result(streamed.coef_, in_memory.coef_, backend)
    assert_same_result(streamed.intercept_, in_memory.intercept_, backend)
    assert streamed.t_ == in_memory.t_ and streamed.n_iter_ == 3
    np.testing.assert_allclose(streamed.loss_curve_, in_memory.loss_curve_, rtol=1e-12)

    aligned = chunks_of(X, y, 640)  # multiples of the batch size: partial_fit batches the same way
    partial = Estimator(**settings)
    for X_chunk, y_chunk in aligned:
        partial.partial_fit(X_chunk, y_chunk, classes=np.unique(y))
    one_pass = Estimator(**{**settings, "max_iter": 1}).fit_chunks(iter(aligned), classes=np.unique(y))
    assert_same_result(one_pass.coef_, partial.coef_, backend)


def test_a_streamed_fit_that_fails_leaves_the_model_as_it_was(backend):
    X, y = sparse_data()
    model = FTRLClassifier(batch_size=64, random_state=0, backend=backend).fit(X, y)
    before = model.coef_.copy()
    bad = chunks_of(X, y, 500)
    bad[2] = (bad[2][0].toarray(), bad[2][1])
    bad[2][0][0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit_chunks(bad)
    np.testing.assert_array_equal(model.coef_, before)
    with pytest.raises(ValueError, match="Chunk 1 is not an \\(X, y\\) pair"):
        FTRLClassifier(backend=backend).fit_chunks([(X, y), X])
    with pytest.raises(ValueError, match="max_iter=2 needs another pass.*one-shot iterator"):
        FTRLClassifier(max_iter=2, backend=backend).fit_chunks(iter(chunks_of(X, y, 500)), classes=np.unique(y))


class InOrder:
    """A re-iterable source without random access (as a generator function's would be)."""

    def __init__(self, chunks):
        self.chunks = chunks

    def __iter__(self):
        return iter(self.chunks)


def test_pegasos_streamed_fit_uses_every_row_for_lam_and_a_random_chunk_order(backend):
    X, y = sparse_data(n=3000)
    chunks = chunks_of(X, y, 500)
    model = PegasosSVC(max_iter=4, random_state=0, backend=backend).fit_chunks(chunks)
    assert model.lam_ == pytest.approx(1.0 / 3000) and model.t_ == 4 * 6 * 8  # 6 chunks of 8 steps
    again = PegasosSVC(max_iter=4, random_state=0, backend=backend).fit_chunks(chunks)
    assert_same_result(again.coef_, model.coef_, backend)
    # the chunk order matters, so a source without random access (visited in order) differs
    in_order = PegasosSVC(max_iter=4, random_state=0, backend=backend).fit_chunks(InOrder(chunks))
    assert not np.allclose(to_host(in_order.coef_), to_host(model.coef_))
    in_memory = PegasosSVC(max_iter=4, tol=None, random_state=0, backend=backend).fit(X, y)
    assert abs(model.score(X, y) - in_memory.score(X, y)) < 0.03


def test_streamed_pegasos_and_ftrl_from_a_file_on_both_backends(tmp_path, backend):
    X, y = sparse_data(n=2000)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    reader = SvmlightChunks(path, chunk_rows=512)
    ftrl = FTRLClassifier(batch_size=64, random_state=0, backend=backend).fit_chunks(reader)
    reference = FTRLClassifier(batch_size=64, shuffle=False, random_state=0, backend="numpy").fit(X, y)
    np.testing.assert_allclose(ftrl.coef_, reference.coef_, rtol=1e-9, atol=1e-12)
    pegasos = PegasosSVC(max_iter=3, random_state=0, backend=backend).fit_chunks(reader)
    assert pegasos.score(X, y) > 0.8 and pegasos.backend_ == backend


def _contents(X, labels):
    parts = (X.data, X.indices, X.indptr) if hasattr(X, "indptr") else (X,)
    return [np.array(part, copy=True) for part in (*parts, labels)]


@pytest.mark.parametrize("seed", range(30))
def test_device_staging_keeps_each_chunk_until_its_steps_have_read_it(monkeypatch, seed):
    # Dense and CSR chunks of growing and shrinking sizes, staged through two slots on a
    # simulated device that runs queued work in a random order (tests/simulated_streams.py):
    # each chunk's steps (a kernel queued on the solver's stream) read exactly that chunk.
    # Without any one of the staging's waits, some seeds read another chunk's data.
    device, staging = load_on_simulated_device("gpusvm._device.staging", monkeypatch, seed)
    rng = np.random.default_rng(seed)
    chunks = []
    for number, rows in enumerate([5, 9, 3, 12, 12, 4, 30, 2, 7]):
        if number % 3 == 1:
            X = rng.normal(size=(rows, 6))
        else:
            X = sp.random(rows, 6, density=0.5, format="csr", random_state=seed + number)
        chunks.append(prepared_chunk(X, {"labels": rng.integers(0, 3, size=rows).astype(np.int32)}, "cupy"))
    expected = [_contents(chunk.X, chunk.rows["labels"]) for chunk in chunks]
    seen = []
    for chunk in staging.DeviceStaging().staged(iter(chunks)):
        device.kernel(lambda chunk=chunk: seen.append(_contents(chunk.X, chunk.rows["labels"])))
    device.finish()
    assert len(seen) == len(expected)
    for number, (got, want) in enumerate(zip(seen, expected)):
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), f"chunk {number}"


def test_read_ahead_keeps_the_order_and_raises_at_the_failing_item():
    def prepare(item, number):
        if item == "bad":
            raise ValueError(f"item {number} is bad")
        return item * 2

    assert list(read_ahead(range(5), prepare)) == [0, 2, 4, 6, 8]
    got = []
    with pytest.raises(ValueError, match="item 2 is bad"):
        for value in read_ahead([1, 2, "bad", 3], prepare):
            got.append(value)
    assert got == [2, 4]


def test_streamed_fit_memory_is_bounded_by_the_chunk_not_the_file(tmp_path):
    # Files of 4,000 and 64,000 rows x 10 nonzeros (0.5 and 7.7 MB as CSR), read 1,000 rows
    # (0.1 MB) at a time: the peak is the same for both, and well under the larger file's CSR.
    rng = np.random.default_rng(0)
    d, per_row = 2**14, 10
    peaks = {}
    for n in (4_000, 64_000):
        columns = (np.arange(per_row) * (d // per_row) + rng.integers(0, d // per_row, size=(n, per_row))).ravel()
        X = sp.csr_matrix((rng.random(n * per_row), columns, np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
        y = (X @ rng.normal(size=d) > 0).astype(int)
        path = tmp_path / f"rows{n}.svm"
        dump_svmlight_file(X, y, str(path), zero_based=True)
        whole_csr = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        for model in (FTRLClassifier(max_iter=1, random_state=0), PegasosSVC(max_iter=1, random_state=0)):
            reader = SvmlightChunks(path, chunk_rows=1_000, n_features=d)
            tracemalloc.start()
            try:
                model.fit_chunks(reader, classes=[0, 1])
                peaks[type(model).__name__, n] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    for name in ("FTRLClassifier", "PegasosSVC"):
        small, large = peaks[name, 4_000], peaks[name, 64_000]
        assert large < 1.1 * small and large < whole_csr / 2, (name, small / 2**20, large / 2**20)


def test_train_with_chunk_rows_on_the_command_line(tmp_path, capsys):
    X, y = sparse_data(n=2000)
    data = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(data), zero_based=False)
    model_path = tmp_path / "m.model"
    code = main(["train", "--solver", "ftrl", "--batch-size", "64", "--random-state", "0", "--backend", "numpy",
                 "--chunk-rows", "300", str(data), str(model_path)])
    out = capsys.readouterr().out
    assert code == 0 and "300 rows at a time" in out and "rows/s" in out
    model = load(model_path)
    assert model.metadata_["data"] == {"file": str(data), "format": "svmlight", "chunk_rows": 300, "zero_based": False}
    expected = FTRLClassifier(batch_size=64, shuffle=False, random_state=0, backend="numpy").fit(X, y)
    np.testing.assert_allclose(model.coef_, expected.coef_, rtol=1e-9, atol=1e-12)  # values via text: 1e-16
    assert main(["predict", str(model_path), str(data)]) == 0
    assert main(["train", "--solver", "sbp", "--chunk-rows", "300", str(data), str(model_path)]) == 2
    assert "--solver sbp needs every row at every step" in capsys.readouterr().err
    (tmp_path / "data.csv").write_text("1,0.5\n0,0.1\n")
    assert main(["train", "--solver", "ftrl", "--chunk-rows", "300", str(tmp_path / "data.csv")]) == 1
    assert "csv files are read whole" in capsys.readouterr().err


# --- kernel solvers: an early error instead of an out-of-memory crash -------------------


def test_the_device_memory_check_names_what_is_needed_and_the_way_out():
    X = np.zeros((60_000, 784), dtype=np.float32)
    needed = device_bytes_to_fit(X, n_outputs=1, batch_size=64)
    assert needed == 60_000 * 784 * 4 + 6 * 8 * 60_000 + 2 * 8 * 64 * 60_000
    check_device_memory(needed, "SBPClassifier on 60000 rows", free=needed)
    with pytest.raises(MemoryError, match=r"SBPClassifier on 60000 rows needs about 0\.24 GiB on the GPU, which "
                                          r"has 0\.10 GiB free.*float32.*backend='numpy'"):
        check_device_memory(needed, "SBPClassifier on 60000 rows", free=2**30 // 10)


@pytest.mark.parametrize("Estimator", [KernelPegasosSVC, SBPClassifier])
def test_kernel_solvers_check_device_memory_before_training(Estimator, backend, monkeypatch):
    import gpusvm._estimator.kernel_model as kernel_model

    def no_memory(needed, what, free=None):
        raise MemoryError(f"{what} needs {needed}")

    monkeypatch.setattr(kernel_model, "check_device_memory", no_memory)
    X, y = sparse_data(n=200)
    if backend == "cupy":
        with pytest.raises(MemoryError, match=f"{Estimator.__name__} on 200 rows x 40 features"):
            Estimator(backend=backend).fit(X, y)
    else:  # host memory is not checked: the NumPy backend trains
        Estimator(backend=backend, max_iter=1).fit(X, y)


@pytest.mark.parametrize("Estimator", [PegasosSVC, FTRLClassifier])
def test_linear_solvers_name_fit_chunks_when_host_data_cannot_fit_the_device(Estimator, backend, monkeypatch):
    import gpusvm._backend as backend_module

    X, y = sparse_data(n=300)
    needed = device_bytes_of(X, n_outputs=1)
    assert needed == X.nnz * 12 + 301 * 4 + 2 * 300 * 8 + 3 * 8 * 41
    monkeypatch.setattr(backend_module, "free_device_bytes", lambda: needed // 2)
    model = Estimator(backend=backend, max_iter=1)
    if backend == "cupy":
        with pytest.raises(MemoryError, match=f"{Estimator.__name__} on 300 rows x 40 features needs about .*"
                                              r"train from host memory with fit_chunks"):
            model.fit(X, y)
        assert not hasattr(model, "coef_")
        model.fit_chunks(chunks_of(X, y, 100))  # two chunks on the device at a time
    else:  # host memory is not checked: the NumPy backend trains
        model.fit(X, y)
    assert model.coef_.shape == (1, 40)

