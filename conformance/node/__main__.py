"""``python -m conformance.node up|down|status``: the node's lifecycle without the gpuconf CLI.

Bad input ends with one line and exit status 2; a component that does not come up with its
log tail and 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from conformance.common.errors import ComponentFailed, NotConverged, UsageError
from conformance.common.interrupts import sigterm_as_interrupt
from conformance.node import lifecycle


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance.node",
                                description="a real Kubernetes node on this machine")
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the control plane and this machine as a real node")
    up.add_argument("--name", default="gpuconf", help="cluster name (default gpuconf)")
    gpus = up.add_mutually_exclusive_group()
    gpus.add_argument("--gpu-profile", metavar="NxMODEL",
                      help=f"mock NVML GPUs (default {lifecycle.DEFAULT_GPU_PROFILE})")
    gpus.add_argument("--driver-root", metavar="DIR",
                      help="the real NVIDIA driver's root (e.g. /usr/local/nvidia)")
    up.add_argument("--dev-root", metavar="DIR",
                    help="where the driver's dev/nvidia* are, when not below --driver-root "
                         "(e.g. /)")
    up.add_argument("--nvidia-src", metavar="DIR", required=True,
                    help="upstream NVIDIA sources: the k8s-device-plugin v0.20.0 tag (its chart)")
    up.add_argument("--chart-values", metavar="FILE",
                    help="YAML values merged over the node's own (e.g. a time-slicing config.map)")
    for name in ("down", "status"):
        sp = sub.add_parser(name)
        sp.add_argument("--name", default="gpuconf")
    return p


def _values(path: str | None) -> dict:
    if not path:
        return {}
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"--chart-values {path}: {exc}".splitlines()[0]) from exc
    if not isinstance(doc, dict):
        raise UsageError(f"--chart-values {path}: not a map of values")
    return doc


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sigterm_as_interrupt()
    try:
        if args.command == "up":
            lifecycle.up(args.name, gpu_profile=args.gpu_profile, driver_root=args.driver_root,
                         dev_root=args.dev_root, nvidia_src=args.nvidia_src,
                         chart_values=_values(args.chart_values))
        elif args.command == "down":
            if not lifecycle.down(args.name):
                print(f"no node named {args.name!r}")
        else:
            print(json.dumps(lifecycle.status(args.name), indent=2))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ComponentFailed, NotConverged) as exc:
        print(f"error: {exc}", file=sys.stderr)
        tail = getattr(exc, "log_tail", "")
        if tail:
            print(tail, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
