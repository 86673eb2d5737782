"""Burn-in (the ``burn`` kind): hold every GPU at its power limit and verify every iteration.

A GPU is judged by what it was pushed to and whether its results stayed correct, as
gpu-burn and DCGM's diagnostic judge it, not by its throughput. One process per GPU (all
start at one instant, as a node's GPUs would be loaded in production) runs iterations of:

1. the tensor-core GEMM (``gemm``, bf16 16384^3 by default: it alone holds an H200 at its
   700 W limit), then its output compared word for word with the reference (verify.py);
2. ``--membw-launches`` launches of the memory triad (``membw``), then a position-weighted
   checksum of the triad's output compared with the reference checksum.

The references are computed once, before the run, by each workload's own check (poisoned
output, one launch, verified against float64), so a miscompare means an iteration differed
from a result known to be right. Counters stay on the device and are read every ``SLOTS``
iterations; two iterations are in flight, so the GPU never waits for the host.

NVML is read on the side: power, SM and memory clock, temperature and clocks-event reasons
every ``sample_period`` (0.5 s); XID events as they come; ECC and remapped-row counters
before and after. A GPU fails on any miscompare, a failed reference check, an XID, a new
uncorrectable ECC error or row remap, a hardware or thermal slowdown reason, or a median
power under ``min_power_fraction`` of its enforced limit (the run did not stress it).

``--inject-corruption`` flips one bit of the GEMM output and one of the triad output in the
iteration at mid-run on the first GPU: the run must then fail, with that iteration found.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpu_kernels import cuda, kernels, nvml, result, stats, timing, verify
from gpu_kernels.procs import Worker, WorkerError, WorkerUnavailable, close_all
from gpu_kernels.verdicts import SLOWDOWN_REASONS

REQUIREMENT = "STACK-BURN-001"
READY_TIMEOUT_S = 600.0  # the references of a 16384^3 GEMM and GiB-sized triads, N at once
MIN_ITERATIONS = 3
SLOTS = 4096  # iterations whose counters live on the device between two reads
DEPTH = 2  # iterations in flight
FIRST_ERRORS = 20  # miscompared iterations listed one by one; the counts cover all
GO_LEAD_S = 1.0  # from "go" to the start: each worker opens three NVML sessions first


@dataclass(frozen=True)
class BurnConfig:
    """What one GPU runs; the defaults are the CLI's."""

    gemm: dict[str, Any] = field(default_factory=lambda: {"dtype": "bf16", "size": 16384})
    membw: dict[str, Any] = field(default_factory=lambda: {"mib": 2048})
    membw_launches: int = 1
    sample_period: float = 0.5
    min_power_fraction: float = 0.95
    seed: int | None = None


