"""A pytest plugin for ci/emulated_cuda.sh: what the CPU stand-in for CuPy lacks.

- Device memory to ask about: the CuPy paths that size their buffers by the free device
  memory (SBP's kernel_cache, the early memory checks) are told 64 GiB are free.
- Streams, events and pinned host memory (the streamed fits' copies,
  ``gpusvm._device.staging``): the stand-in runs everything at once, in order, so a stream
  here is a context that makes itself current, an event is always complete, and pinned
  memory is ordinary host memory.  This lets the staging's data flow (slots, growth,
  views) run; the order of events on a real device is checked by
  tests/test_streaming.py's recorded-timeline test and by the device run.  An event
  records the host clock, so that ``cupy.cuda.get_elapsed_time`` (the benchmarks' fit
  times) gives the emulated work's wall time.
- CuPy's refusals of host arrays: the stand-in's device arrays are a NumPy subclass, so
  it lets host (NumPy) arrays mix with device ones where CuPy raises.  This plugin makes
  it raise where CuPy does (the rules and their CuPy sources: ``_refuse_host_arrays``),
  so that a host array reaching a device path fails here, not first on a GPU.  The other
  way round, ``numpy.asarray(device array)`` and its kin raise as CuPy's ``__array__``
  does (``_refuse_implicit_conversion``), except in the stand-in's own code.  NumPy's C
  code converts a subclass without a hook, so a conversion there still passes here, and
  ``isinstance(device array, numpy.ndarray)`` is still True (False for CuPy's arrays).
- ``cupyx.scipy.ndimage`` (the deformed digits' filters): SciPy's functions on host copies
  (``_install_ndimage``).
- cupyx's sparse products give device arrays; the stand-in's gave host arrays
  (``_sparse_products_on_device``).  Its device CSR matrix is a SciPy subclass, so
  ``scipy.sparse.issparse`` said True; for cupyx's it says False, and now here too
  (outside the stand-in).
- ``host[index] = device array``: NumPy converts the value in C, so CuPy's refusal was
  not seen here either.  gpusvm's modules are compiled with their subscript assignments
  checked (``_check_host_stores``), which raises as CuPy's ``__array__`` would.
"""

import ast
import importlib.abc
import importlib.machinery
import os
import sys
import time
from pathlib import Path


class _Event:
    seconds = 0.0  # the host clock when recorded

    def synchronize(self):
        pass

    def record(self, stream=None):
        self.seconds = time.perf_counter()

    done = True


class _Stream:
    current = None  # the stream of the innermost ``with``; None: the default stream

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.non_blocking = non_blocking

    def __enter__(self):
        self._outer, _Stream.current = _Stream.current, self
        return self

    def __exit__(self, *exc):
        _Stream.current = self._outer
        return False

    def record(self, event=None):
        return event or _Event()

    def wait_event(self, event):
        pass

    def synchronize(self):
        pass


def _install_streams():
    import cupy
    import cupyx
    import numpy as np

    _Stream.null = _Stream()
    cupy.cuda.Stream = _Stream
    cupy.cuda.Event = _Event
    cupy.cuda.get_current_stream = lambda: _Stream.current or _Stream.null
    cupy.cuda.get_elapsed_time = lambda start, end: 1e3 * (end.seconds - start.seconds)
    cupyx.empty_pinned = lambda shape, dtype=np.float64, order="C": np.empty(shape, dtype=dtype, order=order)


def _install_ndimage():
    """``cupyx.scipy.ndimage``'s functions that gpusvm calls (``gpusvm._device.ndimage``:
    the deformed digits' filters and resampling) as SciPy's on host copies, returning
    device arrays: the stand-in has none. cupyx's own run on a device only."""
    import types

    import cupy
    import cupyx.scipy
    import scipy.ndimage

    stand_in = types.ModuleType("cupyx.scipy.ndimage")
    stand_in.gaussian_filter1d = lambda a, *args, **kw: cupy.asarray(
        scipy.ndimage.gaussian_filter1d(a.get(), *args, **kw)
    )
    stand_in.map_coordinates = lambda a, c, **kw: cupy.asarray(scipy.ndimage.map_coordinates(a.get(), c.get(), **kw))
    sys.modules["cupyx.scipy.ndimage"] = stand_in
    cupyx.scipy.ndimage = stand_in


def _is_host_array(value):
    import cupy
    import numpy as np

    return isinstance(value, np.ndarray) and not isinstance(value, cupy.ndarray)


