"""Stack / GPU Feature Discovery: node labels follow the upstream contract and agree.

Checklist (k8s-device-plugin tests/e2e/gpu-feature-discovery_test.go, expected-output*.txt):
- STACK-GFD-002 every GPU node's labels match the upstream regex contract for its MIG strategy
- STACK-GFD-003 labels agree with each other and with the node: family vs compute capability,
  product vs the model's compute capability and memory, version labels vs their parts,
  replicas vs sharing strategy
"""

from __future__ import annotations

import pytest

from conformance.checks import gfd_consistency
from conformance.cluster import evidence as ev
from conformance.nvidia import gfd_contract


@pytest.mark.requirement("STACK-GFD-002")
def test_labels_satisfy_upstream_contract(require_gpu_nodes, evidence):
    problems = []
    for node in require_gpu_nodes:
        contract = gfd_contract.select_contract(node.labels)
        missing = gfd_contract.check_gfd_labels(node.labels)
        if missing:
            problems.append(f"{node.name} ({contract}): " + "; ".join(missing[:5])
                            + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
    evidence.append(ev.Evidence("gpu-node-labels.txt", "\n\n".join(
        f"{n.name}\n" + "\n".join(f"  {k}={v}" for k, v in sorted(n.labels.items())
                                  if k.startswith("nvidia.com/"))
        for n in require_gpu_nodes[:20])))
    assert not problems, (f"{len(problems)} of {len(require_gpu_nodes)} GPU node(s) break the "
                          "GFD label contract: " + " | ".join(problems[:5]))


@pytest.mark.requirement("STACK-GFD-003")
def test_labels_agree_with_each_other(require_gpu_nodes, evidence):
    problems = []
    for node in require_gpu_nodes:
        problems += [f"{node.name}: {p}" for p in gfd_consistency.inconsistencies(node)]
    evidence.append(ev.Evidence("label-consistency.txt", "\n".join(problems) or "consistent"))
    assert not problems, (f"{len(problems)} label inconsistenc(ies) on GPU nodes: "
                          + "; ".join(problems[:8]))
