"""NVIDIA facts, each written once: label names, the GPU Operator's operands and ClusterPolicy,
GPU models, GFD's label contract, the device plugin's sharing config, driver versions.

Pure data and functions over it, taken from the upstream sources they name; no cluster access.
"""
