"""The CUDA sources: they compile with nvcc, and compiler messages name the right file and line."""

import shutil
import subprocess

import pytest

from gpusvm._kernels import COMPILE_OPTIONS, assemble_source, c_type, kernel_dir, name_expressions, template_kernels

from .conftest import needs_device

nvcc = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(nvcc is None, reason="nvcc is not on the PATH")
SOURCES = sorted(p.name for p in kernel_dir().glob("*.cu"))


def instantiate_all(source):
    """The assembled source plus a host table that takes the address of every template
    kernel for float and double, forcing nvcc to instantiate and check each one, the way
    NVRTC's name expressions do at run time."""
    entries = ", ".join(f"(const void*)&{expression}" for expression in name_expressions(source))
    return source + f"\nconst void* gpusvm_instantiated[] = {{ {entries} }};\n" if entries else source


def compile_with_nvcc(source, tmp_path, arch):
    path = tmp_path / "unit.cu"
    path.write_text(source)
    return subprocess.run(
        [nvcc, "-std=c++17", f"-arch={arch}", "-ptx", "-o", str(tmp_path / "unit.ptx"), str(path)],
        capture_output=True, text=True, timeout=300,
    )


def test_sources_found():
    assert {"common.cuh", "pegasos.cu", "kernel_functions.cu", "random.cu"} <= {
        p.name for p in kernel_dir().iterdir()
    }
    assert template_kernels(assemble_source("pegasos.cu")) == [
        "pegasos_accumulate", "pegasos_finish", "pegasos_margins",
    ]
    assert c_type("float32") == "float" and c_type("float64") == "double"
    with pytest.raises(TypeError, match="float32 or float64"):
        c_type("int32")


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", SOURCES)
def test_kernel_compiles(name, arch, tmp_path):
    result = compile_with_nvcc(instantiate_all(assemble_source(name)), tmp_path, arch)
    assert result.returncode == 0, result.stderr


@needs_nvcc
def test_errors_point_at_the_original_file_and_line(tmp_path):
    (tmp_path / "helper.cuh").write_text("#pragma once\n\n__device__ int broken() { return not_declared_here; }\n")
    (tmp_path / "main.cu").write_text(
        '// a kernel\n#include "helper.cuh"\n\n__global__ void k() { int x = also_missing; }\n')
    source = assemble_source("main.cu", directory=tmp_path)
    build = tmp_path / "build"
    build.mkdir()
    result = compile_with_nvcc(source, build, "sm_80")
    assert result.returncode != 0
    assert "helper.cuh(3)" in result.stderr
    assert "main.cu(4)" in result.stderr


def nvrtc_or_skip():
    """CuPy's NVRTC bindings, which compile without a device; skip where they cannot load."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy is not installed")
    try:
        nvrtc.getVersion()
    except Exception as error:  # the NVRTC library itself is missing
        pytest.skip(f"CuPy cannot load NVRTC: {error}")
    return nvrtc


@pytest.mark.parametrize("name", SOURCES)
def test_kernel_compiles_with_nvrtc(name):
    """What CuPy does at run time (NVRTC, name expressions), done without a device."""
    nvrtc = nvrtc_or_skip()
    source = assemble_source(name)
    program = nvrtc.createProgram(source, name, [], [])
    try:
        for expression in name_expressions(source):
            nvrtc.addNameExpression(program, expression)
        try:
            nvrtc.compileProgram(program, [*COMPILE_OPTIONS, "-arch=compute_90"])
        except nvrtc.NVRTCError:
            pytest.fail(nvrtc.getProgramLog(program))
        for expression in name_expressions(source):
            assert nvrtc.getLoweredName(program, expression).startswith("_Z")
    finally:
        nvrtc.destroyProgram(program)


@needs_device
def test_modules_compile_through_cupy():
    for name in SOURCES:
        module_kernels = template_kernels(assemble_source(name))
        from gpusvm._kernels import get_kernel

        for kernel in module_kernels:
            for dtype in ("float32", "float64"):
                assert get_kernel(name, kernel, dtype) is not None
