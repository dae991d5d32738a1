"""Where gpusvm writes a file (a model, predictions): checks made before the work, so
that a long fit never ends in a path it cannot or must not write.

A file is replaced only when it is one gpusvm writes (``replaceable``: a model file,
a predictions file) or empty, or when the caller asks (``overwrite``); never when it is
one of the inputs, and never when it is read-only (no write permission for anyone, so
that even root keeps it). A symbolic link is written through: the file it points to is
the one checked and written.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_target(path):
    """The file a write to ``path`` changes: ``path``, or the file its symbolic links
    lead to (which may not exist yet)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def same_file(a, b):
    """Whether paths ``a`` and ``b`` name the same file (through links, hard or symbolic)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def is_read_only(path):
    """Whether the existing file ``path`` may not be written: no write permission for
    this process, or none for anyone (root may write anything; a file no one may write
    was meant to stay as it is)."""
    return not os.access(path, os.W_OK) or not os.stat(path).st_mode & 0o222


def check_output_path(
    path, *, what, kind, replaceable, overwrite=False, inputs=(), overwrite_hint="overwrite=True", special=False
):
    """``path`` as a :class:`~pathlib.Path` that a write of ``what`` may go to.

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        What is written (``'the model'``), for the messages.
    kind : str
        The files ``replaceable`` accepts (``'a gpusvm model file'``), for the messages.
    replaceable : callable
        ``replaceable(target) -> bool``: whether an existing file is one of ``what``'s
        kind, which a new one may replace.
    overwrite : bool
        Replace any file that is not an input and not read-only.
    inputs : sequence of (name, path)
        Files the work reads (``('DATA', 'train.svm')``): never replaced.
    overwrite_hint : str
        How the caller asks to overwrite, for the message.
    special : bool
        Whether an existing device or pipe (``/dev/null``) may be written to, in place
        (predictions may; a model, written beside and renamed, may not).

    Raises
    ------
    IsADirectoryError, FileNotFoundError, PermissionError, FileExistsError
        Each naming the path and what to give instead. ``ValueError`` for an input.
    """
    if str(path) == "":
        raise FileNotFoundError(f"Cannot write {what} to an empty path; give a file name.")
    if str(path).endswith(os.sep) and not Path(path).is_dir():
        raise FileNotFoundError(
            f"Cannot write {what} to {str(path)!r}: a path that ends with {os.sep!r} names a folder; give a file name."
        )
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"The path {str(path)!r} for {what} is a folder; give a file name, e.g. {str(path / 'out')!r}."
        )
    for name, source in inputs:
        if same_file(path, source):
            also = "" if str(source) == str(path) else f" ({str(source)!r})"
            raise SameFileError(
                f"{str(path)!r} is the {name} file{also}: writing {what} there would replace it; "
                f"give another file name for {what}."
            )
    try:
        target = write_target(path)
        folder = target.resolve().parent
    except (RuntimeError, OSError) as error:  # a loop of symbolic links
        raise FileNotFoundError(f"Cannot write {what} to {str(path)!r}: {error}.") from None
    if not folder.is_dir():
        raise FileNotFoundError(f"Cannot write {what} to {str(path)!r}: the folder {str(folder)!r} does not exist.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"Cannot write {what} to {str(path)!r}: the folder {str(folder)!r} is not writable.")
    if target.exists():
        if not target.is_file():
            if special:
                return path
            raise FileExistsError(f"Cannot write {what} to {str(path)!r}: it is not a regular file.")
        if is_read_only(target):
            raise PermissionError(
                f"Cannot write {what} to {str(path)!r}: the file is read-only (make it writable "
                "first, e.g. chmod u+w, or give another file name)."
            )
        if not overwrite and target.stat().st_size and not replaceable(target):
            raise FileExistsError(
                f"{str(path)!r} exists and is not {kind}; not replacing it with {what} ({overwrite_hint} replaces it)."
            )
    return path


class SameFileError(ValueError):
    """The output path names one of the inputs."""
