"""A copy in a sharing experiment: ``python -m gpu_kernels.worker SPEC_JSON``.

Roles: stress (a sharer), latency (the latency experiment's client), burn (one GPU of a
burn-in), memhog, probe, fault. Protocol: the worker writes JSON lines to stdout ({"event":
"ready" | "attempt" | "result" | "error", ...}) and reads JSON commands from stdin ({"cmd":
"go" | "attempt" | "release" | "exit", ...}). It prepares (CUDA context, buffers, compiled
kernel, warm-up) before "ready", so every copy starts its timed work at the agreed instant,
not when its setup ends.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from gpu_kernels import cuda, fault, kernels, memhog, timing
from gpu_kernels.kernels.base import Workload
from gpu_kernels.result import dumps


def send(event: str, **data: Any) -> None:
    sys.stdout.write(dumps({"event": event, "pid": os.getpid(), **data}) + "\n")
    sys.stdout.flush()


def recv() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(0)  # the parent went away
    return json.loads(line)


def _timed(spec: dict[str, Any], loop: Callable[[Any, Workload, dict[str, Any]],
                                                timing.Completions]) -> int:
    """Build, warm up, report ready, run ``loop`` when told to go, check, report the result."""
    cp = cuda.load(spec.get("device", 0))
    w = kernels.build(spec["kind"], cp, spec.get("options"))
    warm = timing.warm_up(cp, w, spec.get("warmup_seconds", 0.3))
    send("ready", identity=cuda.identity(cp, spec.get("device", 0)), config=w.config,
         warmup=warm)
    done = loop(cp, w, recv())
    correctness = w.check() if done.error is None else {"ok": False,
                                                          "skipped": "a CUDA error ended the run"}
    send("result", kind=w.kind, metric=w.metric, unit=w.unit, scale=w.scale,
         work_per_launch=w.work_per_launch, times=done.times, latencies_ms=done.latencies_ms,
         error=done.error, correctness=correctness)
    return 0 if done.error is None else 1


def stress(spec: dict[str, Any]) -> int:
    """A sharer: launches back to back, ``depth`` in flight, from "go" until "stop"."""
    return _timed(spec, lambda cp, w, go: timing.run_window(cp, w, go["t_go"], go["t_stop"]))


def client(spec: dict[str, Any]) -> int:
    """The latency experiment's client: think, one request, wait for it; until "stop"."""
    return _timed(spec, lambda cp, w, go: timing.run_requests(cp, w, go["t_go"], go["t_stop"],
                                                              spec["think_s"]))


def burner(spec: dict[str, Any]) -> int:
    """One GPU of a burn-in: verified references before "ready", the burn when told to go."""
    from gpu_kernels import burn

    device = spec.get("device", 0)
    cp = cuda.load(device)
    b = burn.Burner(cp, burn.BurnConfig(**spec["config"]), inject=spec.get("inject", False))
    ident = cuda.identity(cp, device)
    send("ready", identity=ident, config=b.config, reference=b.reference)
    go = recv()
    send("result", **b.run(go["t_go"], go["t_stop"], (ident["pci_bus_id"], ident["uuid"],
                                                        device)))
    return 0


def hog(spec: dict[str, Any]) -> int:
    cp = cuda.load(spec.get("device", 0))
    free, total = memhog.free_and_total(cp)
    held = memhog.allocate(cp, int(free * spec["fraction"]))
    free_after, _ = memhog.free_and_total(cp)
    send("ready", fraction=spec["fraction"], free_before_bytes=free, total_bytes=total,
         free_while_held_bytes=free_after, **held.as_dict())
    recv()  # "release"
    held.release()
    cp.cuda.Device().synchronize()
    send("result", released=True)
    return 0


def probe(spec: dict[str, Any]) -> int:
    cp = cuda.load(spec.get("device", 0))
    free, total = memhog.free_and_total(cp)
    send("ready", free_bytes=free, total_bytes=total)
    while (cmd := recv())["cmd"] == "attempt":
        free, _ = memhog.free_and_total(cp)
        got = memhog.allocate(cp, int(cmd["bytes"]))
        send("attempt", free_seen_bytes=free, **got.as_dict())
        got.release()
    send("result", done=True)
    return 0


def faulter(spec: dict[str, Any]) -> int:
    cp = cuda.load(spec.get("device", 0))
    cp.zeros(1, dtype=cp.float32)  # create the context before "ready"
    send("ready")
    recv()  # "go"
    send("result", **fault.trigger(cp))
    return 0


ROLES = {"stress": stress, "latency": client, "burn": burner, "memhog": hog, "probe": probe,
         "fault": faulter}


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    try:
        code = ROLES[spec["role"]](spec)
    except SystemExit:
        raise
    except BaseException as exc:
        send("error", error=f"{type(exc).__name__}: {exc}",
             traceback=traceback.format_exc(limit=8))
        code = 1
    sys.stdout.flush()
    os._exit(code)  # skip CuPy teardown: after a fault it would raise again


if __name__ == "__main__":
    main(sys.argv[1:])
