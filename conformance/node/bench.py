"""Bring-up benchmark of the real node from cached binaries (a benchmark, not a timed test).

    python -m conformance.node.bench --nvidia-src DIR [--runs 3] [--gpu-profile 8xH100]

Each run is a full ``up`` then ``down``; one JSON line per run with the seconds from the start
of ``up`` to each milestone (control plane ready, node Ready, NVIDIA DaemonSets rolled out,
nvidia.com/gpu advertised with GFD's labels) and the seconds ``down`` took; then a summary line
(median of each). The goal on 2 cores: node Ready and the DaemonSets rolled out in < 60 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from conformance.node import lifecycle
from conformance.options import add_node_arguments

MILESTONES = ("control_plane_ready", "images_imported", "node_ready", "prometheus_ready",
              "gateway_ready", "daemonsets_rolled_out", "gpus_advertised", "total")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance.node.bench")
    add_node_arguments(p, ["nvidia_src", "gpu_profile"], required=["nvidia_src"])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--name", default="gpuconf-bench")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.gpu_profile = args.gpu_profile or lifecycle.DEFAULT_GPU_PROFILE
    runs = []
    for i in range(args.runs):
        state = lifecycle.up(args.name, gpu_profile=args.gpu_profile, nvidia_src=args.nvidia_src,
                             progress=lambda _m: None)
        t0 = time.monotonic()
        lifecycle.down(args.name, progress=lambda _m: None)
        row = {m: state.timings.get(m) for m in MILESTONES}
        row["down"] = round(time.monotonic() - t0, 1)
        runs.append(row)
        print(json.dumps({"run": i + 1, **row}), flush=True)
    summary = {k: statistics.median(r[k] for r in runs if r.get(k) is not None)
               for k in [*MILESTONES, "down"]}
    print(json.dumps({"median_of": len(runs), "gpu_profile": args.gpu_profile, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
