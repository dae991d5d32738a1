"""What a new user meets first on the command line: ``--version``, a bare ``gpusvm``,
``--help`` that says what every option means, one-line errors for missing inputs,
``gpusvm data adult``, and the README's and the user guide's examples run as written."""

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from gpusvm import cli
from gpusvm._version import __version__
from gpusvm.cli import OPTION_MEANINGS, build_parser, main, solver_parameters
from gpusvm.data_files import read_data
from gpusvm.datasets import load_adult

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("train", "predict", "info", "demo", "data")


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def subcommands(parser):
    """``{name: parser}`` of ``parser``'s subcommands."""
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action, dict(action.choices)


# --- --version, a bare gpusvm, --help --------------------------------------------------


def test_version_prints_the_package_version(capsys):
    code, out, err = run(capsys, "--version")
    assert code == 0 and out == f"gpusvm {__version__}\n" and err == ""


def test_bare_gpusvm_prints_the_usage_and_each_command_and_exits_2(capsys):
    code, out, err = run(capsys)
    assert code == 2 and out == ""  # no command is a bad command line: argparse's status, on stderr
    assert err.startswith("usage: gpusvm") and "--version" in err
    _, parsers = subcommands(build_parser())
    for name in COMMANDS:
        line = next((line for line in err.splitlines() if line.split()[:1] == [name]), None)
        assert line is not None and len(line.split()) > 2, (name, err)  # the name and its one-line meaning
    assert set(parsers) == set(COMMANDS)
    code, out, err = run(capsys, "--help")  # asked for: standard output, status 0
    assert code == 0 and out.startswith("usage: gpusvm") and all(name in out for name in COMMANDS)


def test_bare_gpusvm_through_the_module_exits_2():
    result = subprocess.run([sys.executable, "-m", "gpusvm"], capture_output=True, text=True)
    assert result.returncode == 2 and "usage: gpusvm" in result.stderr and "Traceback" not in result.stderr


def test_every_option_of_every_command_has_a_meaning():
    parser = build_parser()
    action, parsers = subcommands(parser)
    assert all(choice.help for choice in action._choices_actions)  # the command lines of the bare usage
    for name, command in {"gpusvm": parser, **parsers}.items():
        for option in command._actions:
            if isinstance(option, argparse._SubParsersAction):
                continue
            text = option.help
            assert text and text != argparse.SUPPRESS and text.strip(), (name, option.dest)
            if option.dest.startswith("param_"):  # a solver option: a meaning before the [solvers: defaults]
                meaning, _, defaults = text.partition(" [")
                assert meaning.strip() and not meaning.startswith("see "), (name, option.dest)
                assert defaults.endswith("]"), (name, option.dest)


def test_every_solver_parameter_has_its_own_meaning():
    assert set(OPTION_MEANINGS) == set(solver_parameters())


def test_train_help_explains_both_meanings_of_gamma_and_keeps_the_defaults(capsys):
    code, out, _ = run(capsys, "train", "--help")
    assert code == 0 and "\n  --gamma VALUE" in out and "two parameters of one name" in out
    helps = {action.dest: action.help for action in subcommands(build_parser())[1]["train"]._actions}
    gamma = helps["param_gamma"]
    assert "kernel-pegasos, sbp: the rbf or poly kernel's gamma" in gamma
    assert "rda: not a kernel's, the step damping" in gamma
    assert gamma.endswith("[kernel-pegasos, sbp: 'scale'; rda: 1.0]")
    assert (
        "epochs" in helps["param_max_iter"]
        and "[pegasos: 1000; kernel-pegasos: 10; sbp, ftrl," in helps["param_max_iter"]
    )


# --- one-line errors for missing or unreadable inputs ------------------------------------


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    """300 Adult rows, a model trained on them, a folder and a link to nothing."""
    folder = tmp_path_factory.mktemp("inputs")
    X, y, _, _ = load_adult()
    dump_svmlight_file(X[:300], y[:300], str(folder / "train.svm"), zero_based=False)
    assert main(["train", "--solver", "ftrl", "-q", str(folder / "train.svm"), str(folder / "m.model")]) == 0
    (folder / "a_folder").mkdir()
    (folder / "dangling").symlink_to(folder / "nowhere")
    return folder


def input_error_cases(folder):
    data, model = folder / "train.svm", folder / "m.model"
    missing, a_folder, dangling = folder / "missing", folder / "a_folder", folder / "dangling"
    return {
        "train, DATA missing": (["train", missing], "DATA", missing, "does not exist"),
        "train, DATA a folder": (["train", a_folder], "DATA", a_folder, "is a folder"),
        "train, DATA a link to nothing": (["train", dangling], "DATA", dangling, "is a symbolic link to"),
        "streamed train, DATA missing": (
            ["train", "--solver", "ftrl", "--chunk-rows", 10, missing],
            "DATA",
            missing,
            "does not exist",
        ),
        "predict, MODEL missing": (["predict", missing, data], "MODEL", missing, "does not exist"),
        "predict, MODEL a folder": (["predict", a_folder, data], "MODEL", a_folder, "is a folder"),
        "predict, MODEL a link to nothing": (["predict", dangling, data], "MODEL", dangling, "is a symbolic link"),
        "predict, DATA missing": (["predict", model, missing], "DATA", missing, "does not exist"),
        "predict, DATA a folder": (["predict", model, a_folder, folder / "out"], "DATA", a_folder, "is a folder"),
    }


