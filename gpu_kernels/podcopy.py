"""One copy of a sharing experiment in its own pod: ``python3 -m gpu_kernels.podcopy SPEC PLAN``.

A process copy (``gpu_kernels.worker``) is told "go" on stdin by its parent, at an instant of
the host's monotonic clock. A pod has neither: its runner may sit anywhere, and pods share no
monotonic clock with it. So the copy runs a *plan*: every instant in it is seconds after the
*go instant*, a wall-clock time (``time.time()``) read from the file ``go`` of the pod's barrier
volume (a ConfigMap the runner writes; see ``conformance.cluster.sharing_pods`` for why it is
written with the pods). Pods that share one GPU share one node and so its wall clock: each
turns the go instant into its own monotonic clock once (``mono_go``) and times everything
from there, and reports when it really started (wall clock), so the runner can bound the
start skew between pods instead of trusting it.

The copy prepares (CUDA context, buffers, warm-up: the worker's roles do) before it waits for
the go instant, logs the worker's events as JSON lines, and ends with one ``summary`` line:
identity (GPU UUID, PCI bus id), barrier (go instant, when it was ready, when it started, how
late), the figures over the plan's ``window`` (for the latency client also its requests'
percentiles and CDF) and rates over its ``phases`` (computed here, where the completion times
are), and each event without its bulky arrays. The same summary,
cut to fit, goes to the termination message (``/dev/termination-log``, 4096 bytes), which the
kubelet keeps in the pod's status: the runner reads results there where it cannot read logs.

Plan: {"commands": [{"at_s": 0, "cmd": "go", "t_go_s": 0, "t_stop_s": 4.3}, ...],
"window": {"start_s": 0.5, "end_s": 4.0, "trials": 5}, "phases": {"before": [a, b], ...},
"role_at_s": 0 (start the role only then); commands may ask for "share_fraction" (of the GPU,
within what the copy saw free at its start) or "beyond_share" (1 GiB past that, where it is a
share of the GPU; skipped where it is not),
"barrier_timeout_s": ...; "barrier_dir", "termination_log": elsewhere than in a pod}.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from gpu_kernels import analysis, cuda, memhog, timing
from gpu_kernels import worker as W
from gpu_kernels.result import dumps

BARRIER_DIR = "/opt/gpuconf-barrier"
BARRIER_KEY = "go"
BARRIER_TIMEOUT_S = 600.0
BARRIER_POLL_S = 0.02
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_MAX_BYTES = 4096  # the kubelet's limit on one container's termination message
BULKY = ("times", "latencies_ms", "traceback", "cdf")
IDENTITY_KEYS = ("uuid", "nvml_uuid", "pci_bus_id", "name", "memory_total_bytes", "mig_mode",
                 "compute_mode")


class Copy:
    """The copy's state: its plan, what it logged, and the go instant once it knew it."""

    def __init__(self, spec: dict[str, Any], plan: dict[str, Any]) -> None:
        self.spec, self.plan = spec, plan
        self.commands: list[dict[str, Any]] = [dict(c) for c in plan.get("commands") or []]
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.barrier: dict[str, Any] = {}
        self.mono_go: float | None = None
        self.result: dict[str, Any] | None = None
        self.alone: dict[str, Any] | None = None  # memory this copy saw free at its start

    def send(self, event: str, **data: Any) -> None:
        if event == "result":
            self.result = data
        self.events.setdefault(event, []).append(
            {k: v for k, v in data.items() if k not in BULKY})
        sys.stdout.write(dumps({"event": event, "pid": os.getpid(), **data}) + "\n")
        sys.stdout.flush()

    def wait_for_go(self) -> None:
        """Block until the barrier file holds the go instant; map it to this monotonic clock."""
        path = os.path.join(self.plan.get("barrier_dir", BARRIER_DIR), BARRIER_KEY)
        ready = time.time()
        deadline = time.monotonic() + float(self.plan.get("barrier_timeout_s",
                                                          BARRIER_TIMEOUT_S))
        while True:
            try:
                with open(path) as f:
                    go_at = float(f.read().strip())
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no go instant in {path} after "
                                       f"{self.plan.get('barrier_timeout_s', BARRIER_TIMEOUT_S)}"
                                       " s") from None
                time.sleep(BARRIER_POLL_S)
        seen = time.time()
        self.mono_go = time.monotonic() + (go_at - seen)
        self.barrier = {"go_at": go_at, "ready_wall": ready, "seen_wall": seen}

    def recv(self) -> dict[str, Any]:
        """The worker's ``recv``: the plan's next command, at its instant after go."""
        if self.mono_go is None:
            self.wait_for_go()
        if not self.commands:
            raise SystemExit(0)
        assert self.mono_go is not None
        cmd = self.commands.pop(0)
        at_s = float(cmd.pop("at_s", 0.0))
        timing.sleep_until(self.mono_go + at_s)
        if "start_wall" not in self.barrier:  # the copy's measured start, and when it was due
            now, due = time.time(), self.barrier["go_at"] + at_s
            self.barrier.update(start_wall=now, due_wall=due, late_s=max(0.0, now - due))
        for key in ("t_go", "t_stop"):
            if f"{key}_s" in cmd:
                cmd[key] = self.mono_go + float(cmd.pop(f"{key}_s"))
        if "fraction" in cmd:
            import cupy

            cmd["bytes"] = int(cupy.cuda.runtime.memGetInfo()[1] * cmd.pop("fraction"))
        alone = self.alone or {}
        if "share_fraction" in cmd:  # of the GPU, within what this copy saw free on its own
            cmd["bytes"] = memhog.share_request(alone["total_bytes"], alone["free_bytes"],
                                                cmd.pop("share_fraction"))
        if cmd.pop("beyond_share", False):  # 1 GiB past its own view, where that is a share
            beyond = memhog.beyond_share_request(alone["free_bytes"],
                                                 alone.get("gpu_total_bytes"))
            if beyond is None:
                return self.recv()
            cmd["bytes"] = beyond
        return cmd

    def figures(self) -> dict[str, Any]:
        """The figures over the plan's window and the rates over its phases, go-relative."""
        if self.result is None or self.mono_go is None or "work_per_launch" not in self.result:
            return {}
        out: dict[str, Any] = {}
        go = self.mono_go
        window = self.plan.get("window")
        if window:
            out["figures"] = analysis.copy_figures(self.result, go + window["start_s"],
                                                   go + window["end_s"], window["trials"])
            if self.spec.get("role") == "latency":  # the client: its requests' latencies
                out["latency"] = analysis.client_latency(self.result, go + window["start_s"],
                                                         go + window["end_s"])
        phases = self.plan.get("phases") or {}
        if phases:
            out["rates"] = {name: analysis.rate(self.result, go + a, go + b)
                            for name, (a, b) in phases.items()}
        return out

    def summary(self, identity: dict[str, Any], code: int) -> dict[str, Any]:
        return {"event": "summary", "role": self.spec.get("role"), "exit_code": code,
                "identity": {k: identity.get(k) for k in IDENTITY_KEYS if k in identity},
                "barrier": self.barrier, "memory_alone": self.alone, **self.figures(),
                "events": self.events}

    def start(self, cp: Any, identity: dict[str, Any]) -> None:
        """What the copy sees before its role: its free memory, then (where the plan says
        ``role_at_s``) the go instant plus that, before the role prepares anything (a holder
        that must not allocate before the other copy has seen the GPU on its own)."""
        free, total = cp.cuda.runtime.memGetInfo()
        self.alone = {"free_bytes": int(free), "total_bytes": int(total),
                      "gpu_total_bytes": identity.get("memory_total_bytes")}
        if "role_at_s" in self.plan:
            self.wait_for_go()
            assert self.mono_go is not None
            timing.sleep_until(self.mono_go + float(self.plan["role_at_s"]))


