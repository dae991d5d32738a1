"""The chunk cache of streamed fits (gpusvm/_stream/chunk_cache.py): the passes after the
first read arrays instead of text, bit for bit the same model; a cache that does not match
its file, or is damaged or truncated, is refused and written again; a file that is not a
cache is never overwritten; no room on the disk is a clear error, or a warning for the
fit's own temporary cache."""

import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from gpusvm import FTRLClassifier, PegasosSVC
from gpusvm._stream import chunk_cache, readers
from gpusvm.cli import main
from gpusvm.data_files import SvmlightChunks


@pytest.fixture
def svmlight_file(tmp_path):
    """A shuffled one-based svmlight file of 1,500 sparse rows, two classes."""
    rng = np.random.default_rng(3)
    X = sp.random(1500, 40, density=0.2, format="csr", random_state=4, dtype=np.float64)
    y = np.where(X @ rng.normal(size=40) > 0, 1, -1)
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return path


@pytest.fixture
def parses(monkeypatch):
    """The number of text blocks parsed from now on (every read of a chunk's text)."""
    counted = []
    parse = readers._parse

    def counting(*args, **kwargs):
        counted.append(1)
        return parse(*args, **kwargs)

    monkeypatch.setattr(readers, "_parse", counting)
    return counted


def pegasos():
    return PegasosSVC(max_iter=4, tol=None, random_state=0, backend="numpy", verbose=0)


def test_a_cached_fit_is_the_uncached_fit_bit_for_bit_and_parses_the_text_once(svmlight_file, tmp_path, parses):
    plain = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400), cache_file=None)
    text_parses = len(parses)
    parses.clear()
    cache = tmp_path / "train.cache"
    cached = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400, cache_file=cache))
    np.testing.assert_array_equal(cached.coef_, plain.coef_)
    np.testing.assert_array_equal(cached.intercept_, plain.intercept_)
    assert cached.objective_curve_ == plain.objective_curve_
    assert len(parses) == 4 < text_parses  # the scan's 4 chunks; every epoch from the cache
    assert chunk_cache.is_chunk_cache(cache)
    parses.clear()
    again = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400, cache_file=cache))  # a later run
    np.testing.assert_array_equal(again.coef_, plain.coef_)
    assert parses == []


def test_fit_chunks_makes_a_temporary_cache_by_default_and_removes_it(svmlight_file, tmp_path, monkeypatch, parses):
    folders = []
    mkdtemp = chunk_cache_mkdtemp(monkeypatch, tmp_path, folders)
    online = FTRLClassifier(max_iter=3, random_state=0, backend="numpy", verbose=0)
    default = online.fit_chunks(SvmlightChunks(svmlight_file, 500)).coef_.copy()
    assert len(folders) == 1 and not os.path.exists(folders[0]) and mkdtemp.called
    assert len(parses) == 3  # the scan for the width and the base; every pass after it from the cache
    parses.clear()
    plain = online.fit_chunks(SvmlightChunks(svmlight_file, 500), cache_file=None).coef_
    np.testing.assert_array_equal(default, plain)
    assert len(parses) == 3 * 5  # the scan, then every pass (the classes' and three epochs') from the text


def chunk_cache_mkdtemp(monkeypatch, tmp_path, folders):
    """Temporary folders made under ``tmp_path``, recorded in ``folders``."""
    import tempfile

    from gpusvm._stream import chunks

    made = tempfile.mkdtemp

    def recording(prefix=""):
        folders.append(made(prefix=prefix, dir=tmp_path))
        recording.called = True
        return folders[-1]

    recording.called = False
    monkeypatch.setattr(chunks.tempfile, "mkdtemp", recording)
    return recording


