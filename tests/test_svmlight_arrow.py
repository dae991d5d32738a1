"""Plain svmlight blocks parsed through Arrow (gpusvm._stream.svmlight_arrow) give scikit-learn's
reader's arrays, and every other block is left to that reader, errors included."""

import io
import itertools
import re
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from gpusvm._stream.readers import SvmlightChunks, _parse
from gpusvm._stream import svmlight_arrow
from gpusvm._stream.svmlight_arrow import _arrow_numbers, parse_plain_block

pytest.importorskip("pyarrow")

NUMBER_CHARACTERS = "0123456789.+-eE"
PIECE_BYTES = svmlight_arrow._PIECE_BYTES


def python_float(token):
    try:
        return float(token)
    except ValueError:
        return None


def arrow_float(token):
    numbers = _arrow_numbers(token.encode() + b"\n")
    return None if numbers is None else float(numbers[0])


def sklearn_arrays(block, dtype):
    X, y = load_svmlight_file(io.BytesIO(block), zero_based=True, dtype=dtype)
    return X.data, X.indices, X.indptr, y


def assert_same_arrays(got, expected):
    for name, a, b in zip(("data", "indices", "indptr", "labels"), got, expected):
        assert a.dtype == b.dtype or name == "indices", name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_arrow_reads_a_number_exactly_when_python_float_does():
    """Every token of up to three characters of a plain block's numbers, and random longer
    ones: Arrow accepts what ``float`` accepts, and gives the same double (correctly rounded)."""
    rng = np.random.default_rng(0)
    tokens = ["".join(t) for length in (1, 2, 3) for t in itertools.product(NUMBER_CHARACTERS, repeat=length)]
    tokens += ["".join(rng.choice(list(NUMBER_CHARACTERS), size=rng.integers(4, 14))) for _ in range(1500)]
    tokens += [repr(x) for x in rng.normal(size=300) * 10.0 ** rng.integers(-300, 300, size=300)]
    tokens += [
        "1e999",
        "-1e999",
        "4.9406564584124654e-324",
        "2.4703282292062328e-324",
        "0.1000000000000000055511151231257827",
    ]
    differences = [
        (t, arrow_float(t), python_float(t))
        for t in tokens
        if (arrow_float(t) is None) != (python_float(t) is None)
        or (
            python_float(t) is not None
            and np.float64(arrow_float(t)).tobytes() != np.float64(python_float(t)).tobytes()
        )
    ]
    assert differences == []


@pytest.mark.parametrize("piece_bytes", [1 << 24, 100])  # one piece; pieces of a line or two
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_plain_blocks_give_scikit_learns_arrays(dtype, piece_bytes, monkeypatch):
    monkeypatch.setattr(svmlight_arrow, "_PIECE_BYTES", piece_bytes)
    rng = np.random.default_rng(1)
    X = sp.random(300, 2000, density=0.02, format="csr", random_state=1)
    X.data = rng.normal(size=X.nnz) * 10.0 ** rng.integers(-8, 8, size=X.nnz)
    X = sp.csr_matrix(
        sp.diags((np.arange(300) != 5).astype(float)) @ X
    )  # row 5 without features: its label alone, then a space
    X.eliminate_zeros()
    y = rng.integers(-1, 3, size=300).astype(float) * 1.5
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=True)
    block = buffer.getvalue()
    for variant in (block, block.rstrip(b"\n"), block.replace(b" ", b" \t "), block.replace(b"\n", b"\r\n")):
        got = parse_plain_block(variant, dtype)
        assert got is not None
        assert_same_arrays(got, sklearn_arrays(variant, dtype))


@pytest.mark.parametrize(
    "block",
    [
        b"1 2:3 # a comment\n",
        b"# header\n1 2:3\n",
        b"1 qid:4 2:3\n",
        b"1 2:3\n\n0 1:1\n",
        b" 1 2:3\n",
        b"1 3:1 2:1\n",
        b"1 2:1 2:1\n",
        b"1 1.0:3\n",
        b"1 1e1:3\n",
        b"1 +1:3\n",
        b"1 -1:3\n",
        b"1 1:nan\n",
        b"1 2147483648:1\n",
        b"1 2:3:4\n",
        b"1 2:\n",
        b"1 :2\n",
        b"1:2 3:4\n",
        b"1 2:3\x0b4:5\n",
        b"1,2 3:4\n",
        b"1 2:3 4\n",
        b"1 1:1e\n",
        b"",
    ],
)
def test_blocks_outside_the_plain_grammar_are_left_to_scikit_learn(block):
    assert parse_plain_block(block, np.float64) is None


def test_without_pyarrow_scikit_learn_reads_every_block(monkeypatch, tmp_path):
    block = b"1 0:0.5 3:2\n0 1:1\n"
    path = tmp_path / "data.svm"
    path.write_bytes(block)
    expected = [[0.5, 0, 0, 2], [0, 1, 0, 0]]
    ((X, y),) = list(SvmlightChunks(path, 10, n_features=4, zero_based=True, parser="scikit-learn"))
    np.testing.assert_array_equal(X.toarray(), expected)
    monkeypatch.setitem(sys.modules, "pyarrow.csv", None)  # import pyarrow.csv raises ImportError
    assert parse_plain_block(block, np.float64) is None
    ((X, y),) = list(SvmlightChunks(path, 10, n_features=4, zero_based=True))
    np.testing.assert_array_equal(X.toarray(), expected)
    with pytest.raises(ValueError, match="parser must be 'auto' or 'scikit-learn', got 'pandas'"):
        SvmlightChunks(path, 10, parser="pandas")


