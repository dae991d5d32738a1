"""Data files read ``chunk_rows`` rows at a time, never whole: svmlight and ``.npz``.

Each reader is a re-iterable sequence of ``(X, y)`` chunks (a new pass over the file at
every ``iter``), with ``len``, ``n_rows``, ``n_features`` and random access by chunk
index (``reader[i]``), which the streamed trainers use to visit chunks in a random order.
Memory is bounded by one chunk plus one integer per chunk, whatever the file's size (and,
for a compressed ``.npz``, the checkpoints of its decompression: see :class:`NpzChunks`).

A fit reads its file several times (for the classes and rows, then every epoch), so each
reader keeps a ``FileFingerprint`` of what it read first and refuses, naming the file,
a file that has changed since: a fit would otherwise train on whatever a later pass finds.
"""

from __future__ import annotations

import bisect
import bz2
import contextlib
import datetime
import functools
import gzip
import io
import itertools
import lzma
import math
import numbers
import os
import threading
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from .chunk_cache import CacheMismatch, CacheReader, CacheWriter, check_cache_path, source_facts
from .svmlight_arrow import joined, parse_plain_block


def _check_chunk_rows(chunk_rows):
    """A reader's ``chunk_rows``: an integer (not a bool, a float or a string), at least 1."""
    if not isinstance(chunk_rows, numbers.Integral) or isinstance(chunk_rows, bool):
        raise TypeError(f"chunk_rows must be an integer, got {chunk_rows!r}.")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows!r}.")


class FileFingerprint:
    """What a reader saw of its file, so that it refuses the file once it has changed.

    A streamed fit reads its file more than once (to find the classes and count the
    rows, then once an epoch) and trains on what each pass reads: a file truncated, cut
    in the middle of a line, rewritten or relabelled between two passes would be trained
    on as it then is, or fail with an error about something else.  The fingerprint is
    the file's size and modification time when it was first opened, checked at every
    later opening (one ``os.stat``), the CRC-32 of each chunk's bytes when the chunk was
    first read, checked whenever it is read again (a small part of the cost of parsing
    them), and the number of chunks of the first pass that reached the end, checked at
    the end of every later one (a ``.npz`` reader checks the first only: its members
    carry CRC-32s of their own).  Together they catch a change between
    passes, and a change in the middle of one that touches a chunk still to be read.
    """

    def __init__(self, path):
        self.path = path
        self.seen = None  # (size, modification time in ns) at the first opening
        self.crcs = {}  # chunk number -> CRC-32 of its bytes
        self.n_chunks = None

    def opened(self):
        """Check the file's size and modification time against the first opening's."""
        stat = os.stat(self.path)
        now = (stat.st_size, stat.st_mtime_ns)
        if self.seen is None:
            self.seen = now
        elif now != self.seen:
            (size, modified), (new_size, new_modified) = self.seen, now
            what = (
                f"its size went from {size:,} to {new_size:,} bytes"
                if size != new_size
                else f"it was modified ({_when(modified)}, then {_when(new_modified)})"
            )
            self._refuse(what)

    def chunk(self, number, data, where):
        """Check chunk ``number``'s bytes against the first read of it; ``where`` names
        its lines."""
        crc = zlib.crc32(data)
        first = self.crcs.setdefault(number, crc)
        if crc != first:
            self._refuse(f"{where} (chunk {number}) hold other bytes than when they were first read")

    def ended(self, n_chunks):
        """Check the number of chunks of a pass that reached the end of the file."""
        if self.n_chunks is None:
            self.n_chunks = n_chunks
        elif n_chunks != self.n_chunks:
            self._refuse(f"it now ends after {n_chunks} chunks, where it held {self.n_chunks}")

    def _refuse(self, what):
        raise ValueError(
            f"{self.path} changed after it was first read: {what}. A streamed fit reads its file once for "
            "the classes and rows and again every epoch, and would train on the changed file; it must "
            "not change until the fit ends (train on a copy that stays as it is). To read the new file, "
            "make a new reader."
        )


def _line_count(block):
    """The lines in a block of a text file's bytes (a last line may lack its newline)."""
    return block.count(b"\n") + (bool(block) and not block.endswith(b"\n"))


