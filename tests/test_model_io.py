"""Model files: exact round trips on both backends, atomic writes, and every way a file
can be wrong giving a ModelFileError (never a crash or a silently wrong model)."""

import json
import os
import pickle
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    ModelFileError,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
    load,
    save,
)
from gpusvm.model_io import FORMAT_VERSION, METADATA_MEMBER

from .conftest import assert_same_result, default_backend, needs_device, to_host

SMALL_MODELS = {
    "pegasos": lambda: PegasosSVC(max_iter=3, random_state=0),
    "kernel-pegasos": lambda: KernelPegasosSVC(max_iter=1, random_state=0),
    "sbp": lambda: SBPClassifier(max_iter=2, random_state=0),
    "ftrl": lambda: FTRLClassifier(max_iter=2, random_state=0),
    "truncated-gradient": lambda: TruncatedGradientClassifier(max_iter=2, random_state=0),
    "fobos": lambda: FOBOSClassifier(max_iter=2, random_state=0),
    "rda": lambda: RDAClassifier(max_iter=2, random_state=0),
}


def make_data(rng, n_classes=2, n=120, d=6, sparse=False):
    X = rng.normal(size=(n, d))
    y = np.argmax(X[:, :n_classes] + 0.3 * rng.normal(size=(n, n_classes)), axis=1) * 10 + 3
    if sparse:
        X[rng.random(X.shape) < 0.5] = 0.0
        X = sp.csr_matrix(X)
    return X, y


def assert_same_attributes(a, b):
    assert a.__dict__.keys() - {"metadata_"} == b.__dict__.keys() - {"metadata_"}
    for name, value in a.__dict__.items():
        if name == "metadata_":
            continue
        value, other = to_host(value), to_host(b.__dict__[name])
        if sp.issparse(value):
            assert (value != other).nnz == 0 and value.dtype == other.dtype
        elif isinstance(value, np.ndarray):
            assert value.dtype == other.dtype
            np.testing.assert_array_equal(value, other)
        elif hasattr(value, "__dataclass_fields__"):
            assert_same_attributes(value, other)
        else:
            assert value == other or (value != value and other != other), name


@pytest.fixture
def fitted_path(tmp_path, rng):
    X, y = make_data(rng)
    model = FTRLClassifier(max_iter=2, random_state=0).fit(X, y)
    path = tmp_path / "model.npz"
    save(model, path)
    return path, model, X


# --- round trips ---------------------------------------------------------------------


@pytest.mark.parametrize("solver", SMALL_MODELS)
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("sparse", [False, True])
def test_round_trip_is_exact(solver, n_classes, sparse, tmp_path, rng):
    X, y = make_data(rng, n_classes, sparse=sparse)
    model = SMALL_MODELS[solver]().fit(X, y)
    path = tmp_path / "model.gpusvm"
    save(model, path, metadata={"note": "hello", "weights": [1.5, float("inf")]})
    loaded = load(path)
    assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
    assert_same_attributes(model, loaded)
    assert loaded.metadata_ == {"note": "hello", "weights": [1.5, float("inf")]}
    assert_same_result(loaded.decision_function(X), model.decision_function(X), model.backend_)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("solver", ["pegasos", "ftrl", "rda"])
def test_loaded_model_continues_partial_fit_as_the_saved_one(solver, tmp_path, rng):
    X, y = make_data(rng, 3)
    model = SMALL_MODELS[solver]().fit(X, y)
    save(model, tmp_path / "m")
    loaded = load(tmp_path / "m")
    model.partial_fit(X[:50], y[:50])
    loaded.partial_fit(X[:50], y[:50])
    assert_same_result(loaded.coef_, model.coef_, model.backend_)
    assert_same_result(loaded.intercept_, model.intercept_, model.backend_)


