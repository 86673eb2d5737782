"""Stack / DCGM exporter on real GPUs: its metrics endpoint serves every GPU.

The endpoint is read through the API server's service proxy (no port-forward, no pod of our
own), as NVIDIA/aicr's conformance validator scrapes nvidia-dcgm-exporter:9400/metrics.

Checklist:
- STACK-DCGM-002 DCGM_FI_DEV_* series (utilization, framebuffer) exist for as many GPUs as
  the GPU nodes report in nvidia.com/gpu.count
- STACK-DCGM-003 accelerator_metrics as kubernetes-sigs/ai-conformance checks it
  (TestAcceleratorPerformanceMetrics): per-accelerator utilization and memory series, each
  with a device label (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED by name, as its
  -metrics-utilization-metric / -metrics-memory-metric flags), for every GPU; temperature,
  power and interconnect series reported (evidence accelerator-metrics.json) when present
"""

from __future__ import annotations

import json
import re

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.checks import accelerator_metrics as am
from conformance.cluster import evidence as ev
from conformance.cluster.client import NotFound
from conformance.nvidia import labels as L
from conformance.nvidia import operands
from conformance.plugin.api import not_applicable, not_applicable_if_switched_off, not_run

SERVICE = "nvidia-dcgm-exporter"
PORT = "gpu-metrics"
REQUIRED = (am.DCGM_UTILIZATION, am.DCGM_MEMORY)
_SERIES = re.compile(r'^(DCGM_FI_DEV_[A-Z0-9_]+)\{([^}]*)\}', re.M)
_UUID = re.compile(r'UUID="([^"]+)"')


def gpus_by_metric(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, labels in _SERIES.findall(text):
        uuid = _UUID.search(labels)
        if uuid:
            out.setdefault(name, set()).add(uuid.group(1))
    return out


EXPORTER = operands.get_operand("dcgm-exporter")


def scrape(cluster, ns: str, gpu_stack) -> str:
    """The exporter's /metrics through the API server's service proxy (a failure fails;
    not-applicable where no operator deploys an exporter and there is no such Service, or the
    ClusterPolicy switches it off, as STACK-OPD-* treat a switched-off operand)."""
    if gpu_stack.operator_installed:
        not_applicable_if_switched_off(gpu_stack.policy, EXPORTER, "read metrics from")
    nobody = _nothing_behind(cluster, ns)
    if nobody:
        not_run(nobody)
    try:
        return cluster.core.connect_get_namespaced_service_proxy_with_path(
            f"{SERVICE}:{PORT}", ns, "metrics")
    except ApiException as exc:
        if isinstance(exc, NotFound) and not gpu_stack.operator_installed:
            not_applicable(f"no DCGM exporter: no GPU Operator deploys one and there is no "
                           f"{ns}/{SERVICE} Service (the stack is {gpu_stack.shape})")
        pytest.fail(f"cannot read {ns}/{SERVICE}:{PORT}/metrics through the API server: "
                    f"{exc.status} {exc.reason}")


def _nothing_behind(cluster, ns: str) -> str | None:
    """Why the Service has no exporter to answer (no ready endpoint), or None. Its metrics
    cannot be read then, which says nothing of the GPUs: the checks are not run (whether the
    exporter's pods run is STACK-OPD-*'s verdict), rather than failing on the proxy's 503."""
    try:
        endpoints = cluster.core.read_namespaced_endpoints(SERVICE, ns)
    except ApiException:
        return None  # no Service (404) or no right to read it: the proxy call says which
    ready = [a for s in endpoints.subsets or [] for a in s.addresses or []]
    if ready:
        return None
    return (f"could not read the metrics of {ns}/{SERVICE}: the Service has no ready endpoint "
            "(no exporter pod serves behind it)")


@pytest.mark.requirement("STACK-DCGM-002")
def test_dcgm_exporter_serves_every_gpu(cluster, gpu_env, gpu_stack, require_gpu_nodes,
                                        attachments):
    text = scrape(cluster, gpu_env.options.operator_namespace, gpu_stack)
    attachments.append(ev.Evidence("dcgm-metrics.txt", text[:50_000]))
    expected = sum(n.int_label(L.COUNT) or 0 for n in require_gpu_nodes)
    seen = gpus_by_metric(text)
    missing = [m for m in REQUIRED if m not in seen]
    assert not missing, f"the exporter serves no {', '.join(missing)} series"
    short = {m: len(seen[m]) for m in REQUIRED if len(seen[m]) < expected}
    assert not short, (f"GPU nodes report {expected} GPUs, the exporter has series for fewer: "
                       f"{short}")


@pytest.mark.requirement("STACK-DCGM-003")
def test_per_accelerator_utilization_and_memory(cluster, gpu_env, gpu_stack, require_gpu_nodes,
                                                attachments):
    text = scrape(cluster, gpu_env.options.operator_namespace, gpu_stack)
    report = am.check(text)
    attachments.append(ev.Evidence("accelerator-metrics.json", json.dumps(report.as_dict(),
                                                                      indent=2),
                                mime="application/json"))
    assert report.samples, f"{SERVICE}:{PORT}/metrics serves no samples"
    assert not report.missing(), (
        f"no per-accelerator {' or '.join(report.missing())} series ({am.DCGM_UTILIZATION}, "
        f"{am.DCGM_MEMORY}) carrying a device label ({', '.join(am.DEVICE_LABELS)}); "
        f"SHOULD metrics: {report.optional_summary()}")
    expected = sum(n.int_label(L.COUNT) or 0 for n in require_gpu_nodes)
    for kind, found in (("utilization", report.utilization), ("memory", report.memory)):
        devices = max(len(d) for d in found.values())
        assert devices >= expected, (f"GPU nodes report {expected} GPUs, the {kind} series "
                                     f"cover {devices} devices")
