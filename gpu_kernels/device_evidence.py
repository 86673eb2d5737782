"""Collect the evidence of one GPU machine in one go: ``python -m gpu_kernels.device_evidence``.

Runs, each as the CLI a user would run: the NVML inventory; a variant sweep (tune.py);
membw, fp32, gemm fp16 and bf16 with the chosen variants; interference for membw, fp32 and
gemm at N = 1, 2, 4, 8 plus a mixed pair; both isolation experiments; and the same sharing
experiments under MPS. Writes at most 8 files to --out (the device tool brings back 8) and
prints a summary table last. A time budget skips what would not fit (recorded as not-run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_kernels.kernels import fp32, membw

PY = [sys.executable, "-m", "gpu_kernels"]
# Used where the sweep is skipped or found nothing for a kind.
DEFAULT_CHOICE: dict[str, dict[str, Any]] = {
    "membw": {"variant": membw.DEFAULT_VARIANT}, "fp32": {"variant": fp32.DEFAULT_VARIANT},
    "gemm-fp16": {"backend": "auto", "size": 16384},
    "gemm-bf16": {"backend": "auto", "size": 16384},
}


@dataclass
class Step:
    family: str  # the output file it lands in
    name: str
    argv: list[str]
    estimate_s: float
    timeout_s: float
    rc: int | None = None
    seconds: float = 0.0
    result: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def execute(step: Step, log: Any) -> None:
    start = time.monotonic()
    log.write(f"\n=== {step.name}: {' '.join(step.argv)}\n")
    log.flush()
    try:
        done = subprocess.run(step.argv, capture_output=True, text=True, timeout=step.timeout_s,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
        step.rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        step.rc, err = 124, f"timed out after {step.timeout_s} s"
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    step.seconds = time.monotonic() - start
    step.result = _last_json(out)
    log.write(err[-6000:] if err else "")
    log.write(f"--- rc={step.rc} in {step.seconds:.1f} s\n")
    log.flush()


def shell(log: Any, title: str, command: str) -> None:
    """A diagnostic command's output into the log (nvidia-smi, Xid lines)."""
    try:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30)
        text = (done.stdout + done.stderr)[-4000:]
    except subprocess.TimeoutExpired:
        text = "timed out"
    log.write(f"\n=== {title}: {command}\n{text}\n")
    log.flush()


def kernel_steps(best: dict[str, Any], seconds: float) -> list[Step]:
    timing = ["--seconds", str(seconds), "--trials", "10", "--json"]
    steps = [Step("kernels", "membw", [*PY, "membw", "--variant", best["membw"]["variant"],
                                       *timing], 15, 120),
             Step("kernels", "fp32", [*PY, "fp32", "--variant", best["fp32"]["variant"],
                                      *timing], 15, 120)]
    for dtype in ("fp16", "bf16"):
        g = best[f"gemm-{dtype}"]
        steps.append(Step("kernels", f"gemm-{dtype}", [
            *PY, "gemm", "--dtype", dtype, "--backend", g["backend"], "--size", str(g["size"]),
            *timing], 15, 120))
        # The same GEMM in bursts from idle: what the tensor cores deliver before the power
        # limit pulls the clocks down (each trial ~0.1 s after 2 s of rest)
        steps.append(Step("kernels", f"gemm-{dtype}-burst", [
            *PY, "gemm", "--dtype", dtype, "--backend", g["backend"], "--size", str(g["size"]),
            "--seconds", "1", "--trials", "10", "--rest-seconds", "2", "--json"], 30, 120))
        # From idle: how fast before and after the board reaches its power limit
        options = json.dumps({"dtype": dtype, "backend": g["backend"], "size": g["size"]})
        steps.append(Step("kernels", f"timeline-gemm-{dtype}", [
            sys.executable, "-m", "gpu_kernels.timeline", "gemm", "--seconds", "4",
            "--idle", "5", "--options", options], 15, 90))
    return steps


def _variant_flags(best: dict[str, Any]) -> list[str]:
    # GEMM copies use 8192^3 (as the baseline did) whatever size the solo sweep preferred
    return ["--membw-variant", best["membw"]["variant"], "--fp32-variant",
            best["fp32"]["variant"], "--gemm-backend", best["gemm-fp16"]["backend"],
            "--gemm-size", "8192"]


def sharing_steps(best: dict[str, Any], mps: bool, seconds: float) -> list[Step]:
    flags = _variant_flags(best)
    tag = ["--mps"] if mps else []
    suffix = "-mps" if mps else ""
    copies = "1,2,4" if mps else "1,2,4,8"
    n_configs = 3 if mps else 4
    per = seconds + 9.0  # startup, ramp, tail and the checks of one configuration
    steps = [Step("interference", f"interference-{k}{suffix}", [
        *PY, "interference", "--kernel", k, "--copies", copies, "--seconds", str(seconds),
        *flags, *tag, "--json"], n_configs * per, n_configs * per + 120)
        for k in ("membw", "fp32", "gemm")]
    steps.append(Step("interference", f"interference-mix{suffix}", [
        *PY, "interference", "--mix", "membw,fp32", "--seconds", str(seconds), *flags, *tag,
        "--json"], 3 * per, 3 * per + 120))
    steps += [Step("isolation", f"isolation-{m}{suffix}", [
        *PY, "isolation", "--mode", m, *flags, *tag, "--json"], 20, 150)
        for m in ("memory", "fault")]
    return steps


