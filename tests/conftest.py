"""What every test process shares.

The tests run up to seven sims, a real node (kubelet, containerd and a shim per pod), Helm and
kind on the 2-core machine at once, nearly all of them Go programs. Each Go program the tests
start runs on one P (GOMAXPROCS=1, as the control plane's components do by default:
``conformance/controlplane/components.py``): with a P per core, their idle runtimes spun
looking for work to steal. Measured, three node faults and the node's bring-up
(tests/node/test_node_fault_matrix.py -k "gfd-stopped or crashloop or cdi"): 81 CPU-s on the
machine in 106 s, against 91 CPU-s in 116 s. A GOMAXPROCS in the environment wins.
"""

from __future__ import annotations

import os

os.environ.setdefault("GOMAXPROCS", "1")
