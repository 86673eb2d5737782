"""ci/build-image.sh (`make image`) without building anything: its usage errors, its one-line
error where buildah is missing, and the Makefile target. The build itself (buildah, debootstrap,
minutes) is `make image`, never part of `make test`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "build-image.sh"
BASH = shutil.which("bash") or "/bin/bash"


def run(*args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path} if path else None
    return subprocess.run([BASH, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=30, check=False, env=env)


@pytest.mark.parametrize("args", [("--bogus",), ("--out",), ("--out", "")])
def test_usage_errors_exit_2_with_the_usage(args):
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    assert "usage: ci/build-image.sh" in proc.stderr


def test_help_prints_what_it_does():
    proc = run("--help")
    assert proc.returncode == 0
    assert "Usage: ci/build-image.sh" in proc.stdout and "docker-archive" in proc.stdout


def test_missing_buildah_is_one_line_saying_what_to_do(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sed", "head", "dirname"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    proc = run(path=str(bin_dir))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "ci/build-image.sh: buildah is missing: apt-get install -y buildah (as root), "
        "then make image"]


def test_make_image_calls_the_script_and_make_test_does_not():
    makefile = (ROOT / "Makefile").read_text()
    assert "\nimage:" in makefile and "bash ci/build-image.sh" in makefile
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "image" not in test_recipe and "build-image" not in test_recipe
