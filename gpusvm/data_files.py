"""Read training and test data from LIBSVM/svmlight, ``.npz`` and CSV files.

The formats, chosen by extension unless named:

- **svmlight** (LIBSVM's ``svm-train`` format, also ThunderSVM's): ``label index:value ...``
  per line, read by :func:`gpusvm.datasets.load_svmlight` (pyarrow parses plain lines
  where it is installed; else :func:`sklearn.datasets.load_svmlight_file`, whose result
  and errors it gives in any case).  Indices are one-based
  as LIBSVM writes them, unless the file uses index 0 (``zero_based='auto'``).  Any
  extension other than ``.npz`` and ``.csv`` is read as svmlight; a file compressed by
  gzip, bzip2 or xz (known by its first bytes) is decompressed as it is read.
- **npz**: ``numpy.savez(path, X=X, y=y)`` (``y`` optional), or a sparse matrix written
  by :func:`scipy.sparse.save_npz` (plus an optional ``y`` array in the same archive).
  Read with ``allow_pickle=False``.
- **csv**: comma-separated numbers, the label in the first column (as in svmlight);
  a first line of column names is a header and skipped (its label cell a word over
  numeric labels, or all its feature cells words);
  a UTF-8 byte order mark is ignored.  Labels may be words.

A data error names the file and, for svmlight and CSV text, the line (a line that does
not parse, NaN or infinity, an index the model does not take).

Files larger than memory: :class:`SvmlightChunks` and :class:`NpzChunks` read them
``chunk_rows`` rows at a time, for the streamed ``fit_chunks`` of the linear and online
estimators (:func:`read_chunks` picks the reader by format).  :class:`SvmlightChunks`
parses plain lines through pyarrow where it is installed (the same arrays, faster).  A
fit reads such a file several times, so a reader refuses, naming it, a file that has
changed since the reader first opened it (truncated, rewritten, relabelled: see
``gpusvm._stream.readers.FileFingerprint``): make a new reader for the new file.
"""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._stream.readers import NpzChunks, SvmlightChunks, line_of_row, row_of_entry
from .datasets import load_svmlight

__all__ = ["DataFileError", "FORMATS", "NpzChunks", "SvmlightChunks", "data_format", "read_chunks", "read_data"]

FORMATS = ("auto", "svmlight", "npz", "csv")
STREAMED_FORMATS = ("svmlight", "npz")
_LOCATING_ROWS = 1 << 16  # the chunks a svmlight file that fails is read again in, to find the line


class DataFileError(ValueError):
    """A data file that cannot be read as the format it claims, or that does not fit
    the model it is meant for."""


def data_format(path, fmt="auto"):
    """The format of ``path``: ``fmt`` itself, or one guessed from the extension."""
    if fmt not in FORMATS:
        raise DataFileError(f"format must be one of {FORMATS}, got {fmt!r}.")
    if fmt != "auto":
        return fmt
    suffix = Path(path).suffix.lower()
    return {".npz": "npz", ".csv": "csv"}.get(suffix, "svmlight")


def read_chunks(path, fmt="auto", *, chunk_rows, n_features=None, cache_file=None):
    """A re-iterable reader of ``(X, y)`` chunks of ``chunk_rows`` rows, for training on
    a file larger than memory (:class:`SvmlightChunks` or :class:`NpzChunks`); a text
    file's parsed chunks kept in ``cache_file`` when given (see :class:`SvmlightChunks`).

    Raises
    ------
    DataFileError
        For a CSV file (read whole only).
    FileNotFoundError, IsADirectoryError
        When ``path`` is empty, missing or a folder.
    """
    fmt = data_format(path, fmt)
    _check_data_path(path)
    if fmt not in STREAMED_FORMATS:
        raise DataFileError(
            f"{path}: {fmt} files are read whole; chunked reading takes {' or '.join(STREAMED_FORMATS)}."
        )
    if fmt == "svmlight":
        return SvmlightChunks(path, chunk_rows, n_features=n_features, cache_file=cache_file)
    return NpzChunks(path, chunk_rows)


def _check_data_path(path):
    if str(path) == "":
        raise FileNotFoundError("No data file given (the path is empty).")
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"Data file {path} is a folder; give a data file.")
    if not path.exists():
        raise FileNotFoundError(f"Data file {path} does not exist.")
    if not path.is_file():
        raise DataFileError(f"Data file {path} is not a regular file (a device, pipe or socket); give a file.")


