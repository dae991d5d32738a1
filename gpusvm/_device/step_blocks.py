"""Blocks of solver steps issued with no Python per step: a CUDA graph per block (step_blocks.cu).

A stepper that uses :class:`StepBlocks` writes each step's launches with arguments that
are the same at every step.  What changes from step to step (the step counter, the step
size, a batch's first row...) is a row of a *schedule* array on the device, computed on
the host before the steps run; step ``offset`` of a block reads row ``position +
offset``, where ``position`` is a device counter that the block's last launch advances.
So a block of ``length`` steps is the same launches every time it runs, which is what a
CUDA graph needs: it is captured once and replayed with one call.

Modes
-----
``'direct'``
    Every launch is issued from Python, one after another (``GPUSVM_CUDA_GRAPHS=0``, and
    wherever CuPy cannot capture a graph).
``'graph'``
    Each block length's launches are captured once on a side stream as a CUDA graph
    and replayed with one ``Graph.launch`` per block: the default, since a step's
    launches then cost no Python and no launch latency each, which dominate a step at
    small and medium batches; at the largest batches a step's work hides both, and the
    modes take the same time (the measurements: ``docs/user_guide/gpu_internals.md``,
    "How the defaults were chosen").
``'replay'``
    Each block length's launches are recorded once and replayed with their arguments
    as recorded: what a graph does, in Python, so that the CPU emulation of CUDA
    (which has no graphs) can show that no argument changes from step to step.

Fused steps
-----------
Orthogonal to the mode: a stepper with a kernel that runs a whole block of steps in one
launch (``pegasos_fused_steps``) issues that one launch per block instead of its launches
per step. By default at batches up to ``FUSED_DEFAULT_MAX_BATCH`` (64), where one thread
block's steps beat a graph's launches; at larger batches one thread block is too little
of the device, and graphs win (the same page of the docs). ``GPUSVM_FUSED_STEPS=1`` takes
it at any batch the kernel fits, ``=0`` never.
"""

from __future__ import annotations

import os

import numpy as np
import nvtx

from .cuda_modules import get_cuda_kernel

GRAPH_ENV_VARIABLE = "GPUSVM_CUDA_GRAPHS"
FUSED_ENV_VARIABLE = "GPUSVM_FUSED_STEPS"
MODES = ("direct", "graph", "replay")
BLOCK_STEPS = 128  # steps per block: a few hundred graph nodes, captured in milliseconds
FUSED_DEFAULT_MAX_BATCH = 64  # fused steps by default up to this batch (see above)


def _switch(variable):
    """'1' or '0' as set in the environment variable, else None."""
    value = os.environ.get(variable)
    if value not in (None, "0", "1"):
        raise ValueError(f"{variable} must be '0' or '1', got {value!r}.")
    return value


def default_mode():
    """``'graph'``, or ``'direct'`` when ``GPUSVM_CUDA_GRAPHS=0``."""
    return "direct" if _switch(GRAPH_ENV_VARIABLE) == "0" else "graph"


def fused_steps_default(batch_size=None):
    """Whether a stepper with a fused kernel runs a block of steps of ``batch_size`` rows
    as one launch: ``GPUSVM_FUSED_STEPS=1`` or ``=0`` as set, else up to
    ``FUSED_DEFAULT_MAX_BATCH`` rows."""
    switch = _switch(FUSED_ENV_VARIABLE)
    if switch is not None:
        return switch == "1"
    return batch_size is not None and batch_size <= FUSED_DEFAULT_MAX_BATCH


def can_capture():
    """Whether this CuPy captures CUDA graphs (the CPU emulation of CUDA does not)."""
    import cupy

    return hasattr(getattr(cupy.cuda, "Stream", None), "begin_capture")


