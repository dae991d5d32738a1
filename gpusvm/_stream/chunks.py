"""Training from ``(X, y)`` chunks that never sit in memory together: what the streamed
``fit_chunks`` of the linear and online estimators share.

A chunk source is any iterable of ``(X, y)`` pairs (NumPy, SciPy CSR, CuPy or cupyx
``X``): a list, a generator, or a file reader such as
:class:`gpusvm.data_files.SvmlightChunks`. A *re-iterable* one (``iter`` gives a fresh
pass each time: a list, a reader) can be read more than once, for several epochs or to
count its rows and classes first; a one-shot iterator is read once.

Every chunk read through :class:`ChunkSource` is a :class:`NamedChunk`: an error found
in it, when it is read or later when a trainer checks it (:func:`errors_named`), names
it by its number and, for a file reader, by the file and lines it came from.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import _get_feature_names, _num_samples

from .._backend import is_cupy_array, issparse, namespace_of, to_numpy
from .._validation import check_feature_scale, check_X_y

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@contextlib.contextmanager
def chunks_through_cache(chunks, cache_file, n_passes):
    """``chunks`` as a streamed fit reads them: a text reader (one with ``with_cache``: a
    :class:`gpusvm.data_files.SvmlightChunks` without a cache of its own) that the fit reads
    more than once goes through a chunk cache, so that its later passes read arrays, not text.

    Parameters
    ----------
    chunks : iterable of (X, y)
    cache_file : 'auto', str, os.PathLike or None
        'auto': a cache in a folder of its own in the temporary folder when ``n_passes`` is
        more than one, removed on leaving (optional: a warning where the disk has no room);
        a path: the cache there, kept; None: no cache.
    n_passes : int
        The passes the fit makes over the chunks, at least.
    """
    if cache_file is None or not hasattr(chunks, "with_cache") or chunks.cache_file is not None:
        yield chunks
    elif isinstance(cache_file, str) and cache_file == "auto":
        if n_passes < 2:
            yield chunks
            return
        folder = tempfile.mkdtemp(prefix="gpusvm-chunks-")
        try:
            yield chunks.with_cache(Path(folder) / "chunks.cache", optional=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        yield chunks.with_cache(cache_file)


class ChunkSource:
    """A user's chunks, with the passes the streamed trainers need.

    Parameters
    ----------
    chunks : iterable of (X, y)
    """

    def __init__(self, chunks):
        try:
            self.chunks = chunks
            self.reiterable = iter(chunks) is not chunks
        except TypeError:
            raise TypeError(f"chunks must be an iterable of (X, y) pairs, got a {type(chunks).__name__}.") from None
        self._used = False
        self._width = None  # (n_features, number) of the first chunk
        self._names = None  # (column names or None, number) of the first chunk

    @property
    def feature_names(self):
        """The first chunk's column names (a DataFrame's), or None: what ``feature_names_in_``
        is after a fit on these chunks."""
        return None if self._names is None else self._names[0]

    def passes(self, what):
        """A fresh iterator over the chunks; a one-shot iterator gives its one pass once,
        and asking for a second names ``what`` needed it."""
        if not self.reiterable:
            if self._used:
                raise ValueError(
                    f"{what} needs another pass over the chunks, but they come from a one-shot iterator. "
                    "Pass a list or a re-iterable reader (gpusvm.data_files.SvmlightChunks, NpzChunks)."
                )
            self._used = True
        for number, chunk in enumerate(self.chunks):
            yield self._checked(chunk, number)

    def check_passes(self, reasons):
        """Refuse, before reading anything, a fit that needs more passes than the source
        gives: ``reasons`` names what needs each pass (one entry a pass)."""
        if not self.reiterable and len(reasons) > 1:
            raise ValueError(
                f"{reasons[-1]} needs another pass over the chunks, but they come from a one-shot iterator, "
                f"read once; this fit reads them {len(reasons)} times ({', '.join(dict.fromkeys(reasons))}). "
                "Pass a list or a re-iterable reader (gpusvm.data_files.SvmlightChunks, NpzChunks)."
            )

    def reads_arrays(self):
        """Whether the chunks come as arrays from a file (a text reader's chunk cache), not
        from text to parse: reading them mostly waits on the disk, outside Python's GIL."""
        return getattr(self.chunks, "cache_file", None) is not None

    def knows_n_rows(self):
        """Whether the source tells its number of rows without a pass of ours."""
        return getattr(self.chunks, "n_rows", None) is not None

    def n_rows(self):
        """The number of rows: the reader's ``n_rows`` when it knows it, else one pass."""
        known = getattr(self.chunks, "n_rows", None)
        if known is not None:
            return int(known)
        return sum(X.shape[0] for X, _ in self.passes("counting the rows (for lam = 1 / (C n))"))

    def label_counts(self, what="finding the classes (or pass classes=...)", rows_read=None):
        """The sorted labels of every chunk and the rows of each (one pass);
        ``rows_read(n)``, if given, is called with each chunk's rows (a progress bar)."""
        labels, counts, first_kind = [], [], None
        for number, (_, y) in enumerate(self.passes(what)):
            if rows_read is not None:
                rows_read(len(y))
            if not y.size:
                continue
            kind = "numbers" if y.dtype.kind in "biuf" else "strings or objects"
            if first_kind is None:
                first_kind = (kind, number)
            elif kind != first_kind[0]:
                raise ValueError(
                    f"Chunk {number} has labels that are {kind}, but chunk {first_kind[1]}'s are {first_kind[0]}: "
                    "every chunk's labels must be of one kind."
                )
            if kind == "numbers" and not np.isfinite(y).all():  # NaN would pass np.unique as a class
                bad = "NaN" if np.isnan(y).any() else "infinity"
                raise ValueError(f"{_capitalized(self.describe(number))}: Input y contains {bad}.")
            chunk_labels, chunk_counts = np.unique(y, return_counts=True)
            labels.append(chunk_labels)
            counts.append(chunk_counts)
        if not labels:
            return np.array([]), np.array([], dtype=np.int64)
        classes, position = np.unique(np.concatenate(labels), return_inverse=True)
        return classes, np.bincount(position, weights=np.concatenate(counts)).astype(np.int64)

    def classes(self):
        """The sorted labels of every chunk (one pass)."""
        return self.label_counts()[0]

    def random_access(self):
        """Whether chunk ``i`` can be read on its own (``len`` and ``source[i]``), cheaply
        (a reader of a compressed file says ``seekable = False``)."""
        return (
            hasattr(self.chunks, "__getitem__")
            and hasattr(self.chunks, "__len__")
            and getattr(self.chunks, "seekable", True)
        )

    def chunk(self, index):
        return self._checked(self.chunks[index], index)

    def describe(self, number):
        """``chunk 3``, with the file and lines it came from when the source is a file
        reader (its ``chunk_origin``): what an error about the chunk names."""
        origin = getattr(self.chunks, "chunk_origin", None)
        return f"chunk {number} ({origin(number)})" if callable(origin) else f"chunk {number}"

    def _checked(self, chunk, number):
        """:func:`check_chunk`, as many labels as rows, the same width as the first chunk
        (rows or none), and the same column names in the same order where both have
        names: a :class:`NamedChunk`."""
        X, y, names = check_chunk(chunk, number)
        if X.ndim and y.ndim and X.shape[0] != y.shape[0]:
            raise ValueError(
                f"{_capitalized(self.describe(number))} has {X.shape[0]} rows in X but {y.shape[0]} labels in y: "
                "every row of a chunk needs one label."
            )
        if self._names is None:
            self._names = (names, number)
        elif names is not None and self._names[0] is not None and not np.array_equal(names, self._names[0]):
            first_names, first = self._names
            raise ValueError(
                f"Chunk {number} has the columns {_listed(names)}, but chunk {first} has {_listed(first_names)}: "
                "every chunk must have the same features, in the same order."
            )
        if X.ndim == 2:
            if self._width is None:
                self._width = (X.shape[1], number)
            elif X.shape[1] != self._width[0]:
                width, first = self._width
                raise ValueError(
                    f"Chunk {number} has {X.shape[1]} features, but chunk {first} has {width}: "
                    "every chunk must have the same features."
                )
        return NamedChunk(X, y, self, number)


class NamedChunk(tuple):
    """An ``(X, y)`` pair (it unpacks as one) that knows where it came from: chunk
    ``number`` of ``source`` (a :class:`ChunkSource`); ``name`` is what an error about
    it says."""

    def __new__(cls, X, y, source, number):
        chunk = super().__new__(cls, (X, y))
        chunk.source, chunk.number = source, number
        return chunk

    @property
    def name(self):
        return self.source.describe(self.number)


@contextlib.contextmanager
def errors_named(chunk):
    """A ValueError raised in the block (checking ``chunk``) begins with the chunk's
    name when it is a :class:`NamedChunk`: ``Chunk 3 (data.svm, lines 301-400): ...``."""
    try:
        yield
    except ValueError as error:
        if isinstance(chunk, NamedChunk) and error.args and isinstance(error.args[0], str):
            error.args = (f"{_capitalized(chunk.name)}: {error.args[0]}", *error.args[1:])
        raise


def _capitalized(text):
    return text[:1].upper() + text[1:]


def check_chunk(chunk, number):
    """``(X, y, names)`` of one chunk: X as an array, y on the host, and X's column names
    (a DataFrame's) or None; names the chunk when it is not a pair."""
    try:
        X, y = chunk
    except (TypeError, ValueError):
        raise ValueError(f"Chunk {number} is not an (X, y) pair: got a {type(chunk).__name__}.") from None
    if y is None:
        raise ValueError(f"Chunk {number} has no labels (y is None); training needs them.")
    if type(X) is np.ndarray or issparse(X) or is_cupy_array(X):
        names = None  # no columns to name (scikit-learn's probe for a DataFrame costs a tenth of a millisecond)
    else:
        names = _get_feature_names(X)
        X = np.asarray(X)
    return X, np.asarray(to_numpy(y)), names


def check_chunk_X_y(estimator, X, y, *, reset):
    """:func:`gpusvm._validation.check_X_y` of a streamed chunk, at a cost in proportion
    to the chunk.

    scikit-learn's ``validate_data`` costs about a millisecond a call whatever the rows
    (its probes for DataFrames and the like): more than the steps of a chunk of a few
    rows.  A chunk that needs nothing from it, a C-order float32 or float64 NumPy array
    or a SciPy CSR matrix of finite values, as wide as the estimator's first chunk, with
    one numeric, finite label a row, is checked here in one pass over its values; any
    other chunk, and the first (which sets ``n_features_in_``), goes through
    ``check_X_y``, whose conversions and errors (scikit-learn's wording) apply.
    """
    if reset or not _plain_chunk(X, y, getattr(estimator, "n_features_in_", None)):
        return check_X_y(estimator, X, y, reset=reset)
    check_feature_scale(X)
    return X, y


def _plain_chunk(X, y, width):
    """Whether ``(X, y)`` passes ``check_X_y`` unchanged (see :func:`check_chunk_X_y`)."""
    if type(y) is not np.ndarray or y.ndim != 1 or y.dtype.kind not in "biuf":
        return False
    if X.ndim != 2 or X.shape[0] != y.shape[0] or not X.shape[0] or X.shape[1] != width or X.dtype not in _FLOATS:
        return False
    if type(X) is np.ndarray:
        values = X if X.flags.c_contiguous else None
    elif isinstance(X, (sp.csr_matrix, sp.csr_array)):
        values = X.data
    else:
        return False
    return (
        values is not None and bool(np.isfinite(values).all()) and (y.dtype.kind != "f" or bool(np.isfinite(y).all()))
    )


def _listed(names, shown=6):
    names = [str(name) for name in names]
    return ", ".join(names[:shown]) + (f" ... ({len(names)} in all)" if len(names) > shown else "")


def aligned_chunks(pairs, multiple):
    """The rows of ``pairs`` again, regrouped so that every chunk but the last holds a
    multiple of ``multiple`` rows: the remainder of a chunk is carried to the next, so
    mini-batches fall where they would in the concatenated data."""
    pending = None
    for X, y in pairs:
        if pending is not None:
            X, y = _stack(pending[0], X), np.concatenate([pending[1], y])
            pending = None
        whole = X.shape[0] - X.shape[0] % multiple
        if whole < X.shape[0]:
            pending = (X[whole:], y[whole:])
        if whole:
            yield X[:whole], y[:whole]
    if pending is not None:
        yield pending


def _stack(top, bottom):
    if issparse(top) or issparse(bottom):
        if is_cupy_array(top) or is_cupy_array(bottom):
            import cupyx.scipy.sparse as cusparse

            return cusparse.vstack([cusparse.csr_matrix(top), cusparse.csr_matrix(bottom)]).tocsr()
        return sp.vstack([sp.csr_matrix(top), sp.csr_matrix(bottom)]).tocsr()
    return namespace_of(top).concatenate([top, namespace_of(top).asarray(bottom)])


def check_partial_fit_lengths(X, y):
    """Refuse a ``partial_fit`` chunk whose X and y differ in rows, saying so (scikit-learn's
    "inconsistent numbers of samples" names neither); odd inputs are left to ``check_X_y``."""
    try:
        n_rows, n_labels = _num_samples(X), _num_samples(y)
    except TypeError:
        return
    if n_rows != n_labels:
        raise ValueError(
            f"partial_fit got a chunk of {n_rows} rows in X but {n_labels} labels in y: every row of a chunk "
            "needs one label. The chunk was not learned from; the model is as it was."
        )
