"""Training from chunks that never sit in memory together: the file readers, the streamed
fits (exact for the online learners), the memory bound, and the command line."""

import io
import re
import tracemalloc
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file, make_classification

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
from gpusvm.solvers.pegasos import primal_objective

from .conftest import assert_same_result, default_backend, to_host
from .simulated_streams import load_on_simulated_device

ONLINE = [FTRLClassifier, TruncatedGradientClassifier, FOBOSClassifier, RDAClassifier]


def sparse_data(n=1500, d=40, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    scores = X @ rng.normal(size=(d, n_classes)) + 0.3 * rng.normal(size=(n, n_classes))
    return X, scores.argmax(axis=1) * 10 + 1


def chunks_of(X, y, rows):
    return [(X[i : i + rows], y[i : i + rows]) for i in range(0, X.shape[0], rows)]


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
        np.testing.assert_allclose(sp.vstack([sp.csr_matrix(X) for X, _ in parts]).toarray(), X.toarray(), rtol=1e-7)
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


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")  # a DIA matrix of random entries
@pytest.mark.parametrize("matrix_format", ["csc", "coo", "bsr", "dia"])
def test_npz_chunks_refuse_a_sparse_matrix_that_is_not_csr_by_name(tmp_path, matrix_format, capsys):
    # save_npz writes each format's own arrays; a CSC matrix's column pointers once
    # passed for row pointers (a wrong model), a BSR matrix gave a bare IndexError
    X, y = sparse_data()
    path = tmp_path / f"{matrix_format}.npz"
    save_npz_with_labels(path, X.asformat(matrix_format), y)
    with pytest.raises(ValueError, match=f"{matrix_format}.npz holds a {matrix_format.upper()} matrix.*CSR.*tocsr"):
        list(NpzChunks(path, chunk_rows=400))
    code = main(
        [
            "train",
            "--solver",
            "pegasos",
            "--max-iter",
            "2",
            "--backend",
            "numpy",
            "--chunk-rows",
            "400",
            str(path),
            str(tmp_path / "m.model"),
        ]
    )
    assert code == 1 and f"holds a {matrix_format.upper()} matrix" in capsys.readouterr().err


class ByteCounter:
    """Counts the bytes read from the files under ``folder`` (through ``open`` and ``io.open``)."""

    def __init__(self, monkeypatch, folder):
        import builtins

        self.total, real_open = 0, builtins.open

        def counting_open(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            return _Counted(handle, self) if "b" in mode and str(file).startswith(str(folder)) else handle

        monkeypatch.setattr(builtins, "open", counting_open)
        monkeypatch.setattr(io, "open", counting_open)


class _Counted:
    def __init__(self, handle, counter):
        self._handle, self._counter = handle, counter

    def read(self, *args):
        data = self._handle.read(*args)
        self._counter.total += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


@pytest.mark.parametrize("layout", ["stored dense", "compressed dense", "compressed csr"])
def test_npz_chunks_read_a_chunk_in_time_proportional_to_its_size(tmp_path, monkeypatch, layout):
    # PegasosSVC reads chunks in a random order: reading chunk i once re-read every row
    # before it, so that an epoch of 80 chunks cost 41 plain passes
    import gpusvm._stream.readers as readers

    monkeypatch.setattr(readers, "_CHECKPOINT_BYTES", 1 << 13)  # 8 KiB: many, on small data
    rng = np.random.default_rng(0)
    X = sp.random(4000, 50, density=0.2, format="csr", random_state=0, dtype=np.float64)
    y = rng.integers(0, 2, size=4000)
    path = tmp_path / "data.npz"
    if layout == "compressed csr":
        save_npz_with_labels(path, X, y)
    else:
        (np.savez if layout == "stored dense" else np.savez_compressed)(path, X=X.toarray(), y=y)
    reader = NpzChunks(path, chunk_rows=100)
    counter = ByteCounter(monkeypatch, tmp_path)
    in_order = list(reader)  # a plain pass (the first also takes the checkpoints)
    counter.total = 0
    in_order = list(reader)
    plain_pass = counter.total
    counter.total = 0
    order = rng.permutation(len(reader))
    shuffled = [reader[int(i)] for i in order]
    assert counter.total < 2 * plain_pass, (counter.total, plain_pass)
    for i, (X_chunk, y_chunk) in zip(order, shuffled):
        np.testing.assert_array_equal(sp.csr_matrix(X_chunk).toarray(), sp.csr_matrix(in_order[i][0]).toarray())
        np.testing.assert_array_equal(y_chunk, in_order[i][1])
    np.testing.assert_array_equal(sp.vstack([sp.csr_matrix(part[0]) for part in in_order]).toarray(), X.toarray())


def test_npz_chunks_name_the_file_in_their_errors(tmp_path):
    X, y = sparse_data()
    np.savez(tmp_path / "stored.npz", X=X.toarray(), y=y)
    data = bytearray((tmp_path / "stored.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # a byte of X flipped: the member's CRC-32 no longer matches
    (tmp_path / "flipped.npz").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="flipped.npz is damaged: its member X.npy fails its CRC-32 check"):
        list(NpzChunks(tmp_path / "flipped.npz", chunk_rows=400))
    np.savez_compressed(tmp_path / "compressed.npz", X=X.toarray(), y=y)
    data = bytearray((tmp_path / "compressed.npz").read_bytes())
    data[len(data) // 3] ^= 0xFF
    (tmp_path / "compressed_flipped.npz").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="compressed_flipped.npz"):
        list(NpzChunks(tmp_path / "compressed_flipped.npz", chunk_rows=400))
    np.savez(tmp_path / "objects.npz", X=X.toarray(), y=y.astype(object))
    with pytest.raises(ValueError, match="objects.npz: y holds Python objects"):
        list(NpzChunks(tmp_path / "objects.npz", chunk_rows=400))
    np.savez(tmp_path / "short.npz", X=X.toarray(), y=y[:-5])
    with pytest.raises(ValueError, match=r"short.npz: y has shape \(1495,\), but X has 1500 rows"):
        list(NpzChunks(tmp_path / "short.npz", chunk_rows=400))


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


def test_streamed_pegasos_stops_when_the_progressive_objective_stops_improving(backend):
    # max_iter=1000 epochs used to run to the end (tol did not apply to a streamed fit)
    X, y = make_classification(
        n_samples=3000, n_features=20, n_informative=8, flip_y=0.01, class_sep=2.0, random_state=0
    )
    in_memory = PegasosSVC(random_state=0, backend=backend).fit(X, y)  # 67 epochs
    streamed = PegasosSVC(random_state=0, backend=backend).fit_chunks(chunks_of(X, y, 500))
    assert streamed.n_iter_ < streamed.max_iter and streamed.n_iter_ <= 2 * in_memory.n_iter_, (
        streamed.n_iter_,
        in_memory.n_iter_,
    )
    assert len(streamed.objective_curve_) == streamed.n_iter_ and streamed.t_ == streamed.n_iter_ * 6 * 8
    from gpusvm.solvers.pegasos import NoImprovementStop

    stop = NoImprovementStop(streamed.tol, streamed.n_iter_no_change)  # the rule, replayed on the curve
    replayed = [stop(value, 48 * epoch) for epoch, value in enumerate(streamed.objective_curve_, 1)]
    assert replayed == [False] * (streamed.n_iter_ - 1) + [True]
    # it follows the exact objective: of the model returned, and of the in-memory fit
    targets = np.where(y == 1, 1.0, -1.0)[:, None]
    exact = primal_objective(
        X, targets, np.ones(len(y)), np.hstack([streamed.coef_, streamed.intercept_[:, None]]), streamed.lam_, True
    )
    assert exact < streamed.objective_curve_[-1] < 1.05 * exact
    assert streamed.objective_curve_[-1] < 1.1 * in_memory.objective_curve_[-1]
    assert abs(streamed.score(X, y) - in_memory.score(X, y)) < 0.01
    forced = PegasosSVC(max_iter=7, tol=None, random_state=0, backend=backend).fit_chunks(chunks_of(X, y, 500))
    assert forced.n_iter_ == 7 == len(forced.objective_curve_)


@pytest.mark.filterwarnings("ignore:PegasosSVC.fit_chunks.*came in chunks:UserWarning")  # sorted on purpose
def test_streamed_pegasos_balances_classes_over_the_stream(backend):
    # rows grouped by label: each chunk holds one class, so weights balanced per chunk are all 1
    from sklearn.utils.class_weight import compute_class_weight

    X, y = make_classification(n_samples=2400, n_features=10, weights=[0.8], random_state=0)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    chunks = chunks_of(X, y, 400)
    expected_weights = dict(zip([0, 1], compute_class_weight("balanced", classes=np.array([0, 1]), y=y)))
    settings = dict(max_iter=3, tol=None, random_state=0, backend=backend)
    balanced = PegasosSVC(class_weight="balanced", **settings).fit_chunks(chunks)
    explicit = PegasosSVC(class_weight=expected_weights, **settings).fit_chunks(chunks)
    assert_same_result(balanced.coef_, explicit.coef_, backend)
    given_classes = PegasosSVC(class_weight="balanced", **settings).fit_chunks(chunks, classes=[0, 1])
    assert_same_result(given_classes.coef_, explicit.coef_, backend)
    with pytest.raises(ValueError, match="needs rows of every class.*class 2"):
        PegasosSVC(class_weight="balanced", **settings).fit_chunks(chunks, classes=[0, 1, 2])


def test_streamed_fits_skip_chunks_without_rows(tmp_path, backend):
    X, y = sparse_data(n=1000)
    chunks = chunks_of(X, y, 250)
    with_empty = [
        chunks[0],
        (X[:0], y[:0]),
        chunks[1],
        (np.zeros((0, 40)), np.zeros(0)),
        chunks[2],
        chunks[3],
        (X[:0], y[:0]),
    ]
    model = PegasosSVC(max_iter=2, random_state=0, backend=backend).fit_chunks(with_empty)
    assert model.t_ == 2 * 4 * 4  # two epochs of four chunks of four steps
    ftrl = FTRLClassifier(max_iter=2, random_state=0, backend=backend)
    assert_same_result(ftrl.fit_chunks(with_empty).coef_, ftrl.fit_chunks(chunks).coef_, backend)
    # svmlight: a blank line after rows that chunk_rows divides, a chunk of comments
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    with open(path, "a") as handle:
        handle.write("\n")
    model = PegasosSVC(max_iter=2, random_state=0, backend=backend).fit_chunks(SvmlightChunks(path, chunk_rows=250))
    assert model.t_ == 2 * 4 * 4
    dump_svmlight_file(X[:40], y[:40], str(path), zero_based=True, comment="a chunk\nof comments")
    model = PegasosSVC(max_iter=2, random_state=0, backend=backend).fit_chunks(SvmlightChunks(path, chunk_rows=2))
    assert model.t_ == 2 * 21  # 5 comment lines: chunks of 2, 2 and 1 comments, then 21 with rows


@pytest.mark.parametrize("classes", [None, [1, 11]])
def test_streamed_pegasos_on_a_source_without_rows_says_so(classes):
    for chunks in ([], [(np.zeros((0, 3)), np.zeros(0))]):
        with pytest.raises(ValueError, match="fit_chunks got no chunks with rows"):
            PegasosSVC(backend="numpy").fit_chunks(chunks, classes=classes)


@pytest.mark.parametrize(
    ("Estimator", "settings", "classes", "needs"),
    [
        (PegasosSVC, dict(max_iter=2, lam=1e-3), [1, 11], "max_iter=2"),
        (PegasosSVC, dict(max_iter=1), [1, 11], "max_iter=1"),  # counting the rows for lam first
        (PegasosSVC, dict(max_iter=1, lam=1e-3), None, "max_iter=1"),  # finding the classes first
        (PegasosSVC, dict(max_iter=1, lam=1e-3, class_weight="balanced"), [1, 11], "max_iter=1"),
        (FTRLClassifier, dict(max_iter=2), [1, 11], "max_iter=2"),
    ],
)
def test_a_one_shot_iterator_is_refused_before_it_is_read(Estimator, settings, classes, needs):
    X, y = sparse_data()
    read = []

    def generator():
        for chunk in chunks_of(X, y, 500):
            read.append(1)
            yield chunk

    with pytest.raises(ValueError, match=f"{needs} needs another pass over the chunks.*one-shot iterator"):
        Estimator(backend="numpy", **settings).fit_chunks(generator(), classes=classes)
    assert read == []
    one_pass = dict(settings, max_iter=1, lam=1e-3, class_weight=None)
    if Estimator is FTRLClassifier:
        one_pass = dict(max_iter=1)
    Estimator(backend="numpy", **one_pass).fit_chunks(generator(), classes=[1, 11])  # one pass suffices
    assert read == [1, 1, 1]


def _contents(X, labels):
    parts = (X.data, X.indices, X.indptr) if hasattr(X, "indptr") else (X,)
    return [np.array(part, copy=True) for part in (*parts, labels)]


@pytest.mark.parametrize("seed", range(30))
def test_device_staging_keeps_each_chunk_until_its_steps_have_read_it(monkeypatch, seed):
    # Dense and CSR chunks of growing and shrinking sizes, staged through two slots on a
    # simulated device that runs queued work in a random order (tests/simulated_streams.py):
    # each chunk's steps (a kernel queued on the solver's stream) read exactly that chunk.
    # Without any one of the staging's waits, some seeds read another chunk's data. The host
    # never waits for the solver's stream (CuPy 14.2's CSR constructor would make it).
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
    assert device.host_waits and device.null not in device.host_waits  # only the copy stream, for pinned buffers


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


@pytest.mark.slow  # files many chunks long
def test_streamed_fit_memory_is_bounded_by_the_chunk_not_the_file(tmp_path):
    # Files of 4,000 and 64,000 rows x 10 nonzeros (0.5 and 7.7 MB as CSR), read 1,000 rows
    # (0.12 MB) at a time: the larger file's peak is within a few chunks of the smaller's,
    # and well under its CSR. (About a quarter of a megabyte comes and goes between runs of
    # the same file, a chunk or two held a little longer: a ratio of 1.1 on the ~2.7 MB peak
    # failed on an H200's host, 2.38 against 2.69 MB, and passed here by 0.3%.)
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
        chunk_csr = whole_csr * 1_000 // n
        # verbose=0: no bar, which shows once a fit has taken 5 s (the larger file's only)
        quiet = dict(max_iter=1, random_state=0, verbose=0)
        for model in (FTRLClassifier(**quiet), PegasosSVC(**quiet)):
            if n == 4_000:  # a first fit untraced: the imports and kernel loads a device fit does once
                model.fit_chunks(SvmlightChunks(path, chunk_rows=1_000, n_features=d), classes=[0, 1])
            reader = SvmlightChunks(path, chunk_rows=1_000, n_features=d)
            tracemalloc.start()
            try:
                model.fit_chunks(reader, classes=[0, 1])
                peaks[type(model).__name__, n] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    for name in ("FTRLClassifier", "PegasosSVC"):
        small, large = peaks[name, 4_000], peaks[name, 64_000]
        assert large < small + 4 * chunk_csr and large < whole_csr / 2, (name, small / 2**20, large / 2**20)


def test_train_with_chunk_rows_on_the_command_line(tmp_path, capsys):
    X, y = sparse_data(n=2000)
    data = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(data), zero_based=False)
    model_path = tmp_path / "m.model"
    code = main(
        [
            "train",
            "--solver",
            "ftrl",
            "--batch-size",
            "64",
            "--random-state",
            "0",
            "--backend",
            "numpy",
            "--chunk-rows",
            "300",
            str(data),
            str(model_path),
        ]
    )
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


def test_streamed_training_on_the_command_line_shows_each_epoch(tmp_path, capsys):
    # it printed nothing without -v, and -v gave a bar without a total or an end
    X, y = make_classification(n_samples=2000, n_features=20, n_informative=8, flip_y=0.05, random_state=0)
    data = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(data), zero_based=True)
    code = main(
        [
            "train",
            "--solver",
            "pegasos",
            "--max-iter",
            "4",
            "--random-state",
            "0",
            "--backend",
            "numpy",
            "--chunk-rows",
            "500",
            str(data),
            str(tmp_path / "m.model"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0 and "4 epoch(s)" in captured.out
    for epoch in range(1, 5):  # a line an epoch, with its total of rows and its objective
        assert re.search(f"PegasosSVC epoch {epoch}/4: 100%.* 2000/2000 .*objective=", captured.err)
    assert (
        main(
            [
                "train",
                "--solver",
                "ftrl",
                "--max-iter",
                "2",
                "--backend",
                "numpy",
                "--chunk-rows",
                "500",
                str(data),
                str(tmp_path / "m.model"),
            ]
        )
        == 0
    )
    assert re.search("FTRLClassifier epoch 2/2: 100%.* 2000/2000 .*loss=", capsys.readouterr().err)


# --- kernel solvers: an early error instead of an out-of-memory crash -------------------


def test_the_device_memory_check_names_what_is_needed_and_the_way_out():
    X = np.zeros((60_000, 784), dtype=np.float32)
    needed = device_bytes_to_fit(X, n_outputs=1, batch_size=64)
    assert needed == 60_000 * 784 * 4 + 6 * 8 * 60_000 + 2 * 8 * 64 * 60_000
    check_device_memory(needed, "SBPClassifier on 60000 rows", free=needed)
    with pytest.raises(
        MemoryError,
        match=r"SBPClassifier on 60000 rows needs about 0\.24 GiB on the GPU, which "
        r"has 0\.10 GiB free.*float32.*backend='numpy'",
    ):
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
        with pytest.raises(
            MemoryError,
            match=f"{Estimator.__name__} on 300 rows x 40 features needs about .*"
            r"train from host memory with fit_chunks",
        ):
            model.fit(X, y)
        assert not hasattr(model, "coef_")
        model.fit_chunks(chunks_of(X, y, 100))  # two chunks on the device at a time
    else:  # host memory is not checked: the NumPy backend trains
        model.fit(X, y)
    assert model.coef_.shape == (1, 40)


@pytest.mark.parametrize("Estimator", [PegasosSVC, FTRLClassifier])
def test_fit_chunks_of_dataframes_keeps_their_column_names_and_checks_their_order(Estimator):
    """As fit does for a DataFrame: feature_names_in_ from the chunks' columns, and a chunk
    whose columns come in another order is refused by name (it was trained on, misaligned)."""
    pd = pytest.importorskip("pandas")
    X, y = make_classification(n_samples=120, n_features=3, n_informative=2, n_redundant=0, random_state=0)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    chunks = [(frame[:60], y[:60]), (frame[60:], y[60:])]
    model = Estimator(max_iter=2, random_state=0).fit_chunks(chunks)
    assert model.feature_names_in_.tolist() == ["a", "b", "c"]
    assert model.predict(frame).shape == (120,)
    coef = model.coef_.copy()
    shuffled = [(frame[:60], y[:60]), (frame[60:][["c", "b", "a"]], y[60:])]
    with pytest.raises(ValueError, match="Chunk 1 has the columns c, b, a, but chunk 0 has a, b, c"):
        model.fit_chunks(shuffled)
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.feature_names_in_.tolist() == ["a", "b", "c"]
    arrays = Estimator(max_iter=2, random_state=0).fit_chunks([(X[:60], y[:60]), (X[60:], y[60:])])
    assert not hasattr(arrays, "feature_names_in_")
    assert_same_result(arrays.coef_, coef, default_backend())  # the same model: names only checked


def test_npz_chunks_name_a_bad_chunk_rows_and_a_missing_file(tmp_path):
    path = tmp_path / "data.npz"
    np.savez(path, X=np.ones((4, 2)), y=np.array([0, 1, 0, 1]))
    for bad in ("x", None, 2.7, True):
        with pytest.raises(TypeError, match=f"chunk_rows must be an integer, got {bad!r}"):
            NpzChunks(path, bad)
    with pytest.raises(ValueError, match="chunk_rows must be at least 1, got 0"):
        NpzChunks(path, 0)
    with pytest.raises(FileNotFoundError):
        len(NpzChunks(tmp_path / "missing.npz", 10))


@pytest.mark.parametrize("Estimator", [PegasosSVC, FTRLClassifier])
def test_fit_chunks_names_labels_of_two_kinds_and_a_stream_without_rows(Estimator):
    X = np.random.default_rng(0).normal(size=(8, 2))
    words = np.array(["a", "b"] * 2, dtype=object)
    with pytest.raises(ValueError, match="Chunk 1 has labels that are strings or objects, but chunk 0's are numbers"):
        Estimator().fit_chunks([(X[:4], np.array([0, 1, 0, 1])), (X[4:], words)])
    with pytest.raises(ValueError, match="fit_chunks got no chunks with rows"):
        Estimator().fit_chunks([])
