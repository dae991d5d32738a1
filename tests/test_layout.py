"""The package layout (issue 44): its rules, checked by reading the sources, and fitted
models written before the move still load.

Layers, lowest first; a module imports (at its top or inside a function) only modules of
its own layer or of lower ones, and the import graph has no cycle:

1. foundations: ``_backend``, ``_random``, ``_validation``, ``_instrumentation``,
   ``_output_files``, ``_version``;
2. ``_device/``: the CUDA runtime every launcher shares (compiling ``kernels/*.cu``, step
   blocks and graphs, staging to the device, system info); it never imports a solver;
3. the math that the solvers share and users call: ``kernel_functions/`` and
   ``water_level/``, each with its CUDA twin inside (``_cuda.py``, ``_sbp_level_cuda.py``);
4. ``solvers/``: a folder a solver (``__init__``: the math and ``make_steps``, the one
   place where the backend is chosen; ``_problem``, ``_numpy``, ``_cuda``), and what the
   kernel solvers share (``row_cache``, ``_kernel_values_cuda``);
5. ``_estimator/`` (what the estimators share) and ``_stream/`` (data in chunks);
6. the public modules (``svm``, ``sbp``, ``linear_model``, ``model_io``, ``data_files``,
   ``datasets``, ``cli``, ``dask``, ...) and ``_registry``, which names their classes.

CuPy is imported only in ``_device/`` and the CUDA modules (``_cuda.py``, ``*_cuda.py``),
besides the few array conversions listed in ``ARRAY_CONVERSIONS``; the CPU suite never runs
the lazy CUDA imports, so every import of a gpusvm module, in the package, the tests, the
benchmarks and ci/, is resolved here by reading the sources; every CUDA module's first
docstring line names the ``.cu`` file it launches. The benchmarks are a package whose scripts
run as ``python -m bench.<script>``, never edit ``sys.path``, and share ``bench.datasets``,
``bench.common`` and ``bench.peers``, never importing one another.
"""

import ast
import importlib
import pickle
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

import gpusvm

from .data.make_layout_fixtures import MODELS, layout_data

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpusvm"
DATA = Path(__file__).resolve().parent / "data"

LAYERS = [  # lowest first: (name, module prefixes); a module's layer is its longest prefix
    (
        "foundations",
        [
            "gpusvm._backend",
            "gpusvm._random",
            "gpusvm._validation",
            "gpusvm._instrumentation",
            "gpusvm._output_files",
            "gpusvm._version",
        ],
    ),
    ("device runtime", ["gpusvm._device"]),
    ("kernel functions and water levels", ["gpusvm.kernel_functions", "gpusvm.water_level"]),
    ("solvers", ["gpusvm.solvers"]),
    ("estimators' shared parts and streams", ["gpusvm._estimator", "gpusvm._stream"]),
    ("public modules", ["gpusvm"]),
]

# Two-way imports allowed for now, each with its reason (none left).
KNOWN_CYCLES = {}

# Modules outside _device/ and the CUDA modules that import CuPy: array conversions on the
# CuPy path only, inside functions (cupyx.scipy.sparse for CSR matrices, which the array
# module that the backend gives does not cover).
ARRAY_CONVERSIONS = {
    "gpusvm._backend": "finds CuPy, and moves arrays between the backends",
    "gpusvm._validation": "checks CuPy input as validate_data checks host input",
    "gpusvm._stream.chunks": "stacks CuPy CSR chunks",
    "gpusvm.dask._shards": "stacks CuPy CSR blocks",
}

# The CUDA loader's names: "kernel" above _device/ means an SVM kernel.
CUDA_LOADER_NAMES = {"get_cuda_kernel", "get_cuda_module", "cuda_source_dir"}


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_files():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


MODULES = {module_name(path): path for path in package_files()}


def is_package(name):
    return MODULES[name].name == "__init__.py"


