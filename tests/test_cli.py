"""The command line end to end: train, predict and info on small files, the formats it
reads, and the exit codes and one-line errors a script relies on."""

import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from gpusvm import SBPClassifier, load
from gpusvm._backend import cupy_device_count
from gpusvm._registry import SOLVERS
from gpusvm import cli
from gpusvm.cli import main, parse_value
from gpusvm.data_files import read_data
from gpusvm.datasets import load_adult

QUICK_OPTIONS = {
    "pegasos": ["--max-iter", "5"],
    "kernel-pegasos": ["--max-iter", "1", "--C", "1", "--gamma", "0.05"],
    "sbp": ["--max-iter", "2"],
    "ftrl": ["--max-iter", "2"],
    "truncated-gradient": ["--max-iter", "2", "--l1", "1e-4"],
    "fobos": ["--max-iter", "2"],
    "rda": ["--max-iter", "2", "--batch-size", "32"],  # 1,000 rows: 256 would be 4 steps an epoch
}


@pytest.fixture(scope="module")
def adult_files(tmp_path_factory):
    """1,000 Adult training rows and 500 test rows as LIBSVM writes them (one-based)."""
    folder = tmp_path_factory.mktemp("adult")
    X, y, X_test, y_test = load_adult()
    dump_svmlight_file(X[:1000], y[:1000], str(folder / "train.svm"), zero_based=False)
    dump_svmlight_file(X_test[:500], y_test[:500], str(folder / "test.svm"), zero_based=False)
    return folder, y_test[:500]


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("solver", SOLVERS)
def test_train_then_predict_every_solver(solver, adult_files, tmp_path, capsys):
    folder, y_test = adult_files
    model_path = tmp_path / f"{solver}.model"
    code, out, err = run(
        capsys,
        "train",
        "--solver",
        solver,
        *QUICK_OPTIONS[solver],
        "--random-state",
        "0",
        "--backend",
        "numpy",
        "--n-features",
        123,
        folder / "train.svm",
        model_path,
    )
    assert code == 0, err
    assert f"--solver {solver}" in out and "training accuracy" in out and str(model_path) in out
    assert err == ""  # silent without --verbose
    model = load(model_path)
    assert type(model) is SOLVERS[solver] and model.random_state == 0
    assert model.metadata_["data"] == {"file": str(folder / "train.svm"), "format": "svmlight", "zero_based": False}

    predictions = tmp_path / "predictions.txt"
    code, out, err = run(capsys, "predict", model_path, folder / "test.svm", predictions)
    assert code == 0, err
    labels = np.array([float(line) for line in predictions.read_text().splitlines()])
    accuracy = np.mean(labels == y_test)
    assert out.strip() == f"Accuracy = {accuracy:.4%} ({int(round(accuracy * 500))}/500)"
    assert accuracy > 0.75
    assert set(predictions.read_text().split()) <= {"1", "-1"}  # labels as the file wrote them


def test_predict_to_stdout_decision_values_and_probabilities(adult_files, tmp_path, capsys):
    folder, _ = adult_files
    model_path = tmp_path / "ftrl.model"
    assert run(capsys, "train", "--solver", "ftrl", "--n-features", 123, folder / "train.svm", model_path)[0] == 0
    model = load(model_path)
    X_test = load_adult()[2][:500]

    code, out, err = run(capsys, "predict", model_path, folder / "test.svm")
    assert code == 0 and len(out.splitlines()) == 500 and err.startswith("Accuracy = ")  # report on stderr

    code, out, _ = run(capsys, "predict", "--decision-values", model_path, folder / "test.svm")
    assert code == 0
    np.testing.assert_array_equal([float(line) for line in out.splitlines()], model.decision_function(X_test))

    code, out, _ = run(capsys, "predict", "--probability", model_path, folder / "test.svm")
    probabilities = np.array([[float(v) for v in line.split()] for line in out.splitlines()])
    np.testing.assert_array_equal(probabilities, model.predict_proba(X_test))


