"""The device runtime that every CUDA launcher shares; it never imports a solver.

- :mod:`.cuda_modules`: find, assemble and compile ``kernels/*.cu`` once per device and
  fetch their CUDA kernels (``get_cuda_kernel``): the only place where "kernel" means a
  CUDA kernel; everywhere above this folder it means an SVM kernel;
- :mod:`.step_blocks`: blocks of solver steps issued with no Python per step (CUDA graphs);
- :mod:`.staging`: chunks copied to the device while it computes (pinned buffers, a copy
  stream, two device slots);
- :mod:`.system_info`: what ``gpusvm info`` reports.

Nothing here is imported by ``import gpusvm``: CuPy is imported only when a model trains
or predicts on a device.
"""