def layer_of(name):
    best = max(
        (prefix for _, prefixes in LAYERS for prefix in prefixes if name == prefix or name.startswith(prefix + ".")),
        key=len,
    )
    return next(rank for rank, (_, prefixes) in enumerate(LAYERS) if best in prefixes)


def is_cuda_module(name):
    last = name.rsplit(".", 1)[-1]
    return last == "_cuda" or last.endswith("_cuda")


def imports(tree, name=None, in_package=False):
    """``(target module, names, node, in a function)`` for every import of the tree; relative
    imports are resolved against module ``name`` (a package when ``in_package``)."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append((alias.name, [], child, in_function))
            elif isinstance(child, ast.ImportFrom):
                if child.level and name is None:  # a relative import outside the package
                    target = None
                elif child.level:
                    base = name.split(".") if in_package else name.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module
                found.append((target, [alias.name for alias in child.names], child, in_function))
            visit(child, inside)

    visit(tree, False)
    return found


def parsed(path):
    return ast.parse(path.read_text(), filename=str(path))


def top_level_names(tree):
    """Names a module binds at import time (in its body, its ifs, trys and withs)."""
    names = set()

    def bind(target):
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.add(node.id)

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in getattr(node, "targets", None) or [node.target]:
                    bind(target)
            elif isinstance(node, ast.Import):
                names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                names.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, (ast.For, ast.While)):
                bind(getattr(node, "target", ast.Pass()))
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.With):
                visit(node.body)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return names


TREES = {name: parsed(path) for name, path in MODULES.items()}


def lazy_names(tree):
    """Names a package binds at their first use (PEP 562 in gpusvm/__init__.py): its
    ``_PUBLIC`` dict's keys."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "_PUBLIC" for target in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


BOUND = {name: top_level_names(tree) | lazy_names(tree) for name, tree in TREES.items()}


def test_every_public_name_comes_from_the_module_it_names():
    import gpusvm

    for name, module in gpusvm._PUBLIC.items():
        assert name in BOUND[f"gpusvm.{module}"], f"gpusvm.{module} has no {name}"
        assert getattr(gpusvm, name) is getattr(importlib.import_module(f"gpusvm.{module}"), name)
    # names that are neither public nor a submodule: an AttributeError, as hasattr and getattr's default need
    assert not hasattr(gpusvm, "foo.bar") and getattr(gpusvm, ".sbp", None) is None
    assert getattr(gpusvm, "datasets.x", 1) == 1 and not hasattr(gpusvm, "no_such_module")
    assert "importlib" not in dir(gpusvm) and set(gpusvm.__all__) <= set(dir(gpusvm))


def package_edges():
    """``(importer, imported, in a function)`` between gpusvm modules: ``from X import Y``
    imports X.Y when that is a module, else X."""
    edges = []
    for name, tree in TREES.items():
        for target, names, _, in_function in imports(tree, name, is_package(name)):
            if not target or not target.startswith("gpusvm"):
                continue
            submodules = [f"{target}.{y}" for y in names if f"{target}.{y}" in MODULES]
            if len(submodules) < len(names) or not names:
                edges.append((name, target, in_function))
            edges.extend((name, submodule, in_function) for submodule in submodules)
    return edges


# --- the rules --------------------------------------------------------------------------


def test_every_module_has_a_layer_and_imports_run_down_the_layers():
    wrong = [
        f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
        + (" inside a function" if in_function else "")
        for a, b, in_function in package_edges()
        if b in MODULES and layer_of(b) > layer_of(a)
    ]
    assert not wrong, "imports that run up the layers:\n" + "\n".join(wrong)


def test_the_device_runtime_never_imports_a_solver_or_an_estimator():
    device = [(a, b) for a, b, _ in package_edges() if a.startswith("gpusvm._device")]
    assert device and all(layer_of(b) == 0 or b.startswith("gpusvm._device") for _, b in device), device