def _host_arrays_in(values):
    """The host arrays among ``values``, looking one level into lists and tuples (the
    arrays of ``concatenate``, a ufunc's ``out``)."""
    found = []
    for value in values:
        inner = value if isinstance(value, (list, tuple)) else (value,)
        found += [item for item in inner if _is_host_array(item)]
    return found


def _refuse(values, caller=None):
    """Raise CuPy's error if a host array is among ``values`` (:func:`_host_arrays_in`),
    unless ``caller`` (a frame) is the stand-in's own code."""
    host_arrays = _host_arrays_in(values)
    if host_arrays and not (caller and _called_from_stand_in(caller)):
        raise TypeError(
            f"Unsupported type {type(host_arrays[0])} (a host array where CuPy "
            f"needs a device array; shape {host_arrays[0].shape})"
        )


def _basic_index(key):
    """True when ``key`` has no array or list in it: CuPy then writes through a view."""
    import numpy as np

    parts = key if isinstance(key, tuple) else (key,)
    return not any(isinstance(part, (list, np.ndarray)) for part in parts)


def _on_device(result):
    """A NumPy result as the stand-in's device arrays (scalars stay scalars, as the
    stand-in's own operations leave them)."""
    import cupy

    if isinstance(result, (tuple, list)):
        return type(result)(_on_device(item) for item in result)
    if _is_host_array(result):
        return result.view(cupy.ndarray)
    return result


# CuPy functions that take host arrays: the conversions, and the *_like functions, which
# read only the prototype's shape, dtype and flags (cupy/_creation/basic.py).
_TAKE_HOST_ARRAYS = {
    "asarray",
    "array",
    "asanyarray",
    "asnumpy",
    "get_array_module",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "result_type",
    "can_cast",
    "isscalar",
}


def _refuse_host_arrays():
    """Make the stand-in raise where CuPy refuses a host array.

    - An elementwise operation or reduction (``a + b``, ``a.sum()``, ``cupy.exp``), and a
      NumPy function on device arrays (``__array_function__`` dispatch to CuPy), with a
      host array among its arrays: ``TypeError`` (cupy/_core/_kernel.pyx,
      ``_preprocess_args``: "Unsupported type").
    - A CuPy function other than the conversions given a host array, ``ascontiguousarray``
      among them (cupy/_core/core.pyx types its argument as a device array).
    - ``device[basic index] = host array`` (not 0-d): ``ValueError`` (CuPy writes a
      non-array value with ``fill``, which refuses "non-scalar numpy.ndarray").  With an
      array index CuPy converts the value, and so does this.
    - ``device.set(host)``: the host array's dtype and shape must be the device array's
      (cupy/_core/core.pyx, ``ndarray.set``).
    """
    import cupy
    import numpy as np

    def array_ufunc(self, ufunc, method, *inputs, **kwargs):
        _refuse(inputs + tuple(kwargs.get("out", ())), sys._getframe(1))
        kwargs = {key: cupy._unwrap(value) for key, value in kwargs.items()}
        return _on_device(getattr(ufunc, method)(*cupy._unwrap(inputs), **kwargs))

    def array_function(self, function, types, args, kwargs):
        _refuse(tuple(args) + tuple(kwargs.values()), sys._getframe(1))
        kwargs = {key: cupy._unwrap(value) for key, value in kwargs.items()}
        return _on_device(function(*cupy._unwrap(tuple(args)), **kwargs))

    def setitem(self, key, value):
        if _is_host_array(value) and value.shape != () and _basic_index(key):
            raise ValueError(
                "non-scalar numpy.ndarray cannot be used for fill (CuPy: a host "
                f"array of shape {value.shape} assigned to a slice; use .set())"
            )
        np.ndarray.__setitem__(self, key, value)

    def set_from_host(self, array, stream=None):
        if not _is_host_array(array):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if self.dtype != array.dtype:
            raise TypeError(f"{array.dtype} array cannot be set to {self.dtype} array")
        if self.shape != array.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {array.shape}")
        if not (self.flags.c_contiguous or self.flags.f_contiguous):
            raise RuntimeError("Cannot set to non-contiguous array")
        np.copyto(self.view(np.ndarray), array)

    cupy.ndarray.__array_ufunc__ = array_ufunc
    cupy.ndarray.__array_function__ = array_function
    cupy.ndarray.__setitem__ = setitem
    cupy.ndarray.set = set_from_host

    wrap_function = cupy._fn

    def strict_function(name):
        call = wrap_function(name)
        if name in _TAKE_HOST_ARRAYS:
            return call

        def refusing(*args, **kwargs):
            _refuse(tuple(args) + tuple(kwargs.values()), sys._getframe(1))
            return call(*args, **kwargs)

        return refusing

    cupy._fn = strict_function
    loose_ascontiguousarray = cupy.ascontiguousarray

    def ascontiguousarray(a, dtype=None):
        _refuse((a,), sys._getframe(1))
        return loose_ascontiguousarray(a, dtype)

    cupy.ascontiguousarray = ascontiguousarray


