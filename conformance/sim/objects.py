"""Writing and removing the stand-ins' DaemonSets on KWOK nodes.

KWOK plays no kubelet: a pod it runs goes only when deleted with no grace period, and a
DaemonSet whose new pod never gets Ready (a fault's crash-looping container) would keep its
rolling update waiting for ever. The stand-ins (the operator's, the device plugin chart's, the
DRA driver's and the GPUCluster's) write and remove their DaemonSets through these functions,
install the CRDs they play through ``ensure_crd`` and their namespaces through
``ensure_namespace``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from conformance.cluster import namespaces
from conformance.cluster.client import (
    Cluster,
    Conflict,
    NotFound,
    already_done,
    read_or_none,
)
from conformance.cluster.waits import wait_for

CRD_READY_TIMEOUT_S = 30.0
STANDIN_LABEL = "sim.gpuconf.io/standin"  # on what the operator and chart stand-ins write
# Pod annotations whose KWOK stages (kwok-stages.yaml) play a failing container:
CRASHLOOP_ANNOTATION = "sim.gpuconf.io/crashloop"  # CrashLoopBackOff
STUCK_INIT_ANNOTATION = "sim.gpuconf.io/stuck-init"  # waits in its init step forever


def apply_daemonset(cluster: Cluster, ns: str, body: dict, *,
                    seen: dict[str, int | None] | None = None) -> None:
    """Create, or replace when its pod template's annotations or containers changed; the
    replaced DaemonSet's pods are deleted at once, so all of them run the new template.

    ``seen``: the DaemonSets' generations (None: absent) when the caller read what it decided
    ``body`` from; one whose spec was written since then by someone else (``sim set`` while the
    loop's pass runs) is left as it is: the caller's body is stale, and its next pass reads the
    new one (a pass that re-applied the old chart over a new one kept it for good). The
    generation, not the resourceVersion: status updates do not make a body stale."""
    name = body["metadata"]["name"]
    try:
        cluster.apps.create_namespaced_daemon_set(ns, body)
        return
    except Conflict:
        pass
    current = cluster.apps.read_namespaced_daemon_set(name, ns)
    if seen is not None and seen.get(name) != current.metadata.generation:
        return
    tpl = current.spec.template
    want = body["spec"]["template"]
    if ((tpl.metadata.annotations or {}) == (want["metadata"].get("annotations") or {})
            and len(tpl.spec.containers) == len(want["spec"]["containers"])):
        return
    cluster.apps.replace_namespaced_daemon_set(name, ns, body)
    selector = ",".join(f"{k}={v}" for k, v in body["spec"]["selector"]["matchLabels"].items())
    for pod in cluster.core.list_namespaced_pod(ns, label_selector=selector).items:
        if any(o.name == name for o in pod.metadata.owner_references or []):
            with already_done(NotFound):
                cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)


def delete_daemonsets(cluster: Cluster, ns: str, selector: str, *,
                      pod_selector: str | None = None,
                      keep_pod: Callable[[object], bool] = lambda _pod: False) -> None:
    """Delete the DaemonSets matching ``selector`` in ``ns`` and force-delete the pods that
    match ``pod_selector`` (default: ``selector``; ``""``: every pod in ``ns``) except those
    ``keep_pod`` keeps."""
    with already_done(NotFound):  # the namespace itself may be gone
        for ds in cluster.apps.list_namespaced_daemon_set(ns, label_selector=selector).items:
            with already_done(NotFound):
                cluster.apps.delete_namespaced_daemon_set(ds.metadata.name, ns)
        pods = selector if pod_selector is None else pod_selector
        for pod in cluster.core.list_namespaced_pod(ns, label_selector=pods).items:
            if keep_pod(pod):
                continue
            with already_done(NotFound):
                cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)


def ensure_crd(cluster: Cluster, name: str, document: Callable[[], dict], what: str) -> bool:
    """Install the CRD ``name`` (``document()``) unless the cluster has it, and wait until it is
    established; ``what`` names it in the wait. True when it was installed here."""
    return bool(ensure_crds(cluster, {name: document}, what))


def ensure_crds(cluster: Cluster, documents: dict[str, Callable[[], dict]],
                what: str) -> list[str]:
    """Install each CRD (name -> its document) the cluster lacks, all at once, then wait until
    every one is established (one wait, not one per CRD); the names installed here."""
    missing = [name for name in documents
               if read_or_none(cluster.apiext.read_custom_resource_definition, name) is None]
    for name in missing:
        with already_done(Conflict):
            cluster.apiext.create_custom_resource_definition(documents[name]())

    def established() -> bool:
        return all(any(c.type == "Established" and c.status == "True" for c in (
            cluster.apiext.read_custom_resource_definition(name).status.conditions or []))
            for name in missing)

    if missing:
        wait_for(f"the {what} CRD{'s' if len(missing) > 1 else ''} to be established",
                 established, timeout=CRD_READY_TIMEOUT_S)
    return missing


def install_crd_files(cluster: Cluster, paths: list[Path], what: str,
                      progress: Callable[[str], None]) -> None:
    """The CRDs of a component's build (its module's YAML files) the cluster lacks."""
    docs = [yaml.safe_load(path.read_text()) for path in paths]
    installed = ensure_crds(cluster, {d["metadata"]["name"]: (lambda d=d: d) for d in docs},
                            what)
    if installed:
        progress(f"installed the {len(installed)} {what} CRDs")


def apply_cluster_object(cluster: Cluster, group: str, version: str, plural: str, kind: str,
                         name: str, spec: dict) -> None:
    """A cluster-scoped custom object a stand-in sets up, labelled as the stand-in's: created,
    or its spec patched to ``spec`` when it is there."""
    body = {"apiVersion": f"{group}/{version}", "kind": kind,
            "metadata": {"name": name, "labels": {STANDIN_LABEL: "true"}}, "spec": spec}
    try:
        cluster.custom.create_cluster_custom_object(group, version, plural, body)
    except Conflict:
        cluster.custom.patch_cluster_custom_object(group, version, plural, name, {"spec": spec})


CRD_GONE_TIMEOUT_S = 30.0  # the API server removes a CRD and its objects in seconds


def crds_of(cluster: Cluster, groups: tuple[str, ...]) -> list:
    return [c for c in cluster.apiext.list_custom_resource_definition().items
            if c.spec.group in groups]


def remove_crds(cluster: Cluster, groups: tuple[str, ...], what: str) -> None:
    """Every CRD of ``groups`` and so every object of them, finalizers dropped first (with
    their controller stopped, or stopping, nobody else would drop them)."""
    crds = crds_of(cluster, groups)
    for crd in crds:
        group, plural = crd.spec.group, crd.spec.names.plural
        version = next(v.name for v in crd.spec.versions if v.storage)
        scoped = crd.spec.scope == "Namespaced"
        items = cluster.custom.list_cluster_custom_object(group, version,
                                                          plural).get("items") or []
        for item in items:
            meta = item["metadata"]
            if not meta.get("finalizers"):
                continue
            patch = {"metadata": {"finalizers": None}}
            with already_done(NotFound):
                if scoped:
                    cluster.custom.patch_namespaced_custom_object(
                        group, version, meta["namespace"], plural, meta["name"], patch)
                else:
                    cluster.custom.patch_cluster_custom_object(group, version, plural,
                                                               meta["name"], patch)
    for crd in crds:
        with already_done(NotFound):
            cluster.apiext.delete_custom_resource_definition(crd.metadata.name)
    if crds:
        wait_for(f"the {what} CRDs to be gone", lambda: not crds_of(cluster, groups),
                 timeout=CRD_GONE_TIMEOUT_S)


def crd_document(chart: str | None, filename: str, builtin: Path) -> dict:
    """The CRD ``filename`` from the chart's crds/ folder when a chart is given and has it,
    else the project's own copy ``builtin``."""
    upstream = Path(chart) / "crds" / filename if chart else None
    source = upstream if upstream is not None and upstream.is_file() else builtin
    return yaml.safe_load(source.read_text())


