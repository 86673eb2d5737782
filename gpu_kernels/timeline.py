"""A kernel's rate over time from idle, beside power and SM clock, in 100 ms buckets.

``python -m gpu_kernels.timeline KIND [--seconds S] [--idle S] [--KIND-options]`` prints
one JSON line. It shows what a power cap does: a GPU starts a heavy kernel at full clock
and, once the board reaches its power limit (SwPowerCap), settles lower. Short bursts
measure the first regime, sustained trials (the kernels' bars) the second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from gpu_kernels import cuda, kernels, nvml, result, stats, timing


def run(kind: str, options: dict[str, Any], seconds: float, idle: float,
        bucket: float = 0.1) -> dict[str, Any]:
    cp = cuda.load()
    ident = cuda.identity(cp)
    w = kernels.build(kind, cp, options)
    timing.warm_up(cp, w, 0.0)  # module load and first launches only
    time.sleep(idle)  # let the clocks and the power draw fall back to idle
    with nvml.Sampler(ident["pci_bus_id"], ident["uuid"], period=0.05) as sampler:
        t_go = time.monotonic() + 0.05
        done = timing.run_window(cp, w, t_go, t_go + seconds)
    rows = []
    for a, b in stats.split_windows(t_go, t_go + seconds, max(1, round(seconds / bucket))):
        nv = sampler.summary(a, b)
        rows.append({"t_s": round(a - t_go, 3),
                     "rate": (stats.window_rate(done.times, a, b, w.work_per_launch) or 0)
                     / w.scale, "sm_clock_mhz": nv.get("sm_clock_mhz_mean"),
                     "power_w": nv.get("power_w_mean"), "reasons": nv.get("throttle_reasons")})

    def span(a: float, b: float) -> float | None:
        value = stats.window_rate(done.times, t_go + a, t_go + b, w.work_per_launch)
        return None if value is None else value / w.scale

    out = result.header("timeline")
    out.update({"metric": w.metric, "unit": w.unit, "config": w.config, "device": ident,
                "idle_s": idle, "seconds": seconds, "first_100ms": span(0.0, 0.1),
                "first_500ms": span(0.0, 0.5), "last_1s": span(seconds - 1.0, seconds),
                "buckets": rows, "error": done.error, "ok": done.error is None,
                "exit_code": 0 if done.error is None else 1})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_kernels.timeline")
    parser.add_argument("kind", choices=kernels.STRESS_KINDS)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--options", type=json.loads, default={},
                        help='kernel options as JSON, e.g. \'{"dtype": "bf16"}\'')
    args = parser.parse_args(argv)
    return cuda.print_result("timeline", lambda: run(args.kind, args.options, args.seconds,
                                                     args.idle))


if __name__ == "__main__":
    sys.exit(main())
