"""N pods on one GPU, placed there by the cluster's own sharing, measured together: the
engine of SHARE-INT-001, SHARE-ISO-001/002 and SHARE-LAT-001 on every cluster target.

Placement: each pod asks for one unit of the resource the node's sharing offers
(:mod:`conformance.checks.shared_gpu`: time-slicing, MPS or MIG, from its labels and
resources) and is pinned to that node; the pods then say from inside which GPU they got (CUDA
UUID and PCI bus id), and a point whose pods did not share one physical GPU is not a figure.

Start: every pod runs ``python3 -m gpu_kernels.podcopy`` (gpu_kernels mounted from a ConfigMap
as :mod:`kernel_pods` does), prepares, then waits for the *go instant*, a wall-clock time in the
file ``go`` of a second ConfigMap volume, the barrier. The runner writes that ConfigMap *with*
the pods, ``START_LEAD_S`` ahead, rather than once they are all Running: the kubelet copies a
ConfigMap that appears or changes later into a running pod's volume only at its next periodic
sync of the pod (``syncFrequency``, one minute by default), so a barrier released late would
cost a minute or more a point and reach the pods up to a minute apart. Pods without API access
(no token: the restricted profile) could not watch it either. A pod that is not ready by the
go instant starts late, and says so: each reports when it was ready and when it really
started (its node's wall clock, which the pods of one GPU share; the runner's clock only sets
the go instant), the spread of those starts is the skew, and a skew beyond
``shared_gpu.MAX_START_SKEW_S`` makes the point not-run, never a figure. A late start caused by
a slow start-up is tried once more with a longer lead.

Results: the pod's last log line (``workloads.wait`` reads it, or says why it could not),
else its termination message: the kubelet keeps up to 4 KiB that the container wrote to
``/dev/termination-log`` in the pod's status, read with one more read of the pod.
(A ConfigMap the pod writes would need a token and RBAC the restricted pods do not have.)
A pod whose result can be read neither way makes the point not-run, with both reasons.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.checks import shared_gpu
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import allocation, kernel_pods, pods, workloads
from conformance.cluster.client import Cluster
from conformance.cluster.namespaces import run_labels
from gpu_kernels import analysis, interference, kernels, latency, podcopy
from gpu_kernels.analysis import Thresholds

# From creating the pods to the go instant: scheduling, a container start with the image
# already on the node, CuPy's import, a kernel compile and warm-up (5-10 s on the H200
# machine's node). A pod ready later starts late and the point is tried once more with
# RETRY_LEAD_S (an image pull on a fresh node, say).
START_LEAD_S = 30.0
RETRY_LEAD_S = 120.0
WINDOW = interference.Window(seconds=3.0)
LATENCY_WINDOW = interference.Window(seconds=4.0)  # as the suite's process control
POD_TIMEOUT_S = 300.0  # after the go instant: the window, the tail, the pod ending
BARRIER_VOLUME = "gpuconf-barrier"


@dataclass
class PodCopy:
    """One pod's part: the worker spec and the plan (``gpu_kernels.podcopy``)."""

    spec: dict[str, Any]
    plan: dict[str, Any]


@dataclass
class PodOutcome:
    pod: str
    node: str | None
    phase: str
    summary: dict[str, Any] | None
    source: str | None  # "log" | "termination message" | None
    diagnosis: str | None = None

    def events(self, name: str) -> list[dict[str, Any]]:
        return ((self.summary or {}).get("events") or {}).get(name) or []

    def brief(self) -> dict[str, Any]:
        s = self.summary or {}
        return {"pod": self.pod, "node": self.node, "phase": self.phase, "source": self.source,
                "diagnosis": self.diagnosis, "identity": s.get("identity"),
                "barrier": s.get("barrier")}


@dataclass
class Together:
    """What N pods did together, or why it does not count (``not_run``)."""

    outcomes: list[PodOutcome]
    not_run: str | None = None
    skew_s: float | None = None
    late: bool = False  # not_run because a pod was ready after the go instant
    lead_s: float = 0.0
    tries: list[str] = field(default_factory=list)


class NotRun(Exception):
    """The pods' measurement does not count: the check is not-run, with this reason."""


# ---- placing and starting the pods -----------------------------------------------------------
def free_units(cluster: Cluster, nodes: list[GpuNode]) -> dict[str, dict[str, int]]:
    """Free units per node and GPU resource: allocation's rule, over one list of the pods."""
    used = pods.gpus_in_use_by_node(cluster)
    return {n.name: {r: allocation.free_units(cluster, n, r, used) for r in n.gpu_resources}
            for n in nodes}