def test_the_import_graph_has_no_cycle():
    graph = {}
    for a, b, _ in package_edges():
        if a != b:
            graph.setdefault(a, set()).add(b)
    # Tarjan's strongly connected components
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(frozenset(component))

    for node in sorted(MODULES):
        if node not in index:
            connect(node)
    unexplained = [sorted(component) for component in components if component not in KNOWN_CYCLES]
    assert not unexplained, f"import cycles: {unexplained}"


def test_cupy_is_imported_only_by_the_device_runtime_and_the_cuda_modules():
    wrong = []
    for name, tree in TREES.items():
        for target, _, node, in_function in imports(tree, name, is_package(name)):
            if not target or target.split(".")[0] not in ("cupy", "cupyx"):
                continue
            if name.startswith("gpusvm._device") or is_cuda_module(name):
                continue
            if name in ARRAY_CONVERSIONS and in_function:
                continue
            wrong.append(f"{name}, line {node.lineno}: imports {target}")
    assert not wrong, "\n".join(wrong)


def import_sites():
    """Every import of a gpusvm module in the package, the tests, the benchmarks, ci/ and
    the examples: ``(file, line, module, names)``."""
    files = package_files() + sorted(
        p
        for folder in ("tests", "bench", "ci", "examples", "docs")
        for p in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in p.parts and "_build" not in p.parts
    )
    for path in files:
        name = module_name(path) if path.is_relative_to(PACKAGE) else None
        for target, names, node, _ in imports(parsed(path), name, name is not None and is_package(name)):
            if target and target.split(".")[0] == "gpusvm":
                yield path.relative_to(ROOT), node.lineno, target, names


def test_every_import_of_a_gpusvm_module_resolves():
    """Read, not run: the CPU suite never takes the lazy imports of the CUDA paths, so a
    path that a move broke would otherwise pass unseen until a GPU ran it."""
    unresolved = []
    for path, line, target, names in import_sites():
        if target not in MODULES:
            unresolved.append(f"{path}:{line}: no module {target}")
            continue
        for name in names:
            if name != "*" and name not in BOUND[target] and f"{target}.{name}" not in MODULES:
                unresolved.append(f"{path}:{line}: {target} has no {name}")
    assert not unresolved, "\n".join(unresolved)


BENCH = ROOT / "bench"
# What the benchmark scripts share; every other module of bench/ is a script.
BENCH_SHARED = {"bench.datasets": "the data", "bench.common": "the shared helpers", "bench.peers": "the peers"}


def test_the_benchmarks_are_a_package_whose_scripts_share_only_its_shared_modules():
    """``python -m bench.<script>`` from the root, as scikit-learn's asv_benchmarks: no module
    of bench/ edits ``sys.path`` (nor a source it runs in a child process), none silences E402,
    and a module imports bench's shared modules only, never a script; every module but
    the shared ones is a script (it has a ``__main__`` block)."""
    assert (BENCH / "__init__.py").is_file()
    modules = {f"bench.{path.stem}": path for path in sorted(BENCH.glob("*.py")) if path.name != "__init__.py"}
    assert set(BENCH_SHARED) <= set(modules)
    stems = {name.split(".")[1] for name in modules}
    wrong = []
    for name, path in modules.items():
        where = path.relative_to(ROOT)
        tree = parsed(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
                wrong.append(f"{where}:{node.lineno}: sys.path")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "sys.path" in node.value:
                wrong.append(f"{where}:{node.lineno}: sys.path in a source it runs")
        if "noqa: E402" in path.read_text():
            wrong.append(f"{where}: noqa: E402")
        for target, names, node, _ in imports(tree, name):
            if target == "bench":  # from bench import common
                targets = [f"bench.{alias}" for alias in names]
            elif target and target.split(".")[0].lstrip("_") in stems:  # bench/ on sys.path: `from sbp_step import`
                targets = [f"bench.{target}"]
            else:
                targets = [target] if target and target.startswith("bench.") else []
            wrong += [f"{where}:{node.lineno}: imports {other}" for other in targets if other not in BENCH_SHARED]
        is_script = any(
            isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test)
            for node in tree.body
        )
        if not is_script and name not in BENCH_SHARED:
            wrong.append(f"{where}: neither a script nor one of {sorted(BENCH_SHARED)}")
    assert not wrong, "\n".join(wrong)


