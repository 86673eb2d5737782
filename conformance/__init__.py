"""gpu-conformance: conformance and end-to-end checks for Kubernetes GPU clusters."""

__version__ = "0.1.0"