def _when(nanoseconds):
    """A modification time as an error message shows it."""
    return datetime.datetime.fromtimestamp(nanoseconds / 1e9).isoformat(sep=" ", timespec="microseconds")


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
    CSV reader when pyarrow is installed, faster than scikit-learn's reader and with the
    same arrays (``gpusvm._stream.svmlight_arrow``), at a higher peak memory (the
    benchmark report's ``bench/svmlight_reading.py`` has the figures); other chunks
    (comments, ``qid``, errors) are parsed by scikit-learn's reader.

    Errors name the file and the line: a line that does not parse, and a value or label
    that is NaN or infinite (which every gpusvm estimator refuses; scikit-learn's
    wording), found by the scan or when the chunk is read.  A file that changes after
    the reader first opened it is refused (see ``FileFingerprint``): make a new
    reader to read the new file.

    Parameters
    ----------
    path : str or os.PathLike
        A plain-text file, or one compressed by gzip, bzip2 or xz (known by its first
        bytes, whatever its name), decompressed as it is read. A compressed file is a
        stream: ``reader[i]`` decompresses it from its start, so ``seekable`` is False
        and the streamed trainers read its chunks in order.
    chunk_rows : int, default=100_000
    n_features : int, optional
        The width of X; by default the largest feature index in the file.
    zero_based : {'auto', True, False}, default='auto'
        Whether index 0 is the first feature; 'auto' decides by whether the file uses 0.
    dtype : float32 or float64, default=float64
    parser : {'auto', 'scikit-learn'}, default='auto'
        'auto': plain chunks through pyarrow where it is installed; 'scikit-learn': every
        chunk by scikit-learn's reader.
    cache_file : str or os.PathLike, optional
        A binary cache of the parsed chunks (``gpusvm/_stream/chunk_cache.py``): the first
        full pass over the file (the scan, or a pass in order) writes it, and every later
        read takes the chunk from it, bit for bit the arrays the parse gave, at the disk's
        speed. A cache written earlier for the same file (its size and modification time)
        and settings is read at once; one that does not match, or is damaged, is refused
        with a warning and written again, never read as data. The cache stays after the
        fit (the estimators' ``fit_chunks(..., cache_file=...)`` makes a temporary one by
        default). An existing file that is not a gpusvm cache is never overwritten.
    """

    def __init__(
        self,
        path,
        chunk_rows=100_000,
        *,
        n_features=None,
        zero_based="auto",
        dtype=np.float64,
        parser="auto",
        cache_file=None,
    ):
        _check_chunk_rows(chunk_rows)
        if parser not in ("auto", "scikit-learn"):
            raise ValueError(f"parser must be 'auto' or 'scikit-learn', got {parser!r}.")
        if n_features is not None and (
            not isinstance(n_features, numbers.Integral) or isinstance(n_features, bool) or n_features < 1
        ):
            raise ValueError(f"n_features must be an integer of at least 1 or None, got {n_features!r}.")
        if not (zero_based is True or zero_based is False or zero_based == "auto"):
            raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}.")
        self.path, self.chunk_rows, self.dtype, self.parser = Path(path), int(chunk_rows), dtype, parser
        self._n_features, self._zero_based = n_features, zero_based
        self._given_n_features, self._given_zero_based = n_features, zero_based
        self._offsets = None
        self._n_lines = None  # known once scanned
        self._chunk_lines = {}  # chunk number -> its lines, once read (the last chunk's may be fewer)
        self._fingerprint = FileFingerprint(self.path)
        self.cache_file = None if cache_file is None else Path(cache_file)
        if self.cache_file is not None:
            check_cache_path(self.cache_file, self.path)
        self._cache_reader = None  # the complete cache, once opened
        self._cache_refused = False  # a cache found damaged this session: parse the text
        self._cache_optional = False  # a cache the fit made by itself: no room for it is no error

    def with_cache(self, cache_file, *, optional=False):
        """A reader of the same file with the same settings through the chunk cache at
        ``cache_file``; ``optional``: where the disk has no room for it, warn and parse
        the text every pass instead of raising. It keeps this reader's fingerprint of the
        file: a change since this reader first read it is refused as this reader would.
        It scans the file again, writing the cache as it goes."""
        reader = SvmlightChunks(
            self.path,
            self.chunk_rows,
            n_features=self._given_n_features,
            zero_based=self._given_zero_based,
            dtype=self.dtype,
            parser=self.parser,
            cache_file=cache_file,
        )
        reader._cache_optional, reader._fingerprint = optional, self._fingerprint
        return reader

    def _scan(self):
        if self._offsets is not None or self._adopt_cache():
            return
        offsets, n_rows, lowest, highest, n_lines = [], 0, None, -1, 0
        with self._open() as handle, self._cache_writing() as cache:
            for number, (offset, block) in enumerate(_line_blocks(handle, self.chunk_rows)):
                offsets.append(offset)
                first_line = 1 + number * self.chunk_rows
                self._fingerprint.chunk(number, block, self._lines_of(number, block))
                n_lines += _line_count(block)
                X, y = _parse(
                    block, self.path, first_line, zero_based=True, n_columns=None, dtype=self.dtype, parser=self.parser
                )
                check_finite_rows(X, y, self.path, block, first_line)
                self._check_indices(X, block, first_line)
                cache.add(number, X, y, offset + len(block))
                n_rows += X.shape[0]
                if X.nnz:
                    lowest = min(lowest if lowest is not None else X.indices.min(), X.indices.min())
                    highest = max(highest, X.indices.max())
            self._fingerprint.ended(len(offsets))
            if self._zero_based == "auto":  # (zero_based=False with index 0: refused above, at its line)
                self._zero_based = bool(lowest == 0)
            width = highest + 1 - (0 if self._zero_based else 1)
            if self._n_features is None:
                self._n_features = max(width, 0)
            elif width > self._n_features:  # found once the index base is known: read again for the line
                with open_svmlight(self.path) as again:
                    for number, (_, block) in enumerate(_line_blocks(again, self.chunk_rows)):
                        X, _ = _parse(
                            block, self.path, 1, zero_based=True, n_columns=None, dtype=self.dtype, parser=self.parser
                        )
                        self._check_indices(X, block, 1 + number * self.chunk_rows)
                raise ValueError(f"{self.path} has {width} features, more than n_features={self._n_features}.")
            self._offsets, self._n_rows, self._n_lines = offsets, n_rows, n_lines
            cache.finish(self._summary())

    # --- the chunk cache ---------------------------------------------------------------

    def _facts(self):
        """What the cache's header must say: the file as first opened, and the settings."""
        self._fingerprint.opened()
        settings = {
            "chunk_rows": self.chunk_rows,
            "dtype": np.dtype(self.dtype).str,
            "parser": self.parser,
            "n_features": self._given_n_features,
            "zero_based": self._given_zero_based,
        }
        return source_facts(self.path, settings)

    def _summary(self):
        """What a scan learns of the file, kept in the cache's index."""
        return {
            "offsets": self._offsets,
            "n_rows": self._n_rows,
            "n_lines": self._n_lines,
            "n_features": int(self._n_features),
            "zero_based": bool(self._zero_based),
            "chunk_lines": {str(number): lines for number, lines in self._chunk_lines.items()},
        }

    def _cache(self):
        """The complete cache that matches this reader, opened once, or None."""
        if self.cache_file is None or self._cache_refused:
            return None
        if self._cache_reader is None:
            if not self.cache_file.exists():
                return None
            try:
                self._cache_reader = CacheReader(self.cache_file, self._facts())
            except CacheMismatch as why:
                self._refuse_cache(why)
                return None
        return self._cache_reader

    def _adopt_cache(self):
        """Take what the scan would learn from a complete cache; whether there was one."""
        cache = self._cache()
        if cache is None:
            return False
        summary = cache.summary
        self._offsets, self._n_rows, self._n_lines = summary["offsets"], summary["n_rows"], summary["n_lines"]
        self._n_features, self._zero_based = summary["n_features"], summary["zero_based"]
        self._chunk_lines = {int(number): lines for number, lines in summary["chunk_lines"].items()}
        self._fingerprint.ended(len(self._offsets))
        return True

    def _refuse_cache(self, why):
        """Stop reading a cache that does not match or is damaged: a warning, the file
        removed (it is a cache: its first bytes say so), and the text parsed until a full
        pass writes the cache again."""
        warnings.warn(
            f"The chunk cache {self.cache_file} is not used: {why}. The chunks are parsed from {self.path} "
            "instead, and the cache is written again on the next full pass over the file.",
            UserWarning,
            stacklevel=4,
        )
        self._cache_reader, self._cache_refused = None, True
        with contextlib.suppress(OSError):
            self.cache_file.unlink()

    def _cached_chunk(self, number):
        """Chunk ``number`` from the cache, the arrays its parse gave; None without a
        cache, or when its record is damaged (refused: the caller parses the text)."""
        cache = self._cache()
        if cache is None:
            return None
        self._fingerprint.opened()
        try:
            arrays = cache.arrays(number)
        except CacheMismatch as why:
            self._refuse_cache(why)
            return None
        return self._with_width(arrays["data"], arrays["indices"], arrays["indptr"]), arrays["y"]

    @contextlib.contextmanager
    def _cache_writing(self):
        """A writer of the cache for a full pass in order: ``add`` each parsed chunk,
        ``finish`` at the end; a pass that ends otherwise leaves no cache. A no-op without
        ``cache_file`` or with a complete cache."""
        if self.cache_file is None or self._cache() is not None:
            yield _NoCache()
            return
        writer = _PassCache(self)
        try:
            yield writer
        finally:
            writer.close()

    def _open(self):
        """The file opened (see :func:`open_svmlight`), once it is checked unchanged since the first opening."""
        self._fingerprint.opened()
        return open_svmlight(self.path)

    def _lines_of(self, number, block=None):
        """``lines A-B``: the lines of chunk ``number`` (the chunk's ``block`` of bytes, or
        the file's last line once the file has been scanned, caps them)."""
        start, stop = 1 + number * self.chunk_rows, (number + 1) * self.chunk_rows
        if block is not None:
            self._chunk_lines[number] = _line_count(block)
        if number in self._chunk_lines:  # read: an error about it comes after
            stop = min(stop, start - 1 + self._chunk_lines[number])
        if self._n_lines is not None:
            stop = min(stop, self._n_lines)
        return f"line {start}" if stop <= start else f"lines {start}-{stop}"

    def chunk_origin(self, number):
        """Where chunk ``number`` comes from: the file and its lines, for an error about it."""
        return f"{self.path}, {self._lines_of(number)}"

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

    @property
    def seekable(self):
        """Whether ``reader[i]`` reads chunk ``i`` alone (False for a compressed file,
        which it decompresses from the start)."""
        return compression(self.path) is None

    def __len__(self):
        self._scan()
        return len(self._offsets)

    def __getitem__(self, index):
        self._scan()
        number = range(len(self._offsets))[index]  # an IndexError past the end; negative from the end
        cached = self._cached_chunk(number)
        if cached is not None:
            return cached
        with self._open() as handle:
            handle.seek(self._offsets[number])
            block = b"".join(itertools.islice(handle, self.chunk_rows))
        self._fingerprint.chunk(number, block, self._lines_of(number, block))
        return self._chunk(block, 1 + number * self.chunk_rows)

    def __iter__(self):
        if self._offsets is None and (self._n_features is None or self._zero_based == "auto"):
            self._scan()  # the width or the index base is not known yet
        elif self._offsets is None:
            self._adopt_cache()
        if self._cache() is not None:
            for number in range(len(self._offsets)):
                chunk = self._cached_chunk(number)
                yield chunk if chunk is not None else self[number]  # a damaged record: the text's
            return
        offsets, n_rows, n_lines = [], 0, 0
        with self._open() as handle, self._cache_writing() as cache:  # no scan needed when width and base are given
            for number, (offset, block) in enumerate(_line_blocks(handle, self.chunk_rows)):
                self._fingerprint.chunk(number, block, self._lines_of(number, block))
                offsets.append(offset)
                n_lines += _line_count(block)
                X, y = self._parsed(block, 1 + number * self.chunk_rows)
                cache.add(number, X, y, offset + len(block))
                n_rows += X.shape[0]
                yield self._with_width(X.data, X.indices, X.indptr), y
            self._fingerprint.ended(len(offsets))
            if self._offsets is None:
                self._offsets, self._n_rows, self._n_lines = offsets, n_rows, n_lines
            cache.finish(self._summary())

    def _chunk(self, block, first_line):
        X, y = self._parsed(block, first_line)
        return self._with_width(X.data, X.indices, X.indptr), y

    def _parsed(self, block, first_line):
        """A block's rows as parsed, checked (indices as they are in the file)."""
        X, y = _parse(
            block, self.path, first_line, zero_based=True, n_columns=None, dtype=self.dtype, parser=self.parser
        )
        check_finite_rows(X, y, self.path, block, first_line)
        self._check_indices(X, block, first_line)
        return X, y

    def _with_width(self, data, indices, indptr):
        """Parsed rows (a CSR matrix's arrays, indices as in the file) with the file's
        index base and width."""
        shift = 0 if self._zero_based else 1
        return sp.csr_matrix(
            (data, indices - shift if shift else indices, indptr), shape=(indptr.size - 1, self._n_features)
        )

    def _check_indices(self, X, block, first_line):
        """Refuse index 0 when ``zero_based`` is False, and an index past ``n_features``
        when it is given, naming the line."""
        if not X.nnz:
            return
        if self._zero_based is False and X.indices.min() == 0:
            row = row_of_entry(X, int(np.flatnonzero(X.indices == 0)[0]))
            raise ValueError(
                f"{self.path} uses feature index 0 ({_line_of_row(block, row, first_line)}), but zero_based=False."
            )
        if self._n_features is not None and self._zero_based != "auto":
            limit = self._n_features + (0 if self._zero_based else 1)  # the raw indices below it
            if X.indices.max() >= limit:
                row = row_of_entry(X, int(np.flatnonzero(X.indices >= limit)[0]))
                raise ValueError(
                    f"{self.path} has feature index {int(X.indices.max())} "
                    f"({_line_of_row(block, row, first_line)}), past n_features={self._n_features}"
                    f"{'' if self._zero_based else ' (one-based)'}."
                )


# --- compressed files ----------------------------------------------------------------

# The first bytes of each compressed format that open_svmlight reads, and its opener.
_COMPRESSIONS = {"gzip": (b"\x1f\x8b", gzip.open), "bzip2": (b"BZh", bz2.open), "xz": (b"\xfd7zXZ\x00", lzma.open)}
# What a damaged or truncated compressed file raises while it is read.
_DECOMPRESSION_ERRORS = (EOFError, gzip.BadGzipFile, lzma.LZMAError, zlib.error, OSError)


class _NoCache:
    """The cache writer of a reader without one: does nothing."""

    def add(self, number, X, y, bytes_read):
        pass

    def finish(self, summary):
        pass


class _PassCache:
    """The cache a reader writes in one full pass (:class:`CacheWriter`), sized from the
    file: about the text's size (a value and an index take about the bytes their text
    does), five times a compressed file's, re-estimated from the bytes read so far. Where
    the disk has no room for a cache the fit made by itself, a warning, and no cache."""

    def __init__(self, reader):
        self.reader, self.writer, self.finished = reader, None, False
        size = os.path.getsize(reader.path)
        self.compressed = compression(reader.path) is not None
        self.source_bytes = size
        self._open(size * (5 if self.compressed else 1))

    def _open(self, estimated):
        try:
            self.writer = CacheWriter(self.reader.cache_file, self.reader._facts(), estimated)
        except OSError as error:
            self._no_room(error)

    def _no_room(self, error):
        if self.writer is not None:
            self.writer.abandon()
            self.writer = None
        if not self.reader._cache_optional:
            raise error
        warnings.warn(f"{error} The chunks are parsed from the text every pass.", UserWarning, stacklevel=5)
        self.reader.cache_file = None

    def add(self, number, X, y, bytes_read):
        if self.writer is None:
            return
        try:
            self.writer.add(number, {"data": X.data, "indices": X.indices, "indptr": X.indptr, "y": y})
            if not self.compressed and bytes_read:
                self.writer.expect(self.writer.handle.tell() * self.source_bytes / bytes_read)
        except OSError as error:
            self._no_room(error)

    def finish(self, summary):
        if self.writer is None:
            return
        try:
            self.writer.finish(summary)
        except OSError as error:
            self._no_room(error)
            return
        self.writer, self.finished = None, True
        self.reader._cache_reader, self.reader._cache_refused = None, False

    def close(self):
        """Remove the partial cache of a pass that did not finish."""
        if self.writer is not None:
            self.writer.abandon()
            self.writer = None


def compression(path):
    """``'gzip'``, ``'bzip2'`` or ``'xz'`` for a file compressed so (by its first bytes),
    else None."""
    with open(path, "rb") as handle:
        head = handle.read(6)
    return next((name for name, (magic, _) in _COMPRESSIONS.items() if head.startswith(magic)), None)


@contextlib.contextmanager
def open_svmlight(path):
    """``path`` opened for reading bytes, decompressed as it is read when it is gzip,
    bzip2 or xz (scikit-learn's reader knows ``.gz`` and ``.bz2`` by their names only).
    A compressed file that turns out damaged or truncated raises a ValueError naming it."""
    kind = compression(path)
    if kind is None:
        with open(path, "rb") as handle:
            yield handle
        return
    try:
        with _COMPRESSIONS[kind][1](path, "rb") as handle:
            yield handle
    except _DECOMPRESSION_ERRORS as error:
        raise ValueError(f"{path} is a damaged or truncated {kind} file: {error}") from None


# --- parsing, and errors that name the line -------------------------------------------


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
    """What :func:`sklearn.datasets.load_svmlight_file` returns for a file (plain, or
    compressed: see :func:`open_svmlight`), read ``block_bytes`` (whole lines) at a time,
    each block parsed as :class:`SvmlightChunks` parses a chunk (through pyarrow where its
    lines are plain).

    Returns
    -------
    (X, y) or None
        None where scikit-learn's reader must read the file to give its error (arguments
        it refuses, a block that does not parse, index 0 with ``zero_based=False``, a
        file wider than ``n_features``).
    """
    known_arguments = (n_features is None or isinstance(n_features, numbers.Integral) and n_features >= 1) and (
        zero_based is True or zero_based is False or zero_based == "auto"
    )
    if not known_arguments:
        return None
    with open_svmlight(path) as handle:
        blocks = (
            _parse(block, path, 0, zero_based=True, n_columns=None, dtype=dtype, locate=False)
            for block in _whole_line_blocks(handle, block_bytes)
        )
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


# What scikit-learn's reader raises for a line it cannot read (OverflowError: an index
# past a C int).
_PARSE_ERRORS = (ValueError, UnicodeDecodeError, OverflowError)


def _parse(block, path, first_line, *, zero_based, n_columns, dtype, parser="auto", locate=True):
    """A block of whole lines as ``(X, y)``: through Arrow when the lines are plain
    (gpusvm._stream.svmlight_arrow) and ``parser`` is 'auto', else by scikit-learn's reader; the
    same arrays either way. A block that does not parse raises a ValueError naming
    ``path`` and the line (``first_line`` is the block's first line's number; ``locate``
    False skips the search for it)."""
    parsed = parse_plain_block(block, dtype) if zero_based and parser == "auto" else None
    if parsed is not None:
        data, indices, indptr, labels = parsed
        width = int(indices.max()) + 1 if indices.shape[0] else 1
        if n_columns is None or width <= n_columns:  # else scikit-learn's reader gives its error
            return sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, n_columns or width)), labels
    read = functools.partial(_scikit_learn_parse, n_columns=n_columns, zero_based=zero_based, dtype=dtype)
    try:
        return read(block)
    except _PARSE_ERRORS as error:
        found = _first_bad_line(block, read) if locate else None
        if found is None:
            raise ValueError(
                f"{path} is not a LIBSVM/svmlight file (in the lines from {first_line}): {_reason(error)}"
            ) from None
        number, line, reason = found
        raise ValueError(
            f"{path} is not a LIBSVM/svmlight file: line {first_line + number} {_shown(line)}: {reason}"
        ) from None


