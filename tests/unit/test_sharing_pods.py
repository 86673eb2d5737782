"""The pod engine of the sharing checks (conformance.cluster.sharing_pods) on a fake cluster
whose kubelet runs every pod as a process with the fake CuPy: time-sliced, MPS and MIG pods on
one GPU, pods on different GPUs, a pod that never starts, a pod whose log cannot be read, and
pods that start beyond the skew bound. Each not-run path is a reason, never a figure."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster, PodPlay

from conformance.checks import shared_gpu
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import sharing_pods
from gpu_kernels import interference, podcopy

LEAD_S = 4.0  # the fake pods start in ~1 s (Python, numpy, the fake CuPy)
WINDOW = interference.Window(seconds=0.6, trials=3, ramp=0.2, tail=0.2)


@pytest.fixture(autouse=True)
def _short_leads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharing_pods, "START_LEAD_S", LEAD_S)
    monkeypatch.setattr(sharing_pods, "RETRY_LEAD_S", LEAD_S)


def node(name: str = "gpu-0", labels: dict[str, str] | None = None,
         resources: dict[str, str] | None = None) -> GpuNode:
    alloc = resources if resources is not None else {"nvidia.com/gpu": "4"}
    return GpuNode(name, labels or {}, alloc, alloc, (), True)


TIME_SLICED = node(labels={"nvidia.com/gpu.replicas": "4",
                           "nvidia.com/gpu.sharing-strategy": "time-slicing"})
MPS = node(labels={"nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "mps"},
           resources={"nvidia.com/gpu": "2"})
MIG = node(labels={"nvidia.com/mig.strategy": "mixed"},
           resources={"nvidia.com/mig-1g.18gb": "7", "nvidia.com/mig-3g.71gb": "1"})
WHOLE = node(labels={"nvidia.com/gpu.replicas": "1"}, resources={"nvidia.com/gpu": "8"})


def placement(cluster: FakeCluster, gpu_node: GpuNode) -> shared_gpu.Placement:
    found = sharing_pods.choose(cluster, [gpu_node])  # type: ignore[arg-type]
    assert found is not None
    return found


def two_sharers() -> list[sharing_pods.PodCopy]:
    return [sharing_pods.stress_copy("membw", {"mib": 4}, WINDOW) for _ in range(2)]


def together(cluster: FakeCluster, where: shared_gpu.Placement) -> sharing_pods.Together:
    return sharing_pods.run_counted(cluster, "ns", "run-1", "img", where,  # type: ignore[arg-type]
                                    two_sharers(), "t")


# ---- placement from labels -------------------------------------------------------------------
def test_the_sharing_comes_from_the_node_labels_and_resources(tmp_path) -> None:
    cluster = FakeCluster(tmp_path)
    ts, mps, mig = (placement(cluster, n) for n in (TIME_SLICED, MPS, MIG))
    assert (ts.sharing, ts.resource, ts.units_per_gpu) == ("time-slicing", "nvidia.com/gpu", 4)
    assert (mps.sharing, mps.resource, mps.mode) == ("mps", "nvidia.com/gpu", "MPS pods")
    assert (mig.sharing, mig.resource, mig.units_per_gpu) == ("mig", "nvidia.com/mig-1g.18gb", 7)
    assert sharing_pods.choose(cluster, [WHOLE]) is None  # type: ignore[arg-type]
    renamed = node(labels={"nvidia.com/gpu.replicas": "2"},
                   resources={"nvidia.com/gpu.shared": "2"})
    assert placement(cluster, renamed).resource == "nvidia.com/gpu.shared"


def test_the_pods_ask_for_one_unit_on_the_node_with_the_barrier_and_a_termination_message(
        tmp_path) -> None:
    where = placement(FakeCluster(tmp_path), MIG)
    body = sharing_pods.pod_manifest(two_sharers()[0], 0, where, "img", "barrier-x", "r", "t")
    c = body["spec"]["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/mig-1g.18gb": "1"}
    assert body["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "gpu-0"}
    assert {"name": "gpuconf-barrier", "configMap": {"name": "barrier-x", "optional": True}} \
        in body["spec"]["volumes"]
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["command"][:3] == ["python3", "-m", "gpu_kernels.podcopy"]
    assert body["spec"]["automountServiceAccountToken"] is False


# ---- the pods on the fake kubelet ------------------------------------------------------------
def test_time_sliced_pods_measured_together_with_a_solo_and_the_process_ratio(tmp_path) -> None:
    cluster = FakeCluster(tmp_path)
    doc = sharing_pods.interference_points(cluster, "ns", "run-1", "img",  # type: ignore[arg-type]
                                           placement(cluster, TIME_SLICED), "membw", [2],
                                           window=WINDOW, options={"mib": 4})
    assert [p["copies"] for p in doc["points"]] == [1, 2]
    assert doc["mode"] == "time-sliced pods" and doc["node"] == "gpu-0"
    two = doc["points"][1]
    assert all(c["rate"] > 0 for c in two["per_copy"])
    assert two["start_skew_s"] is not None and two["start_skew_s"] <= shared_gpu.MAX_START_SKEW_S
    uuids = {p["identity"]["uuid"] for p in doc["pods"][1]["pods"]}
    assert len(uuids) == 1  # one GPU, seen from inside both pods
    procs = [{"copies": 2, "per_copy": [{"rate": c["rate"] / 2} for c in two["per_copy"]]}]
    ratio = sharing_pods.pod_vs_process(doc["points"], procs)
    assert [r["copies"] for r in ratio] == [2] and ratio[0]["ratio"] == pytest.approx(2.0)


def test_mps_pods_on_one_gpu_count(tmp_path) -> None:
    cluster = FakeCluster(tmp_path)
    done = together(cluster, placement(cluster, MPS))
    assert done.not_run is None, done.not_run
    assert all(o.source == "log" for o in done.outcomes)


def test_pods_on_distinct_mig_instances_of_one_gpu_count(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {0: PodPlay(mig_instance=0), 1: PodPlay(mig_instance=1)})
    done = together(cluster, placement(cluster, MIG))
    assert done.not_run is None, done.not_run
    uuids = [o.summary["identity"]["uuid"] for o in done.outcomes]
    buses = {o.summary["identity"]["pci_bus_id"] for o in done.outcomes}
    assert len(set(uuids)) == 2 and len(buses) == 1


def test_mig_pods_that_saw_one_instance_are_not_run(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {0: PodPlay(mig_instance=3), 1: PodPlay(mig_instance=3)})
    done = together(cluster, placement(cluster, MIG))
    assert done.not_run and "not distinct instances" in done.not_run


def test_pods_on_different_gpus_are_not_run(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {1: PodPlay(gpu_index=1)})
    where = placement(cluster, TIME_SLICED)
    done = together(cluster, where)
    assert done.not_run and "different GPUs" in done.not_run
    cluster = FakeCluster(tmp_path / "again", {2: PodPlay(gpu_index=1)})  # solo, then two
    with pytest.raises(sharing_pods.NotRun, match="2 time-sliced pods on gpu-0: the pods got "
                                                  "different GPUs"):
        sharing_pods.interference_points(cluster, "ns", "r", "img", where,  # type: ignore
                                         "membw", [2], window=WINDOW, options={"mib": 4})


def test_a_pod_that_never_starts_is_not_run_with_its_state(tmp_path, monkeypatch) -> None:
    cluster = FakeCluster(tmp_path, {1: PodPlay(never_starts=True)})
    done = together(cluster, placement(cluster, TIME_SLICED))
    assert done.not_run and "never started: ErrImagePull" in done.not_run
    assert all(p.deleted for p in cluster.pods.values())  # nothing left holding the GPU


def test_an_unreadable_log_falls_back_to_the_termination_message(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {0: PodPlay(logs_readable=False)})
    done = together(cluster, placement(cluster, TIME_SLICED))
    assert done.not_run is None, done.not_run
    assert [o.source for o in done.outcomes] == ["termination message", "log"]
    assert done.outcomes[0].summary["figures"]["rate"] > 0


def test_a_result_readable_nowhere_is_not_run_with_both_reasons(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {0: PodPlay(logs_readable=False,
                                                keep_termination_message=False)})
    done = together(cluster, placement(cluster, TIME_SLICED))
    assert done.not_run and "403 Forbidden" in done.not_run
    assert "no termination message" in done.not_run


def test_pods_that_start_beyond_the_skew_bound_are_not_run_after_one_retry(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {1: PodPlay(start_delay_s=LEAD_S + 1.0),
                                     3: PodPlay(start_delay_s=LEAD_S + 1.0)})
    done = together(cluster, placement(cluster, TIME_SLICED))
    assert done.not_run and "beyond the 0.2 s bound" in done.not_run
    assert "after the go instant" in done.not_run
    assert len(done.tries) == 1 and len(cluster.created) == 4


# ---- pure rules ------------------------------------------------------------------------------
def test_skew_is_each_start_against_its_own_due_instant() -> None:
    on_time = {"go_at": 100.0, "due_wall": 102.0, "start_wall": 102.01, "ready_wall": 90.0}
    victim = {"go_at": 100.0, "due_wall": 100.0, "start_wall": 100.02, "ready_wall": 90.0}
    assert shared_gpu.start_skew([on_time, victim]) == pytest.approx(0.01)
    late = {"go_at": 100.0, "due_wall": 100.0, "start_wall": 101.0, "ready_wall": 100.9}
    problem = shared_gpu.skew_problem(["a", "b"], [victim, late])
    assert problem and "b was last" in problem and "0.9 s after the go instant" in problem


def test_the_termination_message_fits_4_kib() -> None:
    summary = {"event": "summary", "role": "stress", "identity": {"uuid": "GPU-x"},
               "barrier": {"go_at": 1.0}, "figures": {"rate": 1.0, "trials": [1.0] * 500},
               "events": {"ready": [{"config": "x" * 5000}]}}
    text = podcopy.termination_text(summary)
    assert len(text.encode()) <= podcopy.TERMINATION_MAX_BYTES
    assert '"rate":1.0' in text and "events" not in text


def test_memory_isolation_between_time_sliced_pods_is_a_finding(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, env={"FAKE_CUPY_TOTAL": str(8 * 2**30)})
    found = sharing_pods.memory_isolation(cluster, "ns", "r", "img",  # type: ignore[arg-type]
                                          placement(cluster, TIME_SLICED), release_s=2.0)
    assert found["finding"] and found["sharing"] == "time-sliced pods"
    assert found["isolated"] is False  # one GPU's memory: the holder's share is gone for all
    details = found["details"]
    assert details["other_saw_free_alone_gib"] == pytest.approx(8, rel=0.05)  # before the hold
    assert details["other_allocation"].startswith("failed")
    assert details["other_allocation_after_holder_exit"].startswith("succeeded")
    assert details["other_beyond_share_requested_gib"] is None  # it saw the whole GPU


def test_fault_isolation_between_time_sliced_pods_is_a_finding(tmp_path) -> None:
    cluster = FakeCluster(tmp_path)
    found = sharing_pods.fault_isolation(cluster, "ns", "r", "img",  # type: ignore[arg-type]
                                         placement(cluster, TIME_SLICED), seconds=1.5,
                                         victim="membw", victim_options={"mib": 4})
    assert found["finding"] and found["details"]["faulter_illegal_address"]
    assert found["details"]["other_rate_before"] > 0


# ---- SHARE-LAT-001 between pods: a batch-1 client beside time-sliced sharer pods -------------
# A short first lead (the fake pods are ready in ~1 s); a late start is tried once more with the
# longer one, as on a cluster, so a loaded test machine costs time, not a flaky verdict.
QUICK = sharing_pods.Leads(first=2.5, retry=3.5)
# The client's first request comes before the window opens; a 2-core machine running make test
# can keep a process off a core for most of a second, so the window is longer than the sharers'
# (a 0.6 s one once held no request: "a pod measured nothing").
LATENCY_TEST_WINDOW = interference.Window(seconds=1.5, trials=3, ramp=0.4, tail=0.2)


def latency_points(cluster: FakeCluster, where: shared_gpu.Placement,
                   sharers: list[int]) -> dict:
    return sharing_pods.latency_points(cluster, "ns", "r", "img", where,  # type: ignore[arg-type]
                                       sharers, window=LATENCY_TEST_WINDOW, stress="membw",
                                       stress_options={"mib": 4},
                                       client_options={"hidden": 128, "layers": 2},
                                       think_ms=0.5, leads=QUICK)


def test_the_latency_client_pod_beside_time_sliced_sharer_pods_against_processes(
        tmp_path) -> None:
    cluster = FakeCluster(tmp_path)
    where = placement(cluster, TIME_SLICED)
    doc = latency_points(cluster, where, [1, 4])  # 4 sharers + the client: beyond 4 replicas
    assert [(p["mode"], p["sharers"]) for p in doc["points"]] == [("solo", 0),
                                                                 ("time-slicing", 1)]
    solo, one = doc["points"]
    assert solo["n"] > 0 and one["n"] > 0 and one["latency_us"]["p99"] > 0
    assert one["sharer_rates"][0] > 0 and one["slowdown"]["p99"] is not None
    assert one["start_skew_s"] <= shared_gpu.MAX_START_SKEW_S
    assert doc["mode"] == "time-sliced pods" and doc["client"]["config"]["hidden"] == 128
    assert "time-slicing" in doc["finding"] and "in a pod" in doc["finding"]
    assert len({p["identity"]["uuid"] for p in doc["pods"][1]["pods"]}) == 1
    assert [len(p["pods"]) for p in doc["pods"]] == [1, 2]
    procs = [dict(p, latency_us={k: v / 2 for k, v in p["latency_us"].items()
                                 if isinstance(v, float)}) for p in doc["points"]]
    ratio = sharing_pods.pod_vs_process(doc["points"], procs, sharing_pods.LATENCY)
    assert [r["sharers"] for r in ratio] == [0, 1] and ratio[1]["unit"] == "us"
    assert ratio[1]["pod_p99"] == one["latency_us"]["p99"]
    assert ratio[1]["p99_ratio"] == pytest.approx(2.0)
    assert ratio[1]["p999_ratio"] == pytest.approx(2.0)


def test_a_latency_pod_that_never_starts_is_not_run(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {2: PodPlay(never_starts=True)})  # solo, then its sharer
    with pytest.raises(sharing_pods.NotRun, match=r"the client pod beside 1 sharer pod\(s\) on "
                                                  r"gpu-0 \(time-sliced pods\): .*never started: "
                                                  "ErrImagePull"):
        latency_points(cluster, placement(cluster, TIME_SLICED), [1])
    assert all(p.deleted for p in cluster.pods.values())


def test_a_latency_client_whose_result_is_readable_nowhere_is_not_run(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {0: PodPlay(logs_readable=False,
                                                keep_termination_message=False)})
    with pytest.raises(sharing_pods.NotRun, match=r"the client pod alone on gpu-0 .*403 Forbidden.*"
                                                  "no termination message"):
        latency_points(cluster, placement(cluster, TIME_SLICED), [1])


def test_a_latency_client_read_from_its_termination_message_counts(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {0: PodPlay(logs_readable=False)})
    doc = latency_points(cluster, placement(cluster, TIME_SLICED), [])
    assert doc["pods"][0]["pods"][0]["source"] == "termination message"
    assert doc["points"][0]["n"] > 0 and doc["points"][0]["latency_us"]["p999"] > 0


def test_latency_pods_beyond_the_skew_bound_are_not_run(tmp_path) -> None:
    late = PodPlay(start_delay_s=4.0)  # ready after the go instant, on both tries
    cluster = FakeCluster(tmp_path, {2: late, 4: late})  # the sharer of S=1, and its retry
    with pytest.raises(sharing_pods.NotRun, match=r"the client pod beside 1 .*beyond the 0\.2 s "
                                                  r"bound: .*after the go instant"):
        latency_points(cluster, placement(cluster, TIME_SLICED), [1])
    assert len(cluster.created) == 5  # solo, then S=1 twice (the retry with the longer lead)


def test_latency_pods_on_different_gpus_are_not_run(tmp_path) -> None:
    cluster = FakeCluster(tmp_path, {2: PodPlay(gpu_index=1)})
    with pytest.raises(sharing_pods.NotRun, match="different GPUs"):
        latency_points(cluster, placement(cluster, TIME_SLICED), [1])
