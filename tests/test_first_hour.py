"""A new user's first hour: install advice that works, and a demo that talks from its first second."""

import ast
import io
import re
import sys
import time
from pathlib import Path

import pytest
from sklearn.dummy import DummyClassifier

import gpusvm.demo as demo
from gpusvm._backend import cupy_device_count, resolve_backend

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT_TEXT = (ROOT / "pyproject.toml").read_text()  # read with re: tomllib is Python 3.11's, gpusvm runs on 3.10
VERSION = re.search(r'^version = "([^"]+)"', PYPROJECT_TEXT, re.M).group(1)


def _extras():
    """{extra: the text of its requirements}, from pyproject.toml's [project.optional-dependencies]."""
    section = PYPROJECT_TEXT.split("[project.optional-dependencies]\n")[1].split("\n[")[0]
    return dict(re.findall(r"^([a-z0-9_-]+) = \[(.*?)\]", section, re.M))


EXTRAS = _extras()

# `pip install gpusvm`, `pip install "gpusvm[cuda12]"`, `pip install -U gpusvm`: what only a
# release on PyPI can give (an install from a checkout names a path: `-e .`, `dist/...whl`)
PYPI_INSTALL = re.compile(r"pip install +(?:(?:-U|--upgrade) +)?[\"']?gpusvm\b")


