"""Training from ``(X, y)`` chunks that never sit in memory together: what the streamed
``fit_chunks`` of the linear and online estimators share.

A chunk source is any iterable of ``(X, y)`` pairs (NumPy, SciPy CSR, CuPy or cupyx
``X``): a list, a generator, or a file reader such as
:class:`gpusvm.data_files.SvmlightChunks`. A *re-iterable* one (``iter`` gives a fresh
pass each time: a list, a reader) can be read more than once, for several epochs or to
count its rows and classes first; a one-shot iterator is read once.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import _get_feature_names

from .._backend import is_cupy_array, issparse, namespace_of, to_numpy


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

    def _checked(self, chunk, number):
        """:func:`check_chunk`, and the same width as the first chunk (rows or none), and
        the same column names in the same order where both have names."""
        X, y, names = check_chunk(chunk, number)
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
        return X, y


def check_chunk(chunk, number):
    """``(X, y, names)`` of one chunk: X as an array, y on the host, and X's column names
    (a DataFrame's) or None; names the chunk when it is not a pair."""
    try:
        X, y = chunk
    except (TypeError, ValueError):
        raise ValueError(f"Chunk {number} is not an (X, y) pair: got a {type(chunk).__name__}.") from None
    if y is None:
        raise ValueError(f"Chunk {number} has no labels (y is None); training needs them.")
    names = _get_feature_names(X)
    if not (issparse(X) or is_cupy_array(X)):
        X = np.asarray(X)
    return X, np.asarray(to_numpy(y)), names


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
