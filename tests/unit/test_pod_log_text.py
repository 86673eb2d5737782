"""Pod logs come back as the text the container printed, on every client ``pyproject.toml``
accepts (kubernetes>=31), and a result the suite cannot read is never a finding.

The Python client before v37 runs a ``str`` response through ``json.loads`` then ``str()``
(kubernetes-client/python #811, #1354): a log that is one JSON line, as every kernel pod
prints, came back as ``{'ok': True, ...}`` and every kernel check failed on a healthy H100.
The tests below play that client on the installed one (its ``ApiClient.deserialize``
replaced by v31's, whatever the installed version) against a loopback socket serving a log.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from conformance.checks import smi
from conformance.cluster import evidence
from conformance.cluster.workloads import WorkloadResult
from tests.unit.loopback_api import scripted_cluster

KERNEL_LOG = '{"kind": "membw", "ok": true, "gbps": 3061.25, "verdict": null}\n'


def _v31_deserialize(self, response, response_type, *_rest):
    """kubernetes 31's ``ApiClient.deserialize`` for a ``str`` response: the body through
    ``json.loads`` (when it parses), then ``str()``: a JSON object becomes its Python repr."""
    text = getattr(response, "data", response)  # v31 passes the RESTResponse, v37 the text
    try:
        data = json.loads(text)
    except ValueError:
        data = text
    assert response_type == "str"
    return str(data)


@pytest.fixture
def log_cluster(tmp_path):
    """A client whose API server answers every request with the kernel pod's log."""
    with scripted_cluster(tmp_path, [200], KERNEL_LOG.encode(), "text/plain") as (cluster, _):
        yield cluster


@pytest.fixture
def old_client(monkeypatch):
    monkeypatch.setattr(client.ApiClient, "deserialize", _v31_deserialize)


def test_the_old_clients_deserialising_is_played(log_cluster, old_client):
    """The fake bites: read as the client reads it, the line is no longer JSON."""
    text = log_cluster.logs.read_namespaced_pod_log("pod", "ns")
    assert text.startswith("{'kind': 'membw', 'ok': True")
    with pytest.raises(ValueError):
        json.loads(text)


def test_a_one_json_line_log_reads_back_exactly(log_cluster, old_client):
    assert evidence.pod_logs(log_cluster, "ns", "pod") == KERNEL_LOG
    result = WorkloadResult("pod", "gpu-0", "Succeeded",
                            evidence.pod_log_text(log_cluster, "ns", "pod"))
    assert result.json_line() == json.loads(KERNEL_LOG)
    assert result.unread(result.json_line() is not None) is None


# ---- a result that cannot be read is not run, never a finding --------------------------------
def test_a_line_that_does_not_parse_is_unread_not_a_finding():
    r = WorkloadResult("inv-1", "gpu-0", "Succeeded", "{'kind': 'membw', 'ok': True}\n")
    assert r.json_line() is None
    why = r.unread(r.json_line() is not None)
    assert why and why.startswith("could not read the result of pod inv-1 on node gpu-0: ")
    assert "without a result line" in why


def test_a_log_the_kubelet_did_not_serve_is_unread():
    r = WorkloadResult("inv-1", "kwok-0", "Succeeded", "",
                       log_error="logs unavailable: 500 Internal Server Error")
    assert r.unread(False) == ("could not read the result of pod inv-1 on node kwok-0: "
                               "logs unavailable: 500 Internal Server Error")


def test_a_pod_with_a_diagnosis_stays_a_finding():
    r = WorkloadResult("inv-1", "gpu-0", "Failed", "", "container exited with 1 (Error)",
                       log_error="logs unavailable: 500 Internal Server Error")
    assert r.unread(False) is None


def test_a_pod_that_printed_its_result_is_read():
    assert WorkloadResult("p", "n", "Succeeded", "x\n").unread(True) is None


def test_smi_output_is_read_only_with_its_closing_line():
    assert smi.printed(smi.SMI_SCRIPT, "GPU 0: H100 (UUID: GPU-1)\nNVIDIA_VISIBLE_DEVICES=0\n")
    assert not smi.printed(smi.SMI_SCRIPT, "")
    assert smi.printed(smi.DEVICE_NODES_SCRIPT, "null\nnvidia0\n")
    assert not smi.printed(smi.DEVICE_NODES_SCRIPT, "  \n")


def test_every_log_read_goes_through_the_raw_text_reader():
    """A new ``read_namespaced_pod_log`` call elsewhere would bring the repr back on old
    clients: the project's code reads logs through ``conformance.cluster.logs`` only."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    reader = root / "conformance" / "cluster" / "logs.py"
    callers = [str(p.relative_to(root)) for folder in ("conformance", "tests/node", "ci", "deploy")
               for p in (root / folder).rglob("*.py")
               if p != reader and ".read_namespaced_pod_log(" in p.read_text()]
    assert callers == []
