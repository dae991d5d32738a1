"""Every repository path and every ``gpusvm`` module that the sources and docs name exists
(issue 64).

A layout move leaves old paths behind in comments, docstrings and pages, where no import
and no link check finds them. This test reads the repository's text files (those git
tracks, and new ones it does not ignore) and checks three kinds of mention:

- a path from the repository's root: a token starting with ``gpusvm/``, ``kernels/``,
  ``tests/``, ``bench/``, ``ci/``, ``docs/`` or ``examples/`` must be a file or a folder;
- a dotted name starting with ``gpusvm.`` (in a Sphinx role such as ``:mod:`` or ``:func:``,
  or in plain text) must be a module, or a module and the attributes that follow it;
- in the code (``gpusvm/`` and ``kernels/``), a bare file name (``step_blocks.py``,
  ``sbp_level.cu``) must name a file of the code: a comment there means the package's
  file, not a benchmark's or a test's of the same name.

Tokens with a wildcard or a placeholder (``*``, ``{``, ``<``) are patterns, not paths, and
are skipped. Modules are found on disk; a module's attributes are looked up by importing
it, except in a CUDA module (its name ends in ``cuda``, or it lives in ``_device/``), whose
names are read from its source: CuPy is never imported, and is absent on a CPU machine.
"""

import ast
import importlib
import re
import subprocess
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SUFFIXES = {".py", ".cu", ".cuh", ".md", ".rst", ".sh", ".toml", ".txt", ".cfg"}
SKIPPED = ("bench/results/", "docs/_build/", "tests/data/", ".git/")
TOP_FOLDERS = ("gpusvm", "kernels", "tests", "bench", "ci", "docs", "examples")

# A path from the root: not preceded by a character that would make it part of a longer
# path, a URL or a dotted name (``../shared/tools``, ``cupyx/signal``, ``https://...``).
PATH_TOKEN = re.compile(r"(?<![\w/.~$-])(?:" + "|".join(TOP_FOLDERS) + r")/[\w./*{}<>-]*")
# A dotted name: ``gpusvm.`` not inside a longer dotted name or a path.
DOTTED_TOKEN = re.compile(r"(?<![\w./-])gpusvm(?:\.[A-Za-z_]\w*)+")
# A bare file name in the code: not the end of a path or of a longer name.
BARE_FILE_TOKEN = re.compile(r"(?<![\w/.~$-])[\w-]+\.(?:py|cu|cuh)\b")
CODE_FOLDERS = ("gpusvm/", "kernels/")
PATTERN_CHARACTERS = set("*{<")
# File names that look like dotted names: docs/api's pages and the like.
FILE_SUFFIXES = (".rst", ".md", ".py", ".txt", ".json", ".cu", ".npz", ".pkl")

# Paths named but not in the repository, each with its reason.
ALLOWED_PATHS = {
    "gpusvm/_kernels_src": "where the wheel puts kernels/ (pyproject.toml's force-include)",
    "bench/data": "where bench/get_data.sh downloads the data sets (ignored by git)",
    "bench/README-quick.md": "bench/make_report.py --quick writes it (not committed)",
    "bench/results/profile": "ci/profile.sh's default output folder",
    "docs/_build": "make -C docs html's output (ignored by git)",
    "docs/auto_examples": "sphinx-gallery's output (ignored by git)",
}
# Dotted names that exist only at run time, each with its reason.
ALLOWED_NAMES = {
    "gpusvm.svm.__emu_store__": "ci/emulated_device.py adds it to the modules it compiles",
}


def tracked_text_files():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in sorted(set(listed)):
        path = ROOT / name
        if Path(name).suffix in SUFFIXES and not name.startswith(SKIPPED) and path.is_file():
            yield name, path


def clean(token):
    """The token without the punctuation that ends a sentence or closes a bracket."""
    return token.rstrip(".,:;)")


def code_file_names():
    return {Path(name).name for name, _ in tracked_text_files() if name.startswith(CODE_FOLDERS)}


def path_exists(token):
    if any(token == allowed or token.startswith(allowed + "/") for allowed in ALLOWED_PATHS):
        return True
    return (ROOT / token.rstrip("/")).exists()


def is_cuda_module(name):
    return name.rsplit(".", 1)[-1].endswith("cuda") or name.startswith("gpusvm._device")