def choose(cluster: Cluster, nodes: list[GpuNode]) -> shared_gpu.Placement | None:
    """The node and resource where one-unit pods share one GPU, or None (whole GPUs only)."""
    return shared_gpu.choose(nodes, free_units(cluster, nodes))


def pod_manifest(copy: PodCopy, index: int, placement: shared_gpu.Placement, image: str,
                 barrier: str, run_id: str, name: str) -> dict[str, Any]:
    spec, volume = kernel_pods.kernel_pod([], image=image, resource=placement.resource,
                                          node=placement.node)
    spec.prefix = f"{name}-{index}"
    spec.command = ["python3", "-m", "gpu_kernels.podcopy", json.dumps(copy.spec),
                    json.dumps(copy.plan)]
    body = kernel_pods.manifest(spec, volume, run_id)
    body["spec"]["volumes"].append({"name": BARRIER_VOLUME, "configMap": {
        "name": barrier, "optional": True}})
    container = body["spec"]["containers"][0]
    container["volumeMounts"].append({"name": BARRIER_VOLUME, "mountPath": podcopy.BARRIER_DIR,
                                      "readOnly": True})
    container["terminationMessagePath"] = podcopy.TERMINATION_LOG
    container["terminationMessagePolicy"] = "File"
    return body


def _summary_from(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("event") == "summary":
            return doc
    return None


def termination_message(cluster: Cluster, namespace: str, name: str) -> str:
    try:
        pod = cluster.core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        return f"(pod unreadable: {exc.status} {exc.reason})"
    for s in (pod.status.container_statuses or []) if pod.status else []:
        term = s.state.terminated if s.state else None
        if term is not None and term.message:
            return term.message
    return "(no termination message)"


def read_result(cluster: Cluster, namespace: str, r: workloads.WorkloadResult) -> PodOutcome:
    """The pod's summary from its log, else from its termination message."""
    summary = _summary_from(r.logs) if r.logs else None
    if summary is not None:
        return PodOutcome(r.pod, r.node, r.phase, summary, "log", r.diagnosis)
    if r.diagnosis and r.diagnosis.startswith("pod never started"):
        return PodOutcome(r.pod, r.node, r.phase, None, None, r.diagnosis)
    message = termination_message(cluster, namespace, r.pod)
    summary = _summary_from(message)
    if summary is not None:
        return PodOutcome(r.pod, r.node, r.phase, summary, "termination message", r.diagnosis)
    log = r.log_error or (r.logs or "(empty)").strip()[-200:]
    why = (f"its result could be read neither from its log ({log}) nor from its termination "
           f"message ({message[:200]})")
    return PodOutcome(r.pod, r.node, r.phase, None, None,
                      f"{r.diagnosis}; {why}" if r.diagnosis else why)


def run_together(cluster: Cluster, namespace: str, run_id: str, image: str,
                 placement: shared_gpu.Placement, copies: list[PodCopy], name: str,
                 lead_s: float | None = None) -> Together:
    """The pods of ``copies`` on the placement's node, released by one go instant; what each
    reported, and why the run does not count (a pod that never started, gave no readable
    result, got another GPU, or started beyond the skew bound), if it does not."""
    lead_s = START_LEAD_S if lead_s is None else lead_s
    kernel_pods.ensure_config_map(cluster, namespace, run_id)
    barrier = f"gpuconf-barrier-{name}-{secrets.token_hex(3)}"
    go_at = time.time() + lead_s
    cluster.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": barrier, "labels": run_labels(run_id)},
        "data": {podcopy.BARRIER_KEY: repr(go_at)}})
    names = []
    try:
        for i, c in enumerate(copies):
            body = pod_manifest(c, i, placement, image, barrier, run_id, name)
            cluster.core.create_namespaced_pod(namespace, body)
            names.append(body["metadata"]["name"])
        results = [workloads.wait(cluster, namespace, n, timeout=lead_s + POD_TIMEOUT_S)
                   for n in names]
        outcomes = [read_result(cluster, namespace, r) for r in results]
    finally:
        for n in names:
            pods.delete(cluster, namespace, n)
        with contextlib.suppress(ApiException):
            cluster.core.delete_namespaced_config_map(barrier, namespace)
    return judge_together(placement, outcomes, lead_s)