def read_data(path, fmt="auto", *, n_features=None, zero_based="auto"):
    """Features, labels and how they were read.

    Parameters
    ----------
    path : str or os.PathLike
    fmt : {'auto', 'svmlight', 'npz', 'csv'}
    n_features : int, optional
        The model's feature count at prediction: the file must not have more; a
        svmlight file may have fewer (its last features are all zero); a CSV file has
        exactly this many columns, plus one when it has labels.
    zero_based : {'auto', True, False}
        svmlight only: whether index 0 is the first feature.  ``'auto'`` decides by
        whether the file uses index 0; a model file records the choice for prediction.

    Returns
    -------
    X : scipy.sparse.csr_matrix or ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), or None for a file without labels
    how : dict
        ``{'format': ..., 'zero_based': ...}`` (``zero_based`` for svmlight only).

    Raises
    ------
    DataFileError
        For a file that does not parse, holds NaN or infinity, has no rows, or does not
        fit ``n_features``; for svmlight and CSV text, naming the line.
    FileNotFoundError, IsADirectoryError
        For a missing file, or a folder.
    """
    fmt = data_format(path, fmt)
    _check_data_path(path)
    if fmt == "svmlight":
        X, y, zero_based = _read_svmlight(path, n_features, zero_based)
        return X, y, {"format": fmt, "zero_based": zero_based}
    X, y = _read_npz(path) if fmt == "npz" else _read_csv(path, n_features)
    if n_features is not None and X.shape[1] != n_features:
        raise DataFileError(f"{path} has {X.shape[1]} features, but the model takes {n_features}.")
    return X, y, {"format": fmt}


def _read_svmlight(path, n_features, zero_based):
    try:  # raw indices first, to see whether the file uses index 0
        X, y = load_svmlight(path, zero_based=True)
    except (ValueError, UnicodeDecodeError, OverflowError) as error:
        raise DataFileError(_located_error(path) or f"{path} is not a LIBSVM/svmlight file: {error}") from None
    if not (np.isfinite(X.data).all() and np.isfinite(y).all()):
        raise DataFileError(_located_error(path) or f"{path} holds NaN or infinite values.")
    if X.shape[0] == 0:
        raise DataFileError(f"{path} has no data rows (it is empty, or holds only comments and blank lines).")
    uses_index_zero = X.nnz > 0 and X.indices.min() == 0
    if zero_based == "auto":
        zero_based = bool(uses_index_zero)
    if not zero_based:
        if uses_index_zero:
            where = line_of_row(path, row_of_entry(X, int(np.flatnonzero(X.indices == 0)[0])))
            raise DataFileError(
                f"{path} uses feature index 0 ({where}), but the model was trained on one-based indices."
            )
        X = sp.csr_matrix((X.data, X.indices - 1, X.indptr), shape=(X.shape[0], max(X.shape[1] - 1, 0)))
    if n_features is not None:
        if X.shape[1] > n_features:
            highest = X.shape[1] - 1 + int(not zero_based)
            where = line_of_row(path, row_of_entry(X, int(np.flatnonzero(X.indices >= n_features)[0])))
            raise DataFileError(
                f"{path} has feature index {highest}, but the model takes {n_features} features (the first line "
                f"past them: {where}; when the training file does not use the last features, declare the full "
                "count: gpusvm train --n-features, or load_svmlight_file's n_features)."
            )
        X.resize((X.shape[0], n_features))
    return X.tocsr(), y, zero_based


def _located_error(path):
    """The error of reading svmlight ``path`` again in chunks, which names the line (None
    when it reads): the whole-file reader's error does not say where."""
    try:
        SvmlightChunks(path, _LOCATING_ROWS, zero_based=True).n_rows
    except ValueError as error:
        return str(error)
    return None