def test_the_cuda_loader_is_named_as_such_outside_the_device_runtime():
    """ "kernel" means an SVM kernel everywhere above ``_device/``: the loader's names say CUDA."""
    old = {"get_kernel", "get_module", "kernel_dir"}
    wrong = [f"{name}: {sorted(BOUND[name] & old)}" for name in MODULES if BOUND[name] & old]
    assert not wrong, wrong
    assert CUDA_LOADER_NAMES <= BOUND["gpusvm._device.cuda_modules"]


def cuda_sources_launched(tree):
    """The ``.cu`` files a module names in its ``get_cuda_kernel`` calls (a literal, or a
    module-level constant)."""
    constants = {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }
    launched = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "get_cuda_kernel" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant):
                launched.add(first.value)
            elif isinstance(first, ast.Name) and first.id in constants:
                launched.add(constants[first.id])
    return launched


CUDA_MODULES = sorted(
    name
    for name, tree in TREES.items()
    if is_cuda_module(name) or (cuda_sources_launched(tree) and name != "gpusvm._device.cuda_modules")
)


@pytest.mark.parametrize("name", CUDA_MODULES)
def test_every_cuda_module_names_the_cu_file_it_launches_in_its_first_docstring_line(name):
    first_line = (ast.get_docstring(TREES[name]) or "").splitlines()[0] if ast.get_docstring(TREES[name]) else ""
    sources = {p.name for p in (ROOT / "kernels").glob("*.cu")}
    named = {source for source in sources if source in first_line}
    assert named, f"{name}'s first docstring line names no kernels/*.cu: {first_line!r}"
    assert cuda_sources_launched(TREES[name]) <= named, (name, first_line)


def test_the_cuda_modules_are_where_the_layout_puts_them():
    assert set(CUDA_MODULES) == {
        "gpusvm._device.step_blocks",
        "gpusvm.kernel_functions._cuda",
        "gpusvm.water_level._cuda",
        "gpusvm.water_level._sbp_level_cuda",
        "gpusvm.solvers._kernel_values_cuda",
        "gpusvm.solvers.pegasos._cuda",
        "gpusvm.solvers.kernel_pegasos._cuda",
        "gpusvm.solvers.online_logistic._cuda",
        "gpusvm.solvers.sbp._cuda",
        "gpusvm.solvers.sbp.pairs._cuda",
    }


@pytest.mark.parametrize("solver", ["pegasos", "kernel_pegasos", "online_logistic", "sbp"])
def test_each_solver_chooses_its_backend_in_make_steps_alone(solver):
    """A solver's folder holds its math (citing docs/algorithms.md), its CUDA steps, and one
    ``make_steps``, the only function of the folder that asks which backend it is on."""
    package = f"gpusvm.solvers.{solver}"
    assert "docs/algorithms.md" in ast.get_docstring(TREES[package])
    assert f"{package}._cuda" in MODULES and "make_steps" in BOUND[package]
    choosers = set()
    for name, tree in TREES.items():
        if name == package or name.startswith(package + "."):
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(n, ast.Name) and n.id == "on_device" for n in ast.walk(node)
                ):
                    choosers.add(node.name)
                if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value in ("cupy", "numpy") for c in node.comparators
                ):
                    pytest.fail(f"{name}, line {node.lineno}: compares a backend name")
    assert choosers <= {"make_steps", "make_pair_steps", "pairs_step_together", "plan_pairs"}, choosers
    assert "make_steps" in choosers


def test_no_module_but_the_backend_switch_compares_a_backend_name():
    """The backend is decided once a fit (``GPUClassifierMixin._fit_namespace``) and passed
    down as its array module; a stored name (a model's ``backend_``) is asked through
    ``_backend.is_device_backend``. No module besides ``_backend`` compares a name."""
    comparisons = []
    for name, tree in TREES.items():
        if name == "gpusvm._backend":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(
                isinstance(operand, ast.Constant) and operand.value in ("cupy", "numpy")
                for operand in [node.left, *node.comparators]
            ):
                comparisons.append(f"{name}, line {node.lineno}")
    assert not comparisons, comparisons


