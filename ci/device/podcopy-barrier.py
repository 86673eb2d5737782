"""The pod side of the sharing engine on a real GPU without Kubernetes (issue 33), where a
node cannot be staged: N ``gpu_kernels.podcopy`` copies, each a process as a pod would run it,
released by one go instant in a barrier file (the ConfigMap volume's stand-in), judged by the
engine's own rules (one GPU from inside, start skew against ``MAX_START_SKEW_S``), beside the
same kernel as N processes (``gpu_kernels interference``, the control), pods/processes per N.

    python3 ci/device/podcopy-barrier.py [--kernel membw] [--copies 2,4] [--lead 15] > out.json

Needs CuPy only (the accelerator machine's python3 has it); never touches the GPU's settings.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from conformance.checks import shared_gpu  # noqa: E402
from gpu_kernels import analysis, interference, kernels, podcopy  # noqa: E402

WINDOW = interference.Window(seconds=3.0)


def together(kernel: str, options: dict, n: int, lead: float, work: Path) -> list[dict]:
    """N copies released by one go instant; each copy's summary (or its last output)."""
    barrier = work / f"barrier-{n}"
    barrier.mkdir()
    spec = interference.stress_spec(kernel, options, 0)
    procs = []
    for i in range(n):
        plan = {**podcopy.stress_plan(WINDOW.seconds, WINDOW.trials, WINDOW.ramp, WINDOW.tail),
                "barrier_dir": str(barrier), "termination_log": str(work / f"term-{n}-{i}")}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gpu_kernels.podcopy", json.dumps(spec), json.dumps(plan)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    (barrier / podcopy.BARRIER_KEY).write_text(repr(time.time() + lead))
    out = []
    for i, p in enumerate(procs):
        text, _ = p.communicate(timeout=lead + 300)
        summary = next((json.loads(line) for line in reversed(text.splitlines())
                        if line.startswith('{"event":"summary"')), None)
        term = (work / f"term-{n}-{i}").read_text() if (work / f"term-{n}-{i}").exists() else ""
        out.append({"copy": i, "exit": p.returncode, "summary": summary,
                    "termination_bytes": len(term.encode()),
                    "termination_parses": bool(term) and json.loads(term).get("event") == "summary",
                    "tail": "" if summary else text[-1500:]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="membw")
    ap.add_argument("--copies", default="2,4")
    ap.add_argument("--lead", type=float, default=15.0)
    args = ap.parse_args()
    counts = [int(x) for x in args.copies.split(",")]
    doc: dict = {"kernel": args.kernel, "window_s": WINDOW.seconds, "lead_s": args.lead,
                 "max_start_skew_s": shared_gpu.MAX_START_SKEW_S, "points": [], "runs": []}
    solo, options = None, {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sorted({1, *counts}):
            copies = together(args.kernel, options, n, args.lead, Path(tmp))
            summaries = [c["summary"] or {} for c in copies]
            names = [f"copy-{c['copy']}" for c in copies]
            barriers = [s.get("barrier") or {} for s in summaries]
            run = {"copies": n, "per_copy": copies,
                   "one_gpu_problem": shared_gpu.not_one_gpu(
                       shared_gpu.TIME_SLICING,
                       [(nm, "this-host", s.get("identity") or {}) for nm, s in
                        zip(names, summaries, strict=True)]),
                   "skew_s": shared_gpu.start_skew(barriers),
                   "skew_problem": shared_gpu.skew_problem(names, barriers)}
            doc["runs"].append(run)
            per_copy = [s.get("figures") or {} for s in summaries]
            if any("rate" not in c for c in per_copy):
                print(json.dumps(run)[:3000], file=sys.stderr)
                break
            if n == 1:
                solo = per_copy[0]["rate"]
                ready = (summaries[0].get("events") or {}).get("ready") or [{}]
                options = kernels.pinned(args.kernel, {}, ready[0].get("config") or {})
            pt = analysis.point(experiment="interference", kernel=args.kernel,
                                mode="podcopy processes (pod side, barrier file)",
                                per_copy=per_copy, solo_rates=[solo] * n,
                                limits=analysis.Thresholds())
            pt["start_skew_s"] = run["skew_s"]
            doc["points"].append(pt)
            print(f"N={n}: skew {run['skew_s']} one-GPU {run['one_gpu_problem']} aggregate "
                  f"{pt['aggregate_vs_solo']}", file=sys.stderr, flush=True)
    control = subprocess.run(
        [sys.executable, "-m", "gpu_kernels", "interference", "--kernel", args.kernel,
         "--copies", ",".join(map(str, sorted({1, *counts}))), "--seconds",
         str(WINDOW.seconds), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in control.stdout.splitlines() if ln.startswith("{")]
    proc = json.loads(lines[-1]) if lines else {"error": control.stderr[-1500:]}
    doc["processes"] = proc
    doc["podcopy_vs_process"] = analysis.pod_vs_process(doc["points"], proc.get("points") or [])
    print(json.dumps(doc["podcopy_vs_process"]), file=sys.stderr)
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