def _scikit_learn_parse(block, *, n_columns, zero_based, dtype):
    return load_svmlight_file(io.BytesIO(block), n_features=n_columns, zero_based=zero_based, dtype=dtype)


def _reason(error, line=b""):
    """What scikit-learn's reader's error says about ``line``, plainer where it says too
    little."""
    if isinstance(error, OverflowError):
        return f"a feature index past {2**31 - 1} ({error})"
    if isinstance(error, UnicodeDecodeError):
        return f"bytes that are not text ({error})"
    if line.startswith(b"\x93NUMPY"):
        return "this is a .npy file (NumPy's binary format), not text; gpusvm reads .npz archives (--format npz)"
    if line.startswith(b"PK\x03\x04"):
        return "this is a zip archive (a .npz file, or a gpusvm model?), not text; for a .npz file, use --format npz"
    if line.startswith(b"\xef\xbb\xbf"):
        return f"a UTF-8 byte order mark starts the line; save the file without one ({error})"
    if b"\r" in line.rstrip(b"\r\n"):
        return f"lines end with a carriage return alone; end them with \\n or \\r\\n ({error})"
    if "to unpack" in str(error):  # a field with no colon after the label
        return f"a feature is not index:value ({error})"
    return str(error)


def _lines(block):
    """The lines of a block of bytes, each with its ``\\n`` (as a binary file gives them)."""
    lines = [line + b"\n" for line in block.split(b"\n")]
    lines[-1] = lines[-1][:-1]  # the text after the last line break (none when the block ends with one)
    return lines if lines[-1] else lines[:-1]


