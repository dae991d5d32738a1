"""Streams that misbehave (issue 67): a file that changes under a fit, a chunk whose X
and y differ in rows, chunks of a few rows, and a stream sorted by label."""

import os
import re
import time
import warnings

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file, make_classification

from gpusvm import FOBOSClassifier, FTRLClassifier, PegasosSVC, RDAClassifier, TruncatedGradientClassifier
from gpusvm.cli import main
from gpusvm.data_files import NpzChunks, SvmlightChunks
from gpusvm.solvers.pegasos import NumpyPegasosSteps, PegasosProblem, PegasosState

from .conftest import to_host

STREAMED = [FTRLClassifier, TruncatedGradientClassifier, FOBOSClassifier, RDAClassifier, PegasosSVC]
SORTED = "labels arrive sorted or grouped by class"


def chunks_of(X, y, rows):
    return [(X[i : i + rows], y[i : i + rows]) for i in range(0, X.shape[0], rows)]


def classification(n=600, d=8, **kwargs):
    return make_classification(n_samples=n, n_features=d, random_state=0, **kwargs)


def escaped(path):
    return re.escape(str(path))


# --- a file that changes under the fit -------------------------------------------------


def _truncate_at_a_line(path, X, y):
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"\n", len(data) // 2) + 1])


def _cut_in_a_line(path, X, y):
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"\n", len(data) // 2) - 3])


def _shorter_lines(path, X, y):
    dump_svmlight_file(np.round(X, 1), y, str(path), zero_based=True)


def _other_labels(path, X, y):
    dump_svmlight_file(X, 1 - y, str(path), zero_based=True)


CHANGES = {
    "truncated": _truncate_at_a_line,
    "cut in a line": _cut_in_a_line,
    "shorter lines": _shorter_lines,
    "other labels": _other_labels,
}


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("Estimator", [FTRLClassifier, PegasosSVC])
def test_a_file_changed_after_its_first_scan_is_refused_and_the_model_kept(tmp_path, change, Estimator):
    # before: trained on as it then was (or, for PegasosSVC, an error about a line that does not parse)
    X, y = classification()
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    reader = SvmlightChunks(path, chunk_rows=100)
    model = Estimator(max_iter=2, random_state=0, backend="numpy").fit_chunks(reader)
    before = model.coef_.copy()
    CHANGES[change](path, X, y)
    with pytest.raises(ValueError, match=f"^{escaped(path)} changed after it was first read: "):
        model.fit_chunks(reader)
    np.testing.assert_array_equal(model.coef_, before)


class RewrittenAfterItsFirstPass:
    """A reader (visited in order) whose file another program rewrites once the fit's
    first pass over it has ended."""

    def __init__(self, reader, rewrite):
        self.reader, self.rewrite, self.passes = reader, rewrite, 0

    def __iter__(self):
        yield from self.reader
        self.passes += 1
        if self.passes == 1:
            self.rewrite()


@pytest.mark.parametrize("Estimator", [FTRLClassifier, PegasosSVC])
def test_a_file_relabelled_between_two_passes_of_a_fit_is_found_by_its_checksum(tmp_path, Estimator):
    # The same size and the same modification time: only the bytes tell.
    X, y = classification()
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)

    def relabel():
        stat = os.stat(path)
        _other_labels(path, X, y)  # labels 0 and 1 swapped: as many bytes
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert os.stat(path).st_size == stat.st_size

    source = RewrittenAfterItsFirstPass(SvmlightChunks(path, chunk_rows=100), relabel)
    model = Estimator(max_iter=3, random_state=0, backend="numpy")
    with pytest.raises(
        ValueError,
        match=f"^{escaped(path)} changed after it was first read: lines 1-100 \\(chunk 0\\) hold other bytes",
    ):
        model.fit_chunks(source)
    assert source.passes == 1 and not hasattr(model, "coef_")


def test_an_npz_file_rewritten_after_its_first_pass_is_refused(tmp_path):
    X, y = classification()
    path = tmp_path / "train.npz"
    np.savez(path, X=X, y=y)
    source = RewrittenAfterItsFirstPass(NpzChunks(path, chunk_rows=100), lambda: np.savez(path, X=X[:300], y=y[:300]))
    with pytest.raises(ValueError, match=f"^{escaped(path)} changed after it was first read: its size went from"):
        FTRLClassifier(max_iter=2, backend="numpy").fit_chunks(source)


def test_train_on_a_file_that_changes_after_its_scan_fails_and_writes_no_model(tmp_path, capsys, monkeypatch):
    import gpusvm.cli

    X, y = classification()
    path, model_path = tmp_path / "train.svm", tmp_path / "model"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    read_chunks = gpusvm.cli.read_chunks

    def read_then_cut(*args, **kwargs):
        reader = read_chunks(*args, **kwargs)
        assert reader.n_rows == 600  # the scan
        _truncate_at_a_line(path, X, y)
        return reader

    monkeypatch.setattr(gpusvm.cli, "read_chunks", read_then_cut)
    code = main(["train", "--solver", "ftrl", "--chunk-rows", "100", str(path), str(model_path)])
    err = capsys.readouterr().err
    assert code == 1 and f"{path} changed after it was first read" in err, err
    assert not model_path.exists()


