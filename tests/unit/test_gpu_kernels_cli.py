"""The gpu_kernels CLI without a GPU: usage errors, exit codes, the package without CuPy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "gpu_kernels", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=full)


@pytest.mark.parametrize("args", [
    ("bogus",),
    (),
    ("membw", "--trials", "3"),
    ("membw", "--seconds", "-1"),
    ("membw", "--variant", "nope"),
    ("gemm", "--dtype", "int8"),
    ("interference", "--copies", "1,x"),
    ("interference", "--copies", "0,2"),
    ("interference", "--seconds", "1"),
    ("interference", "--mix", "membw"),
    ("interference", "--mix", "membw,warp"),
    ("isolation",),
    ("isolation", "--mode", "other"),
    ("memhog", "--fraction", "1.5"),
    ("membw", "--no-such-flag"),
])
def test_usage_errors_exit_2_with_one_line(args: tuple[str, ...]) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gpu_kernels: error: ")
    assert "Traceback" not in done.stderr


def test_unknown_kind_names_the_choices() -> None:
    done = run("bogus")
    assert "invalid choice: 'bogus'" in done.stderr and "membw" in done.stderr


def test_help_exits_0() -> None:
    done = run("--help")
    assert done.returncode == 0 and "interference" in done.stdout


@pytest.mark.parametrize("kind", ["membw", "fp32", "gemm", "memhog", "fault", "inventory"])
def test_without_cupy_or_nvml_one_json_line_and_exit_3(kind: str) -> None:
    done = run(kind, "--json")
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    res = json.loads(lines[0])
    assert done.returncode == 3 == res["exit_code"]
    assert res["kind"] == kind and res["ok"] is False and res["error"]


def test_package_imports_without_cupy() -> None:
    code = ("import sys; sys.modules['cupy'] = None; sys.modules['pynvml'] = None\n"
            "import gpu_kernels, gpu_kernels.cli, gpu_kernels.kernels, gpu_kernels.stats\n"
            "import gpu_kernels.interference, gpu_kernels.isolation, gpu_kernels.runner\n"
            "import gpu_kernels.device_evidence, gpu_kernels.tune, gpu_kernels.worker\n"
            "import gpu_kernels.node, gpu_kernels.mps, gpu_kernels.podcopy\n"
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_every_planned_evidence_command_parses() -> None:
    """The device evidence script only runs commands the CLI accepts."""
    from gpu_kernels import cli, device_evidence

    best = dict(device_evidence.DEFAULT_CHOICE)
    plan = device_evidence.kernel_steps(best, 4.0)
    plan += device_evidence.sharing_steps(best, False, 3.0)
    plan += device_evidence.sharing_steps(best, True, 2.0)
    parser = cli.build_parser()
    for step in plan:
        if step.argv[2] == "gpu_kernels.timeline":
            continue
        assert step.argv[1:3] == ["-m", "gpu_kernels"]
        args = parser.parse_args(step.argv[3:])
        cli._validate(args)
        assert args.json
    assert {s.family for s in plan} == {"kernels", "interference", "isolation"}
    assert sum(s.name.endswith("-mps") for s in plan) == 6
