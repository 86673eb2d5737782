"""The device plugin sharing config of a cluster, as the ClusterPolicy points to it."""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster


@dataclass
class SharingDocs:
    config_map: str
    namespace: str
    default_key: str | None
    docs: dict[str, object]  # key -> parsed document (or the raw text when it is not YAML)
    parse_errors: dict[str, str]


def read(cluster: Cluster, policy: dict | None, namespace: str) -> SharingDocs | None:
    """The ConfigMap named by spec.devicePlugin.config, or None when sharing is not configured."""
    ref = ((policy or {}).get("spec", {}).get("devicePlugin", {}) or {}).get("config") or {}
    name = ref.get("name")
    if not name:
        return None
    try:
        cm = cluster.core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return SharingDocs(name, namespace, ref.get("default"), {},
                               {"": f"ConfigMap {namespace}/{name} not found"})
        raise
    docs, errors = {}, {}
    for key, text in (cm.data or {}).items():
        try:
            docs[key] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            errors[key] = f"not YAML: {str(exc).splitlines()[0]}"
    return SharingDocs(name, namespace, ref.get("default"), docs, errors)


def section(doc: dict) -> tuple[str | None, dict]:
    """('timeSlicing'|'mps', its settings) of a sharing document."""
    sharing = (doc or {}).get("sharing") or {}
    for key in ("timeSlicing", "mps"):
        if sharing.get(key):
            return key, sharing[key]
    return None, {}


def replicas_by_resource(doc: dict) -> dict[str, int]:
    _, cfg = section(doc)
    return {r["name"]: int(r["replicas"]) for r in cfg.get("resources", [])
            if isinstance(r, dict) and "name" in r and "replicas" in r}


def strategy_label(key: str | None) -> str:
    return {"timeSlicing": "time-slicing", "mps": "mps"}.get(key or "", "none")