def judge_together(placement: shared_gpu.Placement, outcomes: list[PodOutcome],
                   lead_s: float) -> Together:
    done = Together(outcomes, lead_s=lead_s)
    unread = [o for o in outcomes if o.summary is None]
    if unread:
        done.not_run = "; ".join(f"pod {o.pod}: {o.diagnosis}" for o in unread)
        return done
    who = [(o.pod, o.node, o.summary.get("identity") or {}) for o in outcomes if o.summary]
    problem = shared_gpu.not_one_gpu(placement.sharing, who)
    if problem:
        done.not_run = problem
        return done
    barriers = [(o.summary or {}).get("barrier") or {} for o in outcomes]
    done.skew_s = shared_gpu.start_skew(barriers)
    problem = shared_gpu.skew_problem([o.pod for o in outcomes], barriers)
    if problem:
        done.not_run = problem
        done.late = any(b.get("ready_wall", 0) > b.get("go_at", 0) for b in barriers)
    return done


@dataclass(frozen=True)
class Leads:
    """From creating the pods to the go instant: first, and on the retry after a late start.
    None: ``START_LEAD_S`` and ``RETRY_LEAD_S`` (tests set both short)."""

    first: float | None = None
    retry: float | None = None


def run_counted(cluster: Cluster, namespace: str, run_id: str, image: str,
                placement: shared_gpu.Placement, copies: list[PodCopy], name: str,
                leads: Leads = Leads()) -> Together:
    """:func:`run_together`, once more with a longer lead where a pod was ready too late."""
    first_lead = START_LEAD_S if leads.first is None else leads.first
    done = run_together(cluster, namespace, run_id, image, placement, copies, name,
                        lead_s=first_lead)
    if done.not_run and done.late:
        first = done.not_run
        done = run_together(cluster, namespace, run_id, image, placement, copies, name,
                            lead_s=RETRY_LEAD_S if leads.retry is None else leads.retry)
        done.tries.append(f"lead {first_lead:g} s: {first}")
    return done


# ---- the experiments ------------------------------------------------------------------------
def stress_copy(kernel: str, options: dict[str, Any], window: interference.Window) -> PodCopy:
    """A sharer: go at the go instant, the measured window after the ramp."""
    return PodCopy(interference.stress_spec(kernel, options, 0),
                   podcopy.stress_plan(window.seconds, window.trials, window.ramp, window.tail))


def _counts(placement: shared_gpu.Placement, counts: list[int]) -> list[int]:
    """The pod counts one GPU can hold here: no more pods than units of one GPU."""
    room = min(placement.units_per_gpu, placement.free)
    return sorted({1, *(n for n in counts if n <= room)})


