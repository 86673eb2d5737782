"""Kueue in the sim, without a cluster: the manager's command line and configuration
(controlplane/kueue.py) and the ClusterQueue quota each fault plays (sim/kueue.py)."""

from __future__ import annotations

import yaml

from conformance.controlplane import kueue
from conformance.controlplane.components import PORT_NAMES
from conformance.sim import kueue as sim_kueue
from conformance.sim.faults import BY_NAME
from conformance.sim.operator_plan import SimState
from conformance.sim.profiles import get_profile


def test_manager_runs_on_loopback_with_the_sim_cas_certificates(tmp_path):
    (tmp_path / "pki").mkdir()
    for ext in ("crt", "key"):
        (tmp_path / "pki" / f"{kueue.WEBHOOK_CERT}.{ext}").write_text(ext)
    ports = {kueue.COMPONENT: 20001, kueue.WEBHOOK_PORT: 20002}
    argv = kueue.argv("/bin/kueue", tmp_path, ports)
    assert argv[2] == f"--kubeconfig={tmp_path / 'kueue.kubeconfig'}"
    config = yaml.safe_load((tmp_path / "kueue" / "config.yaml").read_text())
    assert argv[1] == f"--config={tmp_path / 'kueue' / 'config.yaml'}"
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 20002,
                                 "certDir": str(tmp_path / "kueue" / "certs")}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:20001"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["integrations"]["frameworks"] == ["batch/job"]
    certs = tmp_path / "kueue" / "certs"
    assert (certs / "tls.crt").read_text() == "crt" and (certs / "tls.key").read_text() == "key"
    assert kueue.env(tmp_path) == {"KUEUE_METRICS_CERT_DIR": str(certs)}
    assert "--feature-gates=VisibilityOnDemand=false" in argv  # no fixed port on 0.0.0.0
    assert set(kueue.PORT_NAMES) <= set(PORT_NAMES)


def test_quota_is_the_profiles_gpus_and_twice_that_overcommitted():
    assert sim_kueue.wanted(get_profile("gang-kueue"))
    assert not sim_kueue.wanted(get_profile("healthy"))
    assert sim_kueue.gpu_quota(SimState("gang-kueue")) == 4
    assert sim_kueue.gpu_quota(SimState("gang-kueue", [sim_kueue.OVERCOMMITTED])) == 8


def test_the_gang_faults_are_the_ones_sim_kueue_plays():
    for name in (sim_kueue.OVERCOMMITTED, sim_kueue.CONTROLLER_DOWN):
        assert BY_NAME[name].profile == "gang-kueue"