def test_multiclass_csv_and_npz(tmp_path, capsys, rng):
    X = rng.normal(size=(300, 4))
    y = np.array(["north", "south", "west"])[np.argmax(X[:, :3], axis=1)]
    csv = tmp_path / "train.csv"
    rows = [",".join([label] + [str(float(v)) for v in row]) for label, row in zip(y, X, strict=True)]
    lines = ["label,a,b,c,d"] + rows
    csv.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "train", "--solver", "pegasos", csv, tmp_path / "m")
    assert code == 0, err
    code, out, err = run(capsys, "predict", tmp_path / "m", csv, tmp_path / "p")
    assert code == 0 and float(out.split()[2].rstrip("%")) > 90
    assert set((tmp_path / "p").read_text().split()) <= {"north", "south", "west"}
    unlabeled = tmp_path / "unlabeled.csv"  # no label column: predictions, no accuracy
    unlabeled.write_text("\n".join(",".join(str(float(v)) for v in row) for row in X[:5]) + "\n")
    code, out, err = run(capsys, "predict", "--decision-values", tmp_path / "m", unlabeled)
    assert code == 0 and err == "" and len(out.splitlines()) == 5 and len(out.splitlines()[0].split()) == 3

    npz = tmp_path / "train.npz"
    np.savez(npz, X=X, y=(y == "north").astype(int))
    code, out, err = run(capsys, "train", "--solver", "rda", npz, tmp_path / "r")
    assert code == 0, err
    assert run(capsys, "predict", tmp_path / "r", npz)[0] == 0


def test_verbose_train_shows_the_progress_bar(adult_files, tmp_path, capsys):
    folder, _ = adult_files
    code, _, err = run(capsys, "train", "--solver", "sbp", "--max-iter", 2, "-v", folder / "train.svm", tmp_path / "m")
    assert code == 0
    assert "SBP" in err and "step/s" in err  # the holdout's figure: test_progress_and_ranges.py


def test_a_streamed_train_shows_a_line_an_epoch_unless_quiet(adult_files, tmp_path, capsys):
    """--chunk-rows can take long: a line an epoch by default (verbose=1), none with -q."""
    folder, _ = adult_files
    common = ["train", "--solver", "ftrl", "--max-iter", 2, "--chunk-rows", 4000]
    code, _, err = run(capsys, *common, folder / "train.svm", tmp_path / "a")
    assert code == 0 and "FTRLClassifier epoch 1/2" in err and "FTRLClassifier epoch 2/2" in err
    code, _, err = run(capsys, *common, "-q", folder / "train.svm", tmp_path / "b")
    assert code == 0 and err == ""
    assert load(tmp_path / "b").verbose == 0 and load(tmp_path / "a").verbose == 1
    code, _, err = run(capsys, *common, "-q", "-v", folder / "train.svm", tmp_path / "c")
    assert code == 2 and "not allowed with argument" in err


def test_default_model_path_is_the_data_name_plus_model(adult_files, tmp_path, capsys, monkeypatch):
    folder, _ = adult_files
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "train", "--solver", "ftrl", "--max-iter", 1, folder / "train.svm")[0] == 0
    assert (tmp_path / "train.svm.model").is_file()


def test_the_default_solver_is_an_rbf_svm_taking_c_like_svm_trains(adult_files, tmp_path, capsys):
    folder, y_test = adult_files
    assert run(capsys, "train", "--C", 2, folder / "train.svm", tmp_path / "m")[0] == 0
    model = load(tmp_path / "m")
    assert isinstance(model, SBPClassifier) and model.C == 2 and model.kernel == "rbf"
    X_test = load_adult()[2][:500, : model.n_features_in_]  # the training file's last features are unused
    assert model.score(X_test, y_test) > 0.8


def test_the_training_accuracy_is_read_off_a_sample_of_a_large_training_set(adult_files, tmp_path, capsys, monkeypatch):
    folder, _ = adult_files
    args = ("train", "--solver", "ftrl", "--max-iter", 1, folder / "train.svm", tmp_path / "m")
    code, out, _ = run(capsys, *args)
    assert code == 0 and "(on" not in out  # 1,000 rows: all of them
    monkeypatch.setattr(cli, "TRAINING_ACCURACY_ROWS", 300)
    code, out, _ = run(capsys, *args, "--force")
    model = load(tmp_path / "m")
    X, y, _ = read_data(folder / "train.svm", n_features=model.n_features_in_)
    rows = np.sort(np.random.default_rng(0).choice(1000, 300, replace=False))
    assert code == 0 and f"training accuracy {model.score(X[rows], y[rows]):.2%} (on 300 of its rows" in out


def test_info(capsys):
    code, out, err = run(capsys, "info", "--backend", "numpy")
    assert code == 0 and err == ""
    assert out.startswith("gpusvm 0.1.0") and "backend: numpy" in out and "kernels:" in out
    code, out, _ = run(capsys, "info", "--json")
    facts = json.loads(out)
    assert code == 0 and facts["gpusvm"] == "0.1.0" and facts["backend"] in ("numpy", "cupy")
    if cupy_device_count() == 0:
        assert facts["backend"] == "numpy" and facts["devices"] == [] and facts["kernels"] is None
    else:
        assert facts["devices"] and set(facts["kernels"].values()) == {"ok"}


