"""What API groups the cluster serves, from discovery: how a check tells which component
(a gang scheduler, a node autoscaler) a platform runs without knowing where it is installed."""

from __future__ import annotations

import json
from collections.abc import Collection

from kubernetes import client as k8s

from conformance.cluster.client import Cluster
from conformance.cluster.dra import get_text


def served(cluster: Cluster, groups: Collection[str]) -> dict[str, set[str]]:
    """API group -> the resources it serves (subresources left out), for ``groups`` only."""
    found: dict[str, set[str]] = {}
    for group in k8s.ApisApi(cluster.api_client).get_api_versions().groups or []:
        if group.name not in groups:
            continue
        for version in group.versions or []:
            doc = json.loads(get_text(cluster, f"/apis/{group.name}/{version.version}"))
            found.setdefault(group.name, set()).update(
                r["name"] for r in doc.get("resources") or [] if "/" not in r["name"])
    return found