def _read_npz(path):
    with open(path, "rb") as handle:
        head = handle.read(6)
    if head == b"\x93NUMPY":
        raise DataFileError(
            f"{path} is a .npy file (one array); gpusvm reads .npz archives, as "
            "numpy.savez(path, X=X, y=y) writes them."
        )
    if not head.startswith(b"PK") and not zipfile.is_zipfile(path):  # a damaged zip: np.load's error below
        raise DataFileError(
            f"{path} is not a .npz file (not a zip archive); its first line is {_first_line(path)!r}. For a "
            "LIBSVM/svmlight file, use --format svmlight (or an extension other than .npz)."
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            keys = set(archive.files)
            y = archive["y"] if "y" in keys else None
            if "X" in keys:
                X = archive["X"]
            elif {"shape", "format"} <= keys:  # scipy.sparse.save_npz: CSR, CSC, COO, BSR or DIA
                X = sp.load_npz(path).tocsr()
            else:
                raise DataFileError(
                    f"{path} has arrays {sorted(keys)}; expected X (and y), as numpy.savez(path, X=X, y=y) "
                    "writes, or a scipy.sparse.save_npz matrix."
                )
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        if isinstance(error, DataFileError):
            raise
        raise DataFileError(f"{path} is not a readable .npz file (damaged or truncated?): {error}") from None
    if X.ndim != 2:
        raise DataFileError(f"{path}: X must be 2-D, got shape {X.shape}.")
    if y is not None and y.shape != (X.shape[0],):
        raise DataFileError(f"{path}: y has shape {y.shape}, but X has {X.shape[0]} rows.")
    if X.shape[0] == 0:
        raise DataFileError(f"{path} has no data rows.")
    for name, values in (("X", X), ("y", y)):
        _refuse_npz_non_finite(path, name, values)
    return X, y


def _refuse_npz_non_finite(path, name, values):
    """A DataFileError naming the first row of ``values`` (X dense or CSR, or y; labels
    that are not floats pass) that holds NaN or infinity."""
    if values is None or values.dtype.kind not in "fc":
        return
    row = _first_non_finite_row(values)
    if row is not None:
        raise DataFileError(f"{path}, row {row + 1} of {name} (from 1): Input {name} contains NaN or infinity.")


def _first_non_finite_row(values):
    """The first row of ``values`` (dense 1-D or 2-D, or CSR) holding NaN or infinity, or None."""
    data = values.data if sp.issparse(values) else values
    bad = ~np.isfinite(data)
    if not bad.any():
        return None
    if sp.issparse(values):
        return int(np.searchsorted(values.indptr, np.flatnonzero(bad)[0], side="right") - 1)
    return int(np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1))[0])


def _read_csv(path, n_features):
    try:
        with warnings.catch_warnings():  # NumPy's note that blank lines are skipped (as they are, here)
            warnings.filterwarnings("ignore", message="Input line .* contained no data", category=UserWarning)
            text = np.loadtxt(path, delimiter=",", dtype=str, ndmin=2, encoding="utf-8-sig")
    except (ValueError, UnicodeDecodeError) as error:
        raise DataFileError(f"{path} is not a CSV file of equal-length rows: {error}") from None
    text = np.char.strip(text)
    if text.shape[1] < 2:
        raise DataFileError(
            f"{path} has a single column: gpusvm reads CSV files as comma-separated values, the label "
            f"first. Its first line is {_first_line(path)!r}; for a LIBSVM/svmlight file, use --format "
            "svmlight (or an extension other than .csv)."
        )
    header = bool(text.shape[0]) and _is_header(text[0], text[1:, 0])
    if header:
        text = text[1:]
    if text.shape[0] == 0:
        raise DataFileError(f"{path} has no data rows.")
    has_labels = n_features is None or text.shape[1] == n_features + 1
    features = text[:, 1:] if has_labels else text
    try:
        X = features.astype(np.float64)
    except ValueError as error:
        row = next(i for i, cells in enumerate(features) if not _all_numbers(cells))
        raise DataFileError(f"{path}, {_csv_line(path, row + header)}: a feature is not a number ({error}).") from None
    labels = _labels(text[:, 0]) if has_labels else None
    for name, values in (("X", X), ("y", labels if labels is not None and labels.dtype.kind == "f" else None)):
        row = None if values is None else _first_non_finite_row(values)
        if row is not None:
            what = "NaN" if np.isnan(values[row]).any() else f"infinity or a value too large for {values.dtype!r}"
            raise DataFileError(f"{path}, {_csv_line(path, row + header)}: Input {name} contains {what}.")
    return X, labels


def _csv_line(path, row):
    """``line N 'text'`` of row ``row`` of a CSV file, the header included (np.loadtxt
    skips blank lines and ``#`` comments)."""
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if line.split("#", 1)[0].strip():
                if row == 0:
                    text = line.rstrip("\r\n")
                    return f"line {number} {text if len(text) <= 60 else text[:60] + '...'!r}"
                row -= 1
    return f"row {row}"


def _first_line(path, limit=80):
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        return handle.readline(limit).rstrip("\n")


def _is_header(first, labels):
    """Whether a CSV file's ``first`` line (its cells) holds column names, its later
    ``labels`` given: its label cell is a word over numeric labels (``label,age,2020``, or
    the ``label,0,1,...`` of a DataFrame written with its label in front), or every one of
    its feature cells is a word. A first data row with an empty or mistyped cell is
    neither: it is an error at its line, not a header to skip."""
    if not _all_numbers(first[:1]) and labels.size and _all_numbers(labels):
        return True
    return all(cell and not _all_numbers(np.array([cell])) for cell in first[1:])


def _all_numbers(cells):
    try:
        cells.astype(np.float64)
    except ValueError:
        return False
    return True


def _labels(cells):
    """Numeric labels as numbers, anything else as strings."""
    return cells.astype(np.float64) if _all_numbers(cells) else cells