def test_info_says_when_the_backend_asked_for_is_missing(capsys, monkeypatch):
    if cupy_device_count() > 0:
        pytest.skip("a CUDA device is present")
    code, out, err = run(capsys, "info", "--backend", "cupy")
    assert code == 1 and "backend: unavailable" in out and err.count("\n") == 1
    monkeypatch.setenv("GPUSVM_BACKEND", "cupy")  # the variable is honoured like the option
    code, out, err = run(capsys, "info")
    assert code == 1 and "GPUSVM_BACKEND=cupy" in out and "needs CuPy" in err


def test_gpusvm_backend_variable_is_honoured_by_train(adult_files, tmp_path, capsys, monkeypatch):
    folder, _ = adult_files
    monkeypatch.setenv("GPUSVM_BACKEND", "numpy")
    code, out, _ = run(capsys, "train", "--solver", "ftrl", "--max-iter", 1, folder / "train.svm", tmp_path / "m")
    assert code == 0 and "with numpy" in out
    monkeypatch.setenv("GPUSVM_BACKEND", "tpu")
    code, _, err = run(capsys, "train", "--solver", "ftrl", folder / "train.svm", tmp_path / "m")
    assert code == 1 and "GPUSVM_BACKEND" in err and "'tpu'" in err


USAGE_ERRORS = {
    "unknown solver": (["train", "--solver", "libsvm", "DATA"], "invalid choice: 'libsvm'"),
    "unknown option": (["train", "--colour", "red", "DATA"], "unrecognized arguments"),
    "option of another solver": (
        ["train", "--solver", "pegasos", "--l1", "1", "DATA"],
        "--l1 does not apply to --solver pegasos",
    ),
    "bad option value": (["train", "--solver", "pegasos", "--C", "-1", "DATA"], "'C' parameter of PegasosSVC"),
    "bad option type": (["train", "--solver", "ftrl", "--max-iter", "many", "DATA"], "'max_iter' parameter"),
    "bad n-features": (["train", "--n-features", "0", "DATA"], "--n-features must be at least 1"),
    "no data": (["train"], "the following arguments are required: DATA"),
    "unknown backend": (["info", "--backend", "tpu"], "invalid choice: 'tpu'"),
    "probability from an SVM": (["predict", "--probability", "PEGASOS", "DATA"], "--probability needs a logistic"),
}


