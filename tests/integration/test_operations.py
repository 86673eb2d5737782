"""The disruptive reconcile checks pass against the stand-in (which plays the operator's
controller) and fail when the stand-in is told to ignore changes; nothing stays changed."""

from __future__ import annotations

from conformance.cluster.views import read_cluster_policy
from tests.helpers import run_suites, verdicts

RECONCILE = {"OPS-REC-001", "OPS-REC-002"}


def test_operations_skip_without_opt_in(sim, tmp_path):
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "operations")
    assert code == 0, out[-2000:]
    skipped = {r["id"]: r["message"] for r in doc["requirements"] if r["id"] in RECONCILE}
    assert all("--disruptive" in m for m in skipped.values()), skipped


def test_reconcile_checks_pass_and_restore(sim, sim_cluster, sim_state, tmp_path):
    sim_state("healthy")
    before = read_cluster_policy(sim_cluster).spec
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "operations", extra=["--disruptive"])
    assert code == 0, out[-3000:]
    assert RECONCILE | {"OPS-REC-003"} <= verdicts(doc, "pass")
    assert read_cluster_policy(sim_cluster).spec == before, "the ClusterPolicy was not restored"
    nodes = sim_cluster.core.list_node(label_selector="nvidia.com/gpu.deploy.operands=false")
    assert nodes.items == [], "a node was left with its operands switched off"


def test_reconcile_checks_fail_when_the_operator_ignores_changes(sim, sim_state, tmp_path):
    sim_state("healthy", ["standin-ignores-changes"])
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "operations",
                                extra=["--disruptive", "--reconcile-timeout=10"])
    assert code == 1
    assert verdicts(doc, "fail") >= RECONCILE, out[-3000:]
    assert "OPS-REC-003" in verdicts(doc, "pass")  # the Deployment controller is not the operator


def test_certify_driver_upgrade_flow_on_the_sim(sim, sim_cluster, sim_state, tmp_path):
    """`gpuconf certify --driver-version V`: patch, OnDelete rollout (played by the stand-in),
    re-run, compare; the fingerprint names the driver change and nothing regresses."""
    import json
    import subprocess
    import sys

    sim_state("healthy")
    new = "580.126.09"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "certify", "--target", "sim",
                           "--driver-version", new, "--kubeconfig", str(sim.kubeconfig),
                           "--results", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "driver rollout" in proc.stderr and "CERTIFIED" in proc.stdout
    cert = json.loads((tmp_path / "certification.json").read_text())
    assert new in json.dumps(cert["fingerprint_changes"])
    labels = {n.metadata.labels["nvidia.com/cuda.driver-version.full"] for n in
              sim_cluster.core.list_node(label_selector="nvidia.com/gpu.present=true").items}
    assert labels == {new}


def test_restore_keeps_what_others_changed_meanwhile(sim, sim_cluster, sim_state, tmp_path):
    """Each check restores only the field it changed: an edit another actor makes to the
    ClusterPolicy during the run survives it (a whole-spec restore would revert it).

    The stand-in ignores changes until the other actor's edit is in, so that edit always
    lands while the check's change is live (a poll for the check's change could miss it: the
    check restores ~1 s after the operator reconciled, and once it waited here the full 120 s
    and tested nothing). Lifting the fault, not ``sim set``: that would reset the policy."""
    import dataclasses
    import subprocess
    import time

    from conformance.cluster import policy_edit
    from conformance.nvidia import clusterpolicy
    from conformance.options import Options
    from conformance.run.plan import RunPlan
    from conformance.sim import standin_state

    held = sim_state("healthy", ["standin-ignores-changes"])
    name = read_cluster_policy(sim_cluster).name
    before = read_cluster_policy(sim_cluster).spec
    cmd = RunPlan(Options(results=str(tmp_path), disruptive=True)).pytest_command(
        target="sim", kubeconfig=str(sim.kubeconfig),
        paths=["operations/test_reconcile.py::test_device_plugin_env_reaches_the_daemonset"])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    theirs = {"name": "SET_BY_SOMEONE_ELSE", "value": "1"}

    def probed() -> bool:
        env = read_cluster_policy(sim_cluster).section("devicePlugin").get("env") or []
        return any(e["name"] == "GPUCONF_RECONCILE_PROBE" for e in env)

    try:
        deadline = time.monotonic() + 120
        while not probed():  # the check has changed devicePlugin.env, and waits
            assert proc.poll() is None and time.monotonic() < deadline, \
                "the check never changed devicePlugin.env: " + (proc.communicate()[0] or "")[-3000:]
            time.sleep(0.2)
        policy_edit.change_field(sim_cluster, name, ("toolkit", "env"), [theirs])
        standin_state.save_state(sim_cluster, dataclasses.replace(held, faults=[]))
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
        after = read_cluster_policy(sim_cluster).spec
        assert after["toolkit"].get("env") == [theirs], "another actor's change was reverted"
        assert after.get("devicePlugin") == before.get("devicePlugin"), "the check's change stayed"
    finally:
        if proc.poll() is None:
            proc.kill()
        live = sim_cluster.custom.get_cluster_custom_object(*clusterpolicy.API, name)
        live["spec"]["toolkit"].pop("env", None)
        sim_cluster.custom.replace_cluster_custom_object(*clusterpolicy.API, name, live)


def test_a_users_own_operand_switch_survives_the_node_wide_switch(sim, sim_cluster, sim_state):
    """As the operator's state labels work (state_manager.go): ``gpu.deploy.operands=false``
    removes every ``gpu.deploy.<operand>`` label, the user's own included; switched back on,
    the missing ones return as ``true``; a user's ``gpu.deploy.<operand>=false`` set while
    the node-wide switch is on is honoured on every pass, never flipped back."""
    import time

    sim_state("healthy")
    node = sim_cluster.core.list_node(label_selector="nvidia.com/gpu.present=true").items[0]
    name, own = node.metadata.name, "nvidia.com/gpu.deploy.dcgm-exporter"
    other = "nvidia.com/gpu.deploy.device-plugin"

    def labels() -> dict[str, str]:
        return sim_cluster.core.read_node(name).metadata.labels or {}

    def until(what: str, check) -> None:
        deadline = time.monotonic() + 60
        while not check(labels()):
            assert time.monotonic() < deadline, f"not within 60s: {what}"
            time.sleep(0.5)

    try:
        sim_cluster.core.patch_node(name, {"metadata": {"labels": {own: "false"}}})
        sim_cluster.core.patch_node(name, {"metadata": {"labels": {
            "nvidia.com/gpu.deploy.operands": "false"}}})
        until("every operand label removed", lambda lab: own not in lab and other not in lab)
        sim_cluster.core.patch_node(name, {"metadata": {"labels": {
            "nvidia.com/gpu.deploy.operands": None}}})
        until("the operand labels back", lambda lab: lab.get(other) == "true")
        assert labels().get(own) == "true", "absent while switched off: added back as true"
        # the user's own switch, set while the node-wide switch is on, is honoured
        sim_cluster.core.patch_node(name, {"metadata": {"labels": {own: "false"}}})
        time.sleep(5)  # several reconcile passes
        assert labels().get(own) == "false", "the operator overwrote the user's own switch"
    finally:
        sim_cluster.core.patch_node(name, {"metadata": {"labels": {
            own: "true", "nvidia.com/gpu.deploy.operands": None}}})
