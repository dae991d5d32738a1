"""Files gpusvm writes (models, predictions): never an input, never a file that is not
one gpusvm wrote unless asked, never a read-only file; symbolic links written through;
errors about what cannot be saved that fit the value."""

import os

import numpy as np
import pytest

from gpusvm import FTRLClassifier, load, save
from gpusvm.cli import main
from gpusvm.data_files import read_data


def svmlight_text(n=40):
    return "".join(f"{1 if i % 2 else -1} 1:{i / 10} 3:{(i % 3) / 2}\n" for i in range(n))


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def files(tmp_path):
    for name in ("train.svm", "test.svm"):
        (tmp_path / name).write_text(svmlight_text())
    return tmp_path


@pytest.fixture
def model(files):
    X, y, _ = read_data(files / "train.svm")
    return FTRLClassifier(max_iter=1).fit(X, y)


def train(capsys, *argv):
    return run(capsys, "train", "--solver", "ftrl", "--max-iter", 1, *argv)


# --- item 13: the command line never replaces its inputs or a file it did not write ----


@pytest.mark.parametrize("chunked", [False, True])
def test_train_never_writes_the_model_over_its_data(files, capsys, chunked):
    extra = ["--chunk-rows", 16] if chunked else []
    data = files / "train.svm"
    os.link(data, files / "hard-link.svm")
    os.symlink(data, files / "soft-link.svm")
    for target in (data, files / "hard-link.svm", files / "soft-link.svm", files / "." / "train.svm"):
        for force in ([], ["--force"]):  # not even when asked
            code, _, err = train(capsys, *extra, *force, data, target)
            assert code == 2 and "is the DATA file" in err and "give another file name for the model" in err, err
    assert data.read_text() == svmlight_text()


def test_train_does_not_replace_a_file_that_is_not_a_model(files, capsys):
    test = files / "test.svm"
    code, _, err = train(capsys, files / "train.svm", test)  # a test file given as MODEL by mistake
    assert code == 1 and err.strip() == (
        f"gpusvm: error: {str(test)!r} exists and is not a gpusvm model file; "
        "not replacing it with the model: pass --force to replace it, or give another path."
    )
    assert test.read_text() == svmlight_text()
    assert train(capsys, "--force", files / "train.svm", test)[0] == 0  # asked for
    assert load(test).n_features_in_ == 3
    model = files / "m.model"
    for _ in range(2):  # a model file is replaced, as is an empty one
        assert train(capsys, files / "train.svm", model)[0] == 0
    (files / "empty").write_bytes(b"")
    assert train(capsys, files / "train.svm", files / "empty")[0] == 0


def test_predict_never_writes_over_its_inputs_or_a_foreign_file(files, capsys):
    model, data, out = files / "m.model", files / "test.svm", files / "predictions.txt"
    assert train(capsys, files / "train.svm", model)[0] == 0
    before = model.read_bytes()
    for target, name in ((data, "DATA"), (model, "MODEL")):
        for force in ([], ["--force"]):  # not even when asked
            code, _, err = run(capsys, "predict", *force, model, data, target)
            assert code == 2 and f"is the {name} file" in err, err
    assert data.read_text() == svmlight_text() and model.read_bytes() == before
    for options in ([], ["--decision-values"], []):  # predictions replace predictions, of either kind
        assert run(capsys, "predict", *options, model, data, out)[0] == 0
    notes = files / "notes.txt"
    notes.write_text("my notes, one line\nanother: line\n")
    code, _, err = run(capsys, "predict", model, data, notes)
    assert code == 1 and "exists and is not a predictions file" in err and "--force" in err
    assert notes.read_text() == "my notes, one line\nanother: line\n"
    assert run(capsys, "predict", "--force", model, data, notes)[0] == 0
    assert notes.read_text().splitlines()[0] in ("1", "-1")
    code, out_text, _ = run(capsys, "predict", model, data, "-")  # '-': standard output
    assert code == 0 and len(out_text.splitlines()) == 40 and not (files / "-").exists()


def test_predict_replaces_only_predictions_it_wrote(files, capsys):
    """A file of single words (requirements.txt), of other numbers than the model's
    columns (a table of features), or of what predictions could be (the user's own labels
    or scores) is not a predictions file gpusvm wrote: only --force replaces it."""
    model, data = files / "m.model", files / "test.svm"
    assert train(capsys, files / "train.svm", model)[0] == 0
    foreign = {
        "requirements.txt": "numpy\nscipy\nscikit-learn\n",
        "features.txt": "0.1 0.2 0.3\n1.5 2.5 3.5\n",
        "other-labels.txt": "cat\ndog\n",
        "y_true.txt": "1\n-1\n1\n",  # the model's classes, a line each
        "scores.txt": "0.25\n-1.5\n",  # its decision values' width
    }
    for name, text in foreign.items():
        (files / name).write_text(text)
        code, _, err = run(capsys, "predict", model, data, files / name)
        assert code == 1 and "exists and is not a predictions file" in err, name
        assert (files / name).read_text() == text
    (files / "empty.txt").write_text("")  # nothing to lose
    assert run(capsys, "predict", model, data, files / "empty.txt")[0] == 0


