"""MPS on a real node's GPUs needs the user's leave: the plugin's MPS control daemon changes
every GPU's compute mode (``nvidia-smi -c EXCLUSIVE_PROCESS``), a change to the host that a
guest must not make unasked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conformance.common.errors import UsageError
from conformance.node import chart

TIME_SLICING = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "    - name: nvidia.com/gpu\n      replicas: 4\n")
MPS = ("version: v1\nsharing:\n  mps:\n    resources:\n"
       "    - name: nvidia.com/gpu\n      replicas: 2\n")


def _values(**configs: str) -> dict:
    return {"config": {"default": "default", "map": configs}}


def test_mps_in_any_config_of_the_map_counts_not_only_the_default():
    # the node label nvidia.com/device-plugin.config selects any entry of the map
    assert chart.configures_mps(_values(default=TIME_SLICING, mps=MPS))
    assert not chart.configures_mps(_values(default=TIME_SLICING))
    assert not chart.configures_mps({})


def test_mps_on_real_gpus_is_refused_unless_allowed():
    vals = _values(default=MPS)
    with pytest.raises(UsageError, match=r"compute mode to EXCLUSIVE_PROCESS.*"
                                         r"--allow-compute-mode-change"):
        chart.refuse_unasked_compute_mode_change(vals, real_gpus=True, allowed=False)
    chart.refuse_unasked_compute_mode_change(vals, real_gpus=True, allowed=True)
    chart.refuse_unasked_compute_mode_change(vals, real_gpus=False, allowed=False)  # the mock
    chart.refuse_unasked_compute_mode_change(_values(default=TIME_SLICING), real_gpus=True,
                                             allowed=False)


def _node_up(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    values = tmp_path / "mps.yaml"
    values.write_text("config:\n  default: default\n  map:\n    default: |\n"
                      + "".join(f"      {line}\n" for line in MPS.splitlines()))
    return subprocess.run([sys.executable, "-m", "conformance.cli", "node", "up", "--name",
                           "mps-consent", "--driver-root", str(tmp_path / "no-driver"),
                           "--chart-values", str(values), *extra],
                          capture_output=True, text=True, timeout=120)


def test_node_up_refuses_mps_on_a_driver_root_before_starting_anything(tmp_path):
    proc = _node_up(tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "--allow-compute-mode-change" in proc.stderr
    assert "Traceback" not in proc.stderr
    # with the flag the run goes on to its next check (the driver root, which is not there)
    proc = _node_up(tmp_path, "--allow-compute-mode-change")
    assert proc.returncode == 2, proc.stderr
    assert "--allow-compute-mode-change" not in proc.stderr
