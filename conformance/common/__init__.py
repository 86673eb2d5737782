"""The bottom layer: vocabulary, errors, redaction, console output and signal handling.

Every other layer may import it; it imports none of them (only the dependency-free
``gpu_kernels`` leaf, for the exit-code contract both share).
"""
