"""A binary cache of a text file's parsed chunks, so that every pass after the first reads
arrays at the disk's speed instead of parsing text again (as Vowpal Wabbit's ``--cache_file``).

The file, in order:

* ``MAGIC``, then a JSON header: the source (its path, size and modification time) and the
  settings the chunks were parsed with; a cache whose header does not match its reader is
  never read;
* one record a chunk, in the order of the file: its length, the CRC-32 of its bytes, a
  small JSON of its arrays' dtypes and lengths, then the arrays (a CSR matrix's ``data``,
  ``indices`` and ``indptr``, and the labels), each checked against its CRC-32 when read;
* an index: where each record starts and what the reader learned of the whole file (rows,
  width, lines), its CRC-32, where it starts, and ``END``.

A cache is written beside its final path (``.partial``) and renamed there once complete, so
a cache at its path is whole unless something damaged it afterwards; a damaged or truncated
one is found by the index's and the records' CRC-32s. A file at the cache's path that is
not a gpusvm cache is never overwritten.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np

MAGIC = b"GPUSVM-CHUNKS-1\n"
END = b"GPUSVM-CHUNKS-END\n"
FORMAT = 1
_LENGTH = struct.Struct("<Q")
_RECORD = struct.Struct("<QI")  # the payload's length and CRC-32
_TRAILER = struct.Struct("<IQ")  # the index's CRC-32 and where it starts
ARRAYS = ("data", "indices", "indptr", "y")
# Free space kept on the cache's disk beyond its estimated size, for everything else there.
SPARE_BYTES = 256 * 2**20


class CacheMismatch(Exception):
    """A cache that cannot be read for its reader: another source, other settings, or
    damaged bytes. Its message says which."""


def source_facts(path, settings):
    """What a cache's header must hold for ``path`` read with ``settings`` (a dict of JSON
    values: the reader's parse settings)."""
    stat = os.stat(path)
    return {
        "format": FORMAT,
        "source": str(Path(path).resolve()),
        "size": stat.st_size,
        "modified_ns": stat.st_mtime_ns,
        "settings": settings,
    }


