"""The custom metrics adapter in the sim, without a cluster: its command line (controlplane/
metrics_adapter.py), which profiles run it and the faults it plays (sim/metrics_adapter.py)."""

from __future__ import annotations

import ipaddress

from conformance.controlplane import metrics_adapter as adapter
from conformance.controlplane.components import PORT_NAMES
from conformance.sim import metrics_adapter as sim_adapter
from conformance.sim.faults import BY_NAME
from conformance.sim.profiles import get_profile


def test_adapter_serves_on_this_hosts_address_with_the_sim_cas_certificate(tmp_path):
    ports = {adapter.COMPONENT: 20001, adapter.WRITE_PORT: 20002}
    argv = adapter.argv("/bin/test-adapter", tmp_path, ports, "192.0.2.2")
    assert "--bind-address=192.0.2.2" in argv and "--secure-port=20001" in argv
    assert f"--tls-cert-file={tmp_path / 'pki' / 'metrics-adapter-serving.crt'}" in argv
    kc = tmp_path / "metrics-adapter.kubeconfig"
    assert {f"--lister-kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}"} <= set(argv)
    assert adapter.env(ports, "192.0.2.2") == {"TEST_ADAPTER_WRITE_ADDR": "192.0.2.2:20002"}
    assert adapter.serving_hosts()[0] == "custom-metrics-apiserver.custom-metrics.svc"
    assert set(adapter.PORT_NAMES) <= set(PORT_NAMES)


def test_host_ip_is_no_loopback_address():
    assert not ipaddress.ip_address(adapter.host_ip()).is_loopback


def test_only_the_pod_autoscaling_profile_runs_it_and_its_faults_are_there():
    assert sim_adapter.wanted(get_profile("pod-autoscaling"))
    assert not sim_adapter.wanted(get_profile("healthy"))
    for name in (sim_adapter.API_DOWN, "hpa-gpus-held"):
        assert BY_NAME[name].profile == "pod-autoscaling"
