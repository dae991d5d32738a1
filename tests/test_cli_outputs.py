"""What the command line writes (issue 67): it replaces only the files it wrote, every
output goes in whole or not at all, Ctrl-C ends it with one line and status 130, and a
long file name that the folder takes is written."""

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from gpusvm import load, save
from gpusvm._output_files import _temporary_prefix, name_max
from gpusvm.cli import EXIT_INTERRUPTED, main

from .test_output_files import run

REFUSED = "exists and is not a predictions file gpusvm wrote (unchanged since); not replacing it with the predictions"
# The console script, with Python's own Ctrl-C handler even where the test runner was started
# with SIGINT ignored (a background job of a shell), which a child would inherit.
CONSOLE = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); from gpusvm._console import main; "


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 8))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=2000) > 0, 1, -1)
    dump_svmlight_file(X, y, str(tmp_path / "data.svm"))
    assert (
        main(
            [
                "train",
                "--solver",
                "ftrl",
                "--max-iter",
                "1",
                "-q",
                str(tmp_path / "data.svm"),
                str(tmp_path / "m.model"),
            ]
        )
        == 0
    )
    return tmp_path


def keeps_extended_attributes(folder):
    probe = folder / "probe"
    probe.write_text("")
    try:
        os.setxattr(probe, "user.gpusvm.probe", b"1")
    except (AttributeError, OSError):
        return False
    finally:
        probe.unlink()
    return True


# --- 1: the overwrite guard replaces only what it wrote ------------------------------


@pytest.mark.parametrize(
    "name, text",
    [
        ("y_true.txt", "1\n-1\n" * 1000),  # the user's own labels: the model's classes, a line each
        ("weights.txt", "0.25\n-1.5\n3\n"),  # numbers, one a line, as decision values are
        ("pairs.tsv", "0.1\t0.9\n0.7\t0.3\n"),  # two columns, as probabilities of two classes are
        ("long.txt", "1\n" * 40_000 + "my notes on the run\n"),  # predictions for 80 KB, then not
    ],
)
def test_predict_keeps_a_file_it_did_not_write(files, capsys, name, text):
    out = files / name
    out.write_text(text)
    code, _, err = run(capsys, "predict", files / "m.model", files / "data.svm", out)
    assert (
        code == 1
        and err == f"gpusvm: error: {str(out)!r} {REFUSED}: pass --force to replace it, or give another path.\n"
    )
    assert out.read_text() == text
    code, _, err = run(capsys, "predict", "--force", files / "m.model", files / "data.svm", out)
    assert code == 0, err
    assert set(out.read_text().split()) <= {"1", "-1"} and len(out.read_text().splitlines()) == 2000


def test_predict_replaces_its_own_predictions_while_they_are_unchanged(files, capsys):
    if not keeps_extended_attributes(files):
        pytest.skip(f"{files} keeps no extended attributes: gpusvm cannot mark its predictions there")
    model, data, out = files / "m.model", files / "data.svm", files / "predictions.txt"
    for options in ([], ["--decision-values"], []):  # predictions replace predictions, of either kind
        code, _, err = run(capsys, "predict", *options, model, data, out)
        assert code == 0, err
    labels = out.read_text()
    assert labels.splitlines()[0] in ("1", "-1") and len(labels.splitlines()) == 2000  # no header: a label a line
    shutil.copyfile(out, files / "copy.txt")  # a copy (without the mark), then a changed file
    with open(out, "a") as handle:
        handle.write("1\n")
    for changed in (files / "copy.txt", out):
        before = changed.read_text()
        code, _, err = run(capsys, "predict", model, data, changed)
        assert code == 1 and REFUSED in err and str(changed) in err
        assert changed.read_text() == before


