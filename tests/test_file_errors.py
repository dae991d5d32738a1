"""Data files a careless or hostile user gives: every error names the file and the line,
in memory and streamed; compressed files read as streams; chunks of different widths
named; advice that fits the mistake."""

import bz2
import gzip
import lzma

import numpy as np
import pytest
import scipy.sparse as sp

from gpusvm import FTRLClassifier, PegasosSVC, RDAClassifier
from gpusvm._stream.chunks import ChunkSource
from gpusvm.cli import main
from gpusvm.data_files import SvmlightChunks, read_chunks, read_data
from gpusvm.datasets import load_svmlight

from .conftest import assert_same_result, default_backend


def svmlight_text(n=20):
    """``n`` plain lines, labels alternating, three features (one-based)."""
    return "".join(f"{1 if i % 2 else -1} 1:{i / 10} 3:0.5\n" for i in range(n))


def with_line(number, line, n=20):
    """:func:`svmlight_text` with line ``number`` (from 1) replaced."""
    lines = svmlight_text(n).splitlines(keepends=True)
    lines[number - 1] = line
    return "".join(lines)


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def streamed_error(path, chunk_rows=4, **kwargs):
    with pytest.raises(ValueError) as error:
        for _ in SvmlightChunks(path, chunk_rows, **kwargs):  # (list() would ask len(), which scans)
            pass
    return str(error.value)


def in_memory_error(path, **kwargs):
    with pytest.raises(ValueError) as error:
        read_data(path, **kwargs)
    return str(error.value)


# --- item 7: the line of a data error ------------------------------------------------


@pytest.mark.parametrize(
    "line, reason",
    [
        ("1 1:x 3:0.5\n", "could not convert string to float"),
        ("1 3:1 1:0.5\n", "sorted"),
        ("1 1:0.5 2147483648:1\n", "a feature index past 2147483647"),  # scikit-learn: a bare OverflowError
        ("1 1:0.5 99999999999999999999999:1\n", "a feature index past 2147483647"),
    ],
)
@pytest.mark.parametrize("parser", ["auto", "scikit-learn"])
def test_a_line_that_does_not_parse_is_named_by_its_number(tmp_path, line, reason, parser):
    path = tmp_path / "bad.svm"
    path.write_text("# a comment line counts\n" + with_line(11, line))  # line 12 of the file, in chunk 2
    for kwargs in ({}, {"n_features": 3, "zero_based": False}):  # scanned, and read in one pass
        message = streamed_error(path, parser=parser, **kwargs)
        assert message.startswith(f"{path} is not a LIBSVM/svmlight file: line 12 {line.strip()!r}: "), message
        assert reason in message
    message = in_memory_error(path)
    assert message.startswith(f"{path} is not a LIBSVM/svmlight file: line 12 {line.strip()!r}: "), message
    assert reason in message


