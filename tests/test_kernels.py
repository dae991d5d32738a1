"""The CUDA sources: they compile with nvcc, their blocks fit a multiprocessor's registers and
shared memory, and compiler messages name the right file and line."""

import re
import shutil
import subprocess

import pytest

from gpusvm._device.cuda_modules import (
    COMPILE_OPTIONS,
    assemble_source,
    c_type,
    cuda_source_dir,
    name_expressions,
    template_kernels,
)

from .conftest import needs_device

nvcc = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(nvcc is None, reason="nvcc is not on the PATH")
SOURCES = sorted(p.name for p in cuda_source_dir().glob("*.cu"))


def instantiate_all(source):
    """The assembled source plus a host table that takes the address of every template
    kernel for float and double, forcing nvcc to instantiate and check each one, the way
    NVRTC's name expressions do at run time."""
    entries = ", ".join(f"(const void*)&{expression}" for expression in name_expressions(source))
    return source + f"\nconst void* gpusvm_instantiated[] = {{ {entries} }};\n" if entries else source


def compile_with_nvcc(source, tmp_path, arch, output="ptx"):
    """nvcc on ``source``; ``output='cubin'`` also runs ptxas, verbose (its resource report)."""
    path = tmp_path / "unit.cu"
    path.write_text(source)
    verbose = ["-Xptxas", "-v"] if output == "cubin" else []
    return subprocess.run(
        [
            nvcc,
            "-std=c++17",
            f"-arch={arch}",
            f"-{output}",
            *verbose,
            "-o",
            str(tmp_path / f"unit.{output}"),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


# A block's launch fails on the device ("too many resources requested") when its threads'
# registers or its static shared memory exceed the multiprocessor's share for one block,
# which the CPU emulation cannot see.  Registers are handed out per warp in units of 256,
# that is, per thread in multiples of 8.
REGISTERS_PER_BLOCK = 65536
STATIC_SHARED_BYTES_PER_BLOCK = 48 * 1024
LARGEST_BLOCK = 1024  # threads: what a kernel not named below must be able to run with

# A thread's array indexed at run time, or a struct copied and then read that way (a
# `state.edge[basin]`), lives in local memory, off the chip: ptxas reports it as a stack
# frame, and each read in a row loop is a load from memory.  Kernels allowed one, and why.
STACK_FRAME_ALLOWED = {
    "sbp_level_solve": "one block a problem, after the row passes: the per-basin values of "
    "its answer and its bisection are indexed by basin",
}


def largest_blocks():
    """Kernels launched with fewer than ``LARGEST_BLOCK`` threads, and their block size as
    their launcher sets it (a kernel that needs more registers is checked at that size)."""
    warp_per_row = 32 * 4  # the online kernels' blocks: a warp for each of 4 batch rows
    try:
        from gpusvm.solvers.online_logistic import _cuda as online
    except ImportError:  # no CuPy: the launcher cannot be imported to confirm the size
        pass
    else:
        assert 32 * online._ROWS_PER_BLOCK == warp_per_row
    return {"online_margins": warp_per_row, "online_gradients": warp_per_row}


def plain_kernels(name):
    """Names of the ``extern "C"`` kernels of a source file."""
    return re.findall(r'extern "C"\s+__global__\s+void\s+(\w+)', assemble_source(name))


def kernel_name(mangled):
    """A kernel's name from its symbol (a template instantiation's is mangled)."""
    length = re.match(r"_Z(\d+)", mangled)
    return mangled[len(length.group(0)) :][: int(length.group(1))] if length else mangled


def ptxas_resources(report):
    """``{kernel name: (registers, static shared bytes)}`` from ptxas' verbose report (one
    entry per template instantiation; a name's worst case is kept)."""
    resources, name = {}, None
    for line in report.splitlines():
        entry = re.search(r"Compiling entry function '(\w+)'", line)
        if entry:
            name = kernel_name(entry.group(1))
        used = re.search(r"Used (\d+) registers", line)
        if used:
            shared = re.search(r"(\d+) bytes smem", line)
            found = (int(used.group(1)), int(shared.group(1)) if shared else 0)
            resources[name] = tuple(map(max, resources.get(name, found), found))
    return resources


def ptxas_stack_frames(report):
    """``{kernel name: stack frame bytes}`` from ptxas' verbose report (a name's worst case
    over its template instantiations)."""
    frames, name = {}, None
    for line in report.splitlines():
        function = re.search(r"Function properties for (\w+)", line)
        if function:
            name = kernel_name(function.group(1))
        frame = re.search(r"(\d+) bytes stack frame", line)
        if frame:
            frames[name] = max(frames.get(name, 0), int(frame.group(1)))
    return frames


def test_sources_found():
    assert {"common.cuh", "pegasos.cu", "kernel_functions.cu", "random.cu"} <= {
        p.name for p in cuda_source_dir().iterdir()
    }
    assert template_kernels(assemble_source("pegasos.cu")) == [
        "pegasos_accumulate",
        "pegasos_finish",
        "pegasos_fused_steps",
        "pegasos_margins",
    ]
    assert c_type("float32") == "float" and c_type("float64") == "double"
    with pytest.raises(TypeError, match="float32 or float64"):
        c_type("int32")


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", SOURCES)
def test_kernel_compiles_and_fits_its_launches(name, arch, tmp_path):
    result = compile_with_nvcc(instantiate_all(assemble_source(name)), tmp_path, arch, output="cubin")
    assert result.returncode == 0, result.stderr
    resources = ptxas_resources(result.stderr)
    assert set(resources) == set(template_kernels(assemble_source(name))) | set(plain_kernels(name))
    blocks = largest_blocks()
    for kernel, (registers, shared) in resources.items():
        threads = blocks.get(kernel, LARGEST_BLOCK)
        allocated = -(-registers // 8) * 8
        assert allocated * threads <= REGISTERS_PER_BLOCK, (
            f"{kernel} uses {registers} registers a thread: a block of {threads} threads cannot launch"
        )
        assert shared <= STATIC_SHARED_BYTES_PER_BLOCK, f"{kernel} uses {shared} bytes of static shared memory"
    frames = ptxas_stack_frames(result.stderr)
    assert set(frames) == set(resources)
    for kernel, frame in frames.items():
        assert frame == 0 or kernel in STACK_FRAME_ALLOWED, (
            f"{kernel} has a {frame}-byte stack frame: values indexed at run time live in local memory"
        )


@needs_nvcc
def test_blocks_of_1024_threads_are_declared_to_the_compiler(tmp_path):
    """The fused Pegasos steps launch blocks of FUSED_MAX_BATCH = 1,024 threads, where a
    thread may hold 64 registers: the kernel declares that size (GPUSVM_MAX_THREADS), so the
    ptxas that CuPy or the driver runs on the device budgets its registers for it, whatever
    its version.  The declaration reaches the PTX (as ``.maxntid``), as NVRTC's does."""
    from gpusvm.solvers.pegasos import FUSED_MAX_BATCH

    result = compile_with_nvcc(instantiate_all(assemble_source("pegasos.cu")), tmp_path, "sm_90")
    assert result.returncode == 0, result.stderr
    ptx = (tmp_path / "unit.ptx").read_text()
    declared = {
        kernel_name(mangled): int(threads)
        for mangled, threads in re.findall(r"\.entry\s+(\w+)\([^)]*\)\s*\.maxntid\s+(\d+)", ptx)
    }
    assert declared == {"pegasos_fused_steps": FUSED_MAX_BATCH}


def test_ptxas_report_is_read_per_kernel():
    report = """ptxas info    : Compiling entry function '_Z14online_marginsIfEvPKT_' for 'sm_90'
ptxas info    : Used 72 registers, used 0 barriers
ptxas info    : Compiling entry function '_Z14online_marginsIdEvPKT_' for 'sm_90'
ptxas info    : Used 70 registers, used 1 barriers, 256 bytes smem
ptxas info    : Compiling entry function 'water_level_select' for 'sm_90'
ptxas info    : Used 38 registers, used 1 barriers, 516 bytes smem
"""
    assert ptxas_resources(report) == {"online_margins": (72, 256), "water_level_select": (38, 516)}


def test_ptxas_stack_frames_are_read_per_kernel():
    report = """ptxas info    : Compiling entry function '_Z14online_marginsIfEvPKT_' for 'sm_90'
ptxas info    : Function properties for _Z14online_marginsIfEvPKT_
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 72 registers, used 0 barriers
ptxas info    : Compiling entry function '_Z14online_marginsIdEvPKT_' for 'sm_90'
ptxas info    : Function properties for _Z14online_marginsIdEvPKT_
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 70 registers, used 1 barriers, 256 bytes smem
ptxas info    : Compiling entry function 'sbp_draw' for 'sm_90'
ptxas info    : Function properties for sbp_draw
    144 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
"""
    assert ptxas_stack_frames(report) == {"online_margins": 16, "sbp_draw": 144}


@needs_nvcc
def test_errors_point_at_the_original_file_and_line(tmp_path):
    (tmp_path / "helper.cuh").write_text("#pragma once\n\n__device__ int broken() { return not_declared_here; }\n")
    (tmp_path / "main.cu").write_text(
        '// a kernel\n#include "helper.cuh"\n\n__global__ void k() { int x = also_missing; }\n'
    )
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
        from gpusvm._device.cuda_modules import get_cuda_kernel

        for kernel in module_kernels:
            for dtype in ("float32", "float64"):
                assert get_cuda_kernel(name, kernel, dtype) is not None