def test_predict_refusal_from_the_console_is_one_line(files):
    (files / "y_true.txt").write_text("1\n-1\n")
    result = subprocess.run(
        [sys.executable, "-m", "gpusvm", "predict", "m.model", "data.svm", "y_true.txt"],
        cwd=files,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "'y_true.txt'" in result.stderr and "pass --force" in result.stderr and "another path" in result.stderr


# --- 2 and 3: an interrupt leaves every output whole, with one line and status 130 -----

# Sends the process SIGINT at the first line it runs once it has opened, for writing, a
# file in the folder of the output (argv[1]): a Ctrl-C in the middle of writing it.
INTERRUPT_WHILE_WRITING = CONSOLE.replace(
    "from gpusvm._console", "import tempfile; from gpusvm._console"
) + textwrap.dedent(
    """
    import os, sys

    folder = os.path.realpath(os.path.dirname(sys.argv.pop(1)))
    fired = []

    def interrupt(frame, event, arg):
        if frame.f_code.co_filename != tempfile.__file__:  # (it only names the temporary file)
            signal.raise_signal(signal.SIGINT)
        return interrupt

    def on_open(event, args):
        if event != "open" or fired or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path, mode, flags = args
        writes = any(c in mode for c in "wax+") if mode else flags & (os.O_WRONLY | os.O_RDWR)
        if writes and os.path.dirname(os.path.realpath(path)) == folder:
            fired.append(path)
            frame = sys._getframe(1)
            while frame is not None:
                frame.f_trace = interrupt
                frame = frame.f_back
            sys.settrace(interrupt)

    sys.addaudithook(on_open)
    main()
    """
)


@pytest.mark.parametrize("command", ["predict", "train"])
def test_an_interrupt_while_writing_leaves_the_old_file_whole(files, capsys, command):
    model, data, predictions = files / "m.model", files / "data.svm", files / "predictions.txt"
    assert run(capsys, "predict", model, data, predictions)[0] == 0
    if command == "predict":
        out, argv, what = predictions, ["predict", "--decision-values", model, data, predictions], "the predictions"
    else:
        out, argv, what = model, ["train", "--solver", "ftrl", "--max-iter", "2", "-q", data, model], "the model"
    before = out.read_bytes()
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPT_WHILE_WRITING, out, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.read_bytes() == before
    assert result.returncode == EXIT_INTERRUPTED, result.stderr
    assert result.stderr == f"gpusvm {command}: interrupted before writing {what}; {str(out)!r} is left as it was.\n"
    assert not [path.name for path in files.iterdir() if path.name.endswith(".tmp")]


def test_ctrl_c_during_a_fit_ends_train_with_one_line_and_status_130(files):
    model = files / "m.model"
    before = model.read_bytes()
    child = subprocess.Popen(
        [sys.executable, "-c", CONSOLE + "main()", "train", "--solver", "ftrl", "--max-iter", "100000", "-v"]
        + [str(files / "data.svm"), str(model)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        shown, deadline = b"", time.monotonic() + 300  # a loaded machine takes long to start Python
        while b"step/s" not in shown and time.monotonic() < deadline:  # the fit's progress bar: it is training
            if select.select([child.stderr], [], [], 1)[0]:
                shown += os.read(child.stderr.fileno(), 4096)
            assert child.poll() is None, shown
        assert b"step/s" in shown, f"no progress bar within 300 s: {shown!r}"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
    err = (shown + err).decode()
    assert child.returncode == EXIT_INTERRUPTED and "Traceback" not in err, err
    # the line after the bar's last draw (a Ctrl-C in the middle of a draw can leave it unended)
    last = re.split(r"[\r\n]|(?<=\])(?=gpusvm )", err.rstrip("\n"))[-1]
    assert last == f"gpusvm train: interrupted before writing the model; {str(model)!r} is left as it was."
    assert model.read_bytes() == before and out == b""


def test_ctrl_c_while_the_command_starts_ends_with_one_line_and_status_130(files):
    # the sweep's traceback (rc -2): a Ctrl-C in the seconds that importing scikit-learn takes
    raise_at_sklearn = (
        "import signal, sys; "
        "sys.addaudithook(lambda event, args: event == 'import' and args[0] == 'sklearn' "
        "and signal.raise_signal(signal.SIGINT)); "
        "from gpusvm._console import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", raise_at_sklearn, "train", str(files / "data.svm"), str(files / "other.model")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == EXIT_INTERRUPTED and result.stderr.count("\n") == 1, result.stderr
    assert "interrupted" in result.stderr and not (files / "other.model").exists()


# --- 4: a long file name the folder takes ----------------------------------------------


def test_a_long_name_is_written_and_one_too_long_is_named(files, capsys):
    longest = name_max(files)
    model = load(files / "m.model")
    for name in ("m" * (longest - 9) + ".model", "é" * ((longest - 4) // 2) + ".txt", "m" * longest):
        assert len(os.fsencode(f".{name}.{os.getpid()}.XXXXXXXX.tmp")) > longest  # the temporary name before
        save(model, files / name)
        assert load(files / name).n_features_in_ == model.n_features_in_
    name = "m" * (longest - 9) + ".model"
    code, out, err = run(capsys, "train", "--solver", "ftrl", "--max-iter", "1", files / "data.svm", files / name)
    assert code == 0 and "Model written to" in out, err
    name = "p" * (longest - 4) + ".txt"
    code, _, err = run(capsys, "predict", files / "m.model", files / "data.svm", files / name)
    assert code == 0 and len((files / name).read_text().splitlines()) == 2000, err
    assert not [path.name for path in files.iterdir() if path.name.endswith(".tmp")]
    too_long = files / ("m" * (longest + 1))
    code, _, err = run(capsys, "train", "--solver", "ftrl", files / "data.svm", too_long)
    assert code == 1 and err == (
        f"gpusvm: error: Cannot write the model to {str(too_long)!r}: its file name is {longest + 1} bytes long, "
        f"and the folder {str(files)!r} takes names of at most {longest} bytes; give a shorter name.\n"
    )


def ended_process_id():
    """An id, of as many digits as this process's, that no process holds now (a finished
    child's id can be taken again at once on a busy machine)."""
    digits = len(str(os.getpid()))
    for pid in range(10**digits - 1, 10 ** (digits - 1), -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            continue
    raise RuntimeError(f"every process id of {digits} digits is taken")


def test_a_long_names_leftover_is_removed_by_the_next_write(files):
    name = "m" * (name_max(files) - 9) + ".model"
    model = load(files / "m.model")
    save(model, files / name)
    ended = ended_process_id()
    prefix = _temporary_prefix(files, name).rsplit(".", 2)[0]  # ".NAME." without this process's id
    leftover = files / f"{prefix}.{ended}.abcdefgh.tmp"  # as a killed writer leaves it
    leftover.write_bytes(b"PK")
    assert len(os.fsencode(leftover.name)) <= name_max(files)
    save(model, files / name)
    assert not leftover.exists()
