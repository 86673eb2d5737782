"""Scale benchmark: the stack and scheduling suites against 500 simulated GPU nodes.

Prints and records (reports/evidence/scale-500-nodes.json): sim start time, API server memory,
suite wall time and the API requests the run made, by verb. Node checks are list calls, so the
request count must not grow with the node count: the same run on `healthy` (2 GPU nodes) is
measured beside it, in the same session, and the ratio printed.

``--dra``: the same for the DRA suite, on `dra` (3 DRA nodes) and `dra-large` (500 DRA nodes,
4,000 devices in 500 ResourceSlices), recorded in reports/evidence/dra-scale-500-nodes.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from conformance.common.console import quiet
from conformance.options import Options
from conformance.run.plan import RunPlan
from conformance.sim import cluster as simcluster

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "reports" / "evidence" / "scale-500-nodes.json"
DRA_OUT = REPO / "reports" / "evidence" / "dra-scale-500-nodes.json"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(profile: str, suites: tuple[str, ...] = ("stack", "scheduling")) -> dict:
    name = f"bench-{profile}"
    t0 = time.monotonic()
    state = simcluster.up(name, profile=profile, progress=lambda m: print(f"  [{profile}] {m}"))
    up_s = time.monotonic() - t0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            plan = RunPlan(Options(results=tmp, suite=list(suites)))
            cmd = plan.pytest_command(target="sim", kubeconfig=str(state.kubeconfig))
            t1 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            suite_s = time.monotonic() - t1
            doc = json.loads((Path(tmp) / "results.json").read_text())
        requests = doc["measurements"].get("api_requests", {})
        return {
            "profile": profile, "gpu_nodes": doc["fingerprint"].get("gpu_node_count"),
            "sim_up_s": round(up_s, 1), "suite_wall_s": round(suite_s, 1),
            "exit_code": proc.returncode, "summary": doc["summary"],
            "failed": [r["id"] for r in doc["requirements"] if r["verdict"] == "fail"],
            "api_requests": requests, "api_requests_total": sum(requests.values()),
            "apiserver_rss_mib": round(rss_mib(state.pids["kube-apiserver"]), 1),
            "etcd_rss_mib": round(rss_mib(state.pids["etcd"]), 1),
        }
    finally:
        simcluster.down(name, progress=quiet)


def main(argv: list[str] | None = None) -> int:
    import sys

    dra = "--dra" in (sys.argv[1:] if argv is None else argv)
    suites = ("dra",) if dra else ("stack", "scheduling")
    small = measure("dra" if dra else "healthy", suites)
    large = measure("dra-large" if dra else "large", suites)
    ratio = large["api_requests_total"] / max(1, small["api_requests_total"])
    record = {"machine": f"{os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d"),
              "suites": list(suites), "runs": [small, large],
              "api_requests_ratio_large_vs_healthy": round(ratio, 2)}
    out = DRA_OUT if dra else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    for r in (small, large):
        print(f"{r['profile']:<9} {r['gpu_nodes']:>4} GPU nodes  sim up {r['sim_up_s']:>6}s  "
              f"suites {r['suite_wall_s']:>6}s  API requests {r['api_requests_total']:>5}  "
              f"apiserver RSS {r['apiserver_rss_mib']} MiB  failed {r['failed']}")
    print(f"API requests, 500 nodes vs {small['gpu_nodes']}: x{ratio:.2f}; recorded in {out}")
    return 0 if not (small["failed"] or large["failed"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
