"""Scheduling suite: GPUs are integers, allocated whole, placed by type, isolated."""
