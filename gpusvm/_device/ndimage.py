"""``scipy.ndimage`` for the backend's arrays: SciPy's on the host, ``cupyx.scipy.ndimage``
on the device.

CuPy's ``cupyx.scipy.ndimage`` implements SciPy's filters and interpolations with the same
arguments and, up to rounding, the same results; this is the one place that imports it, so
that code above ``_device/`` asks for the module of its ``xp`` and calls the same functions
on either backend (``gpusvm.datasets.make_deformed_mnist``).
"""

from __future__ import annotations

from .._backend import on_device


def ndimage_of(xp):
    """:mod:`scipy.ndimage` for :mod:`numpy`, :mod:`cupyx.scipy.ndimage` for :mod:`cupy`."""
    if on_device(xp):
        import cupyx.scipy.ndimage

        return cupyx.scipy.ndimage
    import scipy.ndimage

    return scipy.ndimage
