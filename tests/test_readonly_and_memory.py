"""Fits where the machine is less kind than a developer's (issue 67): a read-only install or a
broken Numba cache, overlapping fits in threads, memory limits (``ulimit -v``, a cgroup), and
matrices wider than memory; and ``cache_size=True``, refused by name.

The Numba tests run in subprocesses, each compiling the compiled pair steps (several seconds
on a shared 2-core machine): they are marked slow."""

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError
from threadpoolctl import threadpool_info, threadpool_limits

import gpusvm
from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
)
from gpusvm.solvers import row_cache
from gpusvm.solvers.sbp.pairs import _numpy as _pairs

from .conftest import needs_numba

ROOT = Path(__file__).resolve().parent.parent


# A one-vs-one fit on the compiled steps and a cross-validation of it; prints the package's
# path, whether the compiled steps ran, and the warnings.
COMPILED_FIT = """
import json, sys, warnings
import numpy as np
from sklearn.model_selection import cross_val_score
import gpusvm
from gpusvm import SBPClassifier
rng = np.random.default_rng(0)
y = np.repeat([0, 1, 2], 20)
X = rng.normal(size=(y.size, 3)) + 2 * y[:, None]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    score = SBPClassifier(max_iter=2, random_state=0).fit(X, y).score(X, y)
    scores = cross_val_score(SBPClassifier(max_iter=2, random_state=0), X, y, cv=2)
print(json.dumps({
    "package": gpusvm.__file__,
    "compiled": "gpusvm.solvers.sbp.pairs._numba" in sys.modules,
    "scores": [score, *scores.tolist()],
    "warnings": [str(w.message) for w in caught if "Numba" in str(w.message)],
}))
"""


def run_compiled_fit(tmp_path, **env):
    """COMPILED_FIT in a fresh process on the compiled steps, with ``env`` set; its report."""
    script = tmp_path / "compiled_fit.py"
    script.write_text(COMPILED_FIT)
    environment = {**os.environ, "GPUSVM_COMPILED_STEPS": "1", "GPUSVM_BACKEND": "numpy", **env}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.splitlines()[-1])
    assert report["compiled"] and min(report["scores"]) > 0.8
    return report


def unwritable(tmp_path):
    """A path under a regular file: no one can create it, root included (whom a read-only
    mode does not stop)."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    return blocker


def read_only_package(tmp_path):
    """A copy of the package where nothing can be written: each folder's ``__pycache__`` a
    regular file (as ``unwritable``), and the folders read-only (for users other than root)."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "gpusvm", site / "gpusvm", ignore=shutil.ignore_patterns("__pycache__"))
    folders = [site / "gpusvm", *(path for path in (site / "gpusvm").rglob("*") if path.is_dir())]
    for folder in folders:
        (folder / "__pycache__").write_text("")
    for folder in folders:
        folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    return site


@pytest.mark.slow
@needs_numba
def test_compiled_steps_fit_where_numba_has_no_writable_cache(tmp_path):
    """A read-only install, no writable home and NUMBA_CACHE_DIR unwritable: Numba has no
    cache locator (``njit(cache=True)`` raised ``RuntimeError: cannot cache function
    '_select_lowest': no locator available`` at the first one-vs-one fit); the steps compile
    in memory, with one warning, in a fit and in cross_val_score."""
    site = read_only_package(tmp_path)
    blocked = unwritable(tmp_path)
    try:
        report = run_compiled_fit(
            tmp_path,
            PYTHONPATH=str(site),
            PYTHONDONTWRITEBYTECODE="1",
            HOME=str(blocked / "home"),
            XDG_CACHE_HOME=str(blocked / "cache"),
            NUMBA_CACHE_DIR=str(blocked / "numba"),
        )
    finally:
        for folder in [site, *site.rglob("*")]:
            if folder.is_dir():
                folder.chmod(stat.S_IRWXU)  # so that pytest can remove the copy
    assert Path(report["package"]).is_relative_to(site)
    assert len(report["warnings"]) == 1 and "Numba cannot cache" in report["warnings"][0]
    assert "NUMBA_CACHE_DIR" in report["warnings"][0]