def _first_bad_line(block, read):
    """``(index, line, reason)`` of the first line of ``block`` that ``read`` refuses on
    its own (halving the block: about two parses of it), or None when each line passes
    alone."""
    lines = _lines(block)
    if not lines:
        return None
    low, high = 0, len(lines)  # the first bad line is in lines[low:high]
    while high - low > 1:
        middle = (low + high) // 2
        try:
            read(b"".join(lines[low:middle]))
        except _PARSE_ERRORS:
            high = middle
        else:
            low = middle
    try:
        read(lines[low])
    except _PARSE_ERRORS as error:
        return low, lines[low], _reason(error, lines[low])
    return None


def _shown(line, limit=60):
    """A line as an error message shows it: its text, cut at ``limit`` characters."""
    text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _line_of_row(block, row, first_line):
    """``line N 'text'``: where row ``row`` of a parsed block is (comment and blank lines
    hold no row, as scikit-learn's reader skips them)."""
    found = _row_line(_lines(block), row, first_line)
    return f"line {found[0]} {_shown(found[1])}" if found else f"a row in the lines from {first_line}"


def line_of_row(path, row):
    """``line N 'text'``: where row ``row`` of svmlight file ``path`` is (read again, to
    name the line in an error)."""
    with open_svmlight(path) as handle:
        found = _row_line(handle, row, 1)
    return f"line {found[0]} {_shown(found[1])}" if found else f"row {row}"