@pytest.mark.parametrize("case", USAGE_ERRORS)
def test_usage_errors_exit_2_with_one_line(case, adult_files, tmp_path, capsys):
    folder, _ = adult_files
    argv, message = USAGE_ERRORS[case]
    if "PEGASOS" in argv:
        code = run(capsys, "train", "--solver", "pegasos", "--max-iter", 2, folder / "train.svm", tmp_path / "p")[0]
        assert code == 0
    argv = [{"DATA": folder / "train.svm", "PEGASOS": tmp_path / "p"}.get(arg, arg) for arg in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("gpusvm")


def test_file_errors_exit_1_with_one_line(adult_files, tmp_path, capsys):
    folder, _ = adult_files
    model = tmp_path / "m"
    assert run(capsys, "train", "--solver", "ftrl", "--max-iter", 1, folder / "train.svm", model)[0] == 0
    (tmp_path / "garbage.svm").write_text("this is not\nsvmlight\n")
    (tmp_path / "one_class.svm").write_text("1 1:0.5\n1 2:1.0\n")
    (tmp_path / "wide.svm").write_text("1 1:0.5 400:1\n")
    (tmp_path / "nan.csv").write_text("1,0.5,nan\n-1,0.1,0.2\n")
    (tmp_path / "semicolons.csv").write_text("1;0.5;0.1\n-1;0.1;0.2\n")
    np.savez(tmp_path / "whole.npz", X=np.ones((4, 2)), y=np.array([0, 1, 0, 1]))
    (tmp_path / "truncated.npz").write_bytes((tmp_path / "whole.npz").read_bytes()[:100])
    cases = {
        ("train", tmp_path / "missing.svm", model): "does not exist",
        ("train", tmp_path / "garbage.svm", model): "is not a LIBSVM/svmlight file",
        ("train", tmp_path / "one_class.svm", model): "class",
        ("train", tmp_path / "nan.csv", model): "NaN",
        ("train", tmp_path / "semicolons.csv", model): "semicolons.csv has a single column: gpusvm reads CSV files",
        ("train", "--format", "csv", folder / "train.svm", model): "use --format svmlight",
        ("train", tmp_path / "truncated.npz", model): "truncated.npz is not a readable .npz file",
        ("train", folder / "train.svm", tmp_path / "missing" / "m.model"): "does not exist",
        ("train", folder / "train.svm", tmp_path): "is a folder; give a file name",
        ("predict", folder / "train.svm", folder / "test.svm"): "not a gpusvm model file",
        ("predict", tmp_path / "missing.model", folder / "test.svm"): "does not exist: give a model file",
        ("predict", model, tmp_path / "wide.svm"): "has feature index 400, but the model takes",
        ("predict", model, tmp_path / "garbage.svm"): "is not a LIBSVM/svmlight file",
    }
    for argv, message in cases.items():
        before = model.read_bytes()
        code, out, err = run(capsys, *argv)
        assert code == 1 and message in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        assert model.read_bytes() == before  # a failed train leaves the model file as it was
    assert not list(tmp_path.parent.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_train_checks_the_model_path_before_training(adult_files, tmp_path, capsys, monkeypatch):
    from gpusvm import PegasosSVC

    def no_fit(*args, **kwargs):
        raise AssertionError("trained before checking where the model goes")

    monkeypatch.setattr(PegasosSVC, "fit", no_fit)
    code, _, err = run(capsys, "train", "--solver", "pegasos", adult_files[0] / "train.svm", tmp_path / "no" / "m")
    assert code == 1 and "does not exist" in err


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(FileNotFoundError):
        main(["train", "--debug", str(tmp_path / "missing.svm")])


def test_console_entry_point_end_to_end(adult_files, tmp_path):
    folder, _ = adult_files
    command = [sys.executable, "-m", "gpusvm"]
    result = subprocess.run(
        command + ["train", "--solver", "ftrl", "--backend", "numpy", str(folder / "train.svm"), str(tmp_path / "m")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and "Model written to" in result.stdout
    result = subprocess.run(
        command + ["predict", str(tmp_path / "m"), str(tmp_path / "missing.svm")], capture_output=True, text=True
    )
    assert result.returncode == 1 and result.stderr.startswith("gpusvm: error:") and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_parse_value():
    assert parse_value("none") is None and parse_value("True") is True and parse_value("false") is False
    assert parse_value("3") == 3 and isinstance(parse_value("3"), int) and parse_value("0.5") == 0.5
    assert parse_value("inf") == float("inf") and parse_value("scale") == "scale"
    assert parse_value('{"1": 2.0, "-1": 0.5}') == {1: 2.0, -1: 0.5}


def test_profile_script_explains_a_missing_nsys(tmp_path):
    import shutil
    from pathlib import Path

    if shutil.which("nsys"):
        pytest.skip("Nsight Systems is installed: ci/profile.sh would profile")
    script = Path(__file__).resolve().parent.parent / "ci" / "profile.sh"
    result = subprocess.run(["bash", str(script), "ftrl", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1 and "nsys (Nsight Systems) is not on PATH" in result.stderr


def test_predict_notes_labels_the_model_does_not_know(tmp_path, capsys):
    """Words in the training file, numbers in the test file: 0% with a note saying why; a
    class the model never saw, named."""
    (tmp_path / "words.csv").write_text("neg,0.1,0.2\npos,1.0,1.1\nneg,0.0,0.3\npos,0.9,1.2\n")
    (tmp_path / "numbers.svm").write_text("-1 1:0.1 2:0.2\n1 1:1.0 2:1.1\n-1 1:0.0 2:0.3\n1 1:0.9 2:1.2\n")
    model = tmp_path / "words.model"
    assert run(capsys, "train", "--solver", "ftrl", tmp_path / "words.csv", model)[0] == 0
    code, out, _ = run(capsys, "predict", model, tmp_path / "numbers.svm", tmp_path / "out.txt")
    assert code == 0 and out.splitlines()[-2:] == [
        "Accuracy = 0.0000% (0/4)",
        "Note: DATA's labels are numbers (-1, 1), the model's classes strings (neg, pos): no row's label can match.",
    ]
    code, out, _ = run(capsys, "predict", model, tmp_path / "words.csv", tmp_path / "out.txt")
    assert code == 0 and "Note" not in out
    (tmp_path / "two.csv").write_text("neg,0.1,0.2\npos,1.0,1.1\nother,0.0,0.3\n")
    code, out, _ = run(capsys, "predict", model, tmp_path / "two.csv", tmp_path / "out.txt")
    assert (
        out.splitlines()[-1]
        == "Note: DATA's label other is not a class of the model (neg, pos): its rows count as wrong."
    )
    (tmp_path / "digits.csv").write_text("1,0.1,0.2\n2,1.0,1.1\n")
    (tmp_path / "digits.svm").write_text("1 1:0.1 2:0.2\n2 1:1.0 2:1.1\n")
    model = tmp_path / "digits.model"
    assert run(capsys, "train", "--solver", "ftrl", tmp_path / "digits.svm", model)[0] == 0
    code, out, _ = run(capsys, "predict", model, tmp_path / "digits.svm", tmp_path / "out.txt")
    assert "Note" not in out
