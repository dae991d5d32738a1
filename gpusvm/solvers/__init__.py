"""Solvers: pure functions over a problem and a state, given the array module.

One folder a solver (``pegasos/``, ``kernel_pegasos/``, ``sbp/``, ``online_logistic/``):
its math and references at the top of its ``__init__`` (citing ``docs/algorithms.md``),
its problem and state, its NumPy steps (the reference), its CUDA steps (``_cuda.py``,
the launches of ``kernels/<solver>.cu``), and its ``make_steps``, the one place where
the backend is chosen.  Beside them, what the kernel solvers share: the host's cache of
kernel rows (``row_cache.py``) and kernel values on the device (``_kernel_values_cuda.py``).
Only the ``_cuda.py`` modules import CuPy.
"""