@pytest.mark.slow
@needs_numba
def test_compiled_steps_fit_with_a_truncated_numba_cache_and_mend_it(tmp_path):
    """Cache files cut in half made the fit fail with ``UnpicklingError``: the steps compile
    again, with one warning, and the cache is written anew (the next process reads it)."""
    cache = tmp_path / "numba_cache"
    first = run_compiled_fit(tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert first["warnings"] == []
    cached = sorted(cache.rglob("*.nbc"))
    assert cached
    for path in cached:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    truncated = run_compiled_fit(tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert len(truncated["warnings"]) == 1 and "could not be read" in truncated["warnings"][0]
    assert truncated["scores"] == first["scores"]
    mended = run_compiled_fit(tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert mended["warnings"] == [] and mended["scores"] == first["scores"]


def blas_threads():
    """BLAS's threads now (the most over its libraries)."""
    return max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")


def release_openblas():
    """Leave OpenBLAS's limit held by no thread (threadpoolctl 3.8 lets only the thread that
    set it last set it again, while that thread lives and holds it)."""
    from threadpoolctl import OpenBLASController

    release = getattr(OpenBLASController, "clear_controlling_thread", None)
    if release is not None:
        release(force=True)


@pytest.fixture
def two_blas_threads():
    """BLAS on two threads during the test, its limit held by no thread (a
    ``threadpool_limits`` context would hold it in the test's thread, and threadpoolctl
    would ignore the fits' threads); skipped where there is no BLAS to count."""
    if not any(info["user_api"] == "blas" for info in threadpool_info()):
        pytest.skip("threadpoolctl finds no BLAS")
    limiter = threadpool_limits(limits=2, user_api="blas")
    release_openblas()
    try:
        if blas_threads() != 2:
            pytest.skip("this BLAS cannot take two threads")
        yield
    finally:
        release_openblas()
        limiter.restore_original_limits()
        release_openblas()


def in_threads(*bodies):
    """Run each body in a thread of its own; re-raise the first error."""
    errors = []

    def run(body):
        try:
            body()
        except BaseException as error:  # noqa: BLE001 (re-raised below, in the test's thread)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    if errors:
        raise errors[0]


def test_overlapping_steps_limit_blas_until_the_last_leaves(two_blas_threads):
    """Two stacks' steps in two threads, the first leaving first: BLAS stays on one thread
    until the second leaves, then has its two threads again (each restoring what it found
    left it on one), and both large fills get the two threads BLAS had."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    first_cache, second_cache, seen = type("Cache", (), {})(), type("Cache", (), {})(), {}

    def first():
        with _pairs._one_blas_thread(first_cache):
            first_in.set()
            assert second_in.wait(10)
            seen["both in"] = blas_threads()
        first_out.set()

    def second():
        assert first_in.wait(10)
        with _pairs._one_blas_thread(second_cache):
            second_in.set()
            assert first_out.wait(10)
            seen["second alone"] = blas_threads()
            seen["second's fills"] = second_cache.blas_threads
            with second_cache_fill(second_cache):
                seen["a large fill"] = blas_threads()
            seen["after the fill"] = blas_threads()

    in_threads(first, second)
    assert seen == {"both in": 1, "second alone": 1, "second's fills": 2, "a large fill": 2, "after the fill": 1}
    assert blas_threads() == 2


def second_cache_fill(cache):
    """The context of a large fill of ``cache`` (``ClassBlockCache._blas_threads``)."""
    return _pairs.ClassBlockCache._blas_threads(cache)


def test_two_one_vs_one_fits_overlapping_in_threads_restore_blas(two_blas_threads, monkeypatch):
    """Two one-vs-one fits in two threads, the second entering the steps while the first
    steps and leaving after it: BLAS has its two threads again afterwards (it was left on
    one for the rest of the process)."""
    from gpusvm.solvers.sbp.pairs import _plan as pairs_plan

    monkeypatch.setattr(pairs_plan, "use_compiled_steps", lambda work: False)  # no Numba compile
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    host_threads = _pairs.NumpyPairSteps.host_threads

    @contextlib.contextmanager
    def ordered(steps):
        role = threading.current_thread().name
        if role == "second":
            assert first_in.wait(30)
        with host_threads(steps):
            if role == "first":
                first_in.set()
                assert second_in.wait(30)
            else:
                second_in.set()
                assert first_out.wait(30)
            yield
        if role == "first":
            first_out.set()

    monkeypatch.setattr(_pairs.NumpyPairSteps, "host_threads", ordered)
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 15)
    X = rng.normal(size=(y.size, 3)) + y[:, None]
    fits = {}

    def fit(role):
        threading.current_thread().name = role
        fits[role] = SBPClassifier(max_iter=2, random_state=0, backend="numpy").fit(X, y)

    in_threads(lambda: fit("first"), lambda: fit("second"))
    assert blas_threads() == 2
    np.testing.assert_array_equal(fits["first"].dual_coef_, fits["second"].dual_coef_)


# --- memory limits ----------------------------------------------------------------------

ADDRESS_SPACE_FIT = """
import resource, sys
import numpy as np
from gpusvm import KernelPegasosSVC, SBPClassifier
from gpusvm.solvers import row_cache
rng = np.random.default_rng(0)
n = int(sys.argv[1])
X = rng.normal(size=(n, 4)).astype(np.float32)
y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
for Model in (SBPClassifier, KernelPegasosSVC):  # everything imported, and the threads started
    Model(max_iter=1, random_state=0).fit(X[:200], y[:200])
headroom = int(sys.argv[2]) * 2**20
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + headroom, resource.getrlimit(resource.RLIMIT_AS)[1]))
auto = row_cache.cache_bytes("auto", 2**40)
assert 0 < auto <= row_cache.AUTO_CACHE_SHARE * headroom, auto
for Model in (SBPClassifier, KernelPegasosSVC):
    assert Model(max_iter=1, random_state=0).fit(X, y).score(X[:500], y[:500]) > 0.8
print("fitted")
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the virtual size from Linux's /proc")
def test_auto_cache_fits_within_the_address_space_limit(tmp_path):
    """Under ``ulimit -v`` the auto cache is sized from what the limit leaves, not from the
    host's free memory: 8,000 float32 rows, whose kernel matrix (256 MB) the auto cache took
    whole, with 200 MB left to the process (``MemoryError: Unable to allocate``)."""
    script = tmp_path / "address_space_fit.py"
    script.write_text(ADDRESS_SPACE_FIT)
    environment = {**os.environ, "GPUSVM_BACKEND": "numpy", "MALLOC_ARENA_MAX": "2"}
    run = subprocess.run(
        [sys.executable, str(script), "8000", "200"], capture_output=True, text=True, env=environment, timeout=300
    )
    assert run.returncode == 0 and run.stdout.split()[-1] == "fitted", run.stderr[-3000:]


def write_files(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_cgroup_v2_headroom_is_the_least_over_the_groups_above(tmp_path):
    """cgroup v2: each limited group from the process's up to the top, limit less usage less
    inactive file pages; 'max' is no limit; a group not found under the root: the root's."""
    root = tmp_path / "cgroup"
    write_files(root, {"memory.max": "max\n", "memory.current": "123\n"})
    write_files(root / "job", {"memory.max": "3000000000\n", "memory.current": "1000000000\n"})
    write_files(
        root / "job" / "step",
        {"memory.max": "2000000000\n", "memory.current": "1500000000\n", "memory.stat": "anon 1\ninactive_file 100\n"},
    )
    membership = tmp_path / "membership"
    membership.write_text("0::/job/step\n")
    assert row_cache.cgroup_headroom_bytes(str(root), str(membership)) == 2000000000 - (1500000000 - 100)
    membership.write_text("0::/job\n")
    assert row_cache.cgroup_headroom_bytes(str(root), str(membership)) == 2000000000
    membership.write_text("0::/elsewhere\n")  # a container's own part of the tree: the root alone
    assert row_cache.cgroup_headroom_bytes(str(root), str(membership)) is None
    write_files(root, {"memory.max": "1000000000\n", "memory.current": "600000000\n"})
    assert row_cache.cgroup_headroom_bytes(str(root), str(membership)) == 400000000
    assert row_cache.cgroup_headroom_bytes(str(root), str(tmp_path / "absent")) is None


def test_cgroup_v1_headroom_reads_the_memory_controller(tmp_path):
    root = tmp_path / "cgroup"
    unlimited = str(2**63 - 4096)
    write_files(root / "memory", {"memory.limit_in_bytes": unlimited, "memory.usage_in_bytes": "5"})
    write_files(
        root / "memory" / "box",
        {"memory.limit_in_bytes": "800000000", "memory.usage_in_bytes": "300000000", "memory.stat": "cache 7\n"},
    )
    membership = tmp_path / "membership"
    membership.write_text("12:pids:/box\n4:cpu,memory:/box\n0::/\n")
    assert row_cache.cgroup_headroom_bytes(str(root), str(membership)) == 500000000
    write_files(root / "memory" / "box", {"memory.stat": "total_inactive_file 100000000\n"})
    assert row_cache.cgroup_headroom_bytes(str(root), str(membership)) == 600000000
    write_files(root / "memory" / "box", {"memory.limit_in_bytes": unlimited})
    assert row_cache.cgroup_headroom_bytes(str(root), str(membership)) is None


def test_auto_caches_are_sized_from_the_least_of_host_address_space_and_cgroup(monkeypatch):
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: 8 * 2**30)
    monkeypatch.setattr(row_cache, "address_space_headroom_bytes", lambda: None)
    monkeypatch.setattr(row_cache, "cgroup_headroom_bytes", lambda: None)
    assert row_cache.cache_bytes("auto", 2**40) == 2 * 2**30
    monkeypatch.setattr(row_cache, "cgroup_headroom_bytes", lambda: 400 * 2**20)
    assert row_cache.cache_bytes("auto", 2**40) == 100 * 2**20
    monkeypatch.setattr(row_cache, "address_space_headroom_bytes", lambda: 200 * 2**20)
    assert row_cache.cache_bytes("auto", 2**40) == 50 * 2**20
    monkeypatch.setattr(row_cache, "address_space_headroom_bytes", lambda: -5)  # over the limit already
    assert row_cache.available_memory_bytes() == 0 and row_cache.memory_headroom_bytes() == 0
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: None)
    monkeypatch.setattr(row_cache, "address_space_headroom_bytes", lambda: None)
    assert row_cache.memory_headroom_bytes() == 400 * 2**20  # the host's unknown: the limits tell
    monkeypatch.setattr(row_cache, "cgroup_headroom_bytes", lambda: None)
    assert row_cache.memory_headroom_bytes() is None
    assert row_cache.available_memory_bytes() == row_cache.AVAILABLE_MEMORY_UNKNOWN_MB * 2**20


