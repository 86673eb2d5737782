"""DRA / sharing: GpuConfig TimeSlicing and MPS in claims, as the driver will judge them.

Checklist (dra-driver-nvidia-gpu api/nvidia.com/resource/v1beta1 validate.go, sharing.go;
pkg/featuregates: TimeSlicingSettings and MPSSupport are alpha and off by default):
- DRA-SHARE-001 every gpu.nvidia.com GpuConfig / MigDeviceConfig in the cluster's
  ResourceClaims and ResourceClaimTemplates decodes strictly and validates (strategy, interval,
  MPS thread percentage and pinned memory limits), as `gpuconf validate-sharing` does for the
  device plugin's config; a valid config the driver refuses because its feature gate is off is
  reported as that refusal (not-applicable), not as a broken cluster
- DRA-SHARE-002 on real GPUs, two pods sharing one claim with GpuConfig TimeSlicing both run
  and see the same GPU; with the gate off, the driver's refusal is reported as such
"""

from __future__ import annotations

import pytest

from conformance.checks import smi
from conformance.cluster import dra as cluster_dra
from conformance.cluster import evidence as ev
from conformance.cluster import workloads
from conformance.cluster.namespaces import NAMESPACE_PREFIX
from conformance.nvidia import dra
from conformance.plugin.api import finding, not_applicable, own_namespace

TEMPLATE_CLAIM = "resource.kubernetes.io/pod-claim-name"  # a claim made from a template


def _driver_gates(view) -> dict[str, bool]:
    """The feature gates the driver's kubelet plugin runs with (FEATURE_GATES)."""
    gates: dict[str, bool] = {}
    for pod in view.plugin_pods:
        gates.update(pod.gates)
    return gates


def _configs(cluster) -> list[tuple[str, dict]]:
    """(where, parameters) of every gpu.nvidia.com opaque config in claims and templates."""
    out = []
    for kind, items in (("ResourceClaimTemplate", cluster_dra.list_templates(cluster)),
                        ("ResourceClaim", cluster_dra.list_claims(cluster))):
        for obj in items:
            meta = obj.get("metadata") or {}
            if str(meta.get("namespace", "")).startswith(NAMESPACE_PREFIX) or (
                    TEMPLATE_CLAIM in (meta.get("annotations") or {})):
                continue  # this suite's own, or a claim its template already stands for
            spec = obj.get("spec") or {}
            spec = spec.get("spec", spec) if kind == "ResourceClaimTemplate" else spec
            out += [(f"{kind} {meta.get('namespace')}/{meta.get('name')}", p)
                    for p in dra.sharing_configs(spec)]
    return out


@pytest.mark.requirement("DRA-SHARE-001")
def test_claim_sharing_configs_are_valid(request, cluster, require_dra, attachments):
    gates = _driver_gates(require_dra)
    configs = _configs(cluster)
    verdicts = [(where, dra.validate_sharing(p, gates)) for where, p in configs]
    shared = [(w, v) for w, v in verdicts if v.strategy or v.invalid]
    attachments.append(ev.Evidence("sharing-configs.yaml", ev.to_yaml(
        [{"where": w, "parameters": p} for w, p in configs])))
    attachments.append(ev.Evidence("driver-gates.txt", f"FEATURE_GATES of the kubelet plugin: "
                                                    f"{gates or 'none set (alpha gates off)'}"))
    if not shared:
        not_applicable(f"no ResourceClaim or template asks {dra.DRIVER} for sharing "
                       f"({len(configs)} opaque config(s) without a sharing strategy)")
    invalid = [f"{w}: {'; '.join(v.invalid)}" for w, v in shared if v.invalid]
    refused = [f"{w}: {'; '.join(v.refused)}" for w, v in shared if v.refused]
    assert not invalid, ("invalid DRA sharing config(s) (the driver refuses the claim at "
                         "prepare, its pods never start): " + " | ".join(invalid[:8])
                         + (f" | also refused by the driver's gates: {' | '.join(refused[:4])}"
                            if refused else ""))
    if refused:
        not_applicable("the driver refuses DRA sharing here, its alpha feature gate being off "
                       "(enable it in the chart's featureGates, or drop the config): "
                       + " | ".join(refused[:8]))
    finding(request, f"{len(shared)} DRA sharing config(s) valid: "
                     + ", ".join(sorted({v.strategy or '?' for _w, v in shared})))


@pytest.mark.requirement("DRA-SHARE-002")
def test_time_sliced_claim_runs_two_pods(request, cluster, gpu_env, require_dra, targets,
                                         attachments):
    gates = _driver_gates(require_dra)
    if not gates.get(dra.GATE_TIME_SLICING):
        not_applicable(f"refused by the driver as such: {dra.gate_refusal('TimeSlicing')} "
                       "(alpha, off by default)")
    target = next((t for t in targets if t.device_class == dra.GPU_CLASS.name), targets[0])
    namespace = own_namespace(request)
    claim = cluster_dra.create_claim(cluster, namespace, "ts", cluster_dra.claim_spec(
        cluster_dra.request(device_class=target.device_class),
        config=dra.gpu_config("TimeSlicing", interval="Default")), gpu_env.run_id)
    runs = []
    for i in (0, 1):
        body = cluster_dra.claim_pod_manifest(
            f"ts-{i}", gpu_env.run_id, claim=claim, node=target.node.name,
            image=gpu_env.options.cuda_image, command=["sh", "-c", smi.SMI_SCRIPT])
        runs.append(workloads.run_manifest(cluster, namespace, body,
                                           timeout=workloads.QUICK_RUN_TIMEOUT_S))
    attachments.append(ev.Evidence("pods.txt", "\n\n".join(f"{r.pod}: {r.phase} {r.diagnosis}\n"
                                                         f"{r.logs[-600:]}" for r in runs)))
    failed = [f"{r.pod}: {r.diagnosis}" for r in runs if r.diagnosis]
    assert not failed, "time-sliced claim pods did not run: " + "; ".join(failed)
    seen = [smi.gpu_uuids(r.logs) or smi.mig_uuids(r.logs) for r in runs]
    assert all(len(s) == 1 for s in seen) and seen[0] == seen[1], (
        f"two pods sharing one time-sliced claim should see the same single GPU: {seen}")
    finding(request, f"two pods time-slice {seen[0][0]} on {target.node.name}")