@pytest.mark.parametrize("case", list(input_error_cases(Path("."))))
def test_a_missing_input_is_one_line_naming_it_and_what_it_should_be(case, small_files, capsys):
    argv, name, path, problem = input_error_cases(small_files)[case]
    code, out, err = run(capsys, *argv)
    kind = "a model file" if name == "MODEL" else "a data file"
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err and "Errno" not in err, err
    assert err.startswith(f"gpusvm: error: {name} {str(path)!r} {problem}") and f"give {kind}" in err, err
    assert not (small_files / "out").exists()


def test_an_unreadable_input_is_one_line_naming_it(small_files, capsys, monkeypatch):
    # Tests may run as root, who reads any file: the permission check is what is tested.
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: not str(path).endswith("m.model"))
    code, _, err = run(capsys, "predict", small_files / "m.model", small_files / "train.svm")
    assert code == 1 and err.count("\n") == 1
    assert f"MODEL {str(small_files / 'm.model')!r} cannot be read (no read permission): give a model file" in err


def test_an_operating_system_error_names_its_path_without_errno():
    error = PermissionError(13, "Permission denied", "/data/x.svm")
    assert cli._one_line(error) == "'/data/x.svm': Permission denied."


# --- gpusvm data adult ----------------------------------------------------------------


def test_data_adult_writes_the_shipped_adult_files_and_never_replaces_a_file(tmp_path, capsys):
    folder = tmp_path / "new" / "adult"  # made, parents too
    code, out, err = run(capsys, "data", "adult", folder)
    assert code == 0 and err == ""
    assert f"{folder / 'adult_train.svm'} (32,561 rows) and {folder / 'adult_test.svm'} (16,281 rows)" in out
    assert "CC BY 4.0" in out
    expected = load_adult()
    for name, (X, y) in {"adult_train.svm": expected[:2], "adult_test.svm": expected[2:]}.items():
        X_read, y_read, _ = read_data(folder / name, n_features=123)
        assert (X_read != X).nnz == 0 and np.array_equal(y_read, y)
    written = {path: path.read_bytes() for path in folder.iterdir()}

    code, out, err = run(capsys, "data", "adult", folder)  # again: refused, both files as they were
    assert code == 1 and err.count("\n") == 1 and "already exist; not replacing" in err
    assert {path: path.read_bytes() for path in folder.iterdir()} == written

    other = tmp_path / "other"
    other.mkdir()
    (other / "adult_test.svm").write_text("mine\n")  # one of the two: neither is written
    code, _, err = run(capsys, "data", "adult", other)
    assert code == 1 and f"{str(other / 'adult_test.svm')!r} already exists" in err
    assert sorted(p.name for p in other.iterdir()) == ["adult_test.svm"]
    assert (other / "adult_test.svm").read_text() == "mine\n"

    code, _, err = run(capsys, "data", "adult", other / "adult_test.svm")  # DIR a file
    assert code == 1 and "is a file: give a folder" in err
    code, _, err = run(capsys, "data", "mnist", tmp_path)
    assert code == 2 and "invalid choice: 'mnist'" in err
    assert not list(tmp_path.rglob("*.tmp"))


# --- the examples of the README and the user guide, as written ---------------------------


def bash_blocks(path):
    return re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def run_example(block, folder, capsys, monkeypatch, skip=()):
    """Run each line of ``block`` (``gpusvm ...``, a comment after ``#``) in ``folder``."""
    monkeypatch.chdir(folder)
    ran = []
    for line in block.splitlines():
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        assert argv[0] == "gpusvm", line
        if argv[1] in skip:
            continue
        code, out, err = run(capsys, *argv[1:])
        assert code == 0, (line, err)
        ran.append((argv, out, err))
    return ran


def test_the_readme_command_line_example_runs_as_written(tmp_path, capsys, monkeypatch):
    (block,) = [block for block in bash_blocks(ROOT / "README.md") if "gpusvm train" in block]
    ran = run_example(block, tmp_path, capsys, monkeypatch)
    assert [argv[1] for argv, _, _ in ran] == ["data", "train", "predict"]
    predictions = (tmp_path / "predictions.txt").read_text().split()
    assert len(predictions) == 16_281 and set(predictions) <= {"-1", "1"}
    accuracy = float(re.search(r"Accuracy = ([\d.]+)%", ran[-1][1]).group(1))
    assert 80 < accuracy < 90  # the README's headline: PegasosSVC 84.10% on Adult


def test_the_user_guide_command_line_example_runs_as_written(tmp_path, capsys, monkeypatch):
    (block,) = bash_blocks(ROOT / "docs" / "user_guide" / "command_line.md")
    ran = run_example(block, tmp_path, capsys, monkeypatch, skip=("demo",))  # minutes; test_demo_and_bench runs it
    commands = [argv[1] for argv, _, _ in ran]
    assert commands[0] == "data" and "--version" in commands and commands.count("predict") == 3
    assert (tmp_path / "adult.model").is_file() and (tmp_path / "ftrl.model").is_file()
