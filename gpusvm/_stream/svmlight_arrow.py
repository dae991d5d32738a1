"""Plain svmlight lines parsed through Apache Arrow's CSV reader, or not at all.

scikit-learn's reader (:func:`sklearn.datasets.load_svmlight_file`) splits each line in
Python and converts each number with ``float``, which bounds streamed training from a
file (``gpusvm.data_files.SvmlightChunks``) far below what the solvers take (the
benchmark report's ``bench/svmlight_reading.py`` has the rates).  Most files hold one
simple grammar, the one :func:`sklearn.datasets.dump_svmlight_file` writes; for a block
of such lines this module finds the structure with NumPy (where the lines, fields and
colons are) and converts the numbers with Arrow's CSV reader, which parses decimals
exactly as Python's ``float`` does (correctly rounded; ``tests/test_svmlight_arrow.py``
checks acceptance and values token by token).  Both release the GIL, so the block's
pieces are parsed on threads.

The grammar, per line (lines end with ``\\n``; the last may not)::

    label (index:value)*

with fields separated by spaces, tabs or carriage returns, the first field on the line's
first byte, ``index`` decimal digits only, ``label`` and ``value`` numbers without
letters other than ``e``/``E``, and indices strictly increasing along a line.  A block
outside it (comments, ``qid:``, blank or indented lines, ``nan``, unsorted or huge
indices, a malformed field), or a machine without pyarrow, gets ``None``: the caller
then uses scikit-learn's reader, which also gives its errors.  So whichever reader
parses a block, the arrays are the same.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Byte classes (by bytes.translate, the fastest pass over a block): a digit, another
# character of a number, the colon, a field separator, the line end, anything else.
_DIGIT, _SIGN_POINT_EXPONENT, _COLON, _SPACE, _NEWLINE, _OTHER = range(6)


def _byte_classes():
    """The ``bytes.translate`` table from a byte to its class."""
    table = bytearray([_OTHER] * 256)
    for characters, byte_class in (
        (b"0123456789", _DIGIT),
        (b".+-eE", _SIGN_POINT_EXPONENT),
        (b":", _COLON),
        (b" \t\r", _SPACE),
        (b"\n", _NEWLINE),
    ):
        for character in characters:
            table[character] = byte_class
    return bytes(table)


_CLASSES = _byte_classes()
# Every separator becomes a line break: Arrow then reads one number a line (skipping
# the empty lines that runs of separators leave).
_ONE_NUMBER_A_LINE = bytes.maketrans(b" \t\r:", b"\n\n\n\n")
_LARGEST_INDEX = 2**31 - 1  # scikit-learn's reader holds an index in a C int
_PIECE_BYTES = 1 << 20  # 1 MiB: larger pieces parse no faster, and take more working memory
_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_plain_block(block, dtype):
    """``(data, indices, indptr, labels)`` of a block of plain svmlight lines, or None.

    Parameters
    ----------
    block : bytes
        Whole lines of a file (the last one may lack its line break).
    dtype : float32 or float64
        The dtype of ``data``; values are parsed as float64 and then cast, as
        scikit-learn's reader does.

    Returns
    -------
    tuple of ndarray or None
        ``data`` (dtype), ``indices`` (int32, as written), ``indptr`` (int64) and
        ``labels`` (float64): the values scikit-learn's reader returns before building
        its matrix; None when the block is not plain (see the module docstring) or
        pyarrow is not installed.
    """
    try:
        import pyarrow.csv  # noqa: F401 (its reader converts the numbers)
    except ImportError:
        return None
    if not block:
        return None
    # In pieces of whole lines, so that the working arrays (a few bytes for each byte of
    # text) stay small beside the result; the first alone (a block that is not plain is
    # usually known by then), the others on threads (NumPy's loops and Arrow's reader
    # release the GIL).
    bounds, start = [], 0
    while start < len(block):
        stop = block.find(b"\n", start + _PIECE_BYTES) + 1 or len(block)
        bounds.append((start, stop))
        start = stop
    first = _parse_piece(block[slice(*bounds[0])], dtype)
    if first is None:
        return None
    with ThreadPoolExecutor(max(1, min(len(bounds) - 1, _THREADS)), thread_name_prefix="gpusvm-svmlight") as pool:
        rest = pool.map(lambda bound: _parse_piece(block[slice(*bound)], dtype), bounds[1:])
        return joined(itertools.chain([first], rest), dtype)


def joined(pieces, dtype):
    """The ``(data, indices, indptr, labels)`` of consecutive rows, end to end: indices as
    int32 (scikit-learn's reader holds them in a C int), the entries grown in place as the
    pieces come, a lower peak than holding them all and concatenating.  None when there
    are no pieces or one is None."""
    data, indices = np.empty(0, dtype=dtype), np.empty(0, dtype=np.int32)
    indptr, labels = [np.zeros(1, dtype=np.int64)], []
    for piece in pieces:
        if piece is None:
            return None
        piece_data, piece_indices, piece_indptr, piece_labels = piece
        indptr.append(piece_indptr[1:] + data.shape[0])
        _append_in_place(data, piece_data)
        _append_in_place(indices, piece_indices)
        labels.append(piece_labels)
    if not labels:
        return None
    return data, indices, np.concatenate(indptr), np.concatenate(labels)


def _append_in_place(array, values):
    """``array`` (one that owns its memory, of which no view is kept) grown by ``values``:
    realloc can extend it where it lies, where a concatenation holds both copies."""
    start = array.shape[0]
    array.resize(start + values.shape[0], refcheck=False)
    array[start:] = values


def _parse_piece(block, dtype):
    """:func:`parse_plain_block` on a piece of the block (not empty)."""
    if not block.endswith(b"\n"):
        block += b"\n"
    classes = np.frombuffer(block.translate(_CLASSES), dtype=np.uint8)
    if classes.max() == _OTHER:
        return None
    # Fields are runs of number characters and colons; the block ends with a line break,
    # so their starts and ends alternate.
    in_field = np.concatenate((np.zeros(1, dtype=np.int8), (classes <= _COLON).view(np.int8)))
    edges = np.flatnonzero(np.diff(in_field))
    starts, ends = edges[0::2], edges[1::2]
    # A line's first field starts on its first byte: then there are as many as line breaks.
    line_start = np.ones(starts.shape[0], dtype=bool)
    line_start[starts > 0] = classes[starts[starts > 0] - 1] == _NEWLINE
    n_lines = block.count(b"\n")
    if np.count_nonzero(line_start) != n_lines or not line_start[0]:
        return None  # a blank or indented line
    pair_starts, pair_ends = starts[~line_start], ends[~line_start]
    colons = np.flatnonzero(classes == _COLON)
    # The k-th colon strictly inside the k-th pair field, as many colons as pairs: then
    # each pair field has exactly one and no label has any.
    if colons.shape[0] != pair_starts.shape[0]:
        return None
    if not ((pair_starts < colons) & (colons < pair_ends - 1)).all():
        return None
    # Indices are digits only: no sign, point or exponent between a pair's start and its colon.
    signs_points_exponents = classes == _SIGN_POINT_EXPONENT
    if signs_points_exponents.any():
        in_index = np.zeros(classes.shape[0] + 1, dtype=np.int8)
        in_index[pair_starts] = 1
        in_index[colons] = -1
        if (np.cumsum(in_index[:-1], dtype=np.int8).view(bool) & signs_points_exponents).any():
            return None
    numbers = _arrow_numbers(block.translate(_ONE_NUMBER_A_LINE))
    if numbers is None or numbers.shape[0] != n_lines + 2 * pair_starts.shape[0]:
        return None
    # Fields in file order: a label takes one number, a pair two.
    width = np.where(line_start, 1, 2)
    first_number = np.cumsum(width) - width
    labels = numbers[first_number[line_start]]
    pair_number = first_number[~line_start]
    index_values, data = numbers[pair_number], numbers[pair_number + 1]
    if index_values.shape[0] and index_values.max() > _LARGEST_INDEX:
        return None
    indices = index_values.astype(np.int32)
    pair_line = np.cumsum(line_start)[~line_start] - 1
    # Indices strictly increase along a line (else scikit-learn's reader refuses them).
    if not ((np.diff(indices) > 0) | (np.diff(pair_line) > 0)).all():
        return None
    indptr = np.concatenate(([0], np.cumsum(np.bincount(pair_line, minlength=n_lines))))
    with np.errstate(over="ignore"):  # past float32's range: inf, silently, as scikit-learn's reader gives
        data = data.astype(dtype)
    return data, indices, indptr, labels


def _arrow_numbers(text):
    """The numbers of ``text``, one a line (empty lines skipped), as float64; None when
    one does not parse."""
    import pyarrow as pa
    import pyarrow.csv as csv

    read = csv.ReadOptions(column_names=["number"], block_size=1 << 24)
    # No quotes, no nulls: a field is a number or the block is not plain.
    parse = csv.ParseOptions(
        delimiter=",", quote_char=False, double_quote=False, escape_char=False, ignore_empty_lines=True
    )
    convert = csv.ConvertOptions(
        column_types={"number": pa.float64()},
        null_values=[],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    try:
        table = csv.read_csv(pa.py_buffer(text), read_options=read, parse_options=parse, convert_options=convert)
    except pa.ArrowInvalid:
        return None
    return table.column(0).to_numpy()
