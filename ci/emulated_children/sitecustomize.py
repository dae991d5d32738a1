"""The Python processes that an emulated run starts (the workers of a grid search with
``n_jobs=2``) emulate the device as their parent does: ci/emulated_device.py puts this
folder on their PYTHONPATH, and Python imports this module at startup.  The stand-in is
completed when the process imports CuPy, not before."""

import emulated_device

emulated_device.install_when_cupy_is_imported()
