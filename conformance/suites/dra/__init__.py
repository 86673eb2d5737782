"""DRA suite: GPUs handed out by the NVIDIA DRA driver (gpu.nvidia.com) on resource.k8s.io/v1.

Every check is not-applicable, with what the cluster shows, where the NVIDIA DRA driver is not
installed; a default run therefore checks DRA exactly where a cluster serves it.
"""
