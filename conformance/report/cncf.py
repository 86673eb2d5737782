"""CNCF Kubernetes AI Conformance checklist and the rollup of our verdicts onto it.

The checklist is ``cncf/k8s-ai-conformance:docs/AIConformance-1.3x.yaml`` (see
``shared/research/anchors.md`` section 5). A vendor's PRODUCT.yaml gives each item a status of
Implemented / Partially Implemented / Not Implemented / N/A; the rollup proposes that status
from the verdicts of the requirements that support the item, and says on what basis, so a
person can copy it with the report as evidence. Items no requirement supports are listed as
not covered: this suite makes no claim about them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CHECKLIST = "AIConformance-1.3x"

IMPLEMENTED = "Implemented"
PARTIAL = "Partially Implemented"
NOT_IMPLEMENTED = "Not Implemented"
NOT_APPLICABLE = "N/A"


@dataclass(frozen=True)
class CncfItem:
    id: str
    description: str
    level: str


ITEMS: tuple[CncfItem, ...] = (
    CncfItem("dra_support", "Support Dynamic Resource Allocation APIs (beyond device counts)",
             "SHOULD (1.33), MUST (1.34/1.35), dropped in 1.36 (Kubernetes conformance)"),
    CncfItem("driver_runtime_management",
             "Verifiable mechanism that accelerator drivers and runtime configuration are correct "
             "(GFD labels, or DRA device attributes where exposed)", "SHOULD"),
    CncfItem("gpu_sharing", "At least one static sharing strategy; partitions are schedulable; "
             "time-slicing allows oversubscription (device plugin or DRA claims)", "SHOULD"),
    CncfItem("virtualized_accelerator", "vGPU exposed and managed consistently with fractional "
             "GPUs", "SHOULD"),
    CncfItem("ai_inference", "Gateway API: weighted traffic split, header routing", "MUST"),
    CncfItem("advanced_inference_ingress", "Gateway API Inference Extension (KV-cache-aware "
             "routing)", "SHOULD"),
    CncfItem("high_performance_networking", "Discoverable multi-NIC networking, DRA (DRANET)",
             "SHOULD"),
    CncfItem("disaggregated_inference", "Prefill/decode disaggregated serving", "SHOULD"),
    CncfItem("gang_scheduling", "At least one all-or-nothing scheduler works (Kueue, Volcano)",
             "MUST"),
    CncfItem("cluster_autoscaling", "Accelerator node groups scale on pending pods", "MUST"),
    CncfItem("pod_autoscaling", "HPA works for accelerator pods on custom metrics", "MUST"),
    CncfItem("accelerator_metrics", "Per-accelerator utilization and memory via a "
             "machine-readable endpoint", "MUST"),
    CncfItem("ai_service_metrics", "Discover and scrape Prometheus-format workload metrics",
             "MUST"),
    CncfItem("secure_accelerator_access", "Accelerator access isolated and mediated by the "
             "device plugin or DRA plus the runtime", "MUST"),
    CncfItem("robust_controller", "A complex AI operator works: pods, webhooks, reconcile",
             "MUST"),
)
BY_ID: dict[str, CncfItem] = {item.id: item for item in ITEMS}

_UNVERIFIED = ("skip", "not-run")


def item_status(verdicts: Iterable[str]) -> tuple[str, str]:
    """(status, basis) for one item from the verdicts of its supporting requirements.

    Implemented needs every applicable supporting requirement to pass: a skipped or unrun
    requirement is missing evidence, so it downgrades the item to Partially Implemented (when
    something passed) or Not Implemented (when nothing did). Only when every supporting
    requirement is not applicable is the item N/A.
    """
    verdicts = list(verdicts)
    applicable = [v for v in verdicts if v != "not-applicable"]
    passed = applicable.count("pass")
    failed = applicable.count("fail")
    unverified = len(applicable) - passed - failed
    if not applicable:
        return NOT_APPLICABLE, f"all {len(verdicts)} supporting requirements are not applicable"
    basis = f"{passed} of {len(applicable)} applicable supporting requirements passed"
    details = [f"{failed} failed"] if failed else []
    if unverified:
        details.append(f"{unverified} not verified (skipped or not run)")
    if details:
        basis += "; " + ", ".join(details)
    if passed == len(applicable):
        return IMPLEMENTED, basis
    if passed == 0:
        return NOT_IMPLEMENTED, basis
    return PARTIAL, basis


def rollup(requirements: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The CNCF section of report.json: each supported item with its requirements and status."""
    supporting: dict[str, list[dict[str, str]]] = {}
    for req in requirements:
        for item_id in req.get("cncf") or ():
            supporting.setdefault(str(item_id), []).append(
                {"id": str(req.get("id")), "verdict": str(req.get("verdict") or "not-run")}
            )
    known = [item.id for item in ITEMS if item.id in supporting]
    unknown = sorted(set(supporting) - set(BY_ID))
    items = []
    for item_id in known + unknown:
        item = BY_ID.get(item_id, CncfItem(item_id, "(not in the known checklist)", "unknown"))
        status, basis = item_status(r["verdict"] for r in supporting[item_id])
        items.append({
            "id": item.id, "description": item.description, "level": item.level,
            "status": status, "basis": basis, "requirements": supporting[item_id],
        })
    not_covered = [
        {"id": item.id, "description": item.description, "level": item.level}
        for item in ITEMS if item.id not in supporting
    ]
    return {"checklist": CHECKLIST, "items": items, "not_covered": not_covered}
