"""The end-of-run sweep stops at once on a namespace the namespace controller cannot finish
deleting (an unavailable aggregated API breaks its discovery), naming why, instead of waiting
out its timeout (conformance/cluster/namespaces.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.cluster import namespaces
from conformance.common.errors import NotConverged

STALL = ("Discovery failed for some groups, 1 failing: unable to retrieve the complete list of "
         "server APIs: custom.metrics.k8s.io/v1beta2: stale GroupVersion discovery")


class _Core:
    def __init__(self, conditions: list) -> None:
        self.conditions = conditions
        self.deleted: list[str] = []

    def list_namespace(self, label_selector: str):
        return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(name="gpuconf-a"))])

    def delete_namespace(self, name, **_kwargs):
        self.deleted.append(name)

    def list_namespaced_pod(self, _name, **_kwargs):
        return SimpleNamespace(items=[])

    def read_namespace(self, _name):
        return SimpleNamespace(status=SimpleNamespace(conditions=self.conditions))


def test_a_namespace_whose_deletion_cannot_discover_every_api_stops_the_sweep():
    core = _Core([SimpleNamespace(type="NamespaceDeletionDiscoveryFailure", status="True",
                                  message=STALL)])
    with pytest.raises(namespaces.DeletionStalled, match=r"custom\.metrics\.k8s\.io") as stalled:
        namespaces.sweep(SimpleNamespace(core=core), "run-1")
    assert isinstance(stalled.value, NotConverged)  # the CLI's one-line error, exit 1
    assert core.deleted == ["gpuconf-a"]
