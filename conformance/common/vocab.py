"""The words every layer shares: targets, verdicts and exit codes, defined once.

Exit codes are gpu_kernels' contract (``gpu_kernels.result``), which the CLI, the pytest runs it
starts and the kernel pods all follow; 130 is the shell's "ended by SIGINT".
"""

from __future__ import annotations

from typing import Literal

from gpu_kernels.result import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE

__all__ = ["CLUSTER_TARGETS", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_UNAVAILABLE",
           "EXIT_USAGE", "NOT_APPLICABLE_PREFIX", "NOT_RUN_PREFIX", "OUTCOME_VERDICT", "TARGETS",
           "VERDICTS", "VERDICT_RANK", "Target", "worst"]

EXIT_INTERRUPTED = 130

# existing: the kubeconfig's cluster; kind: one made by pytest-kind; sim: the local control plane
# with KWOK nodes; node: the local control plane with this host as a real kubelet node; local:
# this host's GPUs without Kubernetes.
Target = Literal["existing", "kind", "sim", "node", "local"]
TARGETS: tuple[Target, ...] = ("existing", "kind", "sim", "node", "local")
CLUSTER_TARGETS: tuple[Target, ...] = ("existing", "kind", "sim", "node")

# A requirement's verdict, worst first by rank: fail > pass > skip > not-applicable > not-run.
# not-run: no test covered it, or its test could not judge (a result it could not read).
VERDICTS = ("pass", "fail", "skip", "not-applicable", "not-run")
VERDICT_RANK = {"fail": 4, "pass": 3, "skip": 2, "not-applicable": 1, "not-run": 0}
# pytest's outcome of one test -> the verdict it gives its requirement
OUTCOME_VERDICT = {"passed": "pass", "failed": "fail", "skipped": "skip",
                   "not-applicable": "not-applicable", "not-run": "not-run"}
# A skip whose reason starts with this is "not-applicable" (the check does not apply here),
# any other skip is "skip" (it applies but could not run).
NOT_APPLICABLE_PREFIX = "not-applicable:"
# A skip whose reason starts with this is "not-run": the check applies and ran, but could not
# judge (a workload's result it could not read, nodes that only simulate GPUs). Never a finding
# about the GPU stack.
NOT_RUN_PREFIX = "not-run:"


def worst(verdicts: list[str]) -> str:
    """The verdict a requirement gets from its tests' verdicts (``not-run`` for none)."""
    return max(verdicts, key=VERDICT_RANK.__getitem__, default="not-run")