class Burner:
    """One GPU's burn-in (in its worker process): verified references, then the iterations."""

    def __init__(self, cp: Any, config: BurnConfig, inject: bool = False) -> None:
        self.cp = cp
        self.cfg = config
        self.inject = inject
        self.gemm = kernels.build("gemm", cp, {**config.gemm, "seed": config.seed})
        self.membw = kernels.build("membw", cp, {**config.membw, "seed": config.seed})
        self.verifier = verify.Verifier(cp)
        # Each check leaves its verified result in the output: that is the reference.
        self.reference = {"gemm": self.gemm.check(), "membw": self.membw.check()}
        self.gemm_words = verify.words(self.gemm.output())
        self.ref_words = self.gemm_words.copy()
        self.membw_words = verify.words(self.membw.output())
        ref_sum = cp.zeros(1, dtype=cp.uint64)
        self.verifier.checksum(self.membw_words, ref_sum)
        self.ref_sum = int(cp.asnumpy(ref_sum)[0])
        self.gemm_bad = cp.zeros(SLOTS, dtype=cp.uint64)
        self.sums = cp.zeros(SLOTS, dtype=cp.uint64)
        self.rng = random.Random(self.gemm.seed)
        cp.get_default_memory_pool().free_all_blocks()
        self.config = {"gemm": self.gemm.config, "membw": self.membw.config,
                       "membw_launches": config.membw_launches,
                       "gemm_words": int(self.gemm_words.size),
                       "membw_words": int(self.membw_words.size)}

    def run(self, t_go: float, t_stop: float,
            where: tuple[str | None, str | None, int]) -> dict[str, Any]:
        """Iterations from ``t_go`` until ``t_stop``; the raw facts :func:`judge_gpu` judges."""
        with nvml.Sampler(*where, period=self.cfg.sample_period) as sampler, \
                nvml.XidWatcher(*where) as xids:
            before = nvml.health(*where)
            timing.sleep_until(t_go)
            loop = self._loop(t_go, t_stop)
            after = nvml.health(*where)
        return {**loop,
                "samples": [s for s in sampler.samples if t_go <= s["t"] <= loop["t_end"]],
                "sampler_error": sampler.error, "xid": xids.report(t_go),
                "health": {"before": before, "after": after}, "t_go": t_go,
                "reference": self.reference, "ref_checksum": self.ref_sum}

    def _loop(self, t_go: float, t_stop: float) -> dict[str, Any]:
        cp = self.cp
        t_inject = (t_go + t_stop) / 2 if self.inject else math.inf
        pending: deque[tuple[Any, Any, Any]] = deque()
        gpu_ms = {"gemm": 0.0, "membw": 0.0}
        errors: dict[str, Any] = {"iterations": 0, "gemm_iterations": 0, "gemm_words": 0,
                                  "membw_iterations": 0, "first": []}
        starts: list[float] = []
        injected: dict[str, Any] | None = None
        base = slot = 0
        while time.monotonic() < t_stop or len(starts) < MIN_ITERATIONS:
            now = time.monotonic()
            flip = injected is None and now >= t_inject
            if flip:
                injected = {"iteration": len(starts), "t_s": round(now - t_go, 3),
                            "bit": self.rng.randrange(32),
                            "gemm_word": self.rng.randrange(self.gemm_words.size),
                            "membw_word": self.rng.randrange(self.membw_words.size)}
            starts.append(now)
            events = (cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event())
            events[0].record()
            self.gemm.launch()
            if injected and flip:
                self.verifier.flip(self.gemm_words, injected["gemm_word"], injected["bit"])
            self.verifier.compare(self.gemm_words, self.ref_words, self.gemm_bad[slot:slot + 1])
            events[1].record()
            for _ in range(self.cfg.membw_launches):
                self.membw.launch()
            if injected and flip:
                self.verifier.flip(self.membw_words, injected["membw_word"], injected["bit"])
            self.verifier.checksum(self.membw_words, self.sums[slot:slot + 1])
            events[2].record()
            pending.append(events)
            if len(pending) > DEPTH:
                _retire(cp, pending.popleft(), gpu_ms)
            slot += 1
            if slot == SLOTS:
                self._harvest(pending, gpu_ms, base, slot, starts, t_go, errors)
                base, slot = base + slot, 0
        self._harvest(pending, gpu_ms, base, slot, starts, t_go, errors)
        t_end = time.monotonic()
        return {"iterations": len(starts), "seconds": t_end - t_go, "t_end": t_end,
                "gpu_ms": gpu_ms, "errors": errors, "injected": injected,
                "work": {"gemm_flop": self.gemm.work_per_launch,
                         "membw_bytes": self.membw.work_per_launch * self.cfg.membw_launches}}

    def _harvest(self, pending: deque[tuple[Any, Any, Any]], gpu_ms: dict[str, float],
                 base: int, n: int, starts: Sequence[float], t_go: float,
                 errors: dict[str, Any]) -> None:
        """Finish what is in flight, read ``n`` counter slots, count and list miscompares."""
        import numpy as np

        cp = self.cp
        while pending:
            _retire(cp, pending.popleft(), gpu_ms)
        words = cp.asnumpy(self.gemm_bad[:n])
        sums = cp.asnumpy(self.sums[:n])
        self.gemm_bad.fill(0)
        self.sums.fill(0)
        checksum_bad = sums != np.uint64(self.ref_sum)
        for j in np.flatnonzero((words != 0) | checksum_bad):
            errors["iterations"] += 1
            errors["gemm_iterations"] += int(words[j] != 0)
            errors["gemm_words"] += int(words[j])
            errors["membw_iterations"] += int(checksum_bad[j])
            if len(errors["first"]) < FIRST_ERRORS:
                errors["first"].append({"iteration": base + int(j),
                                        "t_s": round(starts[base + int(j)] - t_go, 3),
                                        "gemm_words": int(words[j]),
                                        "membw_checksum_ok": not bool(checksum_bad[j])})


def _retire(cp: Any, events: tuple[Any, Any, Any], gpu_ms: dict[str, float]) -> None:
    start, mid, end = events
    end.synchronize()
    gpu_ms["gemm"] += cp.cuda.get_elapsed_time(start, mid)
    gpu_ms["membw"] += cp.cuda.get_elapsed_time(mid, end)


# --- judging (pure: runs on fabricated facts in the tests) --------------------------------

def power_figures(samples: Sequence[Mapping[str, Any]], limit_w: float | None,
                  goal: float) -> dict[str, Any]:
    """Median (and spread) of the power samples against the enforced limit and the goal."""
    watts = stats.summarize([s["power_w"] for s in samples if s.get("power_w") is not None])
    fraction = (watts["median"] / limit_w if watts["median"] is not None and limit_w
                else None)
    return {"limit_w": limit_w, "goal_fraction": goal, "n": watts["n"],
            **{f"{k}_w": watts[k] for k in ("median", "mean", "min", "max")},
            "fraction_of_limit": fraction,
            "reached": None if fraction is None or goal <= 0 else fraction >= goal}