def _row_line(lines, row, first_line):
    """``(number, line)`` of the line that holds data row ``row`` (lines numbered from
    ``first_line``; comment and blank lines hold none), or None past the last row."""
    for number, line in enumerate(lines, first_line):
        if line.split(b"#", 1)[0].split():
            if row == 0:
                return number, line
            row -= 1
    return None


def row_of_entry(X, position):
    """The row of a CSR matrix that holds its ``position``-th stored entry."""
    return int(np.searchsorted(X.indptr, position, side="right")) - 1


def check_finite_rows(X, y, path, block, first_line):
    """Refuse NaN or infinite values and labels, naming the file and the line, in the
    words of scikit-learn's check (which every gpusvm estimator would apply, without
    the line)."""
    for name, values in (("X", X.data), ("y", y)):
        bad = ~np.isfinite(values)
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            row = position if name == "y" else row_of_entry(X, position)
            what = "NaN" if np.isnan(values[position]) else f"infinity or a value too large for {values.dtype!r}"
            raise ValueError(f"{path}, {_line_of_row(block, row, first_line)}: Input {name} contains {what}.")


class NpzChunks:
    """``.npz`` files (one, or shards of one data set) as chunks of ``chunk_rows`` rows.

    Each file holds ``X`` (a dense C-order array, as ``numpy.savez(path, X=X, y=y)`` or
    ``numpy.savez_compressed`` writes it) or a CSR matrix written by
    :func:`scipy.sparse.save_npz`, and optionally ``y`` in the same archive (the layouts
    :func:`gpusvm.data_files.read_data` reads).  Other sparse formats (CSC, COO, BSR,
    DIA) cannot give rows without reading every one and are refused by name.

    Nothing is read whole: chunk ``i`` (``reader[i]``, and each chunk of a pass) reads
    its own rows of ``X`` and ``y`` (and of a CSR matrix's row pointers) straight out of
    the archive's members, in time proportional to its size, whatever ``i``: a stored
    member by seeking, a compressed one from the nearest of the checkpoints of its
    decompression, one every MiB of its bytes (zlib's state, 39 KiB each, kept once
    made: memory of 4% of the compressed members' uncompressed size, once a pass has
    read them).  Each member's CRC-32 is checked whenever a read reaches its end, and a
    file whose size or modification time has changed since it was first opened is
    refused (see ``FileFingerprint``).

    Parameters
    ----------
    paths : str, os.PathLike or a list of them
    chunk_rows : int, default=100_000
    """

    def __init__(self, paths, chunk_rows=100_000):
        _check_chunk_rows(chunk_rows)
        self.paths = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
        self.chunk_rows = int(chunk_rows)
        self._shards, self._chunks = None, None

    def __getstate__(self):  # the arrays are located again, and the checkpoints taken again, after unpickling
        return {**self.__dict__, "_shards": None, "_chunks": None}

    def _scan(self):
        if self._shards is None:
            shards = [_NpzShard(path) for path in self.paths]
            widths = {shard.shape[1] for shard in shards}
            if len(widths) > 1:
                raise ValueError(f"The .npz shards have different feature counts: {sorted(widths)}.")
            # (shard, first row) of every chunk; chunks do not cross shards
            self._chunks = [(shard, start) for shard in shards for start in range(0, shard.shape[0], self.chunk_rows)]
            self._shards = shards

    @property
    def n_rows(self):
        self._scan()
        return sum(shard.shape[0] for shard in self._shards)

    @property
    def n_features(self):
        self._scan()
        return self._shards[0].shape[1]

    def __len__(self):
        self._scan()
        return len(self._chunks)

    def __getitem__(self, index):
        self._scan()
        shard, start = self._chunks[index]
        return shard.rows(start, min(start + self.chunk_rows, shard.shape[0]))

    def chunk_origin(self, number):
        """Where chunk ``number`` comes from: the file and its rows (from 1), for an error about it."""
        self._scan()
        shard, start = self._chunks[number]
        return f"{shard.path}, rows {start + 1}-{min(start + self.chunk_rows, shard.shape[0])}"

    def __iter__(self):
        self._scan()
        for shard, start in self._chunks:
            yield shard.rows(start, min(start + self.chunk_rows, shard.shape[0]))


