"""Find, assemble and compile the CUDA sources in ``kernels/``, and fetch their CUDA kernels.

Each of ``kernels/*.cu`` is compiled once per device and kept (``cupy.memoize``).
Template kernels (``template <typename real> __global__ void f(...)``) are instantiated
for float and double through NVRTC name expressions; ``extern "C"`` kernels are looked
up by their plain name.  Local headers (``#include "common.cuh"``) are inlined between
``#line`` directives, so a compiler error names the right file and line.

CuPy is imported only inside the functions that compile, never at import time.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

# A template kernel: `template <typename real>` then `__global__ void name(`, or
# `__global__ void GPUSVM_MAX_THREADS(n) name(` (kernels/common.cuh).
TEMPLATE_KERNEL = re.compile(
    r"template\s*<\s*typename\s+real\s*>\s*__global__\s+void\s+(?:GPUSVM_MAX_THREADS\s*\([^)]*\)\s*)?(\w+)\s*\("
)
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.MULTILINE)
_C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
COMPILE_OPTIONS = ("-std=c++17",)


def cuda_source_dir():
    """The folder that holds the ``.cu`` sources.

    A wheel carries them as ``gpusvm/_kernels_src``; a source checkout or an editable
    install has them in ``kernels/`` beside the package.
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_kernels_src", package.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise FileNotFoundError(
        f"gpusvm's CUDA sources were not found in {package / '_kernels_src'} "
        f"or {package.parent / 'kernels'}; reinstall gpusvm."
    )


def c_type(dtype):
    """The C type of a float32/float64 dtype."""
    try:
        return _C_TYPES[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"CUDA kernels run in float32 or float64, got dtype {dtype!r}.") from None


def assemble_source(file_name, directory=None, _seen=None):
    """The source of ``file_name`` with its local headers inlined.

    Each inlined piece starts with a ``#line`` directive naming its own file, and the
    including file resumes with one naming it again, so compiler messages point at the
    original file and line.  A header is inlined once (``#pragma once`` semantics).
    """
    directory = Path(directory) if directory is not None else cuda_source_dir()
    seen = set() if _seen is None else _seen
    seen.add(file_name)
    text = (directory / file_name).read_text()
    if _seen is not None:  # an inlined header: its `#pragma once` would only warn
        text = _PRAGMA_ONCE.sub("", text)
    pieces, last = [f'#line 1 "{file_name}"\n'], 0
    for match in _LOCAL_INCLUDE.finditer(text):
        pieces.append(text[last : match.start()])
        header = match.group(1)
        if header not in seen:
            pieces.append(assemble_source(header, directory, seen))
        line_after = text.count("\n", 0, match.end()) + 2
        pieces.append(f'\n#line {line_after} "{file_name}"\n')
        last = match.end() + 1
    pieces.append(text[last:])
    return "".join(pieces)


def template_kernels(source):
    """Names of the ``template <typename real>`` kernels in a source text."""
    return sorted(set(TEMPLATE_KERNEL.findall(source)))


def name_expressions(source):
    """NVRTC name expressions that instantiate every template kernel for float and double."""
    return [f"{name}<{ctype}>" for name in template_kernels(source) for ctype in ("float", "double")]


def _compile_module(file_name):
    import cupy

    source = assemble_source(file_name)
    expressions = name_expressions(source)
    try:
        module = cupy.RawModule(code=source, options=COMPILE_OPTIONS, name_expressions=expressions)
        module.compile()
    except cupy.cuda.compiler.CompileException as error:
        raise RuntimeError(f"CUDA source {file_name} failed to compile (file and line below):\n{error}") from error
    return module


_module_cache = None


def get_cuda_module(file_name):
    """The compiled module of ``kernels/<file_name>`` on the current device."""
    global _module_cache
    if _module_cache is None:
        import cupy

        _module_cache = cupy.memoize(for_each_device=True)(_compile_module)
    return _module_cache(file_name)


_kernel_cache = None


def get_cuda_kernel(file_name, kernel_name, dtype=None):
    """A compiled kernel: ``kernel_name<float|double>`` for a template, else by name.
    Looked up once per device (the solvers ask for their kernels at every step)."""
    global _kernel_cache
    if _kernel_cache is None:
        import cupy

        _kernel_cache = cupy.memoize(for_each_device=True)(_fetch_kernel)
    return _kernel_cache(file_name, kernel_name, None if dtype is None else c_type(dtype))


def _fetch_kernel(file_name, kernel_name, c_name):
    name = kernel_name if c_name is None else f"{kernel_name}<{c_name}>"
    return get_cuda_module(file_name).get_function(name)


def multiprocessor_count():
    """The current device's multiprocessor count, read from the driver once per device."""
    import cupy

    return _multiprocessor_count(int(cupy.cuda.Device().id))


@functools.lru_cache(maxsize=None)
def _multiprocessor_count(device_id):
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def row_view_arguments(X):
    """The kernel arguments ``(data, indices, indptr, is_csr)`` of ``RowView`` (common.cuh)
    for a CuPy dense matrix or cupyx CSR matrix."""
    import cupy
    import cupyx.scipy.sparse as cusparse

    if cusparse.issparse(X):
        indices, indptr = X.indices.astype(np.int32, copy=False), X.indptr.astype(np.int32, copy=False)
        return X.data, indices, indptr, np.int32(1)
    placeholder = cupy.zeros(1, dtype=np.int32)  # not read for dense rows
    return cupy.ascontiguousarray(X), placeholder, placeholder, np.int32(0)