def test_address_space_headroom_is_the_limit_less_the_virtual_size(monkeypatch):
    resource = pytest.importorskip("resource")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert row_cache.address_space_headroom_bytes() is None
    monkeypatch.setattr(resource, "getrlimit", lambda which: (5 * 2**30, resource.RLIM_INFINITY))
    monkeypatch.setattr(row_cache, "_virtual_size_bytes", lambda: 2**30)
    assert row_cache.address_space_headroom_bytes() == 4 * 2**30


# --- cache_size --------------------------------------------------------------------------


@pytest.mark.parametrize("Model", [SBPClassifier, KernelPegasosSVC])
@pytest.mark.parametrize("value", [True, False, np.True_])
def test_a_boolean_cache_size_is_refused_by_name(Model, value):
    with pytest.raises(InvalidParameterError, match=rf"'cache_size' parameter of {Model.__name__}.*not a bool.*Got"):
        Model(cache_size=value)._validate_params()
    for good in ("auto", 1, 0.5, np.float32(200)):
        Model(cache_size=good)._validate_params()


# --- wide sparse matrices -------------------------------------------------------------------

LINEAR = [FTRLClassifier, TruncatedGradientClassifier, FOBOSClassifier, RDAClassifier, PegasosSVC]


def wide_csr(n_columns, n_rows=6, per_row=3):
    """A CSR matrix of ``n_rows`` rows of ``per_row`` entries over ``n_columns`` columns (a
    few bytes, whatever the width) and two classes."""
    rng = np.random.default_rng(0)
    indices = np.sort(rng.choice(min(n_columns, 2**20), size=(n_rows, per_row), replace=False), axis=1) * (
        n_columns // min(n_columns, 2**20)
    )
    indptr = np.arange(0, n_rows * per_row + 1, per_row)
    X = sp.csr_matrix((rng.random(n_rows * per_row) + 0.5, indices.ravel(), indptr), shape=(n_rows, n_columns))
    return X, np.arange(n_rows) % 2