def test_parameters_with_special_values_survive(tmp_path, rng):
    X, y = make_data(rng)
    model = PegasosSVC(class_weight={3: 2.0, 13: 0.5}, tol=None, average=5, max_iter=2).fit(X, y)
    save(model, tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.get_params() == model.get_params()
    model = TruncatedGradientClassifier(theta=np.inf, max_iter=1).fit(X, y)
    save(model, tmp_path / "m")
    assert load(tmp_path / "m").theta == np.inf
    model = PegasosSVC(verbose=np.True_, fit_intercept=np.False_, max_iter=1).fit(X, y)  # NumPy bools
    save(model, tmp_path / "m")
    assert load(tmp_path / "m").get_params() == model.get_params()


def test_string_labels_and_float32_data(tmp_path, rng):
    X, y = make_data(rng, 3)
    labels = np.array(["cat", "dog", "emu"])[(y - 3) // 10]
    model = KernelPegasosSVC(max_iter=1, random_state=0).fit(X.astype(np.float32), labels)
    save(model, tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.classes_.tolist() == ["cat", "dog", "emu"] and loaded.support_vectors_.dtype == np.float32
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with zipfile.ZipFile(tmp_path / "m") as archive:
        document = json.loads(archive.read(METADATA_MEMBER))
    assert document["dtype"] == "float32" and document["classes"] == ["cat", "dog", "emu"]
    assert document["solver"] == "kernel-pegasos" and document["format_version"] == FORMAT_VERSION


def test_feature_names_survive(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    X, y = make_data(rng)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    model = FTRLClassifier(max_iter=1).fit(frame, y)
    save(model, tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.feature_names_in_.dtype == object
    np.testing.assert_array_equal(loaded.feature_names_in_, model.feature_names_in_)


def test_numpy_reads_the_arrays_without_pickle(fitted_path):
    path, model, _ = fitted_path
    with np.load(path, allow_pickle=False) as archive:
        np.testing.assert_array_equal(archive["coef_"], model.coef_)


def test_a_model_trained_on_the_gpu_loads_and_predicts_on_a_cpu(fitted_path):
    # What a CuPy-trained file holds: backend_ 'cupy' and host arrays.  On a machine
    # without a device it predicts with NumPy; with backend='numpy' it does everywhere.
    path, model, X = fitted_path
    trained_on, model.backend_ = model.backend_, "cupy"
    save(model, path)
    loaded = load(path, backend="numpy")
    assert loaded.backend_ == "numpy" and loaded.backend == "numpy"
    assert_same_result(loaded.decision_function(X), model.decision_function(X), trained_on)
    loaded.partial_fit(X, load(path, backend="numpy").predict(X))  # continues on the CPU


@needs_device
@pytest.mark.parametrize("solver", SMALL_MODELS)
def test_cupy_model_round_trip_and_cross_backend(solver, tmp_path, rng):
    import cupy

    X, y = make_data(rng, 3)
    model = SMALL_MODELS[solver]().set_params(backend="cupy").fit(X, y)
    save(model, tmp_path / "m")
    on_device = load(tmp_path / "m")
    assert on_device.backend_ == "cupy"
    assert_same_attributes(model, on_device)
    on_host = load(tmp_path / "m", backend="numpy")
    np.testing.assert_allclose(on_host.decision_function(X), model.decision_function(X), rtol=1e-9, atol=1e-9)
    scores = on_device.decision_function(cupy.asarray(X))
    np.testing.assert_allclose(scores.get(), model.decision_function(X), rtol=1e-9, atol=1e-9)
    cpu_model = SMALL_MODELS[solver]().set_params(backend="numpy").fit(X, y)
    save(cpu_model, tmp_path / "c")
    np.testing.assert_allclose(
        load(tmp_path / "c", backend="cupy").decision_function(X), cpu_model.decision_function(X), rtol=1e-9, atol=1e-9
    )


def test_load_with_an_unavailable_backend_says_so(fitted_path):
    from gpusvm._backend import cupy_device_count

    if cupy_device_count() > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="backend='cupy' needs CuPy"):
        load(fitted_path[0], backend="cupy")


# --- what cannot be saved --------------------------------------------------------------


def test_save_refuses_what_it_cannot_write_safely(tmp_path, rng):
    X, y = make_data(rng)
    with pytest.raises(NotFittedError):
        save(PegasosSVC(), tmp_path / "m")
    with pytest.raises(TypeError, match="LogisticRegression"):
        save(LogisticRegression().fit(X, y), tmp_path / "m")
    model = FTRLClassifier(random_state=np.random.RandomState(0), max_iter=1).fit(X, y)
    with pytest.raises(TypeError, match="random_state"):
        save(model, tmp_path / "m")
    assert not (tmp_path / "m").exists()


# --- atomic writes ------------------------------------------------------------------


def test_an_interrupted_save_leaves_the_old_file(fitted_path, monkeypatch, rng):
    path, model, X = fitted_path
    before = path.read_bytes()
    calls = []

    def failing_write(stream, array, **kwargs):
        calls.append(array.shape)
        if len(calls) == 2:
            raise KeyboardInterrupt  # e.g. Ctrl-C half way
        return real_write(stream, array, **kwargs)

    real_write = np.lib.format.write_array
    monkeypatch.setattr(np.lib.format, "write_array", failing_write)
    other = RDAClassifier(max_iter=1).fit(*make_data(rng))
    for target in (path, path.parent / "new.npz"):
        calls.clear()
        with pytest.raises(KeyboardInterrupt):
            save(other, target)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.npz"]  # no temporary left
    monkeypatch.undo()
    np.testing.assert_array_equal(load(path).decision_function(X), model.decision_function(X))


def test_saved_file_has_the_usual_permissions(fitted_path):
    umask = os.umask(0)
    os.umask(umask)
    assert fitted_path[0].stat().st_mode & 0o777 == 0o666 & ~umask


# --- damaged and foreign files -------------------------------------------------------


def rewrite(path, out, *, document=None, members=None, drop=()):
    """A copy of the model file at ``path`` with its JSON edited by ``document(doc)``,
    members replaced by ``members`` {name: bytes}, and members in ``drop`` left out."""
    with zipfile.ZipFile(path) as archive:
        contents = {name: archive.read(name) for name in archive.namelist()}
    if document is not None:
        doc = json.loads(contents[METADATA_MEMBER])
        document(doc)
        contents[METADATA_MEMBER] = json.dumps(doc).encode()
    contents.update(members or {})
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in contents.items():
            if name not in drop:
                archive.writestr(name, data)
    return out


def written(path, data):
    path.write_bytes(data)
    return path


def npy_bytes(array, allow_pickle=False):
    import io

    stream = io.BytesIO()
    np.lib.format.write_array(stream, array, allow_pickle=allow_pickle)
    return stream.getvalue()


def set_in(path_keys, value):
    def edit(doc):
        node = doc
        for key in path_keys[:-1]:
            node = node[key]
        node[path_keys[-1]] = value

    return edit


DAMAGES = {
    "empty file": lambda src, out: written(out, b""),
    "text file": lambda src, out: written(out, b"1 1:0.5 2:1\n"),
    "pickled model": lambda src, out: written(out, pickle.dumps(load(src))),
    "first half": lambda src, out: written(out, src.read_bytes()[: len(src.read_bytes()) // 2]),
    "last bytes cut": lambda src, out: written(out, src.read_bytes()[:-30]),
    "plain npz": lambda src, out: (np.savez(out, coef_=np.ones(3)), out.with_suffix(".npz"))[1],
    "no metadata": lambda src, out: rewrite(src, out, drop=[METADATA_MEMBER]),
    "metadata not JSON": lambda src, out: rewrite(src, out, members={METADATA_MEMBER: b"{not json"}),
    "metadata a list": lambda src, out: rewrite(src, out, members={METADATA_MEMBER: b"[1, 2]"}),
    "other format": lambda src, out: rewrite(src, out, document=set_in(["format"], "something-else")),
    "newer version": lambda src, out: rewrite(src, out, document=set_in(["format_version"], FORMAT_VERSION + 1)),
    "version a string": lambda src, out: rewrite(src, out, document=set_in(["format_version"], "1")),
    "version zero": lambda src, out: rewrite(src, out, document=set_in(["format_version"], 0)),
    "unknown solver": lambda src, out: rewrite(src, out, document=set_in(["solver"], "libsvm")),
    "no attributes": lambda src, out: rewrite(src, out, document=lambda doc: doc.pop("attributes")),
    "missing array": lambda src, out: rewrite(src, out, drop=["coef_.npy"]),
    "array of another shape": lambda src, out: rewrite(src, out, members={"coef_.npy": npy_bytes(np.ones((1, 2)))}),
    "array of another dtype": lambda src, out: rewrite(
        src, out, members={"coef_.npy": npy_bytes(np.ones((1, 6), dtype=np.float32))}
    ),
    "object array": lambda src, out: rewrite(
        src, out, members={"coef_.npy": npy_bytes(np.array([[None] * 6], dtype=object), allow_pickle=True)}
    ),
    "garbled npy": lambda src, out: rewrite(src, out, members={"coef_.npy": b"\x93NUMPY garbage"}),
    "bad parameter": lambda src, out: rewrite(src, out, document=set_in(["params", "alpha"], -1.0)),
    "unknown parameter": lambda src, out: rewrite(src, out, document=set_in(["params", "kernel"], "rbf")),
    "attribute that shadows a method": lambda src, out: rewrite(
        src, out, document=set_in(["attributes", "predict"], 1)
    ),
    "dunder attribute": lambda src, out: rewrite(src, out, document=set_in(["attributes", "__class__"], "x")),
    "classes disagree": lambda src, out: rewrite(src, out, document=set_in(["classes"], [3, 14])),
    "one class": lambda src, out: rewrite(
        src,
        out,
        members={"classes_.npy": npy_bytes(np.array([3]))},
        document=lambda doc: (doc.update(classes=[3]), doc["attributes"]["classes_"].update(shape=[1])),
    ),
    "wrong feature count": lambda src, out: rewrite(src, out, document=set_in(["n_features_in"], 7)),
    "features and weights disagree": lambda src, out: rewrite(
        src, out, document=lambda doc: (doc.update(n_features_in=7), doc["attributes"].update(n_features_in_=7))
    ),
    "intercept of another length": lambda src, out: rewrite(
        src,
        out,
        members={"intercept_.npy": npy_bytes(np.ones(3))},
        document=set_in(["attributes", "intercept_", "shape"], [3]),
    ),
    "non-finite weights": lambda src, out: rewrite(src, out, members={"coef_.npy": npy_bytes(np.full((1, 6), np.nan))}),
    "unknown tag": lambda src, out: rewrite(src, out, document=set_in(["attributes", "t_"], {"$code": "rm -rf"})),
    "unknown state class": lambda src, out: rewrite(
        src, out, document=set_in(["attributes", "_state", "$dataclass"], "Popen")
    ),
    "state with other fields": lambda src, out: rewrite(
        src, out, document=lambda doc: doc["attributes"]["_state"]["fields"].pop("level")
    ),
    "backend unknown": lambda src, out: rewrite(src, out, document=set_in(["attributes", "backend_"], "tpu")),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_or_foreign_file_gives_a_clear_error(damage, fitted_path):
    path = DAMAGES[damage](fitted_path[0], fitted_path[0].parent / "damaged")
    with pytest.raises(ModelFileError) as error:
        load(path)
    assert str(path) in str(error.value)


def test_every_flipped_byte_is_caught_or_harmless(fitted_path):
    # Flip one byte at a time across the file: each load either raises ModelFileError
    # or (a byte zip does not read, e.g. a timestamp) gives the very same model.
    path, model, X = fitted_path
    data = path.read_bytes()
    expected = model.decision_function(X)
    out = path.parent / "flipped"
    for position in range(0, len(data), max(1, len(data) // 400)):
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        out.write_bytes(bytes(damaged))
        try:
            loaded = load(out)
        except ModelFileError:
            continue
        np.testing.assert_array_equal(loaded.decision_function(X), expected)


def test_a_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nothing-here")


# --- edited files: each part checked, and the parts against each other ----------------


def replace_array(path, out, member, array):
    """A copy of the model file with the array ``member`` replaced by ``array``, its
    description in the JSON updated to match (an edit made with care, not damage)."""

    def describe(node):
        if isinstance(node, dict):
            if node.get("$array") == member:
                node["dtype"], node["shape"] = array.dtype.str, list(array.shape)
            for value in node.values():
                describe(value)
        elif isinstance(node, list):
            for value in node:
                describe(value)

    return rewrite(path, out, document=describe, members={f"{member}.npy": npy_bytes(array)})


def reorder_classes(path, out):
    with np.load(path, allow_pickle=False) as archive:
        classes = archive["classes_"][::-1].copy()
    replace_array(path, out, "classes_", classes)
    return rewrite(out, out, document=set_in(["classes"], classes.tolist()))


def set_attribute(name, value):
    return lambda src, out: rewrite(src, out, document=set_in(["attributes", name], value))


EDITS = {
    "lam_ NaN": ("pegasos", set_attribute("lam_", {"$float": "nan"})),
    "lam_ negative": ("pegasos", set_attribute("lam_", -1.0)),
    "seed negative": ("pegasos", set_attribute("_seed", -1)),
    "seed a string": ("ftrl", set_attribute("_seed", "7")),
    "negative step count": ("pegasos", set_attribute("t_", -3)),
    "step count not the state's": ("ftrl", set_attribute("t_", 5)),
    "pegasos state of another shape": (
        "pegasos",
        lambda src, out: replace_array(src, out, "_state.v", np.zeros((1, 3))),
    ),
    "online state of another shape": (
        "ftrl",
        lambda src, out: replace_array(src, out, "_state.first", np.zeros((2, 7))),
    ),
    "state that disagrees with coef_": ("pegasos", lambda src, out: replace_array(src, out, "coef_", np.ones((1, 6)))),
    "classes reordered": ("pegasos", reorder_classes),
    "classes repeated": (
        "ftrl",
        lambda src, out: rewrite(
            replace_array(src, out, "classes_", np.array([3, 3])), out, document=set_in(["classes"], [3, 3])
        ),
    ),
    "complex coef_": ("pegasos", lambda src, out: replace_array(src, out, "coef_", np.ones((1, 6), dtype=complex))),
    "int64 coef_": ("ftrl", lambda src, out: replace_array(src, out, "coef_", np.ones((1, 6), dtype=np.int64))),
    "kernel gamma_ zero": ("kernel-pegasos", set_attribute("gamma_", 0.0)),
    "negative support index": (
        "sbp",
        lambda src, out: replace_array(src, out, "support_", -np.ones_like(np.load(src)["support_"])),
    ),
    "n_nonzero_ not coef_'s count": ("ftrl", set_attribute("n_nonzero_", 7)),
    "batch_size_ zero": ("sbp", set_attribute("batch_size_", 0)),
    "nu_ negative": ("sbp", set_attribute("nu_", -0.1)),
    "non-finite support vectors": (
        "kernel-pegasos",
        lambda src, out: replace_array(
            src, out, "support_vectors_", np.full_like(np.load(src)["support_vectors_"], np.nan)
        ),
    ),
}


@pytest.mark.parametrize("edit", EDITS)
def test_an_edited_file_whose_parts_disagree_is_refused(edit, tmp_path, rng):
    solver, change = EDITS[edit]
    X, y = make_data(rng)
    path = tmp_path / "model.npz"
    save(SMALL_MODELS[solver]().fit(X, y), path)
    load(path)  # the file as saved loads
    edited = change(path, tmp_path / "edited.npz")
    with pytest.raises(ModelFileError, match="does not hold a consistent") as error:
        load(edited)
    assert str(edited) in str(error.value)


@pytest.mark.parametrize(
    "solver, name, value",
    [
        ("ftrl", "alpha", "abc"),
        ("pegasos", "fit_intercept", "yes"),
        ("rda", "gamma", None),
        ("pegasos", "batch_size", 0),
    ],
)
def test_a_parameter_written_among_the_fitted_attributes_is_refused(solver, name, value, tmp_path, rng):
    """Parameters come from the file's checked ``params`` alone: one set again among its
    attributes would skip the estimator's parameter checks."""
    X, y = make_data(rng)
    path = tmp_path / "model.npz"
    save(SMALL_MODELS[solver]().fit(X, y), path)
    edited = set_attribute(name, value)(path, tmp_path / "edited.npz")
    with pytest.raises(ModelFileError, match=f"sets '{name}', which is not a fitted attribute"):
        load(edited)


def test_feature_names_that_do_not_fit_the_model_are_refused(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    X, y = make_data(rng)
    model = PegasosSVC(max_iter=2, random_state=0).fit(pd.DataFrame(X, columns=list("abcdef")), y)
    path = tmp_path / "model.npz"
    save(model, path)
    for names, problem in [
        (["a", "b"], "names 2 features, the model has 6"),
        (list("abcdea"), "repeats a name"),
    ]:
        edited = set_attribute("feature_names_in_", {"$strings": names})(path, tmp_path / "edited.npz")
        with pytest.raises(ModelFileError, match=problem):
            load(edited)


def test_save_refuses_a_parameter_set_after_the_fit_that_load_would_refuse(tmp_path, rng):
    X, y = make_data(rng)
    model = FTRLClassifier(max_iter=2).fit(X, y).set_params(alpha=-1.0)
    with pytest.raises(ValueError, match="'alpha' parameter of FTRLClassifier"):
        save(model, tmp_path / "model.npz")
    assert not (tmp_path / "model.npz").exists()


def test_metadata_arrays_are_saved_and_loaded(fitted_path):
    path, model, X = fitted_path
    mean = X.mean(axis=0)
    save(model, path, metadata={"mean": mean, "scaler": {"scale": X.std(axis=0).astype(np.float32)}, "rows": 120})
    loaded = load(path)
    np.testing.assert_array_equal(loaded.metadata_["mean"], mean)
    assert loaded.metadata_["scaler"]["scale"].dtype == np.float32 and loaded.metadata_["rows"] == 120


def test_save_names_a_path_it_cannot_write(fitted_path):
    path, model, _ = fitted_path
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save(model, path.parent / "missing" / "m.npz")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        save(model, path.parent)
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.npz"]


def test_a_save_killed_mid_write_leaves_a_file_the_next_save_removes(fitted_path):
    # A writer killed outright (SIGKILL) cannot clean up; its temporary file names its
    # process id, and the next save to the same path removes it once that process is gone.
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    path, model, X = fitted_path
    started = path.parent / "writing"
    script = textwrap.dedent(f"""
        import pathlib, time
        import numpy as np
        from gpusvm import load, save
        model = load({str(path)!r})
        real_write = np.lib.format.write_array
        def slow_write(*args, **kwargs):
            pathlib.Path({str(started)!r}).touch()
            time.sleep(60)
        np.lib.format.write_array = slow_write
        save(model, {str(path)!r})
    """)
    writer = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and writer.poll() is None:
        time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    orphans = list(path.parent.glob(".model.npz.*.tmp"))
    assert len(orphans) == 1 and str(writer.pid) in orphans[0].name
    live = path.parent / f".model.npz.{os.getpid()}.concurrent.tmp"  # a save in progress here
    live.write_bytes(b"")
    save(model, path)
    assert not orphans[0].exists() and live.exists()
    np.testing.assert_array_equal(load(path).decision_function(X), model.decision_function(X))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_sbp_file_from_before_kernel_dtype_loads_with_the_dtype_it_was_fitted_in(rng, tmp_path, dtype):
    """Before ``kernel_dtype``, X's dtype decided the kernel values' (support_vectors_
    keep it): a file without the parameter, and a pickle, load with that dtype."""
    X, y = make_data(rng)
    model = SBPClassifier(max_iter=2, random_state=0, kernel_dtype="float64").fit(X.astype(dtype), y)
    path = tmp_path / "sbp.gpusvm"
    save(model, path)

    def without_kernel_dtype(doc):  # nor kernel_dtype_, which came later still
        del doc["params"]["kernel_dtype"], doc["attributes"]["kernel_dtype_"]

    old = load(rewrite(path, tmp_path / "old.gpusvm", document=without_kernel_dtype))
    assert old.kernel_dtype == old.kernel_dtype_ == np.dtype(dtype).name
    np.testing.assert_array_equal(old.decision_function(X), model.decision_function(X))
    state = model.__getstate__()
    del state["kernel_dtype"], state["kernel_dtype_"]
    pickled = SBPClassifier.__new__(SBPClassifier)
    pickled.__setstate__(state)
    assert pickled.kernel_dtype == pickled.kernel_dtype_ == np.dtype(dtype).name
    assert pickled.get_params()["max_iter"] == 2


def test_an_sbp_file_from_before_kernel_dtype_auto_has_the_dtype_it_was_set_to(rng, tmp_path):
    """Files and pickles from before kernel_dtype='auto' hold no ``kernel_dtype_``: the
    fitted attribute is then the ``kernel_dtype`` they were fitted with."""
    X, y = make_data(rng)
    model = SBPClassifier(max_iter=2, random_state=0, kernel_dtype="float32").fit(X, y)
    path = tmp_path / "sbp.gpusvm"
    save(model, path)

    def without_the_attribute(doc):
        del doc["attributes"]["kernel_dtype_"]

    assert load(rewrite(path, tmp_path / "old.gpusvm", document=without_the_attribute)).kernel_dtype_ == "float32"
    state = model.__getstate__()
    del state["kernel_dtype_"]
    pickled = SBPClassifier.__new__(SBPClassifier)
    pickled.__setstate__(state)
    assert pickled.kernel_dtype_ == "float32"


def test_a_multiclass_sbp_file_from_before_one_vs_one_loads_as_one_vs_rest(rng, tmp_path):
    """Files written before SBPClassifier had ``multi_class`` hold one-vs-rest models:
    loading one without the parameter gives multi_class='ovr', the model it was."""
    X, y = make_data(rng, n_classes=3)
    model = SBPClassifier(max_iter=2, random_state=0, multi_class="ovr").fit(X, y)
    path = tmp_path / "ovr.gpusvm"
    save(model, path)

    def without_multi_class(doc):
        del doc["params"]["multi_class"], doc["params"]["decision_function_shape"]

    old = load(rewrite(path, tmp_path / "old.gpusvm", document=without_multi_class))
    assert old.multi_class == "ovr" and old.decision_function_shape == "ovr"
    assert_same_result(old.decision_function(X), model.decision_function(X), default_backend())
    one_vs_one = SBPClassifier(max_iter=2, random_state=0).fit(X, y)
    assert one_vs_one.dual_coef_.shape[0] == 3  # a row per pair: (0, 1), (0, 2), (1, 2)
    save(one_vs_one, tmp_path / "ovo.gpusvm")
    assert_same_attributes(load(tmp_path / "ovo.gpusvm"), one_vs_one)
