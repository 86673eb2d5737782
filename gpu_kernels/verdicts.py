"""STACK-NODE-001..007 verdicts on an inventory dict (inventory.py's shape). Pure logic.

Each requirement has one rule, named in :data:`NODE_RULES` or :data:`GPU_RULES` (the suite,
``conformance/suites/stack/test_node_gpu.py``, names them in its checklist). A node rule judges
the whole inventory, a GPU rule each GPU: the requirement fails when any GPU fails, is
not-applicable when every GPU is, else passes. :func:`evaluate` gives
{"id", "verdict": pass|fail|not-applicable, "message"} for each.

STACK-NODE-007 and idle GPUs: an idle GPU lowers its PCIe link *generation* to save power
(and raises it again under load), so a lower generation while NVML reports the GpuIdle
reason (or 0 % utilisation) passes with a note. A lower link *width* is not a power state:
it means the link trained narrower (riser, slot, BIOS) and fails at any load.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PASS, FAIL, NA = "pass", "fail", "not-applicable"

# Reasons that mean the hardware or cooling slowed the GPU down (STACK-NODE-006).
SLOWDOWN_REASONS = frozenset({"HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown",
                              "SwThermalSlowdown"})


@dataclass(frozen=True)
class Options:
    expected_driver_version: str | None = None
    min_driver_version: str | None = None
    allowed_compute_modes: tuple[str, ...] = ("Default",)


@dataclass
class Outcome:
    """A rule's verdict on the node (a node rule) or on one GPU (a GPU rule)."""

    verdict: str
    message: str


NodeRule = Callable[[Mapping[str, Any], Options], Outcome]  # judges the whole inventory
GpuRule = Callable[[Mapping[str, Any], Options], Outcome]  # judges one GPU


def version_tuple(version: str) -> tuple[int, ...]:
    """'580.159.04' -> (580, 159, 4); raises ValueError on anything else."""
    parts = version.strip().split(".")
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a driver version: {version!r}")
    return tuple(int(p) for p in parts)


def _verdict(req_id: str, verdict: str, message: str) -> dict[str, str]:
    return {"id": req_id, "verdict": verdict, "message": message}


def _per_gpu(req_id: str, gpus: Sequence[Mapping[str, Any]], rule: GpuRule,
             opts: Options) -> dict[str, str]:
    if not gpus:
        return _verdict(req_id, FAIL, "no GPU enumerated")
    outcomes = [(gpu.get("index", i), rule(gpu, opts)) for i, gpu in enumerate(gpus)]
    verdicts = {o.verdict for _, o in outcomes}
    verdict = FAIL if FAIL in verdicts else NA if verdicts == {NA} else PASS
    message = "; ".join(f"GPU {i}: {o.message}" for i, o in outcomes)
    return _verdict(req_id, verdict, message)


def enumeration(inv: Mapping[str, Any], _opts: Options) -> Outcome:
    """STACK-NODE-001: every GPU has a model, memory and a UUID no other GPU has."""
    gpus = inv.get("gpus") or []
    if not gpus:
        return Outcome(FAIL, "NVML enumerated no GPU")
    problems = []
    for i, gpu in enumerate(gpus):
        missing = [k for k in ("name", "uuid") if not gpu.get(k)]
        if not gpu.get("memory_total_bytes"):
            missing.append("memory")
        if missing:
            problems.append(f"GPU {gpu.get('index', i)} lacks {', '.join(missing)}")
    uuids = [g.get("uuid") for g in gpus if g.get("uuid")]
    if len(set(uuids)) != len(uuids):
        problems.append("duplicate UUIDs: " + ", ".join(sorted({u for u in uuids
                                                               if uuids.count(u) > 1})))
    if problems:
        return Outcome(FAIL, "; ".join(problems))
    names = sorted({f"{g['name']} ({g['memory_total_bytes'] / 2**30:.0f} GiB)" for g in gpus})
    return Outcome(PASS, f"{len(gpus)} GPU(s), distinct UUIDs: {', '.join(names)}")


def versions(inv: Mapping[str, Any], opts: Options) -> Outcome:
    """STACK-NODE-002: driver and CUDA versions reported, equal on every GPU, as required."""
    gpus = inv.get("gpus") or []
    if not gpus:
        return Outcome(FAIL, "no GPU enumerated")
    drivers = {g.get("driver_version") for g in gpus}
    cudas = {g.get("cuda_driver_version") for g in gpus}
    if None in drivers or None in cudas:
        return Outcome(FAIL, "driver or CUDA version not reported")
    if len(drivers) > 1 or len(cudas) > 1:
        return Outcome(FAIL, f"GPUs disagree: drivers {sorted(drivers)}, CUDA {sorted(cudas)}")
    driver, cuda = drivers.pop(), cudas.pop()
    found = f"driver {driver}, CUDA {cuda}"
    if opts.expected_driver_version and driver != opts.expected_driver_version:
        return Outcome(FAIL, f"{found}; expected driver {opts.expected_driver_version}")
    if opts.min_driver_version:
        try:
            too_old = version_tuple(driver) < version_tuple(opts.min_driver_version)
        except ValueError as exc:
            return Outcome(FAIL, f"{found}; {exc}")
        if too_old:
            return Outcome(FAIL, f"{found}; older than the minimum {opts.min_driver_version}")
    return Outcome(PASS, f"{found} on all {len(gpus)} GPU(s)")