# A compressed member's decompression is checkpointed every this many of its bytes, so that
# a read from any offset decompresses at most this much before it; a checkpoint keeps
# zlib's state and window, 39 KiB (4% of the bytes it spans).
_CHECKPOINT_BYTES = 1 << 20
_READ_BYTES = 1 << 18  # the most of a member's stored bytes read from the file at a time
_SPARSE_MEMBERS = ("data.npy", "indices.npy", "indptr.npy", "shape.npy", "format.npy")


class _NpzShard:
    """One ``.npz`` file: its arrays located once, then rows read by range."""

    def __init__(self, path):
        self.path, self.lock = path, threading.Lock()
        self.fingerprint = FileFingerprint(path)
        try:
            self.fingerprint.opened()
            with open(path, "rb") as handle:
                with zipfile.ZipFile(handle) as archive:
                    infos = {info.filename: info for info in archive.infolist()}
                self._locate(handle, infos)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            raise  # as for any file, not a damaged one
        except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as error:
            raise ValueError(f"{path} is not a readable .npz file (damaged or truncated?): {error}") from None

    def _locate(self, handle, infos):
        path = self.path

        def array(name):
            return _NpyMember(path, handle, infos[name], name[: -len(".npy")])

        self.y = array("y.npy") if "y.npy" in infos else None
        if "X.npy" in infos:
            self.sparse, self.X = False, array("X.npy")
            self.shape = self.X.shape
            if len(self.shape) != 2:
                raise ValueError(f"{path}: X must be 2-D, got shape {self.shape}.")
            if self.X.fortran_order:
                raise ValueError(f"{path}: X is stored in Fortran order; save it C-contiguous to stream it.")
        elif "format.npy" in infos:  # scipy.sparse.save_npz
            matrix_format = array("format.npy").whole(handle).item()
            matrix_format = matrix_format.decode("ascii") if isinstance(matrix_format, bytes) else str(matrix_format)
            if matrix_format == "csr" and not set(_SPARSE_MEMBERS) <= set(infos):
                raise ValueError(f"{path} holds {sorted(infos)}; a save_npz CSR matrix has {list(_SPARSE_MEMBERS)}.")
            if matrix_format != "csr":
                raise ValueError(
                    f"{path} holds a {matrix_format.upper()} matrix (scipy.sparse.save_npz); NpzChunks reads the rows "
                    f"of a CSR matrix or of a dense X, and a {matrix_format.upper()} matrix cannot give its rows "
                    "without reading all of it. Convert the file once, e.g. scipy.sparse.save_npz(path, "
                    "scipy.sparse.load_npz(path).tocsr()) (keeping y), or read it whole (without chunk_rows)."
                )
            self.sparse = True
            self.shape = tuple(int(n) for n in array("shape.npy").whole(handle))
            self.data, self.indices, self.indptr = array("data.npy"), array("indices.npy"), array("indptr.npy")
            if len(self.shape) != 2 or self.indptr.shape != (self.shape[0] + 1,):
                raise ValueError(f"{path}: a CSR matrix of shape {self.shape} has {self.indptr.shape} row pointers.")
        else:
            raise ValueError(f"{path} holds {sorted(infos)}; expected X.npy (and y.npy) or a save_npz matrix.")
        if self.y is not None and self.y.shape != (self.shape[0],):
            raise ValueError(
                f"{path}: y has shape {self.y.shape}, but X has {self.shape[0]} rows: one label a row is needed."
            )

    def rows(self, start, stop):
        """Rows ``start .. stop - 1`` as ``(X, y)``."""
        with self.lock:
            self.fingerprint.opened()
            return self._rows(start, stop)

    def _rows(self, start, stop):
        with open(self.path, "rb") as handle:
            y = self.y.values(handle, start, stop) if self.y is not None else None
            if not self.sparse:
                width = self.shape[1]
                return self.X.values(handle, start * width, stop * width).reshape(stop - start, width), y
            indptr = self.indptr.values(handle, start, stop + 1)
            low, high = int(indptr[0]), int(indptr[-1])
            if not 0 <= low <= high <= self.data.shape[0]:
                raise ValueError(
                    f"{self.path}: the CSR row pointers of rows {start} to {stop - 1} are damaged "
                    f"({low} to {high}, of {self.data.shape[0]} entries)."
                )
            X = sp.csr_matrix(
                (self.data.values(handle, low, high), self.indices.values(handle, low, high), indptr - indptr[0]),
                shape=(stop - start, self.shape[1]),
            )
            return X, y


