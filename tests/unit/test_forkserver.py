"""The forked child pytest is the child pytest: same exit code and output as a subprocess,
the caller's working directory and environment, a timeout that kills it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import forkserver

TESTS = '''
import os
def test_env():
    assert os.environ["FORKSERVER_PROBE"] == "yes"
def test_fails():
    assert 1 == 2
'''


@pytest.fixture
def suite(tmp_path, monkeypatch):
    (tmp_path / "test_probe.py").write_text(TESTS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FORKSERVER_PROBE", "yes")
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
            "-p", "no:xdist", "test_probe.py"]


def test_forked_run_matches_a_subprocess(suite):
    forked = forkserver.run(suite, timeout=60)
    direct = subprocess.run(suite, capture_output=True, text=True, timeout=60)
    assert forked.returncode == direct.returncode == 1
    assert "1 failed, 1 passed" in forked.stdout and "1 failed, 1 passed" in direct.stdout
    assert "assert 1 == 2" in forked.stdout  # the test module's asserts are rewritten


def test_a_run_past_its_timeout_is_killed(suite, tmp_path):
    (tmp_path / "test_probe.py").write_text("import time\ndef test_sleeps():\n"
                                            "    time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run(suite, timeout=3)
    assert forkserver.run([*suite[:-1], "--co", "test_probe.py"], timeout=60).returncode == 0


def test_another_pythonpath_runs_as_a_subprocess(suite, monkeypatch):
    forkserver.run(suite, timeout=60)
    monkeypatch.setenv("PYTHONPATH", "/nonexistent")
    assert not forkserver._server.serves(suite)
    assert forkserver.run(suite, timeout=60).returncode == 1
