"""STACK-NODE verdicts on fabricated NVML inventories."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpu_kernels import node, verdicts
from gpu_kernels.verdicts import Options


def gpu(index: int = 0, **changes: Any) -> dict[str, Any]:
    g = {
        "index": index, "name": "NVIDIA H200",
        "uuid": f"GPU-35ed54a8-0000-0000-0000-00000000000{index}",
        "memory_total_bytes": 150754820096, "driver_version": "580.159.04",
        "cuda_driver_version": "13.0", "compute_mode": "Default",
        "ecc": {"supported": True, "current": "Enabled", "pending": "Enabled",
                "volatile_uncorrected": 0, "volatile_corrected": 0},
        "mig": {"supported": True, "current": "Disabled", "pending": "Disabled"},
        "clocks_event_reasons": {"mask": 1, "names": ["GpuIdle"]},
        "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
        "utilization_gpu_pct": 0,
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(g.get(key), dict):
            g[key] = {**g[key], **value}
        else:
            g[key] = value
    return g


def inventory(*gpus: dict[str, Any]) -> dict[str, Any]:
    gpus = gpus or (gpu(0),)
    return {"driver_version": "580.159.04", "cuda_driver_version": "13.0",
            "gpu_count": len(gpus), "gpus": list(gpus)}


def by_id(inv: dict[str, Any], opts: Options | None = None) -> dict[str, dict[str, str]]:
    return {v["id"]: v for v in verdicts.evaluate(inv, opts)}


def test_healthy_node_passes_everything() -> None:
    found = by_id(inventory(gpu(0), gpu(1)))
    assert sorted(found) == [f"STACK-NODE-00{i}" for i in range(1, 8)]
    assert {v["verdict"] for v in found.values()} == {"pass"}
    assert all(set(v) == {"id", "verdict", "message"} for v in found.values())


def test_volatile_uncorrectable_ecc_fails_003() -> None:
    found = by_id(inventory(gpu(0), gpu(1, ecc={"volatile_uncorrected": 3})))
    assert found["STACK-NODE-003"]["verdict"] == "fail"
    assert "GPU 1: 3 volatile uncorrectable" in found["STACK-NODE-003"]["message"]


def test_ecc_disabled_fails_and_unsupported_is_not_applicable() -> None:
    off = by_id(inventory(gpu(ecc={"current": "Disabled", "pending": "Disabled"})))
    assert off["STACK-NODE-003"]["verdict"] == "fail"
    na = by_id(inventory(gpu(ecc={"supported": False, "current": None})))
    assert na["STACK-NODE-003"]["verdict"] == "not-applicable"
    unreadable = by_id(inventory(gpu(ecc={"volatile_uncorrected": None})))
    assert unreadable["STACK-NODE-003"]["verdict"] == "fail"


def test_enumeration_needs_model_memory_distinct_uuid() -> None:
    dup = by_id(inventory(gpu(0), gpu(1, uuid=gpu(0)["uuid"])))
    assert dup["STACK-NODE-001"]["verdict"] == "fail"
    assert "duplicate" in dup["STACK-NODE-001"]["message"]
    nameless = by_id(inventory(gpu(0, name=None)))
    assert nameless["STACK-NODE-001"]["verdict"] == "fail"
    empty = by_id({"gpus": []})
    assert {v["verdict"] for v in empty.values()} == {"fail"}


def test_driver_versions() -> None:
    mixed = by_id(inventory(gpu(0), gpu(1, driver_version="570.1")))
    assert mixed["STACK-NODE-002"]["verdict"] == "fail"
    missing = by_id(inventory(gpu(0, cuda_driver_version=None)))
    assert missing["STACK-NODE-002"]["verdict"] == "fail"
    inv = inventory()
    assert by_id(inv, Options(expected_driver_version="580.159.04"))[
        "STACK-NODE-002"]["verdict"] == "pass"
    assert by_id(inv, Options(expected_driver_version="580.105.08"))[
        "STACK-NODE-002"]["verdict"] == "fail"
    assert by_id(inv, Options(min_driver_version="580.100"))["STACK-NODE-002"]["verdict"] == "pass"
    assert by_id(inv, Options(min_driver_version="590"))["STACK-NODE-002"]["verdict"] == "fail"
    assert verdicts.version_tuple("580.159.04") == (580, 159, 4)
    with pytest.raises(ValueError):
        verdicts.version_tuple("580.x")


def test_compute_mode_default_or_allowed() -> None:
    inv = inventory(gpu(compute_mode="ExclusiveProcess"))
    assert by_id(inv)["STACK-NODE-004"]["verdict"] == "fail"
    allowed = Options(allowed_compute_modes=("Default", "ExclusiveProcess"))
    assert by_id(inv, allowed)["STACK-NODE-004"]["verdict"] == "pass"


def test_mig_pending_change_fails_and_unsupported_is_na() -> None:
    assert by_id(inventory(gpu(mig={"pending": "Enabled"})))["STACK-NODE-005"]["verdict"] == "fail"
    assert by_id(inventory(gpu(mig={"current": "Enabled", "pending": "Enabled"})))[
        "STACK-NODE-005"]["verdict"] == "pass"
    assert by_id(inventory(gpu(mig={"supported": False})))[
        "STACK-NODE-005"]["verdict"] == "not-applicable"


@pytest.mark.parametrize(("names", "verdict"), [
    (["GpuIdle"], "pass"),
    (["ApplicationsClocksSetting", "SwPowerCap"], "pass"),
    ([], "pass"),
    (["HwSlowdown"], "fail"),
    (["HwThermalSlowdown"], "fail"),
    (["SwThermalSlowdown"], "fail"),
    (["GpuIdle", "HwPowerBrakeSlowdown"], "fail"),
])
def test_throttle_reasons(names: list[str], verdict: str) -> None:
    inv = inventory(gpu(clocks_event_reasons={"mask": 1, "names": names}))
    assert by_id(inv)["STACK-NODE-006"]["verdict"] == verdict


def test_throttle_reasons_unreported_is_na() -> None:
    inv = inventory(gpu(clocks_event_reasons={"mask": None, "names": []}))
    assert by_id(inv)["STACK-NODE-006"]["verdict"] == "not-applicable"


def test_pcie_width_fails_but_idle_gen_passes() -> None:
    narrow = inventory(gpu(pcie={"width_current": 8}))
    assert by_id(narrow)["STACK-NODE-007"]["verdict"] == "fail"
    idle_gen = by_id(inventory(gpu(pcie={"gen_current": 1})))["STACK-NODE-007"]
    assert idle_gen["verdict"] == "pass" and "idle" in idle_gen["message"]
    busy = inventory(gpu(pcie={"gen_current": 3}, utilization_gpu_pct=97,
                         clocks_event_reasons={"mask": 0, "names": []}))
    assert by_id(busy)["STACK-NODE-007"]["verdict"] == "fail"
    unknown = inventory(gpu(pcie={"gen_current": None}))
    assert by_id(unknown)["STACK-NODE-007"]["verdict"] == "not-applicable"


def test_node_result_exit_codes() -> None:
    healthy = node.judged(inventory(), Options())
    assert healthy["kind"] == "inventory" and healthy["exit_code"] == 0 and healthy["ok"]
    broken = copy.deepcopy(inventory())
    broken["gpus"][0]["ecc"]["volatile_uncorrected"] = 1
    judged = node.judged(broken, Options())
    assert judged["exit_code"] == 1 and judged["ok"] is False


def test_the_node_suite_names_each_requirements_rule():
    """STACK-NODE-* one hop from their IDs: the suite's checklist names the rule of
    gpu_kernels/verdicts.py that judges each, and every STACK-NODE requirement of the catalog
    has exactly one rule."""
    from conformance import catalog
    from conformance.suites.stack import test_node_gpu as suite

    rules = {**verdicts.NODE_RULES, **verdicts.GPU_RULES}
    assert set(rules) == {r.id for r in catalog.REQUIREMENTS if r.id.startswith("STACK-NODE-")}
    assert tuple(rules) == suite.NODE_CHECKS
    checklist = suite.__doc__.split("Checklist", 1)[1]
    for req_id, rule in rules.items():
        line = next(x for x in checklist.splitlines() if x.startswith(f"- {req_id} "))
        assert line.endswith(f"``{rule.__name__}``"), line
    assert [v["id"] for v in verdicts.evaluate({"gpus": []})] == list(rules)