def namespace_phase(cluster: Cluster, name: str) -> str | None:
    """The namespace's phase (Active, Terminating), None when there is none."""
    with already_done(NotFound):
        return cluster.core.read_namespace(name).status.phase
    return None


def ensure_namespace(cluster: Cluster, name: str, labels: dict[str, str] | None = None) -> None:
    """The namespace, created once an earlier removal of it is over: the API server refuses
    new objects in a namespace that is still Terminating (a reset right after a removal)."""
    phase = namespace_phase(cluster, name)
    if phase == "Active":  # the loop's every pass: a read, not a create the server refuses
        return
    if phase == "Terminating":
        namespaces.wait_until_deleted(
            cluster, name, description=f"namespace {name}, removed earlier, to be deleted")
    with already_done(Conflict):
        cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": name, "labels": labels or {}}})


def ensure_service_accounts(cluster: Cluster, namespace: str, names: set[str],
                            labels: dict[str, str] | None = None) -> None:
    """The ServiceAccounts ``names`` in ``namespace``, those missing created: one list per
    call (the loop's every pass), not a create per account that the server refuses."""
    have = {sa.metadata.name
            for sa in cluster.core.list_namespaced_service_account(namespace).items}
    for name in sorted(n for n in names - have if n):
        with already_done(Conflict):
            cluster.core.create_namespaced_service_account(namespace, {
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "labels": labels or {}}})