def is_chunk_cache(path):
    """Whether ``path`` is a file that starts as a gpusvm chunk cache (a partial one too)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def check_cache_path(path, source):
    """Refuse a cache path that would overwrite an input: the ``source`` file itself, or an
    existing file that is not a gpusvm chunk cache."""
    path = Path(path)
    if path.exists() and path.resolve() == Path(source).resolve():
        raise ValueError(f"cache_file={str(path)!r} is the file being read; give the cache a path of its own.")
    if path.exists() and (not path.is_file() or not is_chunk_cache(path)):
        raise ValueError(
            f"cache_file={str(path)!r} exists and is not a gpusvm chunk cache; it is left as it is. "
            "Give the cache another path (or remove that file)."
        )


class CacheReader:
    """The chunks of a complete cache, read by number.

    Parameters
    ----------
    path : path of the cache
    facts : dict
        :func:`source_facts` of the reader: the header must equal it.

    Raises
    ------
    CacheMismatch
        When the header names another source or other settings, or the index is damaged.
    """

    def __init__(self, path, facts):
        self.path = Path(path)
        with open(self.path, "rb") as handle:
            if handle.read(len(MAGIC)) != MAGIC:
                raise CacheMismatch("it is not a gpusvm chunk cache")
            header = _read_json(handle, "its header")
            mismatch = _first_difference(header, facts)
            if mismatch:
                raise CacheMismatch(mismatch)
            size = handle.seek(0, os.SEEK_END)
            if size < len(MAGIC) + _TRAILER.size + len(END):
                raise CacheMismatch("it is truncated")
            handle.seek(size - _TRAILER.size - len(END))
            trailer = handle.read(_TRAILER.size + len(END))
            if trailer[_TRAILER.size :] != END:
                raise CacheMismatch("it is truncated (its index is missing)")
            crc, start = _TRAILER.unpack(trailer[: _TRAILER.size])
            if not len(MAGIC) < start < size:
                raise CacheMismatch("its index is damaged")
            handle.seek(start)
            raw = handle.read(size - _TRAILER.size - len(END) - start)
            if zlib.crc32(raw) != crc:
                raise CacheMismatch("its index is damaged (CRC-32 mismatch)")
        index = json.loads(raw[_LENGTH.size :])
        self.offsets, self.summary = index["offsets"], index["summary"]

    def __len__(self):
        return len(self.offsets)

    def arrays(self, number):
        """Chunk ``number``'s arrays, as a dict of ``ARRAYS``: writable, checked against
        the record's CRC-32.

        Raises
        ------
        CacheMismatch
            When the record's bytes are damaged.
        """
        with open(self.path, "rb") as handle:
            handle.seek(self.offsets[number])
            head = handle.read(_RECORD.size)
            if len(head) < _RECORD.size:
                raise CacheMismatch(f"chunk {number}'s record is truncated")
            length, crc = _RECORD.unpack(head)
            payload = bytearray(length)
            if handle.readinto(payload) != length:
                raise CacheMismatch(f"chunk {number}'s record is truncated")
        if zlib.crc32(payload) != crc:
            raise CacheMismatch(f"chunk {number}'s record is damaged (CRC-32 mismatch)")
        (meta_length,) = _LENGTH.unpack_from(payload)
        meta = json.loads(bytes(payload[_LENGTH.size : _LENGTH.size + meta_length]))
        if meta["chunk"] != number:
            raise CacheMismatch(f"chunk {number}'s record holds chunk {meta['chunk']}")
        view, position, arrays = memoryview(payload), _aligned(_LENGTH.size + meta_length), {}
        for name in ARRAYS:
            dtype, count = np.dtype(meta[name][0]), meta[name][1]
            arrays[name] = np.frombuffer(view, dtype=dtype, count=count, offset=position)
            position = _aligned(position + dtype.itemsize * count)
        return arrays


class CacheWriter:
    """Writes a cache record by record, in chunk order, to ``path`` + ``.partial``;
    :meth:`finish` writes the index and renames it to ``path``, :meth:`abandon` removes it.

    The disk's free space is checked before the first record and again as the records
    grow (``estimated_bytes``: the size the whole cache is expected to reach, updated by
    :meth:`expect`); too little raises an ``OSError`` that names the cache.
    """

    def __init__(self, path, facts, estimated_bytes=0):
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.offsets, self.estimated = [], int(estimated_bytes)
        self._check_space(self.estimated)
        self.handle = open(self.partial, "wb")
        self.handle.write(MAGIC)
        _write_json(self.handle, facts)

    def expect(self, estimated_bytes):
        """The whole cache's expected size, re-estimated; checked against the free space."""
        if estimated_bytes > self.estimated:
            self._check_space(estimated_bytes - self.handle.tell())
            self.estimated = int(estimated_bytes)

    def add(self, number, arrays):
        """Chunk ``number``'s arrays (a dict of ``ARRAYS``), after chunk ``number - 1``'s."""
        if number != len(self.offsets):
            raise ValueError(f"the cache takes chunk {len(self.offsets)} next, not chunk {number}")
        meta = {"chunk": number, **{name: [arrays[name].dtype.str, int(arrays[name].size)] for name in ARRAYS}}
        meta_bytes = json.dumps(meta).encode()
        parts = [_LENGTH.pack(len(meta_bytes)), meta_bytes]
        position = _LENGTH.size + len(meta_bytes)
        for name in ARRAYS:
            parts.append(bytes(_aligned(position) - position))
            data = np.ascontiguousarray(arrays[name]).tobytes()
            parts.append(data)
            position = _aligned(position) + len(data)
        payload = b"".join(parts)
        self.offsets.append(self.handle.tell())
        self.handle.write(_RECORD.pack(len(payload), zlib.crc32(payload)))
        self.handle.write(payload)

    def finish(self, summary):
        """Write the index (``summary``: what the reader learned of the whole source) and
        put the cache at its path."""
        start = self.handle.tell()
        raw = _json_bytes({"offsets": self.offsets, "summary": summary})
        self.handle.write(raw)
        self.handle.write(_TRAILER.pack(zlib.crc32(raw), start))
        self.handle.write(END)
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.partial, self.path)

    def abandon(self):
        """Close and remove the partial cache."""
        self.handle.close()
        self.partial.unlink(missing_ok=True)

    def _check_space(self, needed):
        free = shutil.disk_usage(self.partial.parent).free
        if needed + SPARE_BYTES > free:
            raise OSError(
                f"Not enough disk space for the chunk cache {self.path}: it needs about {_megabytes(needed)} "
                f"and {_megabytes(free)} are free there. Give cache_file a path on a disk with more room, "
                "or cache_file=None to parse the text every pass."
            )


def _aligned(position):
    return -(-position // 8) * 8


def _megabytes(n_bytes):
    return f"{n_bytes / 2**20:,.0f} MiB"


def _json_bytes(value):
    raw = json.dumps(value).encode()
    return _LENGTH.pack(len(raw)) + raw


def _write_json(handle, value):
    handle.write(_json_bytes(value))


def _read_json(handle, what):
    head = handle.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise CacheMismatch(f"{what} is truncated")
    (length,) = _LENGTH.unpack(head)
    raw = handle.read(length)
    try:
        return json.loads(raw)
    except ValueError:
        raise CacheMismatch(f"{what} is damaged") from None


def _first_difference(header, facts):
    """Why a cache's ``header`` does not fit the reader's ``facts``, or None."""
    if header.get("format") != facts["format"]:
        return f"it is of format {header.get('format')!r}, this version reads {facts['format']}"
    if header.get("source") != facts["source"]:
        return f"it caches {header.get('source')}, not {facts['source']}"
    if (header.get("size"), header.get("modified_ns")) != (facts["size"], facts["modified_ns"]):
        return "its source has changed since it was written (another size or modification time)"
    if header.get("settings") != facts["settings"]:
        return f"it was parsed with other settings ({header.get('settings')}, not {facts['settings']})"
    return None
