"""Solvers: pure functions over a problem and a state, given the array module.

The only modules that import CuPy are the ``_*_cuda.py`` launchers beside them.
"""