class _NpyMember:
    """An ``.npy`` array in a zip archive: its header, and its values by flat index."""

    def __init__(self, path, handle, info, name):
        self.path, self.name = path, name
        self.member = _ZipMember(path, handle, info)
        prelude = bytes(self.member.read(handle, 0, min(12, self.member.size)))
        stream = io.BytesIO(prelude)
        try:
            version = np.lib.format.read_magic(stream)
            readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in readers:
                raise ValueError(f".npy format version {version} is not streamed; save with NumPy's default")
            length_bytes = 2 if version == (1, 0) else 4
            self.offset = 8 + length_bytes + int.from_bytes(prelude[8 : 8 + length_bytes], "little")
            stream = io.BytesIO(bytes(self.member.read(handle, 0, min(self.offset, self.member.size))))
            np.lib.format.read_magic(stream)
            self.shape, self.fortran_order, self.dtype = readers[version](stream)
        except ValueError as error:
            raise ValueError(f"{path}: {name} is not a readable .npy array: {error}.") from None
        if self.dtype.hasobject:
            raise ValueError(
                f"{path}: {name} holds Python objects, which are not read (that would need pickle); "
                "save numbers or strings."
            )
        expected = self.offset + math.prod(self.shape) * self.dtype.itemsize
        if expected != self.member.size:
            raise ValueError(
                f"{path}: {name} should take {expected} bytes for its shape {self.shape}, but takes "
                f"{self.member.size} (damaged or truncated?)."
            )

    def values(self, handle, start, stop):
        """The values ``start .. stop - 1`` of the flattened array."""
        size = self.dtype.itemsize
        return np.frombuffer(self.member.read(handle, self.offset + start * size, (stop - start) * size), self.dtype)

    def whole(self, handle):
        return self.values(handle, 0, math.prod(self.shape)).reshape(self.shape)