def test_a_read_only_file_is_never_replaced(files, capsys, model):
    path = files / "kept.model"
    save(model, path)
    before = path.read_bytes()
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError, match="the file is read-only"):
        save(model, path)
    with pytest.raises(PermissionError, match="the file is read-only"):
        save(model, path, overwrite=True)  # not even when asked
    code, _, err = train(capsys, "--force", files / "train.svm", path)
    assert code == 1 and "read-only" in err
    predictions = files / "kept.txt"
    predictions.write_text("1\n")
    os.chmod(predictions, 0o444)
    code, _, err = run(capsys, "predict", "--force", path, files / "test.svm", predictions)
    assert code == 1 and "read-only" in err
    assert path.read_bytes() == before and predictions.read_text() == "1\n"


# --- item 13: gpusvm.save ------------------------------------------------------------


def test_save_writes_through_a_symbolic_link(files, model):
    real, link = files / "real.model", files / "link.model"
    link.symlink_to(real.name)  # dangling until the first save
    for _ in range(2):
        save(model, link)
        assert link.is_symlink() and os.readlink(link) == real.name
        np.testing.assert_array_equal(load(real).coef_, model.coef_)
    assert sorted(p.name for p in files.iterdir() if p.suffix == ".model") == ["link.model", "real.model"]


def test_save_leaves_a_file_that_is_not_a_model_unless_asked(files, model):
    data = files / "train.svm"
    with pytest.raises(
        FileExistsError,
        match="exists and is not a gpusvm model file.*pass overwrite=True to replace it, or give another path",
    ):
        save(model, data)
    assert data.read_text() == svmlight_text()
    save(model, data, overwrite=True)
    assert load(data).n_features_in_ == 3
    cut = files / "cut.model"  # a damaged model (here: truncated) may be replaced
    save(model, cut)
    cut.write_bytes(cut.read_bytes()[:100])
    save(model, cut)
    assert load(cut).n_features_in_ == 3


# --- item 14: advice that fits the value ----------------------------------------------


def test_a_metadata_value_that_cannot_be_saved_is_named_as_metadata(files, model):
    with pytest.raises(TypeError) as error:
        save(model, files / "m", metadata={"scaler": {"fitted": object()}})
    message = str(error.value)
    assert "random_state" not in message
    assert message.startswith("The metadata value 'scaler.fitted' cannot be saved: an object has no safe file form")
    assert message.endswith("Convert it to one of those, or leave it out of metadata.")
    with pytest.raises(TypeError, match="^metadata must be a dict or None, got a list"):
        save(model, files / "m", metadata=[("a", 1)])
    with pytest.raises(TypeError, match="parameter random_state.*For random_state, pass an int or None"):
        save(
            FTRLClassifier(max_iter=1, random_state=np.random.RandomState(0)).fit(*read_data(files / "train.svm")[:2]),
            files / "m",
        )
    assert not (files / "m").exists()


# --- found by the sweep ----------------------------------------------------------------


def test_paths_that_cannot_be_a_model_file_are_named(files, model):
    with pytest.raises(FileNotFoundError, match="an empty path"):
        save(model, "")
    with pytest.raises(FileNotFoundError, match="names a folder; give a file name"):
        save(model, str(files / "new") + os.sep)
    (files / "loop1").symlink_to("loop2")
    (files / "loop2").symlink_to("loop1")
    with pytest.raises(FileNotFoundError, match="Cannot write the model to .*loop1"):
        save(model, files / "loop1")
    with pytest.raises(IsADirectoryError, match="is a folder; give a model file"):
        load(files)
    with pytest.raises(TypeError, match="overwrite must be True or False, got 'no'"):
        save(model, files / "m", overwrite="no")
    looped = {}
    looped["self"] = looped
    with pytest.raises(TypeError, match="contains itself"):
        save(model, files / "m", metadata=looped)
    assert not (files / "m").exists() and not (files / "new").exists()


@pytest.mark.parametrize("key, value", [("params", [1, 2]), ("attributes", "x"), ("user", 3), ("classes", {})])
def test_a_model_file_with_parts_of_the_wrong_kind_is_a_model_file_error(files, model, key, value):
    import json
    import zipfile

    from gpusvm import ModelFileError

    save(model, files / "m.model")
    with zipfile.ZipFile(files / "m.model") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    document = json.loads(members["gpusvm.json"])
    document[key] = value
    members["gpusvm.json"] = json.dumps(document).encode()
    with zipfile.ZipFile(files / "edited.model", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ModelFileError, match=f"in gpusvm.json, {key} is a"):
        load(files / "edited.model")


def test_predictions_go_to_a_device(files, capsys):
    assert train(capsys, files / "train.svm", files / "m.model")[0] == 0
    code, _, err = run(capsys, "predict", files / "m.model", files / "test.svm", os.devnull)
    assert code == 0 and "Accuracy" not in err
