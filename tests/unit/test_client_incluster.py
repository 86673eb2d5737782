"""connect() in a pod: without any kubeconfig, the pod's ServiceAccount (KUBERNETES_SERVICE_HOST
and the kubelet's token and CA files), as client-go's rest.InClusterConfig; a kubeconfig, when
there is one, still wins."""

from __future__ import annotations

import pytest

from conformance.cluster import client as kclient
from conformance.common.errors import UsageError

CA = """-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwprdWJlcm5ldGVz
-----END CERTIFICATE-----
"""


@pytest.fixture
def pod_env(tmp_path, monkeypatch):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("pod-token-1")
    (sa / "ca.crt").write_text(CA)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("GPUCONF_SERVICE_ACCOUNT_DIR", str(sa))
    return sa


def test_in_cluster_config_without_a_kubeconfig(pod_env):
    cluster = kclient.connect()
    conf = cluster.api_client.configuration
    assert cluster.server == "https://10.96.0.1:443"
    assert cluster.kubeconfig is None
    assert conf.auth_settings()["BearerToken"]["value"] == "bearer pod-token-1"
    assert conf.ssl_ca_cert == str(pod_env / "ca.crt")
    assert conf.retries.total == kclient.RETRY_TOTAL


def test_the_default_mount_is_the_kubelets(monkeypatch):
    monkeypatch.delenv("GPUCONF_SERVICE_ACCOUNT_DIR", raising=False)
    assert str(kclient.service_account_dir()) == "/var/run/secrets/kubernetes.io/serviceaccount"


def test_a_kubeconfig_wins_over_the_pod(pod_env, tmp_path):
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
                  "'https://example:6443'}}]\nusers: [{name: u, user: {token: t}}]\n"
                  "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    assert kclient.connect(str(kc)).server == "https://example:6443"


def test_a_pod_without_its_token_is_one_line(pod_env):
    (pod_env / "token").unlink()
    with pytest.raises(UsageError, match="in-cluster config cannot be used") as err:
        kclient.connect()
    assert "\n" not in str(err.value)


def test_outside_a_pod_nothing_changes(pod_env, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(UsageError, match="no kubeconfig"):
        kclient.connect()