_STAND_IN_MODULES = ("cupy", "cupyx", "emu", __name__)


def _called_from_stand_in(frame):
    """True when a frame on the stack belongs to the stand-in (its arrays are NumPy's
    underneath, and it converts them on purpose), SciPy's sparse matrices among it: the
    stand-in's device CSR matrix is one."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] in _STAND_IN_MODULES or module.startswith("scipy.sparse"):
            return True
        frame = frame.f_back
    return False


# CuPy's ndarray.__array__ (cupy/_core/core.pyx)
_IMPLICIT_CONVERSION = (
    "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy array explicitly."
)


def _refuse_implicit_conversion():
    """``numpy.asarray(device array)`` (and ``array``, ``asanyarray``,
    ``ascontiguousarray``) raise ``TypeError`` as CuPy's ``ndarray.__array__`` does
    (cupy/_core/core.pyx), unless the stand-in itself converts."""
    import cupy
    import numpy as np

    def refusing(convert):
        def strict(a, *args, **kwargs):
            if isinstance(a, cupy.ndarray) and not _called_from_stand_in(sys._getframe(1)):
                raise TypeError(_IMPLICIT_CONVERSION)
            return convert(a, *args, **kwargs)

        return strict

    for name in ("asarray", "array", "asanyarray", "ascontiguousarray"):
        setattr(np, name, refusing(getattr(np, name)))


def _sparse_products_on_device():
    """The stand-in's device CSR matrix is a SciPy subclass, so its products and
    ``toarray`` gave SciPy's host arrays, where cupyx gives device arrays (and a device
    path took its host branch unseen).  Now they give device arrays, and refuse a host
    operand as cupyx does."""
    import cupyx.scipy.sparse

    device_csr = cupyx.scipy.sparse.csr_matrix

    def on_device(method):
        def dense_results_on_device(self, *args, **kwargs):
            _refuse(args)
            return _on_device(method(self, *args, **kwargs))

        return dense_results_on_device

    for name in ("_matmul_dispatch", "_rmatmul_dispatch", "toarray"):
        setattr(device_csr, name, on_device(getattr(device_csr, name)))


def _store(target, index, value):
    """``target[index] = value``, refused as CuPy refuses it: a device array into a host
    array, unless a 0-d one into a single element (NumPy then takes ``float(value)``,
    which CuPy allows)."""
    import cupy
    import numpy as np

    if _is_host_array(target) and isinstance(value, cupy.ndarray):
        parts = index if isinstance(index, tuple) else (index,)
        one_element = len(parts) == target.ndim and all(isinstance(part, (int, np.integer)) for part in parts)
        if not (value.ndim == 0 and one_element):
            raise TypeError(
                f"{_IMPLICIT_CONVERSION} (A device array of shape {value.shape} stored into a "
                f"host array of shape {target.shape}.)"
            )
    target[index] = value


class _StoreChecks(ast.NodeTransformer):
    """Rewrites ``target[index] = value`` (one target) as
    ``__emu_value__ = value; __emu_store__(target, index, __emu_value__)``: the value is
    evaluated first, then the target and the index, as Python does."""

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
            return node
        target = node.targets[0]
        keep = ast.Assign(targets=[ast.Name("__emu_value__", ast.Store())], value=node.value)
        store = ast.Expr(
            ast.Call(
                func=ast.Name("__emu_store__", ast.Load()),
                args=[target.value, self._index(target.slice), ast.Name("__emu_value__", ast.Load())],
                keywords=[],
            )
        )
        return [ast.copy_location(keep, node), ast.copy_location(store, node)]

    def _index(self, index):
        """The subscript as an expression (``a:b`` is only valid inside brackets)."""
        if isinstance(index, ast.Slice):
            bounds = [bound or ast.Constant(None) for bound in (index.lower, index.upper, index.step)]
            return ast.Call(func=ast.Name("slice", ast.Load()), args=bounds, keywords=[])
        if isinstance(index, ast.Tuple):
            return ast.Tuple(elts=[self._index(part) for part in index.elts], ctx=ast.Load())
        return index


class _CheckedStoresLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):  # from the source every time: a cached .pyc has no checks
        tree = _StoreChecks().visit(ast.parse(self.get_data(self.path), self.path))
        return compile(ast.fix_missing_locations(tree), self.path, "exec", dont_inherit=True)

    def exec_module(self, module):
        module.__emu_store__ = _store
        super().exec_module(module)


# gpusvm's modules of functions compiled by Numba: their stores are into host arrays in
# compiled code, which cannot call the check (nor hold a device array)
_COMPILED_BY_NUMBA = {"gpusvm.solvers.sbp.pairs._numba"}


class _CheckedStoresFinder(importlib.abc.MetaPathFinder):
    """gpusvm's modules, found by the other finders, loaded by :class:`_CheckedStoresLoader`
    (but those of ``_COMPILED_BY_NUMBA``)."""

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] != "gpusvm" or name in _COMPILED_BY_NUMBA:
            return None
        spec = _find_spec_without(self, name, path, target)
        if spec is not None and isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            spec.loader = _CheckedStoresLoader(spec.loader.name, spec.loader.path)
        return spec


def _find_spec_without(finder, name, path, target):
    """The module spec that the import system's other finders give."""
    for other in sys.meta_path:
        if other is not finder and hasattr(other, "find_spec"):
            spec = other.find_spec(name, path, target)
            if spec is not None:
                return spec
    return None