class StepBlocks:
    """Runs a stepper's steps in blocks of at most ``block_steps``.

    Owns the device schedule (one float64 row of values per step) and the ``position``
    counter that the rows are read at.

    Parameters
    ----------
    launch_steps : callable
        ``launch_steps(length, launch)`` issues the launches of ``length`` steps, each
        through ``launch(kernel, grid, block, args)``; step ``offset`` passes
        ``*blocks.at(offset)`` to its kernels, and no argument depends on the block.
    mode : {'direct', 'graph', 'replay'} or None
        None: :func:`default_mode`.
    block_steps : int or None
        None: ``BLOCK_STEPS``.
    capturable : bool, default=True
        False when some launch cannot be captured (a library call that allocates, a
        read by the host): 'graph' then runs as 'direct', as it does where CuPy cannot
        capture (:func:`can_capture`).
    launch_fused : callable or None
        ``launch_fused(length, launch)`` issues one launch that runs ``length`` steps
        (reading ``*blocks.at(0)``), used instead of ``launch_steps`` when
        :func:`fused_steps_default` says so for ``batch_size``; None: the stepper has
        none for this problem.
    batch_size : int or None
        The rows of a step, for :func:`fused_steps_default`.
    """

    def __init__(self, launch_steps, mode=None, block_steps=None, capturable=True, launch_fused=None, batch_size=None):
        import cupy

        fused = launch_fused is not None and fused_steps_default(batch_size)
        self.launch_steps = launch_fused if fused else launch_steps
        self.position = cupy.zeros(1, dtype=np.int64)
        self.schedule = cupy.empty((0, 0))
        self.mode = default_mode() if mode is None else mode
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}.")
        if self.mode == "graph" and not (capturable and can_capture()):
            self.mode = "direct"
        self.block_steps = BLOCK_STEPS if block_steps is None else block_steps
        self._advance = get_cuda_kernel("step_blocks.cu", "advance_position")
        self._recorded = {}  # block length -> a graph, or the recorded launches

    def at(self, offset):
        """The kernel arguments that locate step ``offset`` of a block: the schedule, the
        position counter, the offset."""
        return self.schedule, self.position, np.int32(offset)

    def run(self, schedule):
        """Run one step per row of ``schedule`` (a host array, read as float64), in order
        (asynchronous)."""
        import cupy

        schedule = np.ascontiguousarray(schedule, dtype=np.float64)
        if schedule.shape[0] > self.schedule.shape[0] or schedule.shape[1] != self.schedule.shape[1]:
            self.schedule = cupy.empty(schedule.shape, dtype=np.float64)
            self._recorded.clear()  # the recorded launches point at the old schedule
        # CuPy refuses ``device[:n] = host``.  On the current stream, after the steps that
        # read the previous schedule, and without waiting for them (set() without a stream
        # would copy synchronously).
        self.schedule[: schedule.shape[0]].set(schedule, stream=cupy.cuda.get_current_stream())
        self.position.fill(0)
        full, rest = divmod(schedule.shape[0], self.block_steps)
        for length in [self.block_steps] * full + ([rest] if rest else []):
            self._run_block(length)

    def _issue(self, length, launch):
        self.launch_steps(length, launch)
        launch(self._advance, (1,), (1,), (self.position, np.int64(length)))

    def _run_block(self, length):
        if self.mode == "direct":
            self._issue(length, _launch)
            return
        recorded = self._recorded.get(length)
        if recorded is None:
            # The first block of a length runs as direct launches (which also loads
            # every kernel before a capture) and is recorded for the next ones.
            self._issue(length, _launch)
            self._recorded[length] = self._capture(length) if self.mode == "graph" else self._record(length)
        elif self.mode == "graph":
            recorded.launch()
        else:
            for kernel, grid, block, args in recorded:
                kernel(grid, block, args)

    def _record(self, length):
        launches = []
        self._issue(length, lambda *launch: launches.append(launch))
        return launches

    def _capture(self, length):
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        with nvtx.annotate("step_blocks.capture", color="purple"), stream:
            stream.begin_capture()
            try:
                self._issue(length, _launch)
            finally:
                graph = stream.end_capture()
        return graph


def _launch(kernel, grid, block, args):
    kernel(grid, block, args)
