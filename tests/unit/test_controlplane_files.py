"""The control-plane layer's files: one kubeconfig writer (client certificate or token) and one
state-file type, shared by the sim's control plane and the real node."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conformance.controlplane.components import ClusterState
from conformance.controlplane.kubeconfig import kubeconfig
from conformance.controlplane.statefile import STATE_FILE, StateFile
from conformance.node.configs import bootstrap_kubeconfig
from conformance.node.state import NodeState


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    ca, cert, key = tmp_path / "ca.crt", tmp_path / "a.crt", tmp_path / "a.key"
    for p in (ca, cert, key):
        p.write_bytes(p.name.encode())
    return ca, cert, key


def test_kubeconfig_with_a_client_certificate(tmp_path):
    ca, cert, key = _files(tmp_path)
    doc = json.loads(kubeconfig("https://127.0.0.1:6443", ca, "kubernetes-admin", cert=cert,
                                key=key))
    assert doc["current-context"] == "gpuconf-sim"
    (cluster,) = doc["clusters"]
    assert cluster["cluster"]["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == b"ca.crt"
    (user,) = doc["users"]
    assert user["name"] == "kubernetes-admin"
    assert base64.b64decode(user["user"]["client-key-data"]) == b"a.key"


def test_the_kubelet_bootstrap_kubeconfig_carries_the_token(tmp_path):
    ca, _cert, _key = _files(tmp_path)
    doc = json.loads(bootstrap_kubeconfig("https://10.96.0.1:443", ca, "abcdef.0123456789abcdef"))
    assert doc["users"] == [{"name": "kubelet-bootstrap",
                             "user": {"token": "abcdef.0123456789abcdef"}}]
    assert doc["contexts"][0]["context"] == {"cluster": "gpuconf", "user": "kubelet-bootstrap"}
    assert doc["current-context"] == "bootstrap"


def test_a_kubeconfig_needs_credentials(tmp_path):
    ca, cert, _key = _files(tmp_path)
    with pytest.raises(ValueError):
        kubeconfig("https://127.0.0.1:6443", ca, "nobody", cert=cert)


@dataclass
class _Thing(StateFile):
    name: str
    folder: str
    pids: dict[str, int] = field(default_factory=dict)
    where = Path()

    @classmethod
    def root(cls) -> Path:
        return cls.where


def test_a_state_file_round_trips_and_is_absent_before_its_first_save(tmp_path):
    _Thing.where = tmp_path
    assert _Thing.load("one") is None
    (tmp_path / "one").mkdir()
    thing = _Thing("one", str(tmp_path / "one"), {"etcd": 42})
    thing.save()
    assert (tmp_path / "one" / STATE_FILE).is_file()
    assert not list((tmp_path / "one").glob("*.tmp"))
    assert _Thing.load("one") == thing


def test_the_control_plane_and_the_node_keep_their_state_in_their_own_folders(tmp_path,
                                                                                monkeypatch):
    monkeypatch.setenv("GPUCONF_CACHE", str(tmp_path))
    assert ClusterState.root() == tmp_path / "clusters"
    assert NodeState.root() == tmp_path / "nodes"
    node = NodeState("n", str(tmp_path / "nodes" / "n"), "/run/x", "host", "10.0.0.1")
    assert node.kubeconfig == tmp_path / "clusters" / "n" / "kubeconfig"


@pytest.mark.parametrize("caller, want", [({}, ("400", "1")),
                                          ({"GOGC": "100", "GOMAXPROCS": "4"}, ("100", "4"))])
def test_the_components_go_runtime_settings_and_the_callers_win(monkeypatch, tmp_path, caller,
                                                                 want):
    """Each Go component runs at GOGC=400 on one P unless the caller's environment says
    otherwise (components.py says what each saves)."""
    from conformance.controlplane.components import ControlPlane

    for var in ("GOGC", "GOMAXPROCS"):
        monkeypatch.delenv(var, raising=False)
    for var, value in caller.items():
        monkeypatch.setenv(var, value)
    state = ClusterState(name="x", folder=str(tmp_path), kubernetes_version="v1.36.3", ports={})
    env = ControlPlane._env(state, "kube-apiserver")
    assert (env["GOGC"], env["GOMAXPROCS"]) == want
