"""Stack / GPU Feature Discovery: node labels follow the upstream contract and agree.

Checklist (k8s-device-plugin tests/e2e/gpu-feature-discovery_test.go, expected-output*.txt):
- STACK-GFD-002 every GPU node's labels match the upstream regex contract for its MIG strategy,
  as far as the GFD release that labelled it (its pod's image, else the labels it wrote) wrote
  them, back to GFD's first contract (v0.1.0): a label missing only because that GFD is older
  is a warning ("GFD older than vX.Y"), a label whose value breaks the contract a failure
- STACK-GFD-003 labels agree with each other and with the node: family vs compute capability,
  product vs the model's compute capability and memory, version labels vs their parts,
  replicas vs sharing strategy
"""

from __future__ import annotations

import pytest

from conformance.checks import gfd_consistency
from conformance.cluster import evidence as ev
from conformance.nvidia import gfd_contract
from conformance.plugin.api import finding


@pytest.mark.requirement("STACK-GFD-002")
def test_labels_satisfy_upstream_contract(request, gpu_stack, require_gpu_nodes, attachments):
    problems, old = [], {}
    for node in require_gpu_nodes:
        version = (gpu_stack.gfd_version(node.name)
                   or gfd_contract.version_from_labels(node.labels))
        check = gfd_contract.check_gfd_labels(node.labels, version)
        missing = check.problems
        if missing:
            problems.append(f"{node.name} ({gfd_contract.select_contract(node.labels)}, GFD "
                            f"{version.text}): " + "; ".join(missing[:5])
                            + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
        if check.too_old:
            nodes, labels = old.setdefault((version.text, version.judged), ([], set()))
            nodes.append(node.name)
            labels.update(check.too_old)
    attachments.append(ev.Evidence("gpu-node-labels.txt", "\n\n".join(
        f"{n.name}\n" + "\n".join(f"  {k}={v}" for k, v in sorted(n.labels.items())
                                  if k.startswith("nvidia.com/"))
        for n in require_gpu_nodes[:20])))
    assert not problems, (f"{len(problems)} of {len(require_gpu_nodes)} GPU node(s) break the "
                          "GFD label contract: " + " | ".join(problems[:5]))
    if old:  # a warning, not a failure: that GFD release did not write these labels yet
        finding(request, "; ".join(
            f"warning: GFD {text} on {len(nodes)} node(s) ({judged}): they lack labels added "
            f"later: {', '.join(sorted(labels)[:4])}{' ...' if len(labels) > 4 else ''} "
            f"(upgrade GFD to {gfd_contract.UPSTREAM_VERSION} for them)"
            for (text, judged), (nodes, labels) in old.items()))


@pytest.mark.requirement("STACK-GFD-003")
def test_labels_agree_with_each_other(require_gpu_nodes, attachments):
    problems = []
    for node in require_gpu_nodes:
        problems += [f"{node.name}: {p}" for p in gfd_consistency.inconsistencies(node)]
    attachments.append(ev.Evidence("label-consistency.txt", "\n".join(problems) or "consistent"))
    assert not problems, (f"{len(problems)} label inconsistenc(ies) on GPU nodes: "
                          + "; ".join(problems[:8]))