def _fmt(x: Any, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def summary(steps: Sequence[Step]) -> str:
    lines = [f"{'step':<26} {'rc':>3} {'s':>6}  result"]
    for s in steps:
        r = s.result or {}
        if s.rc is None:
            text = "not run (time budget)"
        elif r.get("error"):
            text = f"ERROR {r['error'][:90]}"
        elif "median" in r:
            bar = (r.get("bar") or {}).get("value")
            text = (f"median {_fmt(r['median'], 4)} {r['unit']} cv {_fmt(r['cv'])} "
                    f"bar {_fmt(bar)} met {r.get('met')} check {r['correctness']['ok']} "
                    f"{r.get('config', {}).get('variant') or r.get('config', {}).get('backend')}")
        elif r.get("kind") == "interference":
            text = "; ".join(f"N={p['copies']} agg {_fmt(p.get('aggregate_vs_solo'))} "
                             f"J {_fmt(p.get('jain'))} {p['verdict']}" for p in r["points"])
        elif r.get("kind") == "isolation":
            text = f"isolated={r.get('isolated')}: {r.get('finding', '')[:150]}"
        elif r.get("kind") == "inventory":
            text = " ".join(f"{v['id'][-3:]}:{v['verdict']}" for v in r["verdicts"])
        elif r.get("kind") == "timeline":
            text = (f"{r['metric']}: first 100 ms {_fmt(r['first_100ms'], 4)}, first 500 ms "
                    f"{_fmt(r['first_500ms'], 4)}, last 1 s {_fmt(r['last_1s'], 4)} {r['unit']}")
        elif r.get("kind") == "tune":
            text = json.dumps(r.get("best"))
        else:
            text = "no JSON result"
        lines.append(f"{s.name:<26} {_fmt(s.rc):>3} {s.seconds:6.1f}  {text}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_kernels.device_evidence")
    parser.add_argument("--out", default=os.environ.get("OUT", "evidence-out"))
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--kernel-seconds", type=float, default=4.0)
    parser.add_argument("--sharing-seconds", type=float, default=3.0)
    parser.add_argument("--prefix", default="h200")
    parser.add_argument("--no-mps", action="store_true")
    parser.add_argument("--skip-tune", action="store_true", help="use the default variants")
    parser.add_argument("--only", choices=("all", "kernels", "sharing"), default="all",
                        help="run only the solo kernels or only the sharing experiments")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    steps: list[Step] = []
    with open(out / "run-log.txt", "w") as log:
        shell(log, "nvidia-smi", "nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE | head -60")
        first = [Step("inventory", "inventory", [*PY, "inventory", "--json"], 5, 60)]
        if not args.skip_tune:
            first.append(Step("tune", "tune", [sys.executable, "-m", "gpu_kernels.tune"], 70,
                              240))
        for step in first:
            execute(step, log)
            steps.append(step)
        tuned: dict[str, Any] = {}
        if not args.skip_tune:
            tuned = (first[-1].result or {}).get("best") or {}
        best = {k: tuned.get(k) or v for k, v in DEFAULT_CHOICE.items()}
        plan = kernel_steps(best, args.kernel_seconds) if args.only != "sharing" else []
        if args.only != "kernels":
            plan += sharing_steps(best, False, args.sharing_seconds)
            if not args.no_mps:
                plan += sharing_steps(best, True, args.sharing_seconds - 1.0)
        for step in plan:
            steps.append(step)
            if time.monotonic() - start + step.estimate_s > args.budget_s:
                continue
            execute(step, log)
            if step.name.startswith("isolation-fault"):
                shell(log, "Xid lines", "dmesg 2>/dev/null | grep -i xid | tail -5")
        shell(log, "nvidia-smi after", "nvidia-smi")
    families: dict[str, list[dict[str, Any]]] = {}
    for s in steps:
        families.setdefault(s.family, []).append(
            s.result or {"name": s.name, "rc": s.rc, "error": "no JSON result"})
    for family, results in families.items():
        body = results[0] if family in ("inventory", "tune") else results
        (out / f"{args.prefix}-{family}.json").write_text(json.dumps(body, indent=1))
    table = summary(steps)
    (out / "summary.txt").write_text(table + f"\ntotal {time.monotonic() - start:.0f} s\n")
    print(table)
    print(f"total {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