class _ZipMember:
    """A member of a zip archive read from any offset in time proportional to the bytes
    read: a stored member by seeking, a deflated one (``numpy.savez_compressed``,
    ``save_npz``) from the nearest checkpoint of its decompression (one each
    ``_CHECKPOINT_BYTES``, taken as reads first pass them), or from where the last read
    ended.  Checkpoints carry the CRC-32 of the bytes before them, so every read that
    reaches the member's end checks its CRC."""

    def __init__(self, path, handle, info):
        self.path, self.name, self.size, self.crc = path, info.filename, info.file_size, info.CRC
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or info.flag_bits & 0x1:
            raise ValueError(
                f"{path}: {info.filename} is encrypted or compressed by zip method "
                f"{info.compress_type}; NpzChunks reads stored and deflated members (as numpy.savez, "
                "numpy.savez_compressed and scipy.sparse.save_npz write them)."
            )
        self.deflated = info.compress_type == zipfile.ZIP_DEFLATED
        handle.seek(info.header_offset)
        header = handle.read(30)  # the local file header, whose name and extra field lengths can differ
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"no local header for {info.filename}")
        name_length, extra_length = int.from_bytes(header[26:28], "little"), int.from_bytes(header[28:], "little")
        first = info.header_offset + 30 + name_length + extra_length
        self.end = first + info.compress_size
        # checkpoint k: the member's bytes from offsets[k] on come from the file at
        # states[k] = (file offset, decompressor there, CRC-32 of the bytes before)
        self.offsets, self.states = [0], [(first, self._decompressor(), 0)]
        self.cursor = None  # where the last read ended: (offset, file offset, decompressor, CRC-32)

    def _decompressor(self):
        return zlib.decompressobj(-zlib.MAX_WBITS) if self.deflated else None

    def read(self, handle, offset, size):
        """``size`` bytes from ``offset`` on, as a bytearray."""
        try:
            return self._read(handle, offset, size)
        except (OSError, zlib.error) as error:
            raise ValueError(
                f"{self.path} is not a readable .npz file (damaged or truncated?): {self.name}: {error}"
            ) from None

    def _read(self, handle, offset, size):
        out, stop = bytearray(size), offset + size
        if not size:
            return out
        k = bisect.bisect_right(self.offsets, offset) - 1
        position, (file_offset, decompressor, crc) = self.offsets[k], self.states[k]
        if self.cursor is not None and position <= self.cursor[0] <= offset:
            (position, file_offset, decompressor, crc), self.cursor = self.cursor, None
        elif decompressor is not None:
            decompressor = decompressor.copy()
        handle.seek(file_offset)
        pending = b""
        while position < stop:
            boundary = self.offsets[-1] + _CHECKPOINT_BYTES  # the next checkpoint (none is past it yet)
            limit = min(stop, boundary) - position
            if not pending:
                pending = handle.read(max(0, min(_READ_BYTES, self.end - handle.tell())))
                if not pending:
                    raise ValueError(f"{self.path} is truncated: its member {self.name} ends early.")
            if decompressor is None:
                piece, pending = pending[:limit], pending[limit:]
            else:
                before = len(pending)
                piece = decompressor.decompress(pending, limit)
                pending = decompressor.unconsumed_tail
                if not piece and (decompressor.eof or len(pending) == before):
                    raise ValueError(f"{self.path} is truncated: its member {self.name} ends early.")
            crc = zlib.crc32(piece, crc)
            skip = max(0, offset - position)
            if skip < len(piece):
                out[position + skip - offset : position + len(piece) - offset] = piece[skip:]
            position += len(piece)
            if position == boundary:
                self.offsets.append(position)
                self.states.append((handle.tell() - len(pending), decompressor.copy() if decompressor else None, crc))
        if position == self.size and crc != self.crc:
            raise ValueError(f"{self.path} is damaged: its member {self.name} fails its CRC-32 check.")
        self.cursor = (position, handle.tell() - len(pending), decompressor, crc)
        return out