@pytest.mark.parametrize("Model", LINEAR)
def test_a_matrix_wider_than_memory_is_refused_before_anything_is_allocated(Model):
    """2^40 columns of three entries a row: the model's dense arrays (64 TiB) are refused
    by name before any is allocated (FTRL grew to 24 GB and was killed at 2^31 - 2)."""
    X, y = wide_csr(2**40)
    with pytest.raises(MemoryError, match=r"n_features=1099511627776 columns.*bytes.*FeatureHasher"):
        Model(max_iter=1, backend="numpy").fit(X, y)
    with pytest.raises(MemoryError, match="n_features=1099511627776"):
        Model(max_iter=1, backend="numpy").partial_fit(X, y, classes=[0, 1])


@pytest.mark.parametrize("Model", LINEAR)
def test_the_width_is_checked_against_what_the_process_may_take(Model, monkeypatch):
    """The issue's width, 2^31 - 2 columns, with 1 GiB left to the process: refused, naming
    the bytes needed and those available, in fit and fit_chunks; a width that fits trains."""
    monkeypatch.setattr(row_cache, "read_available_memory_bytes", lambda: 2**30)
    monkeypatch.setattr(row_cache, "address_space_headroom_bytes", lambda: None)
    monkeypatch.setattr(row_cache, "cgroup_headroom_bytes", lambda: None)
    X, y = wide_csr(2**31 - 2)
    needed = (2**31 - 1) * 64  # the columns and an intercept, one model: 8 + 56 bytes a column
    with pytest.raises(MemoryError, match=rf"n_features={X.shape[1]} columns.* {needed} bytes .*the 1073741824 bytes"):
        Model(max_iter=1, backend="numpy").fit(X, y)
    with pytest.raises(MemoryError, match=rf"n_features={X.shape[1]} columns"):
        Model(max_iter=1, backend="numpy").fit_chunks([(X[:3], y[:3]), (X[3:], y[3:])])
    narrow, _ = wide_csr(2**12)
    Model(max_iter=1, backend="numpy").fit(narrow, y)


def test_gpusvm_is_the_checkout():
    """The subprocesses above copy or import this checkout's package."""
    assert Path(gpusvm.__file__).resolve().is_relative_to(ROOT)