# Where an estimator's module may ask for an array module by a backend's name: the fit's one
# decision (the base mixin's), and gpusvm.dask's tasks, each on a worker that resolves its own.
NAMESPACE_CALLS = {"gpusvm._estimator.base": 2, "gpusvm.dask._pegasos": 1, "gpusvm.dask._online": 1}


def test_estimators_ask_for_the_array_module_once_a_fit():
    calls = {}
    for name, tree in TREES.items():
        if name.startswith(("gpusvm.solvers", "gpusvm.kernel_functions", "gpusvm.water_level", "gpusvm._device")):
            continue
        count = sum(
            isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "get_namespace"
            for node in ast.walk(tree)
        )
        if count and name not in ("gpusvm._backend", "gpusvm.datasets"):
            calls[name] = count
    assert calls == NAMESPACE_CALLS


def monkeypatched_module_globals():
    """``(test file, line, module, name)`` for every ``monkeypatch.setattr`` of a gpusvm
    module's global in the tests (through an imported module, or a dotted string)."""
    for path in sorted((ROOT / "tests").glob("*.py")):
        tree = parsed(path)
        aliases = {}  # local name -> gpusvm module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("gpusvm") and alias.asname:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpusvm"):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "setattr"
                and getattr(node.func.value, "id", None) == "monkeypatch"
            ):
                continue
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id in aliases and isinstance(node.args[1], ast.Constant):
                yield path.name, node.lineno, aliases[first.id], node.args[1].value
            elif isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("gpusvm"):
                module, _, name = first.value.rpartition(".")
                yield path.name, node.lineno, module, name


def names_read(tree):
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def test_every_monkeypatched_module_global_is_read_where_it_is_patched():
    """A test that patches a module's global patches what that module's code reads; after a
    move, a patch of a re-export (read by nobody) would silently test nothing."""
    patched = list(monkeypatched_module_globals())
    assert len(patched) >= 10
    wrong = [
        f"{path}:{line}: {module}.{name}"
        for path, line, module, name in patched
        if module not in MODULES or name not in names_read(TREES[module])
    ]
    assert not wrong, "patched globals that their module does not read:\n" + "\n".join(wrong)


# --- models written by the code before the move still load --------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("how", ["pickle", "model file"])
def test_models_written_before_the_move_still_load(name, how):
    X, y2, y3 = layout_data()
    if how == "pickle":
        with open(DATA / f"layout_{name}.pkl", "rb") as file:
            model = pickle.load(file)
    else:
        model = gpusvm.load(DATA / f"layout_{name}.npz")
    expected = np.load(DATA / "layout_predictions.npz")
    with gpusvm.config_context(backend="numpy"):
        if (
            name == "sbp_ovo"
        ):  # written before kernel_dtype (kernel values in X's dtype), nu='auto' and batch_size='auto'
            assert model.kernel_dtype == "float64" and model.nu == 0.01 and model.C == 1.0 and model.batch_size == 64
        if name == "kernel_pegasos":  # written before batch 8 and the averaged iterate were the defaults
            assert (model.batch_size, model.average) == (1, False)
        if name == "ftrl":  # written before batch_size='auto'
            assert model.batch_size == 1024
        # a fresh fit with the parameters the file was written with (SBP's, KernelPegasosSVC's
        # and FTRL's defaults have moved since)
        fresh = clone(model).fit(X, y3 if name == "sbp_ovo" else y2)
        np.testing.assert_array_equal(model.predict(X), expected[name])
        np.testing.assert_array_equal(model.predict(X), fresh.predict(X))
        np.testing.assert_allclose(model.decision_function(X), expected[name + "_decision"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(model.decision_function(X), fresh.decision_function(X), rtol=1e-12, atol=1e-12)