def interference_points(cluster: Cluster, namespace: str, run_id: str, image: str,
                        placement: shared_gpu.Placement, kernel: str, counts: list[int],
                        window: interference.Window = WINDOW,
                        limits: Thresholds | None = None,
                        options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Solo first (it pins the sizing and normalises every point), then each N pods.

    Raises :class:`NotRun` when a point's pods do not count (the reason names the point)."""
    limits = limits or Thresholds()
    points: list[dict[str, Any]] = []
    solo, options = None, dict(options or {})
    pods_seen: list[dict[str, Any]] = []
    for n in _counts(placement, counts):
        done = run_counted(cluster, namespace, run_id, image, placement,
                           [stress_copy(kernel, options, window) for _ in range(n)],
                           f"{kernel}-{n}")
        pods_seen.append({"copies": n, "skew_s": done.skew_s, "lead_s": done.lead_s,
                          "tries": done.tries, "pods": [o.brief() for o in done.outcomes]})
        if done.not_run:
            raise NotRun(f"{n} {placement.mode} on {placement.node}: {done.not_run}")
        per_copy = [dict((o.summary or {}).get("figures") or {}, pod=o.pod)
                    for o in done.outcomes]
        if any("rate" not in c for c in per_copy):
            raise NotRun(f"{n} {placement.mode}: a pod measured nothing "
                         f"({[o.events('error') for o in done.outcomes]})")
        if n == 1:
            solo = per_copy[0]["rate"]
            ready = done.outcomes[0].events("ready")
            options = kernels.pinned(kernel, options,
                                     (ready[0] if ready else {}).get("config") or {})
        pt = analysis.point(experiment="interference", kernel=kernel, mode=placement.mode,
                            per_copy=per_copy, solo_rates=[solo] * n, limits=limits)
        pt["start_skew_s"] = done.skew_s
        points.append(pt)
    failed = any(p["verdict"] == "fail" for p in points)
    return {"experiment": "interference", "kernel": kernel, "mode": placement.mode,
            "sharing": placement.sharing, "node": placement.node,
            "resource": placement.resource, "units_per_gpu": placement.units_per_gpu,
            "thresholds": limits.as_dict(), "points": points, "pods": pods_seen,
            "max_start_skew_s": shared_gpu.MAX_START_SKEW_S,
            "verdict": "fail" if failed else "pass"}


def client_copy(options: dict[str, Any], think_ms: float, window: interference.Window
                ) -> PodCopy:
    """The latency experiment's client: batch-1 requests over the sharers' window."""
    return PodCopy(latency.client_spec(options, think_ms, 0),
                   podcopy.stress_plan(window.seconds, window.trials, window.ramp, window.tail))


def latency_points(cluster: Cluster, namespace: str, run_id: str, image: str,
                   placement: shared_gpu.Placement, sharers: list[int],
                   window: interference.Window = LATENCY_WINDOW, stress: str = "gemm",
                   stress_options: dict[str, Any] | None = None,
                   client_options: dict[str, Any] | None = None, think_ms: float = 1.0,
                   leads: Leads = Leads()) -> dict[str, Any]:
    """SHARE-LAT-001 between pods: the client pod alone, then beside each S sharer pods of
    ``stress`` on its GPU (S + 1 pods: no more than one GPU's units), the points as
    gpu_kernels.latency's (``mode``: the placement's sharing, which the time slice the p99s
    imply reads for "time-slicing"), with the sharing and the pods' start skew.

    Raises :class:`NotRun` when a point's pods do not count, or its client measured no
    request (the reason names the point)."""
    points: list[dict[str, Any]] = []
    pods_seen: list[dict[str, Any]] = []
    client = client_copy(dict(client_options or {}), think_ms, window)
    stress_options, config = dict(stress_options or {}), None
    for n in _counts(placement, [s + 1 for s in sharers]):
        s = n - 1
        copies = [client, *[stress_copy(stress, stress_options, window) for _ in range(s)]]
        done = run_counted(cluster, namespace, run_id, image, placement, copies,
                           f"latency-{s}", leads)
        pods_seen.append({"sharers": s, "skew_s": done.skew_s, "lead_s": done.lead_s,
                          "tries": done.tries, "pods": [o.brief() for o in done.outcomes]})
        where = (f"the client pod {f'beside {s} sharer pod(s)' if s else 'alone'} on "
                 f"{placement.node} ({placement.mode})")
        if done.not_run:
            raise NotRun(f"{where}: {done.not_run}")
        c, rest = done.outcomes[0], done.outcomes[1:]
        measured = (c.summary or {}).get("latency") or {}
        figures = [(o.summary or {}).get("figures") or {} for o in rest]
        if not measured.get("n") or any("rate" not in f for f in figures):
            raise NotRun(f"{where}: a pod measured nothing (client {c.events('error')}, "
                         f"sharers {[o.events('error') for o in rest]})")
        ready = c.events("ready")
        config = config or (ready[0] if ready else {}).get("config")
        if s and not points[1:]:  # later sharers reuse the first sharer's launch sizing
            sized = rest[0].events("ready")
            stress_options = kernels.pinned(stress, stress_options,
                                            (sized[0] if sized else {}).get("config") or {})
        pt = analysis.latency_point_of("solo" if s == 0 else placement.sharing, s, measured,
                                       figures)
        pt["start_skew_s"] = done.skew_s
        points.append(pt)
    solo = points[0]
    for p in points:
        analysis.with_slowdowns(p, solo)
    quantum = analysis.implied_quantum(points)
    cfg = config or {}
    described = (f"{cfg.get('layers')} x {cfg.get('hidden')}^2 bf16 GEMV layers, "
                 f"{think_ms:g} ms think time, in a pod")
    return {"experiment": "latency", "requirement": latency.REQUIREMENT,
            "mode": placement.mode, "sharing": placement.sharing, "node": placement.node,
            "resource": placement.resource, "units_per_gpu": placement.units_per_gpu,
            "client": {"kernel": "infer", "config": cfg, "think_ms": think_ms},
            "stress": {"kernel": stress, "options": stress_options},
            "window": {"seconds": window.seconds, "ramp_s": window.ramp},
            "points": points, "quantum": quantum, "pods": pods_seen,
            "max_start_skew_s": shared_gpu.MAX_START_SKEW_S,
            "finding": analysis.latency_finding(described, stress, solo, points[1:], quantum)}


def memory_isolation(cluster: Cluster, namespace: str, run_id: str, image: str,
                     placement: shared_gpu.Placement, fraction: float = 0.88,
                     probe_fraction: float = 0.25, release_s: float = 20.0) -> dict[str, Any]:
    """As the process experiment (gpu_kernels.isolation.memory): the other pod sees the GPU on
    its own first (at its start; the holder allocates only at the go instant), then one pod
    holds ``fraction`` of what it sees free until ``release_s``; the other asks for
    ``probe_fraction`` of the GPU within its own view, 1 GiB, the same again once the holder
    let go, and 1 GiB beyond its own view where that is a share (MPS's per-client limit)."""
    holder = PodCopy({"role": "memhog", "fraction": fraction, "device": 0},
                     {"role_at_s": 0.0, "commands": [{"at_s": release_s, "cmd": "release"}]})
    probe = PodCopy({"role": "probe", "device": 0}, {"commands": [
        {"at_s": 0.25 * release_s, "cmd": "attempt", "share_fraction": probe_fraction},
        {"at_s": 0.3 * release_s, "cmd": "attempt", "bytes": 1 << 30},
        {"at_s": 1.25 * release_s, "cmd": "attempt", "share_fraction": probe_fraction},
        {"at_s": 1.3 * release_s, "cmd": "attempt", "beyond_share": True},
        {"at_s": 1.35 * release_s, "cmd": "exit"}]})
    done = run_counted(cluster, namespace, run_id, image, placement, [holder, probe], "memory")
    if done.not_run:
        raise NotRun(f"memory isolation between {placement.mode}: {done.not_run}")
    h, p = done.outcomes
    held = (h.events("ready") or [None])[0]
    if held is None:
        raise NotRun(f"the holding pod {h.pod} held nothing: {h.events('error')}")
    alone = (p.summary or {}).get("memory_alone") or {}
    ready = (p.events("ready") or [None])[0]
    big, small, after, over = [*p.events("attempt"), None, None, None, None][:4]
    errors = p.events("error")
    found = analysis.memory_finding(placement.mode, held, ready, big, small, after,
                                    probe_error=errors[0].get("error") if errors else None,
                                    gpu_total_bytes=alone.get("gpu_total_bytes"),
                                    own_share_bytes=alone.get("free_bytes"), beyond_share=over)
    found.update(pods=[o.brief() for o in done.outcomes], skew_s=done.skew_s,
                 node=placement.node, resource=placement.resource)
    return found


def fault_isolation(cluster: Cluster, namespace: str, run_id: str, image: str,
                    placement: shared_gpu.Placement, seconds: float = 6.0,
                    victim: str = "membw", victim_options: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """One pod runs ``victim``; another hits an illegal address a third into its window. The
    victim measures its rate before, during and after (the faulting pod is gone within ~1 s)."""
    ramp = WINDOW.ramp
    t_fault = ramp + seconds / 3
    t_end = ramp + seconds
    phases = analysis.fault_phases(ramp, t_fault, t_fault + 1.0, t_end)
    victim_copy = PodCopy(interference.stress_spec(victim, victim_options, 0), {
        "commands": [{"at_s": 0.0, "cmd": "go", "t_go_s": 0.0, "t_stop_s": t_end + 0.2}],
        "phases": {k: list(v) for k, v in phases.items()}})
    faulter = PodCopy({"role": "fault", "device": 0},
                      {"commands": [{"at_s": t_fault, "cmd": "go"}]})
    done = run_counted(cluster, namespace, run_id, image, placement, [victim_copy, faulter],
                       "fault")
    v, f = done.outcomes
    if done.not_run:
        raise NotRun(f"fault isolation between {placement.mode}: {done.not_run}")
    vs = v.summary or {}
    result = (v.events("result") or [None])[-1]
    fault_report = (f.events("result") or [None])[-1] or {
        "error": f"faulting pod: {f.diagnosis or f.events('error')}"}
    errors = v.events("error")
    found = analysis.fault_finding(
        placement.mode, result, errors[0].get("error") if errors and not result else None,
        fault_report, phases, rates=vs.get("rates") or {k: 0.0 for k in phases})
    found.update(pods=[o.brief() for o in done.outcomes], node=placement.node,
                 resource=placement.resource)
    return found


pod_vs_process = analysis.pod_vs_process
INTERFERENCE, LATENCY = analysis.INTERFERENCE, analysis.LATENCY  # what pod_vs_process compares