def ecc(gpu: Mapping[str, Any], _opts: Options) -> Outcome:
    """STACK-NODE-003: ECC enabled, no volatile uncorrectable errors."""
    ecc = gpu.get("ecc") or {}
    if not ecc.get("supported"):
        return Outcome(NA, "ECC not supported")
    if ecc.get("current") != "Enabled":
        return Outcome(FAIL, f"ECC {ecc.get('current')} (pending {ecc.get('pending')})")
    uncorrected = ecc.get("volatile_uncorrected")
    if uncorrected is None:
        return Outcome(FAIL, "ECC enabled but the volatile uncorrectable count is unreadable")
    if uncorrected > 0:
        return Outcome(FAIL, f"{uncorrected} volatile uncorrectable ECC error(s): drain and reset")
    return Outcome(PASS, f"ECC enabled, 0 volatile uncorrectable, "
                      f"{ecc.get('volatile_corrected')} corrected")


def compute_mode(gpu: Mapping[str, Any], opts: Options) -> Outcome:
    """STACK-NODE-004: a compute mode that lets pods share the GPU (Default unless told)."""
    allowed = opts.allowed_compute_modes
    mode = gpu.get("compute_mode")
    if mode is None:
        return Outcome(NA, "compute mode not reported")
    verdict = PASS if mode in allowed else FAIL
    return Outcome(verdict, f"compute mode {mode} (allowed: {', '.join(allowed)})")


def mig(gpu: Mapping[str, Any], _opts: Options) -> Outcome:
    """STACK-NODE-005: MIG mode reported, no mode change pending."""
    mig = gpu.get("mig") or {}
    if not mig.get("supported"):
        return Outcome(NA, "MIG not supported")
    current, pending = mig.get("current"), mig.get("pending")
    if current != pending:
        return Outcome(FAIL, f"MIG {current}, pending {pending}: a mode change awaits a GPU reset")
    return Outcome(PASS, f"MIG {current} (pending {pending})")


def throttle(gpu: Mapping[str, Any], _opts: Options) -> Outcome:
    """STACK-NODE-006: no hardware, thermal or power-brake slowdown."""
    reasons = gpu.get("clocks_event_reasons") or {}
    if reasons.get("mask") is None:
        return Outcome(NA, "clocks-event reasons not reported")
    names = list(reasons.get("names") or [])
    bad = sorted(SLOWDOWN_REASONS.intersection(names))
    if bad:
        return Outcome(FAIL, "slowdown reasons active: " + ", ".join(bad))
    benign = f" (benign: {', '.join(names)})" if names else ""
    return Outcome(PASS, "no slowdown reasons" + benign)


def _is_idle(gpu: Mapping[str, Any]) -> bool:
    names = (gpu.get("clocks_event_reasons") or {}).get("names") or []
    return "GpuIdle" in names or gpu.get("utilization_gpu_pct") == 0


def pcie(gpu: Mapping[str, Any], _opts: Options) -> Outcome:
    """STACK-NODE-007: the PCIe link at its maximum width (and generation, unless idle)."""
    pcie = gpu.get("pcie") or {}
    gen, gen_max = pcie.get("gen_current"), pcie.get("gen_max")
    width, width_max = pcie.get("width_current"), pcie.get("width_max")
    if None in (gen, gen_max, width, width_max):
        return Outcome(NA, "PCIe link not reported")
    link = f"PCIe gen {gen}/{gen_max}, x{width}/x{width_max}"
    if width < width_max:
        return Outcome(FAIL, f"{link}: link width downtrained")
    if gen < gen_max:
        if _is_idle(gpu):
            return Outcome(PASS, f"{link}: lower generation while idle (power saving), allowed")
        return Outcome(FAIL, f"{link}: generation below maximum while busy")
    return Outcome(PASS, f"{link}: at maximum")


# Each requirement and its rule: the one place that says which rule judges which ID.
NODE_RULES: dict[str, NodeRule] = {
    "STACK-NODE-001": enumeration,
    "STACK-NODE-002": versions,
}
GPU_RULES: dict[str, GpuRule] = {
    "STACK-NODE-003": ecc,
    "STACK-NODE-004": compute_mode,
    "STACK-NODE-005": mig,
    "STACK-NODE-006": throttle,
    "STACK-NODE-007": pcie,
}
REQUIREMENTS = (*NODE_RULES, *GPU_RULES)


def evaluate(inv: Mapping[str, Any], opts: Options | None = None) -> list[dict[str, str]]:
    """All seven STACK-NODE verdicts for one node's inventory."""
    opts = opts or Options()
    gpus = inv.get("gpus") or []
    found = []
    for req_id, node_rule in NODE_RULES.items():
        outcome = node_rule(inv, opts)
        found.append(_verdict(req_id, outcome.verdict, outcome.message))
    found += [_per_gpu(req_id, gpus, rule, opts) for req_id, rule in GPU_RULES.items()]
    return found
