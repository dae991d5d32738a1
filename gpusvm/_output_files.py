"""Where and how gpusvm writes a file (a model, predictions).

Checks made before the work, so that a long fit never ends in a path it cannot or must
not write: a file is replaced only when it is one gpusvm writes (``replaceable``: a model
file, a predictions file gpusvm marked) or empty, or when the caller asks
(``overwrite``); never when it is one of the inputs, and never when it is read-only (no
write permission for anyone, so that even root keeps it). A symbolic link is written
through: the file it points to is the one checked and written.

Writes go to a temporary file beside the target, ``.NAME.PID.XXXXXXXX.tmp`` (``NAME``
shortened where the folder's limit on a name's length requires), which is flushed to disk
and renamed over the target: a reader, an error or a Ctrl-C finds the old file or the new
one, never half of one. A writer killed outright (SIGKILL, power loss) can leave its
temporary file; the next write to the same path removes those whose process has ended.

A file that carries no structure of its own (predictions: a label or numbers a line, as a
file of the user's own labels is) is marked when written: an extended attribute,
``user.gpusvm.output``, holds what it is and the SHA-256 of its bytes, so that a later
write replaces it only while it is still, byte for byte, what gpusvm wrote. The mark
changes nothing a reader sees; where the file system keeps no extended attributes (or a
copy drops them), the file is not recognised and the caller's ``overwrite`` replaces it.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import tempfile
from pathlib import Path

MARK_ATTRIBUTE = "user.gpusvm.output"
DEFAULT_NAME_MAX = 255  # bytes, where the folder does not say (os.pathconf)
_TEMPORARY_SUFFIX = ".tmp"
_RANDOM_CHARACTERS = 8  # what tempfile.mkstemp puts between its prefix and suffix


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
    length, longest = len(os.fsencode(path.name)), name_max(path.parent)
    if length > longest:
        raise OSError(
            f"Cannot write {what} to {str(path)!r}: its file name is {length} bytes long, and the folder "
            f"{str(path.parent)!r} takes names of at most {longest} bytes; give a shorter name."
        )
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
                f"{str(path)!r} exists and is not {kind}; not replacing it with {what}: "
                f"pass {overwrite_hint} to replace it, or give another path."
            )
    return path


class SameFileError(ValueError):
    """The output path names one of the inputs."""


# --- writing: a temporary file beside the target, renamed over it --------------------


def name_max(folder):
    """The longest file name, in bytes, that ``folder`` takes."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows), or no answer
        return DEFAULT_NAME_MAX


def write_file(path, data, *, mark=None):
    """Write the bytes ``data`` to ``path``: in place to an existing device or pipe
    (``/dev/null``), else as :func:`write_atomically` does, with its ``mark``."""
    target = write_target(path)
    if target.exists() and not target.is_file():
        with open(target, "wb") as handle:
            handle.write(data)
        return
    write_atomically(target, lambda handle: handle.write(data), mark=mark)


def write_atomically(path, write, *, mark=None):
    """Write a file through ``write(handle)`` (a binary file object, seekable) into a
    temporary file in ``path``'s folder, flush it to disk, and rename it over ``path``.

    ``path`` is the file to replace (not a symbolic link: :func:`write_target`). On any
    error or interrupt the temporary file is removed and ``path`` is as it was. ``mark``
    (e.g. ``'gpusvm predictions'``) marks the new file as that kind, for :func:`has_mark`.
    The new file has the mode a plain ``open(path, 'w')`` would give.
    """
    path = Path(path)
    folder = path.resolve().parent
    prefix = _temporary_prefix(folder, path.name)
    _remove_orphans(folder, prefix)
    temporary = None
    try:
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=_TEMPORARY_SUFFIX)
        with os.fdopen(descriptor, "w+b") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, _new_file_mode(path))
        if mark is not None:
            _set_mark(temporary, mark)
        os.replace(temporary, path)
    except BaseException:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        raise


def has_mark(path, kind):
    """Whether ``path`` is a file :func:`write_atomically` wrote with ``mark=kind``, and
    unchanged since: its mark names ``kind`` and the SHA-256 of its bytes as they are."""
    try:
        value = os.getxattr(path, MARK_ATTRIBUTE)
    except (AttributeError, OSError):  # no extended attributes here, or no mark
        return False
    return value.startswith(f"{kind} sha256:".encode()) and value == _mark_value(path, kind)


def _mark_value(path, kind):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"{kind} sha256:{digest.hexdigest()}".encode()


def _set_mark(path, kind):
    with contextlib.suppress(AttributeError, OSError):  # not kept here: the file is not recognised later
        os.setxattr(path, MARK_ATTRIBUTE, _mark_value(path, kind))


def _temporary_prefix(folder, name):
    """``.NAME.PID.``: with mkstemp's random characters and ``.tmp``, a name the folder
    takes, ``NAME`` cut (at a character) as its limit on names' length requires."""
    pid = f"{os.getpid()}."
    room = name_max(folder) - len(f"..{pid}") - _RANDOM_CHARACTERS - len(_TEMPORARY_SUFFIX)
    encoded = os.fsencode(name)
    if len(encoded) > room:  # a character the cut breaks is dropped
        name = encoded[: max(room, 0)].decode("utf-8", "ignore")
    return f".{name}.{pid}"


def _remove_orphans(folder, prefix):
    """Delete the temporary files (``prefix`` + ``PID.XXXXXXXX.tmp``... see
    :func:`_temporary_prefix`) of writes to the same target whose process has ended
    (killed mid-write); those of live processes, writing concurrently, stay.

    Process ids are this machine's: in a folder shared with other machines, this can
    remove a remote writer's temporary file, whose write then fails with an error (its
    target stays whole).
    """
    stem = prefix[: -len(f"{os.getpid()}.")]  # ".NAME."
    for leftover in folder.glob(f"{glob.escape(stem)}*{_TEMPORARY_SUFFIX}"):
        pid = leftover.name[len(stem) :].split(".", 1)[0]
        if pid.isdigit() and not _process_is_running(int(pid)):
            leftover.unlink(missing_ok=True)


def _process_is_running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's process, or a pid this system cannot check: keep the file
    return True


def _new_file_mode(path):
    """The mode a plain ``open(path, 'w')`` would give (mkstemp makes files 0600)."""
    if path.exists():
        return path.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