@pytest.mark.parametrize(
    "line, message",
    [
        ("1 1:nan 3:0.5\n", "Input X contains NaN."),
        ("1 1:-inf 3:0.5\n", "Input X contains infinity or a value too large for dtype('float64')."),
        ("nan 1:1 3:0.5\n", "Input y contains NaN."),
    ],
)
def test_a_non_finite_value_is_named_by_its_line(tmp_path, capsys, line, message):
    path = tmp_path / "nan.svm"
    path.write_text(with_line(6, line))
    where = f"{path}, line 6 {line.strip()!r}: {message}"
    assert streamed_error(path) == where
    assert streamed_error(path, n_features=3, zero_based=False) == where  # no scan
    with pytest.raises(ValueError, match="^" + where.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        FTRLClassifier(max_iter=1).fit_chunks(SvmlightChunks(path, 4))
    assert in_memory_error(path) == where
    code, _, err = run(capsys, "train", "--solver", "ftrl", path, tmp_path / "m")
    assert code == 1 and where in err
    code, _, err = run(capsys, "train", "--solver", "ftrl", "--chunk-rows", 4, path, tmp_path / "m")
    assert code == 1 and where in err


def test_a_value_past_float32_is_named_by_its_line(tmp_path):
    path = tmp_path / "big.svm"
    path.write_text(with_line(3, "1 1:1e39\n"))
    assert streamed_error(path, dtype=np.float32) == (
        f"{path}, line 3 '1 1:1e39': Input X contains infinity or a value too large for dtype('float32')."
    )


def test_index_errors_name_the_line(tmp_path, capsys):
    path = tmp_path / "zero.svm"
    path.write_text(with_line(7, "1 0:1 3:0.5\n"))
    for kwargs in ({"zero_based": False}, {"n_features": 3, "zero_based": False}):  # scanned, or not
        assert (
            streamed_error(path, **kwargs)
            == f"{path} uses feature index 0 (line 7 '1 0:1 3:0.5'), but zero_based=False."
        )
    assert "line 7 '1 0:1 3:0.5'" in in_memory_error(path, n_features=3, zero_based=False)
    wide = tmp_path / "wide.svm"
    wide.write_text(with_line(5, "1 7:1\n"))
    assert "line 5 '1 7:1'" in in_memory_error(wide, n_features=3, zero_based=False)  # predicting with a model
    for kwargs in ({"n_features": 3}, {"n_features": 3, "zero_based": False}):  # scanned, or not
        assert "has feature index 7 (line 5 '1 7:1'), past n_features=3" in streamed_error(wide, **kwargs)


def test_a_csv_value_error_names_the_line(tmp_path):
    path = tmp_path / "nan.csv"
    path.write_text("label,a,b\n1,0.5,0.1\n\n-1,nan,0.2\n")
    assert in_memory_error(path) == f"{path}, line 4 '-1,nan,0.2': Input X contains NaN."
    path.write_text("1,0.5,0.1\n-1,x,0.2\n")
    assert in_memory_error(path).startswith(f"{path}, line 2 '-1,x,0.2': a feature is not a number")


def test_a_csv_first_row_with_a_bad_cell_is_an_error_not_a_header(tmp_path):
    """A header is a first line of column names; a first data row with an empty or
    mistyped cell is named like any other row (it was skipped as a header, silently)."""
    path = tmp_path / "data.csv"
    path.write_text("1,,2\n0,1,3\n1,2,2\n")
    assert in_memory_error(path).startswith(f"{path}, line 1 '1,,2': a feature is not a number")
    path.write_text("1,0.5x,2\n0,1,3\n1,2,2\n")
    assert in_memory_error(path).startswith(f"{path}, line 1 '1,0.5x,2': a feature is not a number")
    headers = [
        "label,width,height",  # every feature named
        "label,age,2020",  # a word over numeric labels: names that are numbers, or none
        "label,0,1",  # a DataFrame written with its label column in front
        "label,age,",
    ]
    for header in headers:
        path.write_text(f"{header}\n1,0.5,2\n0,1,3\n")
        X, y, _ = read_data(path)
        assert X.shape == (2, 2) and y.tolist() == [1, 0], header
    path.write_text("y,width,height\nneg,0.5,2\npos,1,3\n")  # word labels, named features
    assert read_data(path)[1].tolist() == ["neg", "pos"]
    path.write_text("neg,0.5,2\npos,1,3\n")  # word labels, no header
    assert read_data(path)[1].tolist() == ["neg", "pos"]


def test_a_csv_byte_order_mark_is_not_part_of_the_first_label(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf1,0.5,2\n0,1,3\n1,2,2\n0,0,1\n")
    X, y, _ = read_data(path)
    assert y.tolist() == [1, 0, 1, 0] and y.dtype.kind == "f" and X.shape == (4, 2)
    path.write_bytes(b"\xef\xbb\xbf1,x,2\n")
    assert in_memory_error(path).startswith(f"{path}, line 1 '1,x,2'")


@pytest.mark.parametrize("sparse_format", ["csr", "csc", "coo", "bsr", "dia"])
def test_every_format_scipy_saves_reads_as_csr(tmp_path, sparse_format):
    path = tmp_path / "data.npz"
    X = sp.random(6, 4, density=0.5, format="csr", random_state=0)
    sp.save_npz(path, X.asformat(sparse_format))
    read, labels, _ = read_data(path)
    assert sp.isspmatrix_csr(read) and labels is None and (read != X).nnz == 0


@pytest.mark.parametrize("sparse", [False, True])
def test_an_npz_file_with_nan_infinity_or_no_rows_is_refused_naming_the_row(tmp_path, sparse):
    path = tmp_path / "data.npz"
    X = np.ones((4, 2))
    X[2, 1] = np.nan
    if sparse:
        sp.save_npz(path, sp.csr_matrix(X))
    else:
        np.savez(path, X=X, y=np.array([0, 1, 0, 1]))
    assert in_memory_error(path) == f"{path}, row 3 of X (from 1): Input X contains NaN or infinity."
    np.savez(path, X=np.ones((3, 2)), y=np.array([0.0, np.inf, 1.0]))
    assert in_memory_error(path) == f"{path}, row 2 of y (from 1): Input y contains NaN or infinity."
    np.savez(path, X=np.zeros((0, 2)), y=np.zeros(0))
    assert in_memory_error(path) == f"{path} has no data rows."


# --- item 8: compressed files are streams --------------------------------------------


@pytest.mark.parametrize(
    "name, opener",
    [
        ("data.svm.gz", gzip.open),
        ("data.svm.bz2", bz2.open),
        ("data.svm.xz", lzma.open),
        ("gzip-without-its-extension.svm", gzip.open),
    ],
)
def test_compressed_files_are_read_as_streams(tmp_path, capsys, name, opener):
    plain = tmp_path / "plain.svm"
    plain.write_text(svmlight_text(50))
    path = tmp_path / name
    with opener(path, "wt") as stream:
        stream.write(svmlight_text(50))
    expected = list(SvmlightChunks(plain, 16))
    reader = SvmlightChunks(path, 16)
    got = list(reader)
    assert len(got) == len(expected) == 4 and (reader.n_rows, reader.n_features, reader.zero_based) == (50, 3, False)
    for (X, y), (X_plain, y_plain) in zip(got, expected):
        np.testing.assert_array_equal(X.toarray(), X_plain.toarray())
        np.testing.assert_array_equal(y, y_plain)
    np.testing.assert_array_equal(reader[2][0].toarray(), expected[2][0].toarray())  # decompressed from the start
    assert not reader.seekable and SvmlightChunks(plain, 16).seekable
    assert not ChunkSource(reader).random_access()  # the streamed trainers read it in order
    X, y, _ = read_data(path)
    np.testing.assert_array_equal(X.toarray(), read_data(plain)[0].toarray())
    model = tmp_path / "m.model"
    code, out, err = run(capsys, "train", "--solver", "pegasos", "--max-iter", 3, "--chunk-rows", 16, path, model)
    assert code == 0 and model.is_file(), err
    streamed = PegasosSVC(max_iter=3, random_state=0).fit_chunks(read_chunks(path, chunk_rows=16))
    in_order = PegasosSVC(max_iter=3, random_state=0).fit_chunks(InOrder(expected))
    assert_same_result(streamed.coef_, in_order.coef_, default_backend())


class InOrder:
    """Re-iterable chunks without random access."""

    def __init__(self, chunks):
        self.chunks = chunks

    def __iter__(self):
        return iter(self.chunks)


def test_a_truncated_compressed_file_is_named(tmp_path):
    whole = gzip.compress(svmlight_text(2000).encode())
    path = tmp_path / "cut.svm.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match="cut.svm.gz is a damaged or truncated gzip file"):
        list(SvmlightChunks(path, 100))
    with pytest.raises(ValueError, match="cut.svm.gz is a damaged or truncated gzip file"):
        read_data(path)
    with pytest.raises(ValueError, match="cut.svm.gz is a damaged or truncated gzip file"):
        load_svmlight(path)


# --- item 10: chunks of different widths ---------------------------------------------


@pytest.mark.parametrize("Estimator", [FTRLClassifier, RDAClassifier, PegasosSVC])
@pytest.mark.parametrize("sparse", [False, True])
def test_chunks_of_different_widths_are_named(Estimator, sparse):
    rng = np.random.default_rng(0)
    make = sp.csr_matrix if sparse else np.asarray
    chunks = [
        (make(rng.normal(size=(5, 3))), np.array([0, 1, 0, 1, 0])),
        (make(rng.normal(size=(5, 4))), np.array([1, 0, 1, 0, 1])),
    ]
    for classes in (None, [0, 1]):  # found by the pass for the classes, or by training
        with pytest.raises(ValueError, match="^Chunk 1 has 4 features, but chunk 0 has 3: every chunk must have"):
            Estimator(batch_size=4).fit_chunks(chunks, classes=classes)
    empty = (make(rng.normal(size=(0, 7))), np.array([]))
    with pytest.raises(ValueError, match="^Chunk 1 has 7 features, but chunk 0 has 3"):
        Estimator(batch_size=4).fit_chunks([chunks[0], empty, chunks[0]], classes=[0, 1])


# --- item 14: advice that fits the mistake -------------------------------------------


def test_a_text_file_read_as_npz_is_not_told_about_pickles(tmp_path, capsys):
    path = tmp_path / "train.svm"
    path.write_text(svmlight_text())
    message = in_memory_error(path, fmt="npz")
    assert "allow_pickle" not in message and "pickle" not in message
    assert message == (
        f"{path} is not a .npz file (not a zip archive); its first line is '-1 1:0.0 3:0.5'. For a "
        "LIBSVM/svmlight file, use --format svmlight (or an extension other than .npz)."
    )
    np.save(tmp_path / "X.npy", np.ones((3, 2)))
    assert "is a .npy file (one array); gpusvm reads .npz archives" in in_memory_error(tmp_path / "X.npy", fmt="npz")
    code, _, err = run(capsys, "train", "--format", "npz", path, tmp_path / "m")
    assert code == 1 and "use --format svmlight" in err and "pickle" not in err


# --- found by the sweep ----------------------------------------------------------------


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"1 1:0.5\r-1 2:1\r", "lines end with a carriage return alone; end them with \\n or \\r\\n"),
        (b"\xef\xbb\xbf1 1:0.5\n", "a UTF-8 byte order mark starts the line; save the file without one"),
        (b"1 1:0.5 x\n", "a feature is not index:value"),
        (b"\x93NUMPY\x01\x00v\x00{'descr': '<f8'}\n", "this is a .npy file (NumPy's binary format), not text"),
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00\n", "this is a zip archive (a .npz file, or a gpusvm model?), not text"),
    ],
)
def test_a_line_that_does_not_parse_gets_a_reason_that_fits(tmp_path, content, reason):
    path = tmp_path / "odd.svm"
    path.write_bytes(content)
    assert reason in streamed_error(path)
    assert reason in in_memory_error(path)


def test_a_file_without_rows_or_a_path_is_named(tmp_path, capsys):
    for content in ("", "# only a comment\n\n"):
        path = tmp_path / "empty.svm"
        path.write_text(content)
        for chunked in ([], ["--chunk-rows", 5]):
            code, _, err = run(capsys, "train", "--solver", "ftrl", *chunked, path, tmp_path / "m")
            assert code == 1 and f"{path} has no data rows" in err, err
    with pytest.raises(FileNotFoundError, match="No data file given"):
        read_data("")
    with pytest.raises(IsADirectoryError, match="is a folder; give a data file"):
        read_data(tmp_path)
