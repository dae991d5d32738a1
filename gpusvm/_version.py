"""gpusvm's version, in a module of its own so that modules below the package's
``__init__`` (``model_io``, ``_device.system_info``) read it without importing the package."""

__version__ = "0.1.0"