def test_a_cache_of_a_file_that_changed_is_refused_and_written_again(svmlight_file, tmp_path, parses):
    cache = tmp_path / "train.cache"
    list(SvmlightChunks(svmlight_file, 400, cache_file=cache))
    rng = np.random.default_rng(9)
    X = sp.random(900, 40, density=0.2, format="csr", random_state=5)
    dump_svmlight_file(X, rng.choice([-1, 1], 900), str(svmlight_file), zero_based=False)
    parses.clear()
    with pytest.warns(UserWarning, match="is not used: its source has changed"):
        chunks = list(SvmlightChunks(svmlight_file, 400, cache_file=cache))
    assert sum(X.shape[0] for X, _ in chunks) == 900 and parses  # the new file's rows, from its text
    parses.clear()
    again = list(SvmlightChunks(svmlight_file, 400, cache_file=cache))  # written again on that pass
    assert parses == []
    for (X_a, y_a), (X_b, y_b) in zip(chunks, again, strict=True):
        assert (X_a != X_b).nnz == 0 and np.array_equal(y_a, y_b)


def test_a_cache_read_with_other_settings_is_refused(svmlight_file, tmp_path):
    cache = tmp_path / "train.cache"
    list(SvmlightChunks(svmlight_file, 400, cache_file=cache))
    with pytest.warns(UserWarning, match="parsed with other settings"):
        chunks = list(SvmlightChunks(svmlight_file, 400, dtype=np.float32, cache_file=cache))
    assert all(X.dtype == np.float32 for X, _ in chunks)


@pytest.mark.parametrize("damage", ["a record's byte", "truncated", "the index's byte"])
def test_a_damaged_cache_is_never_read_as_data(svmlight_file, tmp_path, damage):
    cache = tmp_path / "train.cache"
    reference = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400), cache_file=None)
    list(SvmlightChunks(svmlight_file, 400, cache_file=cache))
    raw = bytearray(cache.read_bytes())
    if damage == "truncated":
        raw = raw[: len(raw) // 2]
    elif damage == "a record's byte":
        raw[len(raw) // 3] ^= 0xFF
    else:
        raw[-len(chunk_cache.END) - 20] ^= 0xFF
    cache.write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match=f"chunk cache {cache} is not used: .*(damaged|truncated)"):
        model = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400, cache_file=cache))
    np.testing.assert_array_equal(model.coef_, reference.coef_)


def test_a_file_that_is_not_a_cache_is_never_overwritten(svmlight_file, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(ValueError, match="cache_file='.*notes.txt' exists and is not a gpusvm chunk cache"):
        SvmlightChunks(svmlight_file, 400, cache_file=notes)
    with pytest.raises(ValueError, match="is the file being read"):
        SvmlightChunks(svmlight_file, 400, cache_file=svmlight_file)
    with pytest.raises(ValueError, match="is not a gpusvm chunk cache"):
        pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400), cache_file=notes)
    assert notes.read_text() == "my notes\n"
    assert svmlight_file.read_bytes().startswith(b"-1 ") or svmlight_file.read_bytes().startswith(b"1 ")


def test_a_pass_that_does_not_end_leaves_no_cache(svmlight_file, tmp_path):
    cache = tmp_path / "train.cache"
    reader = SvmlightChunks(svmlight_file, 400, n_features=40, zero_based=False, cache_file=cache)
    passes = iter(reader)
    next(passes)
    passes.close()
    assert not cache.exists() and not list(tmp_path.glob("*.partial"))
    assert sum(X.shape[0] for X, _ in reader) == 1500 and cache.exists()  # a whole pass in order writes it


def test_no_room_for_a_cache_is_a_clear_error_or_for_the_fits_own_cache_a_warning(svmlight_file, tmp_path, monkeypatch):
    full = type("Usage", (), {"free": 10 * 2**20})()
    monkeypatch.setattr(chunk_cache.shutil, "disk_usage", lambda path: full)
    reference = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400), cache_file=None)
    with pytest.raises(OSError, match="Not enough disk space for the chunk cache .*train.cache"):
        pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400), cache_file=tmp_path / "train.cache")
    assert not list(tmp_path.glob("train.cache*"))
    with pytest.warns(UserWarning, match="Not enough disk space .* parsed from the text every pass"):
        model = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400))  # 'auto'
    np.testing.assert_array_equal(model.coef_, reference.coef_)