def _spread(samples: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any]:
    s = stats.summarize([x[key] for x in samples if x.get(key) is not None])
    return {k: s[k] for k in ("min", "median", "max")}


def throttle_figures(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each clocks-event reason seen, with the share of samples it was active in."""
    counts: dict[str, int] = {}
    for s in samples:
        for name in nvml.decode_reasons(s.get("reasons_mask")):
            counts[name] = counts.get(name, 0) + 1
    n = len(samples)
    return {"reasons": {k: round(v / n, 3) for k, v in sorted(counts.items())},
            "slowdown": sorted(SLOWDOWN_REASONS.intersection(counts))}


def health_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """ECC and remapped-row counters before and after the run, and what changed."""
    def diff(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
             keys: Sequence[str]) -> dict[str, int | None]:
        a, b = a or {}, b or {}
        return {k: None if a.get(k) is None or b.get(k) is None else int(b[k]) - int(a[k])
                for k in keys}

    rows = after.get("remapped_rows") or {}
    return {"nvml": bool(before.get("nvml") and after.get("nvml")),
            "ecc_delta": diff(before.get("ecc"), after.get("ecc"),
                              ("volatile_corrected", "volatile_uncorrected")),
            "remapped_rows_delta": diff(before.get("remapped_rows"), after.get("remapped_rows"),
                                        ("correctable", "uncorrectable")),
            "remap_pending": rows.get("pending"), "remap_failure": rows.get("failure"),
            "before": dict(before), "after": dict(after)}


def series(samples: Sequence[Mapping[str, Any]], t0: float) -> dict[str, list[Any]]:
    """The raw NVML samples as columns, times in seconds from ``t0``."""
    keys = ("power_w", "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "utilization_pct",
            "reasons_mask")
    return {"t_s": [round(s["t"] - t0, 3) for s in samples],
            **{k: [s.get(k) for s in samples] for k in keys}}


def _injection(injected: Mapping[str, Any] | None,
               errors: Mapping[str, Any]) -> dict[str, Any] | None:
    if not injected:
        return None
    hit = next((e for e in errors.get("first", []) if e["iteration"] == injected["iteration"]),
               None)
    by_gemm = bool(hit and hit["gemm_words"] > 0)
    by_membw = bool(hit and not hit["membw_checksum_ok"])
    return {**injected, "caught_by_gemm_compare": by_gemm,
            "caught_by_memory_checksum": by_membw, "caught": by_gemm and by_membw}


def judge_gpu(identity: Mapping[str, Any], facts: Mapping[str, Any],
              min_power_fraction: float) -> dict[str, Any]:
    """One GPU's burn-in result: figures, verdict, and the reasons it failed."""
    reasons: list[str] = []
    if facts.get("error"):
        reasons.append(f"the run failed: {facts['error']}")
    for name, check in (facts.get("reference") or {}).items():
        if not check.get("ok"):
            reasons.append(f"{name} reference check failed ({check.get('method')})")
    errors = facts.get("errors") or {}
    iterations = facts.get("iterations") or 0
    if errors.get("iterations"):
        reasons.append(f"{errors['iterations']} of {iterations} iterations miscompared: GEMM "
                       f"{errors['gemm_iterations']} ({errors['gemm_words']} words), memory "
                       f"checksum {errors['membw_iterations']}")
    samples = facts.get("samples") or []
    power = power_figures(samples, identity.get("power_limit_w"), min_power_fraction)
    if power["reached"] is False:
        reasons.append(f"median power {power['median_w']:.0f} W is "
                       f"{100 * power['fraction_of_limit']:.1f} % of the "
                       f"{power['limit_w']:.0f} W limit, under the "
                       f"{100 * min_power_fraction:.0f} % goal: the GPU was not stressed")
    throttle = throttle_figures(samples)
    if throttle["slowdown"]:
        reasons.append("slowdown reasons during the run: " + ", ".join(throttle["slowdown"]))
    xid = facts.get("xid") or {}
    if xid.get("count"):
        reasons.append("XID " + ", ".join(str(e["xid"]) for e in xid["events"])
                       + " during the run")
    health = health_delta(*(((facts.get("health") or {}).get(k) or {})
                            for k in ("before", "after")))
    if (health["ecc_delta"]["volatile_uncorrected"] or 0) > 0:
        reasons.append(f"{health['ecc_delta']['volatile_uncorrected']} new uncorrectable ECC "
                       "error(s)")
    if (health["remapped_rows_delta"]["uncorrectable"] or 0) > 0 or health["remap_failure"]:
        reasons.append("rows remapped for uncorrectable errors during the run (or a remap "
                       "failed)")
    injection = _injection(facts.get("injected"), errors)
    if injection and not injection["caught"]:
        reasons.append("the injected corruption was not caught")
    gpu_ms = facts.get("gpu_ms") or {}
    work = facts.get("work") or {}

    def rate(work_key: str, ms_key: str) -> float | None:
        ms = gpu_ms.get(ms_key)
        return iterations * work[work_key] / (ms / 1000.0) / 1e12 if ms and work_key in work \
            else None

    return {
        "index": identity.get("index"), "uuid": identity.get("uuid"),
        "name": identity.get("name"), "pci_bus_id": identity.get("pci_bus_id"),
        "verdict": "fail" if reasons else "pass", "reasons": reasons,
        "iterations": iterations, "seconds": facts.get("seconds"), "errors": errors,
        "reference": facts.get("reference"), "injected": injection,
        "throughput": {"gemm_tflops": rate("gemm_flop", "gemm"),
                       "membw_tbs": rate("membw_bytes", "membw"),
                       "note": "over each part's GPU time, its compare or checksum included"},
        "power": power,
        "sm_clock_mhz": _spread(samples, "sm_clock_mhz"),
        "mem_clock_mhz": _spread(samples, "mem_clock_mhz"),
        "temperature_c": _spread(samples, "temperature_c"),
        "throttle": throttle, "xid": xid, "health": health,
        "samples": {"period_s": facts.get("sample_period"),
                    **series(samples, facts.get("t_go", 0.0)),
                    "error": facts.get("sampler_error")},
        "error": facts.get("error"),
    }


def verdict(gpus: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's verdict: it fails when any GPU does, naming each failed GPU's UUID."""
    failed = [g for g in gpus if g["verdict"] != "pass"]
    reasons = [f"GPU {g['index']} ({g['uuid']}): {r}" for g in failed for r in g["reasons"]]
    injected = next(({"index": g["index"], "uuid": g["uuid"], **g["injected"]}
                     for g in gpus if g.get("injected")), None)
    return {"verdict": "fail" if failed else "pass", "reasons": reasons,
            "failed_uuids": [g["uuid"] for g in failed], "injected": injected}


# --- the parent: one worker per GPU -------------------------------------------------------

def run(*, seconds: float, devices: Sequence[int] | None, config: BurnConfig,
        inject: bool = False) -> dict[str, Any]:
    """The ``burn`` kind's result over ``devices`` (None: every GPU CUDA sees)."""
    count = cuda.device_count()
    devices = list(range(count)) if devices is None else list(devices)
    missing = [d for d in devices if d >= count]
    if missing:
        raise cuda.CupyUnavailable(f"device(s) {missing} requested, CUDA sees {count}")
    workers = [Worker({"role": "burn", "device": d, "config": asdict(config),
                       "inject": inject and i == 0}) for i, d in enumerate(devices)]
    facts: list[tuple[dict[str, Any], dict[str, Any]]] = []
    try:
        readies = [_expect(w, "ready", READY_TIMEOUT_S) for w in workers]
        t_go = time.monotonic() + GO_LEAD_S
        for w, ready in zip(workers, readies, strict=True):
            if "error" not in ready:
                w.send("go", t_go=t_go, t_stop=t_go + seconds)
        for d, w, ready in zip(devices, workers, readies, strict=True):
            ident = ready.get("identity") or {"index": d}
            done = ready if "error" in ready else _expect(w, "result", seconds + 300.0)
            facts.append((ident, {**done, "sample_period": config.sample_period}))
    finally:
        close_all(workers)
    gpus = [judge_gpu(ident, f, config.min_power_fraction) for ident, f in facts]
    found = verdict(gpus)
    out = result.header("burn")
    out.update({"requirement": REQUIREMENT, "seconds": seconds, "devices": devices,
                "config": {**asdict(config), "inject_corruption": inject,
                           "compare": "GEMM output bit-exact against its verified first "
                                      "result; memory output by a position-weighted checksum"},
                "gpus": gpus, **found, "ok": found["verdict"] == "pass",
                "exit_code": result.EXIT_OK if found["verdict"] == "pass"
                else result.EXIT_FAILED})
    return out


def _expect(w: Worker, event: str, timeout: float) -> dict[str, Any]:
    """A worker's message, or {"error"} when it failed: one GPU's failure is its verdict."""
    try:
        return w.expect(event, timeout)
    except WorkerUnavailable:  # cannot run here: exit 3, not a failed point
        raise
    except WorkerError as exc:
        return {"error": f"{exc} {exc.stderr_tail}".strip()}
