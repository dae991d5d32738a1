"""Data files read ``chunk_rows`` rows at a time, never whole: svmlight and ``.npz``.

Each reader is a re-iterable sequence of ``(X, y)`` chunks (a new pass over the file at
every ``iter``), with ``len``, ``n_rows``, ``n_features`` and random access by chunk
index (``reader[i]``), which the streamed trainers use to visit chunks in a random order.
Memory is bounded by one chunk plus one integer per chunk, whatever the file's size.
"""

from __future__ import annotations

import io
import itertools
import numbers
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from ._svmlight_arrow import joined, parse_plain_block


class SvmlightChunks:
    """A LIBSVM/svmlight file as chunks of ``chunk_rows`` rows.

    Unless both ``n_features`` and ``zero_based`` are given, the first use scans the file
    once (parsing each chunk with scikit-learn's reader and keeping only its row count,
    largest and smallest feature index, and byte offset), to learn the width, whether
    indices start at 0, and where each chunk starts; every chunk is then parsed again
    when read. ``n_rows``, ``len`` and random access always need that scan; a plain pass
    with both given does not (half the parsing). Comment lines count as rows of the chunk
    they fall in, so chunks can hold fewer than ``chunk_rows`` examples.

    A chunk of plain lines (``label index:value ...``, as
    :func:`sklearn.datasets.dump_svmlight_file` writes them) is parsed through pyarrow's
    CSV reader when pyarrow is installed, 2.7 to 4 times as fast as scikit-learn's reader
    on 2 cores, with the same arrays (``gpusvm._svmlight_arrow``), at a higher peak memory
    (about 0.2 GiB more at 100,000 rows of 40 entries; ``bench/svmlight_reading.py``);
    other chunks (comments, ``qid``, errors) are parsed by scikit-learn's reader.

    Parameters
    ----------
    path : str or os.PathLike
        A plain-text file (compressed files cannot be read from an offset).
    chunk_rows : int, default=100_000
    n_features : int, optional
        The width of X; by default the largest feature index in the file.
    zero_based : {'auto', True, False}, default='auto'
        Whether index 0 is the first feature; 'auto' decides by whether the file uses 0.
    dtype : float32 or float64, default=float64
    parser : {'auto', 'scikit-learn'}, default='auto'
        'auto': plain chunks through pyarrow where it is installed; 'scikit-learn': every
        chunk by scikit-learn's reader.
    """

    def __init__(self, path, chunk_rows=100_000, *, n_features=None, zero_based="auto", dtype=np.float64,
                 parser="auto"):
        if int(chunk_rows) < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows!r}.")
        if parser not in ("auto", "scikit-learn"):
            raise ValueError(f"parser must be 'auto' or 'scikit-learn', got {parser!r}.")
        self.path, self.chunk_rows, self.dtype, self.parser = Path(path), int(chunk_rows), dtype, parser
        self._n_features, self._zero_based = n_features, zero_based
        self._offsets = None

    def _scan(self):
        if self._offsets is not None:
            return
        offsets, n_rows, lowest, highest = [], 0, None, -1
        with open(self.path, "rb") as handle:
            for offset, block in _line_blocks(handle, self.chunk_rows):
                offsets.append(offset)
                X, _ = _parse(block, self.path, offset, zero_based=True, n_columns=None, dtype=self.dtype,
                              parser=self.parser)
                n_rows += X.shape[0]
                if X.nnz:
                    lowest = min(lowest if lowest is not None else X.indices.min(), X.indices.min())
                    highest = max(highest, X.indices.max())
        if self._zero_based == "auto":
            self._zero_based = bool(lowest == 0)
        elif not self._zero_based and lowest == 0:
            raise ValueError(f"{self.path} uses feature index 0, but zero_based=False.")
        width = highest + 1 - (0 if self._zero_based else 1)
        if self._n_features is None:
            self._n_features = max(width, 0)
        elif width > self._n_features:
            raise ValueError(f"{self.path} has {width} features, more than n_features={self._n_features}.")
        self._offsets, self._n_rows = offsets, n_rows

    @property
    def n_rows(self):
        self._scan()
        return self._n_rows

    @property
    def n_features(self):
        self._scan()
        return self._n_features

    @property
    def zero_based(self):
        self._scan()
        return self._zero_based

    def __len__(self):
        self._scan()
        return len(self._offsets)

    def __getitem__(self, index):
        self._scan()
        offset = self._offsets[index]
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            return self._chunk(b"".join(itertools.islice(handle, self.chunk_rows)), offset)

    def __iter__(self):
        if self._offsets is None and (self._n_features is None or self._zero_based == "auto"):
            self._scan()  # the width or the index base is not known yet
        with open(self.path, "rb") as handle:  # one sequential pass: no scan needed when width and base are given
            for offset, block in _line_blocks(handle, self.chunk_rows):
                yield self._chunk(block, offset)

    def _chunk(self, block, offset):
        shift = 0 if self._zero_based else 1
        X, y = _parse(block, self.path, offset, zero_based=True, n_columns=self._n_features + shift, dtype=self.dtype,
                      parser=self.parser)
        if shift:
            if X.nnz and X.indices.min() == 0:
                raise ValueError(f"{self.path} uses feature index 0 (in the chunk at byte {offset}), "
                                 "but zero_based=False.")
            X = sp.csr_matrix((X.data, X.indices - 1, X.indptr), shape=(X.shape[0], self._n_features))
        return X, y