# --- a chunk whose X and y differ in rows ----------------------------------------------


@pytest.mark.parametrize("classes", [None, [0, 1]])
@pytest.mark.parametrize("Estimator", STREAMED)
def test_a_chunk_with_fewer_labels_than_rows_is_named(Estimator, classes):
    X, y = classification(300)
    chunks = [(X[:100], y[:100]), (X[100:200], y[100:150]), (X[200:], y[200:])]
    with pytest.raises(ValueError, match="^Chunk 1 has 100 rows in X but 50 labels in y: every row of a chunk needs"):
        Estimator(backend="numpy").fit_chunks(chunks, classes=classes)


@pytest.mark.parametrize("Estimator", STREAMED)
def test_partial_fit_says_when_a_chunk_has_fewer_labels_than_rows(Estimator):
    X, y = classification(300)
    model = Estimator(backend="numpy").partial_fit(X[:100], y[:100], classes=[0, 1])
    before = model.coef_.copy()
    with pytest.raises(ValueError, match="^partial_fit got a chunk of 100 rows in X but 50 labels in y"):
        model.partial_fit(X[100:200], y[100:150])
    np.testing.assert_array_equal(model.coef_, before)


@pytest.mark.parametrize("Estimator", STREAMED)
def test_a_chunk_that_fails_its_checks_is_named_with_its_file_and_lines(tmp_path, Estimator):
    X, y = classification()
    labels = y.copy()
    labels[234] = 2  # line 235, in chunk 2
    path = tmp_path / "labels.svm"
    dump_svmlight_file(X, labels, str(path), zero_based=True)
    with pytest.raises(
        ValueError,
        match=f"^Chunk 2 \\({escaped(path)}, lines 201-300\\): y contains labels \\[2.0\\] that are not in classes",
    ):
        Estimator(backend="numpy").fit_chunks(SvmlightChunks(path, chunk_rows=100), classes=[0, 1])
    npz = tmp_path / "nan.npz"
    with_nan = X.copy()
    with_nan[150, 3] = np.nan
    np.savez(npz, X=with_nan, y=y)
    with pytest.raises(ValueError, match=f"^Chunk 1 \\({escaped(npz)}, rows 101-200\\): Input X contains NaN"):
        Estimator(backend="numpy").fit_chunks(NpzChunks(npz, chunk_rows=100), classes=[0, 1])
    in_memory = chunks_of(with_nan, y, 100)
    with pytest.raises(ValueError, match="^Chunk 1: Input X contains NaN"):
        Estimator(backend="numpy").fit_chunks(in_memory, classes=[0, 1])


# --- chunks of a few rows: PegasosSVC costs in proportion to them ----------------------


def _best_seconds(fit, repeats=3):
    times, model = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        model = fit()
        times.append(time.perf_counter() - started)
    return min(times), model