def test_a_chunk_wider_than_n_features_gets_scikit_learns_error():
    with pytest.raises(ValueError, match="n_features was set to 3"):
        _parse(b"1 0:1 5:1\n", "data.svm", 0, zero_based=True, n_columns=3, dtype=np.float64)


# Lines of plain fields with, now and then (one field in twenty), a token of random characters,
# from the grammar's or not.
FIELD_CHARACTERS = st.sampled_from(list("0123456789") * 4 + list(".+-eE: \t\r#qnai,\x0b"))


def now_and_then_random(plain):
    return st.one_of(*[plain] * 19, st.text(FIELD_CHARACTERS, min_size=0, max_size=5))


INDEX = now_and_then_random(st.integers(0, 40).map(str))
VALUE = now_and_then_random(st.one_of(st.floats(allow_nan=False).map(repr), st.integers(-9, 9).map(str)))
LINE = st.tuples(
    now_and_then_random(st.integers(-2, 2).map(str)),
    st.lists(st.tuples(INDEX, VALUE), max_size=5),
    st.sampled_from(["", " ", "\t", "\r"]),
    st.sampled_from([True] * 9 + [False]),
)


def block_of(lines):
    out = []
    for label, pairs, trailing, sort in lines:
        if sort:  # mostly sorted, unique indices, as files are
            pairs = sorted({int(i): v for i, v in pairs if i.isdigit()}.items())
        out.append(" ".join([label] + [f"{i}:{v}" for i, v in pairs]) + trailing)
    return "\n".join(out).encode()


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(LINE, min_size=1, max_size=6), dtype=st.sampled_from([np.float64, np.float32]))
def test_any_block_gives_what_scikit_learn_gives(lines, dtype):
    """Whatever the block: when scikit-learn's reader fails, the Arrow path has declined it
    (so the reader's error is what the caller sees); when it succeeds, the Arrow path has
    declined it or gives the same arrays."""
    block = block_of(lines)
    svmlight_arrow._PIECE_BYTES = 8  # a piece a line, mostly (restored below)
    try:
        check_against_scikit_learn(block, dtype)
    finally:
        svmlight_arrow._PIECE_BYTES = PIECE_BYTES


def check_against_scikit_learn(block, dtype):
    try:
        expected = sklearn_arrays(block, dtype)
    except (ValueError, OverflowError):
        assert parse_plain_block(block, dtype) is None
        return
    got = parse_plain_block(block, dtype)
    if got is not None:
        assert_same_arrays(got, expected)


def whole_file_cases(tmp_path):
    """Files that load_svmlight reads in blocks, and one it leaves to scikit-learn (gzip)."""
    rng = np.random.default_rng(2)
    X = sp.random(250, 30, density=0.2, format="csr", random_state=2)
    X.data = rng.normal(size=X.nnz)
    y = rng.integers(0, 3, size=250)
    files = {}
    for name, zero_based in (("zero.svm", True), ("one.svm", False)):
        files[name] = tmp_path / name
        dump_svmlight_file(X, y, str(files[name]), zero_based=zero_based)
    files["comments.svm"] = tmp_path / "comments.svm"
    files["comments.svm"].write_bytes(b"# made by hand\n1 1:0.5 4:2 # a row\n\n-1 2:1\n")
    files["empty.svm"] = tmp_path / "empty.svm"
    files["empty.svm"].write_bytes(b"")
    return files


@pytest.mark.parametrize("block_bytes", [1 << 23, 20])  # the whole file; a line or two
@pytest.mark.parametrize(
    "arguments",
    [
        dict(),
        dict(zero_based=True),
        dict(zero_based=False),
        dict(n_features=40),
        dict(dtype=np.float32),
        dict(zero_based=False, n_features=40),
    ],
)
def test_load_svmlight_gives_scikit_learns_result(tmp_path, monkeypatch, arguments, block_bytes):
    from gpusvm._stream import readers as _chunked_files
    from gpusvm.datasets import load_svmlight

    reading = _chunked_files.read_svmlight_in_blocks
    monkeypatch.setattr(
        "gpusvm.datasets.read_svmlight_in_blocks",
        lambda *args, **kwargs: reading(*args, **kwargs, block_bytes=block_bytes),
    )
    for name, path in whole_file_cases(tmp_path).items():
        try:
            X_expected, y_expected = load_svmlight_file(str(path), **arguments)
        except ValueError as error:
            with pytest.raises(ValueError, match=re.escape(str(error))):
                load_svmlight(path, **arguments)
            continue
        X, y = load_svmlight(path, **arguments)
        assert (reading(path, **arguments) is None) == (name == "empty.svm"), name  # read in blocks
        assert X.shape == X_expected.shape and X.dtype == X_expected.dtype, name
        np.testing.assert_array_equal(X.toarray(), X_expected.toarray(), err_msg=name)
        np.testing.assert_array_equal(y, y_expected, err_msg=name)


def test_load_svmlight_errors_are_scikit_learns(tmp_path):
    from gpusvm.datasets import load_svmlight

    path = tmp_path / "data.svm"
    for text, arguments in (
        (b"1 0:1 5:2\n", dict(zero_based=False)),
        (b"1 1:1 5:2\n", dict(n_features=3)),
        (b"1 1:1 5:x\n", dict()),
        (b"1 1:1\n", dict(n_features=0)),
    ):
        path.write_bytes(text)
        with pytest.raises(ValueError) as expected:
            load_svmlight_file(str(path), **arguments)
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
            load_svmlight(path, **arguments)
