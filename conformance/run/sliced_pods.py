"""Time-sliced pods on one real GPU: what the device plugin's time-slicing gives N pods that
each hold one slice, measured the way ``gpu_kernels`` measures N processes, so that pod and
process are one ratio from one run.

Each pod runs one ``gpu_kernels.worker`` copy (stress, memhog, probe or fault) from the
workload image, gpu_kernels mounted from a ConfigMap. Pods cannot be told "go" on stdin, so
every command a copy would read comes with the host's monotonic instant to act at (pods and
host share CLOCK_MONOTONIC: containers get no time namespace). The copies prepare (CUDA
context, buffers, warm-up) before that instant, as the process experiment's copies do, and
the analysis is gpu_kernels' own (``analysis.copy_figures``, ``analysis.point``).

    python -m conformance.run.sliced_pods --kubeconfig K --image REF [--kernel membw ...]
        [--pods 1,2,4] [--seconds 6] [--isolation] [--processes] > result.json

``--processes`` also runs ``python -m gpu_kernels interference`` on this host (the process
experiment) and reports pod aggregate / process aggregate for each N.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from typing import Any

from conformance.cluster import kernel_pods, namespaces, workloads
from conformance.cluster.client import Cluster, connect
from conformance.common.runid import new_run_id
from gpu_kernels import analysis, interference
from gpu_kernels.analysis import Thresholds
from gpu_kernels.kernels import pinned

# From creating the pods to "go": they start (the image is local), import CuPy, compile and
# warm up (~5-10 s on the H200 machine); a copy that is late says so (its "waiting" event).
LEAD_S = 30.0
RAMP_S, TAIL_S = 0.5, 0.4  # as gpu_kernels.interference.Window: settle, then measure
TRIALS = 5
POD_TIMEOUT_S = 240.0
RUNNER = r'''
import json, sys, time
from gpu_kernels import worker as W
spec, commands = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def recv():
    if not commands:
        raise SystemExit(0)
    cmd = commands.pop(0)
    W.send("waiting", now=time.monotonic(), until=cmd["at"])  # a copy late for its instant
    delay = cmd.pop("at") - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    if "fraction" in cmd:
        import cupy
        cmd["bytes"] = int(cupy.cuda.runtime.memGetInfo()[1] * cmd.pop("fraction"))
    return cmd
W.recv = recv
W.main([json.dumps(spec)])
'''


def _events(r: workloads.WorkloadResult) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in r.json_lines():
        out.setdefault(line.get("event", "?"), []).append(line)
    return out


def run_copies(cluster: Cluster, run_id: str, image: str, copies: list[tuple[dict, list]],
               name: str) -> list[dict[str, Any]]:
    """One pod per (worker spec, timed commands), all in a fresh namespace; each pod's events
    (ready, attempt, result, error) and how it ended."""
    ns = namespaces.create_namespace(cluster, name, run_id)
    try:
        kernel_pods.ensure_config_map(cluster, ns, run_id)
        base, volume = kernel_pods.kernel_pod([], image=image)
        names = []
        for i, (spec, commands) in enumerate(copies):
            pod = dataclasses.replace(base, prefix=f"slice-{i}", command=[
                "python3", "-c", RUNNER, json.dumps(spec), json.dumps(commands)])
            body = kernel_pods.manifest(pod, volume, run_id)
            cluster.core.create_namespaced_pod(ns, body)
            names.append(body["metadata"]["name"])
        results = [workloads.wait(cluster, ns, n, timeout=POD_TIMEOUT_S) for n in names]
        return [{"pod": r.pod, "node": r.node, "phase": r.phase, "diagnosis": r.diagnosis,
                 "events": _events(r), "log_tail": r.logs[-600:] if r.diagnosis else ""}
                for r in results]
    finally:
        namespaces.delete_namespace(cluster, ns)


def stress_point(cluster: Cluster, run_id: str, image: str, kernel: str, n: int,
                 seconds: float, options: dict) -> tuple[list[dict], list[dict]]:
    """N pods run ``kernel`` together: their figures over the common window."""
    t_go = time.monotonic() + LEAD_S
    t0 = t_go + RAMP_S
    t1 = t0 + seconds
    spec = interference.stress_spec(kernel, options, 0)
    go = [{"at": t_go, "cmd": "go", "t_go": t_go, "t_stop": t1 + TAIL_S}]
    ran = run_copies(cluster, run_id, image, [(spec, list(go)) for _ in range(n)],
                     f"sliced-{kernel}-{n}")
    figures = []
    for pod in ran:
        result = (pod["events"].get("result") or [None])[-1]
        if result is None:
            raise RuntimeError(f"pod {pod['pod']}: no result ({pod['diagnosis']}; "
                               f"{pod['events'].get('error')}; {pod['log_tail']})")
        waiting = (pod["events"].get("waiting") or [{}])[0]
        figures.append({**analysis.copy_figures(result, t0, t1, TRIALS), "pod": pod["pod"],
                        "late_s": max(0.0, waiting.get("now", 0.0) - t_go)})
    return figures, [r["events"].get("ready", [{}])[0].get("config", {}) for r in ran]


def stress(cluster: Cluster, run_id: str, image: str, kernel: str, counts: list[int],
           seconds: float) -> list[dict[str, Any]]:
    """Solo first (it pins the sizing and normalises every point), then each N."""
    limits = Thresholds()
    points, solo, options = [], None, {}
    for n in sorted({1, *counts}):
        try:
            per_copy, configs = stress_point(cluster, run_id, image, kernel, n, seconds, options)
        except RuntimeError as exc:
            points.append({"kernel": kernel, "copies": n, "verdict": "fail",
                           "reasons": [str(exc)[:500]]})
            if n == 1:
                break
            continue
        if n == 1:
            solo = per_copy[0]["rate"]

            options = pinned(kernel, {}, configs[0])
        pt = analysis.point(experiment="interference", kernel=kernel, mode="time-sliced pods",
                            per_copy=per_copy, solo_rates=[solo] * n, limits=limits)
        points.append(pt)
    return points


def memory_isolation(cluster: Cluster, run_id: str, image: str, fraction: float = 0.88,
                     probe_fraction: float = 0.25) -> dict[str, Any]:
    """One pod holds ``fraction`` of the free memory; another tries to allocate
    ``probe_fraction`` of the total, then 1 GiB, then (after the holder let go) again."""
    t = time.monotonic() + LEAD_S
    holder = ({"role": "memhog", "fraction": fraction, "device": 0},
              [{"at": t + 20, "cmd": "release"}])
    probe = ({"role": "probe", "device": 0},
             [{"at": t, "cmd": "attempt", "fraction": probe_fraction},
              {"at": t + 5, "cmd": "attempt", "bytes": 1 << 30},
              {"at": t + 25, "cmd": "attempt", "fraction": probe_fraction},
              {"at": t + 26, "cmd": "exit"}])
    ran = run_copies(cluster, run_id, image, [holder, probe], "sliced-memory")
    held = (ran[0]["events"].get("ready") or [None])[0]
    if held is None:
        return {"finding": None, "error": f"holding pod {ran[0]['pod']}: {ran[0]['diagnosis']} "
                f"{ran[0]['events'].get('error')} {ran[0]['log_tail']}".strip(),
                "pods": [{k: v for k, v in r.items() if k != "events"} for r in ran]}
    ready = (ran[1]["events"].get("ready") or [None])[0]
    attempts = ran[1]["events"].get("attempt") or []
    big, small, after = [*attempts, None, None, None][:3]
    found = analysis.memory_finding("time-sliced pods", held, ready, big, small, after)
    found["pods"] = [{k: v for k, v in r.items() if k != "events"} for r in ran]
    return found


def fault_isolation(cluster: Cluster, run_id: str, image: str, seconds: float = 6.0,
                    victim: str = "membw") -> dict[str, Any]:
    """One pod runs ``victim``; another hits an illegal address a third into its window."""
    t_go = time.monotonic() + LEAD_S
    t0 = t_go + 0.5
    t_end = t0 + seconds
    t_fault = t0 + seconds / 3
    ran = run_copies(cluster, run_id, image, [
        (interference.stress_spec(victim, {}, 0),
         [{"at": t_go, "cmd": "go", "t_go": t_go, "t_stop": t_end + 0.2}]),
        ({"role": "fault", "device": 0}, [{"at": t_fault, "cmd": "go"}])], "sliced-fault")
    v, f = ran
    victim_result = (v["events"].get("result") or [None])[-1]
    fault_report = (f["events"].get("result") or [None])[-1] or {
        "error": f"faulting pod: {f['diagnosis']}"}
    # the faulting pod's exit is not seen from here: take the end of its window
    phases = analysis.fault_phases(t0, t_fault, t_fault + 1.0, t_end)
    found = analysis.fault_finding("time-sliced pods", victim_result,
                                   None if victim_result else f"victim pod: {v['diagnosis']}",
                                   fault_report, phases)
    found["pods"] = [{k: val for k, val in r.items() if k != "events"} for r in ran]
    return found


def processes(kernel: str, counts: list[int], seconds: float) -> dict[str, Any]:
    """The process experiment on this host's GPU 0 (same kernel, same copies)."""
    proc = subprocess.run([sys.executable, "-m", "gpu_kernels", "interference", "--kernel",
                           kernel, "--copies", ",".join(map(str, counts)), "--seconds",
                           str(seconds), "--json"], capture_output=True, text=True,
                          timeout=900, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": proc.stderr[-800:]}


def pod_vs_process(pod_points: list[dict], proc_doc: dict) -> list[dict[str, Any]]:
    by_n = {p.get("copies"): p for p in proc_doc.get("points") or []}
    out = []
    for p in pod_points:
        q = by_n.get(p.get("copies"))
        if q and p.get("per_copy") and q.get("per_copy"):
            pod_sum = sum(c["rate"] for c in p["per_copy"])
            proc_sum = sum(c["rate"] for c in q["per_copy"])
            out.append({"copies": p["copies"], "pod_aggregate": pod_sum,
                        "process_aggregate": proc_sum,
                        "ratio": pod_sum / proc_sum if proc_sum else None,
                        "pod_jain": p.get("jain"), "process_jain": q.get("jain")})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.run.sliced_pods",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True, help="the node's kubeconfig")
    p.add_argument("--image", required=True, help="the workload image (gpu_kernels + CuPy)")
    p.add_argument("--kernel", action="append", default=[], help="stress kernel (repeatable; "
                   "default membw, none with --isolation alone)")
    p.add_argument("--pods", default="1,2,4", help="pod counts (default 1,2,4)")
    p.add_argument("--seconds", type=float, default=6.0, help="measured window (default 6)")
    p.add_argument("--isolation", action="store_true", help="also memory and fault isolation")
    p.add_argument("--processes", action="store_true",
                   help="also the process experiment on this host, and the pod/process ratio")
    args = p.parse_args(argv)
    cluster = connect(args.kubeconfig)
    run_id = new_run_id()
    counts = [int(x) for x in args.pods.split(",")]
    doc: dict[str, Any] = {"experiment": "time-sliced pods", "pods": counts,
                           "seconds": args.seconds, "kernels": {}}
    kernels = args.kernel or ([] if args.isolation else ["membw"])
    for kernel in kernels:
        t0 = time.monotonic()
        entry: dict[str, Any] = {"pods": stress(cluster, run_id, args.image, kernel, counts,
                                                args.seconds)}
        if args.processes:
            entry["processes"] = processes(kernel, counts, args.seconds)
            entry["pod_vs_process"] = pod_vs_process(entry["pods"], entry["processes"])
        entry["wall_s"] = round(time.monotonic() - t0, 1)
        doc["kernels"][kernel] = entry
        print(json.dumps({"kernel": kernel, "pod_vs_process": entry.get("pod_vs_process"),
                          "points": [{k: pt.get(k) for k in ("copies", "aggregate_vs_solo",
                                                             "jain", "cv_max", "verdict")}
                                     for pt in entry["pods"]]}), file=sys.stderr, flush=True)
    if args.isolation:
        doc["memory_isolation"] = memory_isolation(cluster, run_id, args.image)
        doc["fault_isolation"] = fault_isolation(cluster, run_id, args.image)
    print(json.dumps(doc))
    # a measurement that did not happen (a pod without a result) is not a figure: exit 1
    unmeasured = [pt for e in doc["kernels"].values() for pt in e["pods"] if "per_copy" not in pt]
    unmeasured += [k for k in ("memory_isolation", "fault_isolation")
                   if k in doc and doc[k].get("finding") is None]
    return 1 if unmeasured else 0


if __name__ == "__main__":
    sys.exit(main())
