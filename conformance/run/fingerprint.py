"""The cluster fingerprint of a run: what was checked, for the report and for certification."""

from __future__ import annotations

import re
import socket

from kubernetes import client

from conformance.cluster import dra as cluster_dra
from conformance.cluster import views
from conformance.nvidia import driver, gfd_contract
from conformance.nvidia import labels as L
from conformance.run.targets import Env
from gpu_kernels import inventory

_CHART_LABEL = re.compile(r"^(?P<name>.+?)-(?P<version>v?\d.*)$")  # helm.sh/chart: NAME-VERSION


def operator_versions(dep: client.V1Deployment) -> tuple[str | None, str | None]:
    """The running operator's version and its chart's. The image tag comes first: the
    ``app.kubernetes.io/version`` label is the chart's appVersion, which a values override
    of ``operator.version`` does not change (a chart from NVIDIA's source tree says
    "main-latest" while it runs v26.7.0; seen on the H200 node). A chart version may hold
    hyphens ("v1.0.0-devel", "25.3.0-rc.1"), so it is what follows the chart's name."""
    labels = dep.metadata.labels or {}
    image = dep.spec.template.spec.containers[0].image or ""
    name_part = image.split("@", 1)[0].rsplit("/", 1)[-1]  # a digest has no tag
    tag = name_part.split(":", 1)[1] if ":" in name_part else None
    m = _CHART_LABEL.match(labels.get("helm.sh/chart", ""))
    return tag or labels.get("app.kubernetes.io/version"), m["version"] if m else None


def of_cluster(env: Env) -> dict:
    cluster = env.require_cluster()
    stack = views.read_gpu_stack(cluster, env.options.operator_namespace)
    nodes = views.list_gpu_nodes(cluster)
    dra_view = cluster_dra.read_view(cluster)  # how each node hands out GPUs, who serves it
    paths = dra_view.paths(nodes)
    served = dra_view.stacks(nodes, cluster_policy=stack.policy is not None)
    rows = []
    for node in nodes:
        lab = node.labels
        resource, count = node.main_resource
        gfd = stack.gfd_version(node.name) or gfd_contract.version_from_labels(lab)
        rows.append({
            "name": node.name,
            "gpu_evidence": list(node.evidence),
            "gpu_product": lab.get(L.PRODUCT),
            "gpu_count": _int(lab.get(L.COUNT)),
            "gpu_memory_mib": _int(lab.get(L.MEMORY)),
            "gpu_resource": resource,
            "allocatable": count,
            "replicas": _int(lab.get(L.REPLICAS)),
            "sharing_strategy": lab.get(L.SHARING_STRATEGY),
            "mig_strategy": lab.get(L.MIG_STRATEGY, "none"),
            "driver_version": driver.version_from_labels(lab),
            "cuda_version": lab.get(L.RUNTIME_FULL),
            "gfd_version": gfd.text if gfd else None,
            "allocation": paths.get(node.name),  # device-plugin | dra | both | none
            "served_by": served.get(node.name),  # ClusterPolicy | GPUCluster | none
        })
    operator_version, chart_version = (
        operator_versions(stack.operator_deployments[0]) if stack.operator_deployments
        else (None, None))
    return {
        "kubernetes_version": env.server_version,
        "gpu_stack": stack.shape,
        "operator_version": operator_version,
        "chart_version": chart_version,
        "driver_versions": sorted({r["driver_version"] for r in rows if r["driver_version"]}),
        "cuda_versions": sorted({r["cuda_version"] for r in rows if r["cuda_version"]}),
        "sharing_strategies": sorted({r["sharing_strategy"] or "none" for r in rows}),
        "gpu_node_count": len(rows),
        "allocation_paths": sorted({r["allocation"] for r in rows if r["allocation"]}),
        "dra_api": dra_view.api_versions,
        "nodes": rows,
    }


def of_local_host() -> dict:
    """The same shape for ``--target local``: this host's GPUs as NVML reports them."""
    inv = inventory.collect()
    gpus = inv.get("gpus") or []
    names = sorted({g.get("name") for g in gpus if g.get("name")})
    memory = [g["memory_total_bytes"] for g in gpus if g.get("memory_total_bytes")]
    row = {
        "name": socket.gethostname(),
        "gpu_product": ", ".join(names) or None,
        "gpu_count": len(gpus),
        "gpu_memory_mib": (min(memory) // 2**20) if memory else None,
        "gpu_resource": None, "allocatable": None, "replicas": None,
        "sharing_strategy": None,
        "mig_strategy": "none",
        "driver_version": inv.get("driver_version"),
        "cuda_version": inv.get("cuda_driver_version"),
    }
    return {
        "kubernetes_version": None, "operator_version": None, "chart_version": None,
        "driver_versions": [row["driver_version"]] if row["driver_version"] else [],
        "cuda_versions": [row["cuda_version"]] if row["cuda_version"] else [],
        "sharing_strategies": ["none"],
        "gpu_node_count": 1 if gpus else 0,
        "nodes": [row] if gpus else [],
        "source": "NVML on this host (--target local)",
    }


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
