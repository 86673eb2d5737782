"""The node the node tests bring up: its name (one per pytest process) and its mock GPUs."""

from __future__ import annotations

import os

NODE_NAME = f"ntest-{os.getpid()}"
GPU_PROFILE = "8xH100"
GPU_COUNT = 8
# Under xdist (`make test`, --dist loadgroup) every node test runs on one worker: one kubelet
# per host. Each node test module marks itself with it (a marker added in a collection hook
# must come before xdist's own hook reads it: ``tryfirst``, as tests/integration/conftest.py
# does for its profile groups).
XDIST_GROUP = "real-node"
