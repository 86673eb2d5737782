"""The CLI end to end on a fake device: tests/unit/fakes holds numpy stand-ins for CuPy and
nvidia-ml-py and a fake nvidia-cuda-mps-control. Kernels run on the CPU, so the figures
mean nothing; what is tested is the plumbing: processes, start barrier, windows, JSON
shapes, exit codes, findings and the MPS daemon's start and stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent / "fakes"


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(FAKES), "FAKE_CUPY_DIR": str(tmp_path),
                "FAKE_CUPY_TOTAL": str(16 * 2**30),  # the fake NVML's total follows
                "PATH": f"{FAKES / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    return env


def cli(env: dict[str, str], *args: str, code: int | None = 0) -> dict[str, Any]:
    """Run the CLI; ``code`` None accepts pass or fail (fake timings judge nothing)."""
    done = subprocess.run([sys.executable, "-m", "gpu_kernels", *args, "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    assert done.returncode == code if code is not None else done.returncode in (0, 1), \
        done.stderr
    return json.loads(lines[0])


@pytest.mark.parametrize(("kind", "args"), [
    ("membw", ["--mib", "4"]),
    ("fp32", ["--launch-ms", "2"]),
    ("gemm", ["--size", "256"]),
])
def test_kernel_kinds(fake_env: dict[str, str], kind: str, args: list[str]) -> None:
    res = cli(fake_env, kind, "--seconds", "0.2", "--trials", "5", "--warmup-seconds", "0.05",
              "--no-bar", *args)
    assert res["kind"] == kind and res["correctness"]["ok"] is True
    assert len(res["trials"]) == 5 and res["median"] > 0 and res["bar"] is None
    assert res["device"]["name"] == "NVIDIA H200" and res["device"]["driver_version"]
    assert len(res["samples"]) == 5


def test_burst_regime_rests_before_each_trial(fake_env: dict[str, str]) -> None:
    import time

    t0 = time.monotonic()
    res = cli(fake_env, "gemm", "--size", "256", "--seconds", "0.1", "--warmup-seconds", "0.05",
              "--no-bar", "--rest-seconds", "0.3")
    assert time.monotonic() - t0 >= 5 * 0.3, "the GPU was not left idle before each trial"
    assert res["config"]["regime"] == "burst" and res["config"]["rest_seconds"] == 0.3
    sustained = cli(fake_env, "gemm", "--size", "256", "--seconds", "0.1",
                    "--warmup-seconds", "0.05", "--no-bar")
    assert sustained["config"]["regime"] == "sustained"


def test_negative_rest_is_a_usage_error(fake_env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "gpu_kernels", "gemm", "--rest-seconds", "-1"],
                          cwd=ROOT, env=fake_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--rest-seconds must be >= 0" in done.stderr


def test_h200_bar_is_applied_and_missed(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "membw", "--mib", "4", "--seconds", "0.2", "--warmup-seconds", "0.05",
              code=1)
    assert res["bar"]["value"] == 4.0 and res["met"] is False


def test_memhog_and_fault(fake_env: dict[str, str]) -> None:
    held = cli(fake_env, "memhog", "--fraction", "0.5", "--seconds", "0.1")
    assert held["succeeded"] and held["touched_and_verified"] and held["held_bytes"] > 0
    fault = cli(fake_env, "fault")
    assert fault["raised"] and fault["illegal_address"] and fault["exit_code"] == 0


def test_inventory_healthy_and_with_an_ecc_error(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "inventory")
    assert [v["verdict"] for v in res["verdicts"]] == ["pass"] * 7
    assert res["inventory"]["gpus"][0]["pcie"]["gen_max"] == 5
    bad = cli({**fake_env, "FAKE_NVML_ECC_UNCORRECTED": "2"}, "inventory", code=1)
    assert {v["id"]: v["verdict"] for v in bad["verdicts"]}["STACK-NODE-003"] == "fail"


def test_interference_points(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "interference", "--kernel", "membw", "--copies", "2", "--seconds",
              "0.6", "--membw-mib", "4", code=None)
    assert res["experiment"] == "interference" and res["mode"] == "time-slicing"
    assert [p["copies"] for p in res["points"]] == [1, 2]
    shared = res["points"][1]
    assert len(shared["per_copy"]) == 2 and len(shared["slowdown"]) == 2
    assert all(c["correct"] and len(c["trials"]) == 5 for c in shared["per_copy"])
    assert shared["jain"] is not None and shared["verdict"] in ("pass", "fail")
    assert res["points"][0]["verdict"] == "baseline"


def test_mixed_pair(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "interference", "--mix", "membw,fp32", "--seconds", "0.6",
              "--membw-mib", "4", "--fp32-launch-ms", "2", code=None)
    assert [p["kernel"] for p in res["points"]] == ["membw", "fp32", "membw+fp32"]
    mixed = res["points"][-1]
    assert mixed["unit"] == "mixed" and mixed["copies"] == 2


def test_memory_isolation_finding(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "isolation", "--mode", "memory")
    assert res["isolated"] is False and "No memory isolation" in res["finding"]
    assert res["details"]["other_allocation_after_holder_exit"] == "succeeded"


def test_memory_isolation_under_mps_replica_limits(fake_env: dict[str, str]) -> None:
    # The H100's 4-replica run: each client sees its pinned limit (less its context) as free;
    # a request of a quarter of the GPU is above that and must not read as "no isolation".
    res = cli(fake_env, "isolation", "--mode", "memory", "--mps-replicas", "4")
    details = res["details"]
    assert res["sharing"] == "mps" and res["isolated"] is True
    assert res["mps"]["replica_defaults"]["pinned_mem_limit"] == "4096M"
    assert details["other_saw_free_alone_gib"] < 4.0 and details["other_allocation"] == "succeeded"
    assert details["other_beyond_share_allocation"].startswith("failed")
    assert "per-client memory limit" in res["finding"] and "limit is enforced" in res["finding"]


def test_fault_isolation_under_mps_stops_the_daemon(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "isolation", "--mode", "fault", "--mps", "--seconds", "1.5",
              "--membw-mib", "4")
    assert res["sharing"] == "mps" and res["details"]["other_survived"] is True
    assert res["mps"]["started"] and res["mps"]["stopped"] is True
    assert res["mps"]["server_list"] == ["4242"]
    assert "[fake] quit" in res["mps"]["control_log_tail"]


def test_timeline_buckets(fake_env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "gpu_kernels.timeline", "membw", "--seconds",
                           "1.2", "--idle", "0", "--options", '{"mib": 4}'], cwd=ROOT,
                          env=fake_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout)
    assert res["kind"] == "timeline" and len(res["buckets"]) == 12
    assert res["first_100ms"] > 0 and res["last_1s"] > 0
    assert {"t_s", "rate", "sm_clock_mhz", "power_w", "reasons"} <= set(res["buckets"][0])