def test_the_cache_reads_back_every_array_as_written(tmp_path):
    rng = np.random.default_rng(0)
    facts = {"format": chunk_cache.FORMAT, "source": "x", "size": 1, "modified_ns": 2, "settings": {}}
    writer = chunk_cache.CacheWriter(tmp_path / "c", facts)
    written = []
    for number in range(3):
        X = sp.random(int(rng.integers(0, 50)), 7, density=0.3, format="csr", random_state=number, dtype=np.float32)
        arrays = {"data": X.data, "indices": X.indices, "indptr": X.indptr, "y": rng.normal(size=X.shape[0])}
        writer.add(number, arrays)
        written.append(arrays)
    writer.finish({"n": 3})
    reader = chunk_cache.CacheReader(tmp_path / "c", facts)
    assert len(reader) == 3 and reader.summary == {"n": 3}
    for number, arrays in enumerate(written):
        read = reader.arrays(number)
        for name in chunk_cache.ARRAYS:
            assert read[name].dtype == arrays[name].dtype and np.array_equal(read[name], arrays[name])
            assert read[name].flags.writeable
    with pytest.raises(chunk_cache.CacheMismatch, match="caches x, not y"):
        chunk_cache.CacheReader(tmp_path / "c", {**facts, "source": "y"})


def test_the_command_line_keeps_a_cache_where_asked_and_reuses_it(svmlight_file, tmp_path, capsys, parses):
    cache = tmp_path / "train.cache"
    argv = ["train", "--solver", "ftrl", "--max-iter", "2", "--chunk-rows", "500", "--backend", "numpy", "-q"]
    assert main([*argv, "--cache-file", str(cache), str(svmlight_file), str(tmp_path / "a.model")]) == 0
    assert chunk_cache.is_chunk_cache(cache)
    parses.clear()
    assert main([*argv, "--cache-file", str(cache), str(svmlight_file), str(tmp_path / "b.model")]) == 0
    assert parses == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default temporary cache: no warning, removed after
        assert main([*argv, str(svmlight_file), str(tmp_path / "c.model")]) == 0
    assert main(["train", "--no-cache", "--solver", "ftrl", str(svmlight_file), str(tmp_path / "d.model")]) == 2
    assert "--no-cache goes with --chunk-rows" in capsys.readouterr().err


def test_chunks_from_the_cache_are_read_ahead_on_a_worker_thread(svmlight_file, tmp_path, monkeypatch):
    """Reading arrays back waits on the disk outside the GIL, so on the host the next chunk
    is read while the current one trains; text is parsed in turn, in the caller's thread."""
    from gpusvm._stream import pipeline

    threads = []
    read_ahead = pipeline.read_ahead

    def recording(items, prepare, timing=None):
        def prepare_here(item, number):
            import threading

            threads.append(threading.current_thread().name)
            return prepare(item, number)

        return read_ahead(items, prepare_here, timing)

    monkeypatch.setattr(pipeline, "read_ahead", recording)
    cached = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400, cache_file=tmp_path / "c"))
    assert threads and all(name.startswith("gpusvm-read-ahead") for name in threads)
    threads.clear()
    plain = pegasos().fit_chunks(SvmlightChunks(svmlight_file, 400), cache_file=None)
    assert threads == []
    np.testing.assert_array_equal(cached.coef_, plain.coef_)


def test_a_streamed_epochs_line_shows_the_rates_of_its_reading_and_of_its_steps(svmlight_file, tmp_path, capsys):
    model = PegasosSVC(max_iter=2, tol=None, random_state=0, backend="numpy", verbose=1)
    model.fit_chunks(SvmlightChunks(svmlight_file, 400, cache_file=tmp_path / "c"))
    lines = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if "epoch 2/2" in line]
    read, steps = (
        float(lines[-1].split(f"{name}=")[1].split(" rows/s")[0].replace(",", "")) for name in ("read", "steps")
    )
    assert read > 0 and steps > 0 and "objective=" in lines[-1]