def test_streamed_pegasos_in_chunks_of_ten_rows_costs_in_proportion_to_them():
    # before: each chunk of 10 rows took a step of 64 draws and gathered the batches of 64
    # steps, about 45 times the in-memory fit's time; now one step of its 10 rows
    X, y = classification(3000, 100)
    chunks = chunks_of(X, y, 10)
    settings = dict(max_iter=5, tol=None, random_state=0, backend="numpy", verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # five epochs: a ConvergenceWarning, perhaps
        in_memory_seconds, in_memory = _best_seconds(lambda: PegasosSVC(**settings).fit(X, y))
        streamed_seconds, streamed = _best_seconds(lambda: PegasosSVC(**settings).fit_chunks(chunks))
    assert streamed_seconds < 20 * in_memory_seconds, (streamed_seconds, in_memory_seconds)
    assert abs(streamed.score(X, y) - in_memory.score(X, y)) < 0.02
    assert streamed.t_ == 5 * 300  # one step a chunk


def _pegasos_problem(X, y, batch_size):
    return PegasosProblem(
        X=X,
        targets=np.where(y == 1, 1.0, -1.0)[:, None],
        sample_weight=np.ones(X.shape[0]),
        lam=1e-3,
        batch_size=batch_size,
        fit_intercept=True,
        projection=True,
        average_start=1,
        weight_by_step=True,
        seed=3,
    )


def test_numpy_steps_gather_only_the_batches_of_the_steps_asked_for():
    X, y = classification(500)
    problem = _pegasos_problem(X, y, batch_size=16)
    planned = NumpyPegasosSteps(problem, PegasosState.zeros(1, X.shape[1] + 1, np.float64, np))
    one_by_one = NumpyPegasosSteps(problem, PegasosState.zeros(1, X.shape[1] + 1, np.float64, np))
    planned.run_steps(3)
    assert planned.batches.gathered == 3
    for _ in range(3):
        one_by_one.step()  # a step on its own gathers a block of steps ahead
    assert one_by_one.batches.gathered == one_by_one.batches.block_steps > 3
    planned.run_steps(100)
    for _ in range(100):
        one_by_one.step()
    for name in ("v", "scale_a", "sq_norm_v", "avg_p", "avg_b"):  # the same rows: the same steps, bit for bit
        np.testing.assert_array_equal(getattr(planned.state, name), getattr(one_by_one.state, name), err_msg=name)


def test_streamed_pegasos_chunks_smaller_than_a_batch_agree_on_both_backends(backend):
    X, y = classification(120, 6)
    chunks = chunks_of(X, y, 20)  # six chunks of 20 rows, batch 64: a step of its 20 rows each
    settings = dict(max_iter=2, tol=None, random_state=0)
    model = PegasosSVC(backend=backend, **settings).fit_chunks(chunks)
    reference = PegasosSVC(backend="numpy", **settings).fit_chunks(chunks)
    assert model.t_ == reference.t_ == 2 * 6
    np.testing.assert_allclose(to_host(model.coef_), reference.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(to_host(model.intercept_), reference.intercept_, rtol=1e-9, atol=1e-12)


# --- a stream sorted by label ------------------------------------------------------------


def _sorted_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [str(warning.message) for warning in caught if SORTED in str(warning.message)]


@pytest.mark.parametrize("Estimator", STREAMED)
def test_a_stream_sorted_by_label_warns_and_a_shuffled_one_does_not(Estimator):
    X, y = classification(3000, 10)
    order = np.argsort(y, kind="stable")
    settings = dict(max_iter=2, random_state=0, backend="numpy")
    found = _sorted_warnings(lambda: Estimator(**settings).fit_chunks(chunks_of(X[order], y[order], 300)))
    assert len(found) == 1 and found[0].startswith(f"{Estimator.__name__}.fit_chunks: "), found
    assert "Shuffle the rows" in found[0]
    assert not _sorted_warnings(lambda: Estimator(**settings).fit_chunks(chunks_of(X, y, 300)))
    # three classes, sorted
    X, y = classification(3000, 10, n_informative=4, n_classes=3)
    order = np.argsort(y, kind="stable")
    assert _sorted_warnings(lambda: Estimator(**settings).fit_chunks(chunks_of(X[order], y[order], 300)))


@pytest.mark.parametrize("Estimator", STREAMED)
def test_no_sorted_stream_warning_for_a_rare_class_or_small_chunks_in_a_random_order(Estimator):
    X, y = classification(3000, 10, weights=[0.97], flip_y=0)
    settings = dict(max_iter=1, random_state=0, backend="numpy")
    assert not _sorted_warnings(lambda: Estimator(**settings).fit_chunks(chunks_of(X, y, 500)))
    if Estimator is PegasosSVC:  # chunks of 5 rows of a sorted file, visited in a random order: they mix
        X, y = classification(3000, 10)
        order = np.argsort(y, kind="stable")
        assert not _sorted_warnings(lambda: Estimator(**settings).fit_chunks(chunks_of(X[order], y[order], 5)))


def test_a_sorted_stream_costs_rda_most(tmp_path):
    # What the warning is for: the same rows, sorted by label, against shuffled.
    X, y = classification(4000, 20, n_informative=8, flip_y=0.05)
    X_test, y_test = X[3000:], y[3000:]
    X, y = X[:3000], y[:3000]
    order = np.argsort(y, kind="stable")
    gaps = {}
    for Estimator in (FTRLClassifier, RDAClassifier):
        settings = dict(random_state=0, backend="numpy")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shuffled = Estimator(**settings).fit_chunks(chunks_of(X, y, 300)).score(X_test, y_test)
            in_order = Estimator(**settings).fit_chunks(chunks_of(X[order], y[order], 300)).score(X_test, y_test)
        gaps[Estimator.__name__] = shuffled - in_order
    assert gaps["RDAClassifier"] > gaps["FTRLClassifier"] and gaps["RDAClassifier"] > 0.01, gaps


@pytest.mark.parametrize("Estimator", [FTRLClassifier, PegasosSVC])
def test_a_nan_label_found_while_finding_the_classes_names_its_chunk(Estimator):
    rng = np.random.default_rng(0)
    chunks = [(rng.normal(size=(50, 3)), rng.integers(0, 2, 50).astype(float)) for _ in range(8)]
    chunks[6][1][3] = np.nan
    with pytest.raises(ValueError, match=r"^Chunk 6: Input y contains NaN\.$"):
        Estimator().fit_chunks(chunks)  # no classes=: the first pass finds them


def test_the_last_chunk_of_a_reader_that_never_scanned_names_the_lines_it_has(tmp_path):
    path = tmp_path / "short.svm"
    lines = [f"{i % 2} 1:{i * 0.01} 3:1" for i in range(950)]
    lines[900] = "7 1:1"
    path.write_text("\n".join(lines) + "\n")
    reader = SvmlightChunks(path, chunk_rows=200, n_features=10, zero_based=True)  # width and base given: no scan
    with pytest.raises(ValueError, match=r"lines 801-950\)"):
        FTRLClassifier().fit_chunks(reader, classes=[0, 1])
