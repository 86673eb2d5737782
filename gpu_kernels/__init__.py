"""CuPy kernels and sharing experiments for GPU conformance; one JSON result per run.

Importing the package needs neither CuPy nor NVML: both load inside the functions that use
them. See README.md for the CLI and the result schema.
"""

__version__ = "0.1.0"