def package_messages():
    """(file, line, text) of every string constant in gpusvm/ that is not a docstring: the
    text of errors, warnings, help and printed lines."""
    found = []
    for path in sorted((ROOT / "gpusvm").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        docstrings = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    docstrings.add(id(body[0].value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found.append((path.relative_to(ROOT), node.lineno, node.value))
    return found


def test_no_message_in_the_package_advises_an_install_from_pypi():
    advice = [(path, line, text) for path, line, text in package_messages() if "pip install" in text]
    assert advice, "the scan found no install advice at all: is it reading the package?"
    wrong = [f"{path}:{line}: {text!r}" for path, line, text in advice if PYPI_INSTALL.search(text)]
    assert not wrong, "gpusvm is not on PyPI; advise a checkout, a wheel or the CuPy wheel:\n" + "\n".join(wrong)


def test_every_message_naming_an_extra_says_how_to_get_it_without_pypi():
    naming = [
        (path, line, text)
        for path, line, text in package_messages()
        if any(f"gpusvm[{extra}]" in text for extra in EXTRAS)
    ]
    for path, line, text in naming:
        assert "checkout" in text or "cupy-cuda" in text, f"{path}:{line}: {text!r}"


@pytest.mark.skipif(cupy_device_count() > 0, reason="a CUDA device is present")
def test_the_cupy_error_names_the_wheels_that_the_extras_install():
    with pytest.raises(RuntimeError) as error:
        resolve_backend("cupy")
    message = str(error.value)
    for extra in ("cuda12", "cuda13"):
        wheel = re.match(r'"([A-Za-z0-9_.-]+)', EXTRAS[extra]).group(1)  # "cupy-cuda12x>=13" -> cupy-cuda12x
        assert f"pip install {wheel}" in message or f" or {wheel}" in message, (wheel, message)
    assert 'pip install -e ".[cuda12]"' in message and "\n" not in message
    assert not PYPI_INSTALL.search(message)


@pytest.mark.parametrize("name", ["README.md", "docs/user_guide/install.md"])
def test_install_text_puts_the_checkout_first_and_labels_pypi_as_not_yet(name):
    text = (ROOT / name).read_text()
    first = next(line for line in text.splitlines() if "pip install" in line)
    assert "pip install -e " in first, f"{name}: the first install line a reader meets must work today: {first!r}"
    assert "not on PyPI yet" in text
    in_code, paragraph, last_paragraph, fence_paragraph = False, [], [], ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            fence_paragraph = " ".join(paragraph or last_paragraph)  # the prose just above the block
            paragraph, last_paragraph = [], []
            continue
        if not in_code and line.strip():
            paragraph.append(line)
        elif not in_code:
            last_paragraph, paragraph = paragraph or last_paragraph, []
        if PYPI_INSTALL.search(line):
            context = line + " " + (fence_paragraph if in_code else " ".join(paragraph))
            assert "not yet" in context, f"{name}:{number}: a PyPI install line not labelled as such: {line!r}"


@pytest.mark.parametrize("name", ["README.md", "docs/user_guide/install.md"])
def test_the_wheel_named_in_the_install_text_is_the_one_the_build_writes(name):
    version = VERSION
    wheels = set(re.findall(r"dist/gpusvm-([^-\s]+)-py3-none-any\.whl", (ROOT / name).read_text()))
    assert wheels == {version}, f"{name} names gpusvm wheels of versions {sorted(wheels)}; pyproject says {version}"


# --- the demo ---------------------------------------------------------------------


class _Recorded:
    """A model that checks, when its fit runs, that the demo has already named the fit."""

    backend_ = "numpy"

    def __init__(self, name, lines):
        self.name, self.lines = name, lines

    def fit(self, X, y):
        assert self.lines[-1] == f"  {self.name}: fitting on {X.shape[0]:,} rows ...", self.lines[-3:]
        self.model_ = DummyClassifier(strategy="most_frequent").fit(X, y)
        return self

    def predict(self, X):
        assert self.lines[-1].startswith(f"  {self.name}: fitted in "), self.lines[-3:]
        return self.model_.predict(X)


def _quiet_pairs(lines):
    def pairs(backend, seed=0):
        return [
            (
                f"task {k}",
                (f"gpusvm model {k}", _Recorded(f"gpusvm model {k}", lines)),
                (f"peer {k}", _Recorded(f"peer {k}", lines)),
            )
            for k in range(3)
        ]

    return pairs


class _CountingStdout(io.StringIO):
    flushes = 0

    def flush(self):
        self.flushes += 1
        super().flush()


def test_demo_names_each_fit_before_it_runs_and_flushes_each_line(monkeypatch):
    lines = []
    stdout = _CountingStdout()
    monkeypatch.setattr(demo, "demo_pairs", _quiet_pairs(lines))
    monkeypatch.setattr(sys, "stdout", stdout)
    rows = demo.run_demo(backend="numpy", out=lines.append)
    assert len(rows) == 6
    assert stdout.flushes >= len(lines)
    assert sum(line.endswith("fitting on 20,000 rows ...") for line in lines) == 6  # the default: DEFAULT_ROWS
    assert any("the first 20,000 of the 32,561 training rows" in line for line in lines)
    assert any("--full" in line for line in lines)  # the default run says how to get the full one


def test_demo_full_trains_on_every_row_and_refuses_a_row_count_beside_it(monkeypatch):
    lines = []
    monkeypatch.setattr(demo, "demo_pairs", _quiet_pairs(lines))
    demo.run_demo(backend="numpy", out=lines.append, full=True)
    assert any("all 32,561 training rows" in line for line in lines)
    assert sum(line.endswith("fitting on 32,561 rows ...") for line in lines) == 6
    with pytest.raises(ValueError, match="n_train=3000"):
        demo.run_demo(backend="numpy", n_train=3000, out=lines.append, full=True)


def test_demo_speaks_before_it_loads_the_data(monkeypatch):
    lines = []

    def slow_load(**kwargs):
        raise KeyboardInterrupt  # a user who stops it while the data load: something was on screen already

    monkeypatch.setattr(demo, "load_adult", slow_load)
    with pytest.raises(KeyboardInterrupt):
        demo.run_demo(backend="numpy", out=lines.append)
    assert lines[0].startswith("gpusvm demo:") and "Loading" in lines[-1]


def test_demo_defaults_match_the_readme_headline_setting():
    readme = (ROOT / "README.md").read_text()
    assert f"{demo.DEFAULT_ROWS:,}" in readme and "--full" in readme and "--quick" in readme
    assert (demo.ADULT_SIGMA2, demo.ADULT_C, demo.ADULT_NU) == (10.0, 1.0, 1.10e-2)  # bench/sbp_kernel.py's "no bias"
    kernel_pair = demo.demo_pairs("numpy")[0]
    sbp, svc = kernel_pair[1][1], kernel_pair[2][1]
    assert sbp.gamma == svc.gamma == 1 / 20 and svc.C == 1.0 and sbp.fit_intercept is False


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_elapsed_seconds_count_on_a_terminal_and_are_erased(monkeypatch):
    monkeypatch.setattr(demo, "TICK_SECONDS", 0.01)
    terminal = _Terminal()
    with demo._Elapsed("fitting", stream=terminal):
        time.sleep(0.1)
    written = terminal.getvalue()
    assert written.count("\r      fitting ... ") >= 2 and written.endswith("\r\033[K")


def test_elapsed_seconds_write_nothing_to_a_log(monkeypatch):
    monkeypatch.setattr(demo, "TICK_SECONDS", 0.01)
    log = io.StringIO()
    with demo._Elapsed("fitting", stream=log):
        time.sleep(0.05)
    assert log.getvalue() == ""


def test_the_command_line_takes_full_and_refuses_it_beside_quick(capsys):
    from gpusvm import cli

    args = cli.build_parser().parse_args(["demo", "--full"])
    assert args.full and not args.quick
    assert cli.main(["demo", "--full", "--quick"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