def module_file(name):
    """The source of the module ``name`` in this checkout, or None: found on disk, as
    ``importlib.util.find_spec`` would find it, but without importing its parents."""
    path = ROOT.joinpath(*name.split("."))
    for candidate in (path.with_name(path.name + ".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=None)
def top_level_names(name):
    """The names a module's source binds at its top, read without importing it."""
    tree = ast.parse(module_file(name).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


class ImportFailed(Exception):
    """A module (or a name a package imports lazily) fails to import: what it names is not
    checked, and the failure is reported once."""


@lru_cache(maxsize=None)
def dotted_name_exists(token):
    if token in ALLOWED_NAMES:
        return True
    parts = token.split(".")
    for end in range(len(parts), 0, -1):  # the longest prefix that is a module
        module = ".".join(parts[:end])
        if module_file(module) is not None:
            break
    else:
        return False
    rest = parts[end:]
    if not rest:
        return True
    if is_cuda_module(module):  # CuPy is absent on a CPU machine: read, do not import
        return rest[0] in top_level_names(module)
    try:
        value = importlib.import_module(module)
        for attribute in rest:  # a package's __getattr__ may import a module here
            value = getattr(value, attribute)
    except AttributeError:
        return False
    except Exception as error:
        raise ImportFailed(f"{type(error).__name__}: {error}") from error
    return True


def mentions(text, *, code=False):
    """(line number, kind, token) for each path or dotted name in ``text``, and for each
    bare file name when ``text`` is code's."""
    for number, line in enumerate(text.splitlines(), start=1):
        for match in PATH_TOKEN.finditer(line):
            token = clean(match.group())
            if not PATTERN_CHARACTERS & set(token):
                yield number, "path", token
        for match in DOTTED_TOKEN.finditer(line):
            token = clean(match.group())
            if token.endswith(FILE_SUFFIXES):
                token = token.rsplit(".", 1)[0]
            yield number, "module", token
        if code:
            for match in BARE_FILE_TOKEN.finditer(line):
                yield number, "file name", match.group()


def test_every_named_path_and_module_exists():
    missing, unchecked, file_names = [], {}, code_file_names()
    for name, path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, kind, token in mentions(text, code=name.startswith(CODE_FOLDERS)):
            mention = f"{name}:{number}: {token}"
            try:
                if kind == "path":
                    exists = path_exists(token)
                elif kind == "module":
                    exists = dotted_name_exists(token)
                else:
                    exists = token in file_names
            except ImportFailed as failure:
                unchecked.setdefault(str(failure), []).append(mention)
                continue
            if not exists:
                missing.append(mention)
    report = [f"{len(missing)} mentions of paths or modules that do not exist:", *missing]
    for failure, where in unchecked.items():
        report.append(f"{len(where)} mentions not checked, an import fails ({failure}); the first: {where[0]}")
    assert not missing and not unchecked, "\n".join(report)


def test_the_scan_finds_stale_mentions():
    """The patterns catch a moved file, a moved module, a missing attribute and a bare file
    name in the code, and skip patterns, URLs and paths outside the repository."""
    # Built from parts, so that the scan of this file does not report them.
    moved_file, moved_module, no_name = (
        "gpusvm" + "/_step_blocks.py",
        "gpusvm" + "._kernel_values_cuda",
        "gpusvm" + "._backend.no_such_name",
    )
    text = "\n".join(
        [
            f"see {moved_file}, and kernels/*.cu",
            f":mod:`{moved_module}` and :func:`~{no_name}`",
            "../shared/tools/cuda-emu and https://example.org/docs/page",
        ]
    )
    found = [(number, token) for number, kind, token in mentions(text)]
    assert found == [(1, moved_file), (2, moved_module), (2, no_name)]
    assert not path_exists(moved_file)
    assert path_exists("gpusvm/_device/step_blocks.py")
    assert not dotted_name_exists(moved_module)
    assert dotted_name_exists("gpusvm.solvers._kernel_values_cuda")
    assert not dotted_name_exists(no_name)
    assert dotted_name_exists("gpusvm._backend.resolve_backend.__name__")
    assert dotted_name_exists("gpusvm._device.step_blocks.StepBlocks")  # read, not imported

    bare = "the schedule (" + "_step_blocks.py), and sbp_level.cu"
    assert [token for _, kind, token in mentions(bare, code=True) if kind == "file name"] == [
        "_step_blocks.py",
        "sbp_level.cu",
    ]
    assert not list(mentions(bare))
    assert "sbp_level.cu" in code_file_names() and "_step_blocks.py" not in code_file_names()
