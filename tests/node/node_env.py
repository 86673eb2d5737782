"""The node the node tests bring up: its name (one per pytest process) and its mock GPUs."""

from __future__ import annotations

import os

NODE_NAME = f"ntest-{os.getpid()}"
GPU_PROFILE = "8xH100"
GPU_COUNT = 8