def _line_blocks(handle, lines):
    """``(offset, block)``: the next ``lines`` lines of a file opened in binary mode, and
    the byte they start at, until the end of the file."""
    while True:
        offset = handle.tell()
        block = b"".join(itertools.islice(handle, lines))
        if not block:
            return
        yield offset, block


def _whole_line_blocks(handle, size):
    """Blocks of whole lines of about ``size`` bytes each (one line at least), of a file
    opened in binary mode, to its end (cheaper than lines: no object for each)."""
    rest = b""
    while True:
        read = handle.read(size)
        if not read:
            if rest:
                yield rest
            return
        block = rest + read
        end = block.rfind(b"\n") + 1
        if end == 0:  # no line ends in it yet
            rest = block
            continue
        rest = block[end:]
        yield block[:end]


def read_svmlight_in_blocks(path, *, n_features=None, dtype=np.float64, zero_based="auto", block_bytes=1 << 23):
    """What :func:`sklearn.datasets.load_svmlight_file` returns for a plain-text file,
    read ``block_bytes`` (whole lines) at a time, each block parsed as
    :class:`SvmlightChunks` parses a chunk (through pyarrow where its lines are plain).

    Returns
    -------
    (X, y) or None
        None where scikit-learn's reader must read the file to give its error (arguments
        it refuses, a block that does not parse, index 0 with ``zero_based=False``, a
        file wider than ``n_features``).
    """
    known_arguments = (n_features is None or isinstance(n_features, numbers.Integral) and n_features >= 1) and (
        zero_based is True or zero_based is False or zero_based == "auto")
    if not known_arguments:
        return None
    with open(path, "rb") as handle:
        blocks = (_parse(block, path, 0, zero_based=True, n_columns=None, dtype=dtype)
                  for block in _whole_line_blocks(handle, block_bytes))
        try:
            read = joined(((X.data, X.indices, X.indptr, labels) for X, labels in blocks), dtype)
        except ValueError:  # the caller's scikit-learn reader gives the error, for the whole file
            return None
    if read is None:
        return None  # an empty file: scikit-learn's reader says what it makes of it
    data, indices, indptr, y = read
    # scikit-learn's rules: one-based indices shift down (for 'auto': when index 0 is unused)
    lowest = indices.min() if indices.shape[0] else None
    if zero_based is False and lowest == 0:
        return None
    if zero_based is False or (zero_based == "auto" and lowest is not None and lowest > 0):
        indices -= 1
    width = (int(indices.max()) if indices.shape[0] else 0) + 1
    if n_features is not None and n_features < width:
        return None
    if indptr[-1] < 2**31:  # the indices' int32, so that the matrix keeps both arrays as they are
        indptr = indptr.astype(indices.dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, n_features or width)), y


def _parse(block, path, offset, *, zero_based, n_columns, dtype, parser="auto"):
    """A block of whole lines as ``(X, y)``: through Arrow when the lines are plain
    (gpusvm._svmlight_arrow) and ``parser`` is 'auto', else by scikit-learn's reader; the
    same arrays either way."""
    parsed = parse_plain_block(block, dtype) if zero_based and parser == "auto" else None
    if parsed is not None:
        data, indices, indptr, labels = parsed
        width = int(indices.max()) + 1 if indices.shape[0] else 1
        if n_columns is None or width <= n_columns:  # else scikit-learn's reader gives its error
            return sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, n_columns or width)), labels
    try:
        X, y = load_svmlight_file(io.BytesIO(block), n_features=n_columns, zero_based=zero_based, dtype=dtype)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not a LIBSVM/svmlight file (in the chunk at byte {offset}): {error}") from None
    return X, y


