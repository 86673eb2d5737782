"""Operations / workloads on real GPUs: the kernels run in pods and answer with one result.

Checklist:
- OPS-WL-001 a gpu_kernels pod (the module mounted into --workload-image) holding one GPU runs
  the memory kernel and prints exactly one JSON result line, and the result is a pass
"""

from __future__ import annotations

import pytest

from conformance.checks import taints
from conformance.cluster import kernel_pods
from conformance.plugin.api import finding

KERNEL_ARGS = ["membw", "--seconds", "3"]


@pytest.mark.requirement("OPS-WL-001")
def test_kernel_pod_reports_one_json_result(request, cluster, gpu_env, require_gpu_nodes,
                                            namespace):
    node = next((n for n in require_gpu_nodes if not taints.untolerated_taints(n)), None)
    assert node is not None, "every GPU node carries a taint GPU pods do not tolerate"
    r = kernel_pods.run(cluster, namespace, gpu_env.run_id, KERNEL_ARGS,
                        image=gpu_env.options.workload_image, node=node.name)
    assert r.diagnosis is None, f"kernel pod {r.pod} on {node.name}: {r.diagnosis}"
    results = r.json_lines()
    assert len(results) == 1, (f"kernel pod {r.pod} printed {len(results)} JSON results, "
                               f"expected one:\n{r.logs[-800:]}")
    doc = results[0]
    assert doc.get("ok") is True, f"kernel pod {r.pod}: {doc.get('error') or doc}"
    finding(request, f"{node.name}: membw {doc.get('median')} {doc.get('unit')} in a pod")