def stress_plan(seconds: float, trials: int, ramp: float, tail: float) -> dict[str, Any]:
    """A sharer's plan (and the latency client's): launch from the go instant, measure
    ``seconds`` after a ``ramp``, keep launching ``tail`` past the window (as
    gpu_kernels.interference.Window)."""
    end = ramp + seconds
    return {"commands": [{"at_s": 0.0, "cmd": "go", "t_go_s": 0.0, "t_stop_s": end + tail}],
            "window": {"start_s": ramp, "end_s": end, "trials": trials}}


def termination_text(summary: dict[str, Any], limit: int = TERMINATION_MAX_BYTES) -> str:
    """The summary as one JSON line that fits the termination message: the events go first,
    then the per-trial rates, when it is too long."""
    for drop in ((), ("events",), ("events", "trials")):
        doc = {k: v for k, v in summary.items() if k not in drop}
        if "trials" in drop and isinstance(doc.get("figures"), dict):
            doc["figures"] = {k: v for k, v in doc["figures"].items() if k != "trials"}
        text = dumps(doc)
        if len(text.encode()) <= limit:
            return text
    return dumps({k: summary.get(k) for k in ("event", "role", "exit_code", "identity")})


def run(spec: dict[str, Any], plan: dict[str, Any]) -> int:
    copy = Copy(spec, plan)
    W.send, W.recv = copy.send, copy.recv  # the worker's roles talk to the plan
    identity: dict[str, Any] = {}
    try:
        cp = cuda.load(spec.get("device", 0))
        identity = cuda.identity(cp, spec.get("device", 0))
        copy.start(cp, identity)
        code = W.ROLES[spec["role"]](spec)
    except SystemExit as exc:  # the plan ran out of commands
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException as exc:
        copy.send("error", error=f"{type(exc).__name__}: {exc}",
                  traceback=traceback.format_exc(limit=8))
        code = 1
    summary = copy.summary(identity, code)
    sys.stdout.write(dumps(summary) + "\n")
    sys.stdout.flush()
    try:
        with open(plan.get("termination_log", TERMINATION_LOG), "w") as f:
            f.write(termination_text(summary))
    except OSError:  # not in a pod (a test): the log line is the result
        pass
    return code


def main(argv: list[str]) -> None:
    code = run(json.loads(argv[0]), json.loads(argv[1]))
    sys.stdout.flush()
    os._exit(code)  # skip CuPy teardown: after a fault it would raise again


if __name__ == "__main__":
    main(sys.argv[1:])
