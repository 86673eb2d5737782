"""The sim reached through its kubeconfig as an existing cluster gets the verdicts of
``--target sim``: the suite decides which GPU nodes are simulated from what each node shows
(KWOK's annotation, its kubelet version, fake-gpu-operator's labels), not from the target it
was told, so the real-GPU checks are not run there rather than failing on logs KWOK cannot
serve (issue 32, point 1).
"""

from __future__ import annotations

from tests.helpers import disguised_as_real, run_suites, verdicts

RUN_TIMEOUT_S = 900  # every suite, on a shared 2-core machine


def test_a_sim_through_its_kubeconfig_gets_the_verdicts_of_target_sim(sim, sim_state, tmp_path):
    sim_state("healthy")
    _code, as_sim, out_sim = run_suites(sim.kubeconfig, tmp_path / "sim", target="sim",
                                        timeout=RUN_TIMEOUT_S)
    _code, existing, out = run_suites(sim.kubeconfig, tmp_path / "existing",
                                      target="existing", timeout=RUN_TIMEOUT_S)
    rows = {r["id"]: r for r in existing["requirements"]}

    def why(ids: set[str]) -> str:
        return "\n".join(f"{i}: {rows[i]['verdict']}: {rows[i]['message'][:300]}"
                         for i in sorted(ids))

    passed = verdicts(as_sim, "pass")
    assert passed, f"nothing passed under --target sim\n{out_sim[-2000:]}"
    lost = passed - verdicts(existing, "pass")
    assert not lost, f"pass under --target sim, not through --kubeconfig:\n{why(lost)}"
    unjudged = (verdicts(as_sim, "skip") | verdicts(as_sim, "not-applicable")
                | verdicts(as_sim, "not-run"))
    failed = unjudged & verdicts(existing, "fail")
    assert not failed, (f"skipped or not-applicable under --target sim, failed through "
                        f"--kubeconfig:\n{why(failed)}\n{out[-1500:]}")
    real_gpu = [rows[i] for i in ("STACK-NODE-001", "STACK-TK-002", "SCHED-ISO-001")
                if i in rows and rows[i]["verdict"] == "not-run"]
    assert real_gpu and all("simulated" in r["message"] and "KWOK" in r["message"]
                            for r in real_gpu), why({r["id"] for r in real_gpu})


UNREAD_SUITES = ("stack/test_toolkit.py", "stack/test_burn_in.py", "scheduling/test_isolation.py",
                 "sharing/test_gpu_sharing.py")
UNREAD_CHECKS = {"STACK-TK-002", "STACK-BURN-001", "SCHED-ISO-001", "SCHED-ISO-002",
                 "SHARE-INT-001", "SHARE-ISO-001", "SHARE-ISO-002", "SHARE-LAT-001"}


def test_results_the_suite_cannot_read_are_not_run_not_findings(sim, sim_cluster, sim_state,
                                                                tmp_path):
    """Nodes that look real whose kubelets serve no logs (KWOK's, disguised: a real cluster
    with the kubelet port closed): the real-GPU checks' pods run and end, their results
    cannot be read, and each check is not run naming the pod and node, never failed with a
    diagnosis of the toolkit or the GPUs."""
    sim_state("healthy")
    with disguised_as_real(sim_cluster) as nodes:
        _code, doc, out = run_suites(sim.kubeconfig, tmp_path, *UNREAD_SUITES,
                                     target="existing", timeout=RUN_TIMEOUT_S)
    rows = {r["id"]: r for r in doc["requirements"]}
    failed = {i: rows[i]["message"][:300] for i in verdicts(doc, "fail")}
    assert not failed, f"{failed}\n{out[-1500:]}"
    for i in sorted(UNREAD_CHECKS):
        row = rows[i]
        assert row["verdict"] == "not-run", f"{i}: {row['verdict']}: {row['message'][:300]}"
        assert "could not read the result of pod" in row["message"], f"{i}: {row['message']}"
        assert any(n in row["message"] for n in nodes), f"{i}: {row['message']}"