class NpzChunks:
    """``.npz`` files (one, or shards of one data set) as chunks of ``chunk_rows`` rows.

    Each file holds ``X`` (a dense C-order array, as ``numpy.savez(path, X=X, y=y)``
    writes it) or a CSR matrix written by :func:`scipy.sparse.save_npz`, and optionally
    ``y`` in the same archive (the layouts :func:`gpusvm.data_files.read_data` reads).
    Rows are read from the archive's members as a stream, never the whole ``X``; ``y``
    and a CSR matrix's row pointers (one integer per row) are read whole.

    Parameters
    ----------
    paths : str, os.PathLike or a list of them
    chunk_rows : int, default=100_000
    """

    def __init__(self, paths, chunk_rows=100_000):
        if int(chunk_rows) < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows!r}.")
        self.paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
        self.chunk_rows = int(chunk_rows)
        self._shapes = None

    def _scan(self):
        if self._shapes is None:
            self._shapes = [_npz_shape(path) for path in self.paths]
            widths = {shape[1] for shape in self._shapes}
            if len(widths) > 1:
                raise ValueError(f"The .npz shards have different feature counts: {sorted(widths)}.")

    @property
    def n_rows(self):
        self._scan()
        return sum(shape[0] for shape in self._shapes)

    @property
    def n_features(self):
        self._scan()
        return self._shapes[0][1]

    def _index(self):
        """``(shard, first row)`` of every chunk; chunks do not cross shards."""
        self._scan()
        return [(k, start) for k, shape in enumerate(self._shapes) for start in range(0, shape[0], self.chunk_rows)]

    def __len__(self):
        return len(self._index())

    def __getitem__(self, index):
        shard, start = self._index()[index]
        with _NpzRows(self.paths[shard]) as rows:
            rows.skip(start)
            return rows.read(self.chunk_rows)

    def __iter__(self):
        self._scan()
        for path in self.paths:
            with _NpzRows(path) as rows:
                while not rows.done:
                    yield rows.read(self.chunk_rows)


def _npz_shape(path):
    with _NpzRows(path) as rows:
        return rows.shape


class _NpzRows:
    """Sequential row reads from one ``.npz`` archive (dense ``X`` or a save_npz CSR)."""

    def __init__(self, path):
        self.path = path
        try:
            self.archive = zipfile.ZipFile(path)
            names = set(self.archive.namelist())
            self.y = self._whole("y.npy") if "y.npy" in names else None
            if "X.npy" in names:
                self.sparse = False
                self.stream = self.archive.open("X.npy")
                self.shape, self.dtype = self._header(self.stream)
            elif {"data.npy", "indices.npy", "indptr.npy", "shape.npy"} <= names:
                self.sparse = True
                self.indptr = self._whole("indptr.npy")
                self.shape = tuple(int(n) for n in self._whole("shape.npy"))
                self.data, self.indices = self.archive.open("data.npy"), self.archive.open("indices.npy")
                (_, self.dtype), (_, self.index_dtype) = self._header(self.data), self._header(self.indices)
            else:
                raise ValueError(f"{path} holds {sorted(names)}; expected X.npy (and y.npy) or a save_npz matrix.")
        except (OSError, zipfile.BadZipFile, KeyError) as error:
            raise ValueError(f"{path} is not a readable .npz file (damaged or truncated?): {error}") from None
        if len(self.shape) != 2:
            raise ValueError(f"{path}: X must be 2-D, got shape {self.shape}.")
        self.position = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.archive.close()

    @property
    def done(self):
        return self.position >= self.shape[0]

    def _whole(self, member):
        with self.archive.open(member) as stream:
            return np.lib.format.read_array(stream, allow_pickle=False)

    def _header(self, stream):
        version = np.lib.format.read_magic(stream)
        readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"{self.path}: .npy format version {version} is not streamed; save with NumPy's default.")
        shape, fortran_order, dtype = readers[version](stream)
        if fortran_order and len(shape) > 1:
            raise ValueError(f"{self.path}: X is stored in Fortran order; save it C-contiguous to stream it.")
        if dtype.hasobject:
            raise ValueError(f"{self.path}: X holds Python objects, which are not read (no pickle).")
        return shape, dtype

    def skip(self, n_rows):
        """Move past ``n_rows`` rows (reading them: a compressed member cannot seek)."""
        while n_rows > 0:
            step = min(n_rows, 65_536)
            self.read(step)
            n_rows -= step

    def read(self, n_rows):
        """The next up to ``n_rows`` rows as ``(X, y)``."""
        start, stop = self.position, min(self.position + n_rows, self.shape[0])
        if self.sparse:
            low, high = int(self.indptr[start]), int(self.indptr[stop])
            data = _read_values(self.data, self.dtype, high - low, self.path)
            indices = _read_values(self.indices, self.index_dtype, high - low, self.path)
            X = sp.csr_matrix((data, indices, self.indptr[start:stop + 1] - low), shape=(stop - start, self.shape[1]))
        else:
            X = _read_values(self.stream, self.dtype, (stop - start) * self.shape[1], self.path)
            X = X.reshape(stop - start, self.shape[1])
        self.position = stop
        return X, (self.y[start:stop] if self.y is not None else None)


def _read_values(stream, dtype, count, path):
    """The next ``count`` values of an ``.npy`` member, read straight into a new array."""
    values = np.empty(count, dtype=dtype)
    view, filled = memoryview(values).cast("B"), 0
    while filled < view.nbytes:
        read = stream.readinto(view[filled:])
        if not read:
            raise ValueError(f"{path} is truncated: an array ends early.")
        filled += read
    return values
