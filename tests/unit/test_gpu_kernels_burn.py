"""The ``burn`` kind: judging on fabricated facts, the device checksum's maths, and the CLI end
to end on the fake CuPy/NVML (tests/unit/fakes), where the figures mean nothing but every
way a burn-in must fail is exercised: a miscompare (the injected bit flip), low power, an
XID, a new uncorrectable ECC error, a slowdown reason; each failure names the GPU's UUID."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes.harness import ROOT, bare_env, run_cli, usage_error
from fakes.harness import fake_env as make_env

from gpu_kernels import burn, verify

SMALL = ["--gemm-dtype", "fp16", "--gemm-size", "256", "--membw-mib", "4"]
IDENTITY = {"index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA H200", "pci_bus_id": "0000:18:00.0",
            "power_limit_w": 700.0}


# --- pure judging ---------------------------------------------------------------------------

def samples(power: float = 690.0, mask: int = 0x4, n: int = 20) -> list[dict[str, Any]]:
    return [{"t": 100.0 + 0.5 * i, "power_w": power, "sm_clock_mhz": 1400 + i,
             "mem_clock_mhz": 3201, "temperature_c": 60 + i % 3, "utilization_pct": 100,
             "reasons_mask": mask} for i in range(n)]


def facts(**over: Any) -> dict[str, Any]:
    clean = {"iterations": 100, "seconds": 10.0, "t_go": 100.0,
             "gpu_ms": {"gemm": 1300.0, "membw": 300.0},
             "work": {"gemm_flop": 2 * 16384.0**3, "membw_bytes": 3 * 2**31},
             "errors": {"iterations": 0, "gemm_iterations": 0, "gemm_words": 0,
                        "membw_iterations": 0, "first": []},
             "reference": {"gemm": {"ok": True}, "membw": {"ok": True}},
             "samples": samples(), "xid": {"supported": True, "count": 0, "events": []},
             "health": {"before": health(0), "after": health(0)}, "injected": None,
             "sample_period": 0.5}
    return {**clean, **over}


def health(uncorrected: int, corrected: int = 0) -> dict[str, Any]:
    return {"nvml": True, "ecc": {"volatile_uncorrected": uncorrected,
                                  "volatile_corrected": corrected},
            "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False,
                              "failure": False}}


def test_clean_gpu_at_its_power_limit_passes() -> None:
    gpu = burn.judge_gpu(IDENTITY, facts(), 0.95)
    assert gpu["verdict"] == "pass" and gpu["reasons"] == [] and gpu["uuid"] == "GPU-aaaa"
    assert gpu["power"]["median_w"] == 690.0 and gpu["power"]["reached"] is True
    assert gpu["power"]["fraction_of_limit"] == pytest.approx(690 / 700)
    assert gpu["throttle"]["reasons"] == {"SwPowerCap": 1.0} and gpu["throttle"]["slowdown"] == []
    assert gpu["throughput"]["gemm_tflops"] == pytest.approx(100 * 2 * 16384.0**3 / 1.3 / 1e12)
    assert gpu["samples"]["t_s"][:2] == [0.0, 0.5] and len(gpu["samples"]["power_w"]) == 20
    assert gpu["sm_clock_mhz"] == {"min": 1400, "median": 1409.5, "max": 1419}


@pytest.mark.parametrize(("over", "reason"), [
    ({"samples": samples(power=470.0)}, "67.1 % of the 700 W limit"),
    ({"samples": samples(mask=0x4 | 0x40)}, "HwThermalSlowdown"),
    ({"xid": {"supported": True, "count": 1, "events": [{"xid": 79, "t_s": 3.2}]}}, "XID 79"),
    ({"health": {"before": health(0), "after": health(2)}}, "2 new uncorrectable ECC"),
    ({"reference": {"gemm": {"ok": False, "method": "blocks"}, "membw": {"ok": True}}},
     "gemm reference check failed"),
    ({"errors": {"iterations": 2, "gemm_iterations": 1, "gemm_words": 7,
                 "membw_iterations": 1, "first": []}},
     "2 of 100 iterations miscompared: GEMM 1 (7 words), memory checksum 1"),
    ({"error": "worker 9 exited (code 1)"}, "the run failed"),
])
def test_each_failure_fails_the_gpu(over: dict[str, Any], reason: str) -> None:
    gpu = burn.judge_gpu(IDENTITY, facts(**over), 0.95)
    assert gpu["verdict"] == "fail"
    assert any(reason in r for r in gpu["reasons"]), gpu["reasons"]
    run = burn.verdict([gpu, burn.judge_gpu({**IDENTITY, "index": 1, "uuid": "GPU-bbbb"},
                                            facts(), 0.95)])
    assert run["verdict"] == "fail" and run["failed_uuids"] == ["GPU-aaaa"]
    assert all(r.startswith("GPU 0 (GPU-aaaa): ") for r in run["reasons"])


def test_corrected_ecc_errors_are_reported_not_failed() -> None:
    gpu = burn.judge_gpu(IDENTITY, facts(health={"before": health(0, 3),
                                                 "after": health(0, 5)}), 0.95)
    assert gpu["verdict"] == "pass" and gpu["health"]["ecc_delta"]["volatile_corrected"] == 2


def test_power_unknown_without_nvml_and_goal_off() -> None:
    no_nvml = burn.judge_gpu({**IDENTITY, "power_limit_w": None}, facts(samples=[]), 0.95)
    assert no_nvml["power"]["reached"] is None and no_nvml["verdict"] == "pass"
    off = burn.judge_gpu(IDENTITY, facts(samples=samples(power=100.0)), 0.0)
    assert off["power"]["reached"] is None and off["verdict"] == "pass"


def test_injection_must_be_caught_by_both_checks() -> None:
    injected = {"iteration": 50, "bit": 3, "gemm_word": 10, "membw_word": 20, "t_s": 5.0}
    hit = {"iteration": 50, "t_s": 5.0, "gemm_words": 1, "membw_checksum_ok": False}
    errors = {"iterations": 1, "gemm_iterations": 1, "gemm_words": 1, "membw_iterations": 1,
              "first": [hit]}
    caught = burn.judge_gpu(IDENTITY, facts(injected=injected, errors=errors), 0.95)
    assert caught["injected"]["caught"] is True and caught["verdict"] == "fail"
    assert burn.verdict([caught])["injected"]["uuid"] == "GPU-aaaa"
    half = {**errors, "first": [{**hit, "membw_checksum_ok": True}]}
    missed = burn.judge_gpu(IDENTITY, facts(injected=injected, errors=half), 0.95)
    assert missed["injected"]["caught_by_gemm_compare"] is True
    assert missed["injected"]["caught"] is False
    assert "the injected corruption was not caught" in missed["reasons"]


# --- the checksum the device computes -------------------------------------------------------

def test_checksum_changes_with_any_bit_flip_and_with_a_swap() -> None:
    rng = np.random.default_rng(1)
    words = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    ref = verify.checksum_reference(words)
    for word, bit in [(0, 0), (17, 31), (4095, 13), (2048, 7)]:
        flipped = words.copy()
        flipped[word] ^= np.uint32(1 << bit)
        assert verify.checksum_reference(flipped) != ref
    swapped = words.copy()
    swapped[[3, 900]] = swapped[[900, 3]]
    assert verify.checksum_reference(swapped) != ref
    assert verify.checksum_reference(words.copy()) == ref


def test_words_are_a_view_of_the_output() -> None:
    out = np.zeros((8, 8), dtype=np.float16)
    w = verify.words(out)
    w[0] = 0xFFFFFFFF
    assert w.dtype == np.uint32 and w.size == 32 and np.isnan(out[0, 0])
    with pytest.raises(ValueError):
        verify.words(np.zeros(6, dtype=np.float16))


# --- the CLI on the fake device -------------------------------------------------------------

@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    return make_env(tmp_path, FAKE_NVML_POWER_W="690", FAKE_NVML_REASONS="0x4")


def cli(env: dict[str, str], *args: str, code: int = 0) -> dict[str, Any]:
    return run_cli(env, "burn", *args, code=code, timeout=120)


def test_burn_passes_at_the_power_limit(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "--seconds", "0.6", *SMALL)
    assert res["kind"] == "burn" and res["requirement"] == "STACK-BURN-001"
    assert res["verdict"] == "pass" and res["ok"] is True and res["failed_uuids"] == []
    (gpu,) = res["gpus"]
    assert gpu["uuid"].startswith("GPU-") and gpu["iterations"] >= 3
    assert gpu["errors"]["iterations"] == 0 and gpu["reference"]["gemm"]["ok"]
    assert gpu["power"]["reached"] is True and gpu["xid"]["supported"] is True
    assert gpu["health"]["nvml"] is True and gpu["health"]["ecc_delta"]["volatile_uncorrected"] == 0
    assert res["injected"] is None and res["config"]["membw"] == {"mib": 4, "op": "triad",
                                                                  "variant": "flat-u1"}


def test_injected_bit_flip_is_caught_on_the_first_gpu_only(fake_env: dict[str, str]) -> None:
    env = {**fake_env, "FAKE_CUPY_DEVICES": "2", "FAKE_NVML_GPUS": "2"}
    res = cli(env, "--seconds", "1", "--inject-corruption", *SMALL, code=1)
    first, second = res["gpus"]
    assert first["uuid"] != second["uuid"] and res["failed_uuids"] == [first["uuid"]]
    assert second["verdict"] == "pass" and second["injected"] is None
    assert res["injected"]["caught"] is True and res["injected"]["uuid"] == first["uuid"]
    assert first["errors"]["iterations"] == 1 and first["errors"]["gemm_words"] == 1
    (bad,) = first["errors"]["first"]
    assert bad["iteration"] == res["injected"]["iteration"] and not bad["membw_checksum_ok"]
    assert any(first["uuid"] in r and "miscompared" in r for r in res["reasons"])


@pytest.mark.parametrize(("env", "reason"), [
    ({"FAKE_NVML_POWER_W": "300"}, "under the 95 % goal"),
    ({"FAKE_NVML_XID": "79"}, "XID 79"),
    ({"FAKE_NVML_ECC_UNCORRECTED_STEP": "1"}, "uncorrectable ECC"),
    ({"FAKE_NVML_REASONS": "0x24"}, "SwThermalSlowdown"),
])
def test_hardware_symptoms_fail_the_run(fake_env: dict[str, str], env: dict[str, str],
                                        reason: str) -> None:
    res = cli({**fake_env, **env}, "--seconds", "0.6", *SMALL, code=1)
    assert res["verdict"] == "fail" and any(reason in r for r in res["reasons"]), res["reasons"]


def test_unsupported_xid_events_are_reported(fake_env: dict[str, str]) -> None:
    res = cli({**fake_env, "FAKE_NVML_NO_EVENTS": "1"}, "--seconds", "0.4", *SMALL)
    xid = res["gpus"][0]["xid"]
    assert xid["supported"] is False and "Not Supported" in xid["error"]


def test_missing_device_and_missing_cupy_exit_3(fake_env: dict[str, str]) -> None:
    assert cli(fake_env, "--devices", "3", *SMALL, code=3)["error"]
    assert cli(bare_env(), code=3)["kind"] == "burn"


@pytest.mark.parametrize("args", [("--devices", "x"), ("--min-power-fraction", "2"),
                                  ("--seconds", "0"), ("--membw-launches", "0")])
def test_usage_errors(args: tuple[str, ...]) -> None:
    usage_error("burn", *args)


def test_new_modules_import_without_cupy_or_nvml() -> None:
    code = ("import sys; sys.modules['cupy'] = None; sys.modules['pynvml'] = None\n"
            "import gpu_kernels.burn, gpu_kernels.verify, gpu_kernels.latency\n"
            "import gpu_kernels.kernels.fp64, gpu_kernels.kernels.infer\n"
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=bare_env())
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