def _check_host_stores():
    """Compile gpusvm's modules with their subscript assignments checked by :func:`_store`
    (before gpusvm is imported)."""
    if any(isinstance(finder, _CheckedStoresFinder) for finder in sys.meta_path):
        return
    if "gpusvm" in sys.modules:
        raise RuntimeError("emulated_device: gpusvm was imported before its stores could be checked")
    sys.meta_path.insert(0, _CheckedStoresFinder())


def _device_sparse_is_not_scipys():
    """``scipy.sparse.issparse(device CSR)`` is False, as for cupyx's matrices (code
    that tests it first took its SciPy branch here, and on a GPU another)."""
    import cupyx.scipy.sparse
    import scipy.sparse

    scipys_issparse = scipy.sparse.issparse

    def issparse(x):
        if isinstance(x, cupyx.scipy.sparse.csr_matrix) and not _called_from_stand_in(sys._getframe(1)):
            return False
        return scipys_issparse(x)

    scipy.sparse.issparse = issparse


def _install_in_child_processes():
    """Python processes started from here install this too when they import CuPy
    (ci/emulated_children's ``sitecustomize``), or a grid search's workers would run the
    bare stand-in."""
    here = Path(__file__).resolve().parent
    paths = [str(here / "emulated_children"), str(here)]
    inherited = os.environ.get("PYTHONPATH", "")
    if paths[0] not in inherited.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([inherited] if inherited else []))


def install():
    """Give the stand-in what it lacks (this module's docstring), in this process and the
    Python processes it starts; ci/emulated_bench.py calls it for a benchmark script."""
    _check_host_stores()
    _install_in_child_processes()
    _complete_the_stand_in()


def install_when_cupy_is_imported():
    """:func:`install` for a process that the emulated one starts, without importing the
    stand-in before the process's own code does (tests/test_backend.py checks that
    importing gpusvm does not import CuPy, in a child process).  Its own children inherit
    the PYTHONPATH that brought it here."""
    _check_host_stores()
    if "cupy" in sys.modules:
        _complete_the_stand_in()
    else:
        sys.meta_path.insert(0, _AfterImportFinder("cupy", _complete_the_stand_in))


def _complete_the_stand_in():
    import gpusvm._backend

    gpusvm._backend.free_device_bytes = lambda: 64 * 2**30
    _install_streams()
    _refuse_host_arrays()
    _refuse_implicit_conversion()
    _sparse_products_on_device()
    _device_sparse_is_not_scipys()
    _install_ndimage()


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Calls ``then()`` once module ``name``, found by the other finders, has run."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once
        spec = _find_spec_without(self, name, path, target)
        if spec is not None:
            spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


class _ThenLoader(importlib.abc.Loader):
    """Runs a module with ``loader``, then calls ``then()``."""

    def __init__(self, loader, then):
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.then()


def pytest_load_initial_conftests(early_config, parser, args):
    _check_host_stores()  # tests/conftest.py imports gpusvm


def pytest_configure(config):
    install()
