"""The sim's GPUCluster stack against the GPU Operator's sources (v26.7.0): the state labels it
writes, its operands' names, selectors and pod labels, and its built-in CRD's identity."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
import yaml

from conformance.nvidia import dra
from conformance.sim import dra_plan, gpucluster, objects

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SRC = SHARED / "upstream" / "src" / "gpu-operator-v26.7.0-src.tar.xz"
CHART_CRD = (SHARED / "upstream" / "gpu-operator-v26.7.0" / "chart" / "crds"
             / "nvidia.com_gpuclusters.yaml")
OWNER = {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "name": "gpu-cluster",
         "uid": "0"}


def _source(*suffixes: str) -> dict[str, str]:
    if not SRC.exists():
        pytest.skip(f"{SRC} is absent: upstream sources live in ../shared, which only the "
                    "project's CI has")
    with tarfile.open(SRC) as tar:
        return {s: tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith(s)))
                .read().decode() for s in suffixes}


def _manifest(text: str) -> dict:
    """A state manifest with its Go template lines dropped (names and labels are literal)."""
    return yaml.safe_load("\n".join(line for line in text.splitlines()
                                    if "{{" not in line and not line.lstrip().startswith("#")))


def test_state_labels_are_gpucluster_state_labels():
    go = _source("controllers/state_manager.go")["controllers/state_manager.go"]
    consts = dict(re.findall(r'(\w+LabelKey)\s*=\s*"([^"]+)"', go))
    block = re.search(r"var gpuClusterStateLabels = map\[string\]string\{(.*?)\n\}", go, re.S)
    upstream = {consts[k] for k in re.findall(r"(\w+LabelKey):", block.group(1))}
    assert set(gpucluster.STATE_LABELS) - {"nvidia.com/gpu.present"} == upstream


def test_operands_are_named_and_selected_as_the_operator_renders_them():
    files = _source("state-dra-driver/0500_daemonset.yaml",
                    "state-dra-validation/0500_daemonset.yaml")
    plugin = _manifest(files["state-dra-driver/0500_daemonset.yaml"])
    ours = dra_plan.plugin_daemonset(dra_plan.gpucluster_plugin("gpu-operator"))
    assert ours["metadata"]["name"] == plugin["metadata"]["name"]
    assert ours["spec"]["selector"] == plugin["spec"]["selector"]
    for key in ("app", "app.kubernetes.io/name", "app.kubernetes.io/component"):
        assert ours["spec"]["template"]["metadata"]["labels"][key] == (
            plugin["spec"]["template"]["metadata"]["labels"][key])

    validator = _manifest(files["state-dra-validation/0500_daemonset.yaml"])
    op = next(o for o in dra.GPUCLUSTER_OPERANDS if o.key == "dra-validator")
    ours = gpucluster.operand_daemonset(op, "gpu-operator", OWNER, [])
    assert ours["metadata"]["name"] == validator["metadata"]["name"]
    assert ours["spec"]["selector"] == validator["spec"]["selector"]
    assert ours["spec"]["template"]["metadata"]["labels"]["app"] == (
        validator["spec"]["template"]["metadata"]["labels"]["app"])  # nvidia-operator-validator


def test_only_the_fault_makes_the_exporter_crash():
    op = next(o for o in dra.GPUCLUSTER_OPERANDS if o.key == "dcgm-exporter")
    healthy = gpucluster.operand_daemonset(op, "gpu-operator", OWNER, [])
    broken = gpucluster.operand_daemonset(op, "gpu-operator", OWNER, [gpucluster.OPERAND_DOWN])
    assert healthy["spec"]["template"]["metadata"]["annotations"] == {}
    assert broken["spec"]["template"]["metadata"]["annotations"] == {
        objects.CRASHLOOP_ANNOTATION: "true"}


def test_the_chart_defaults_switch_the_controller_and_dcgm_off():
    spec = gpucluster.cluster_object()["spec"]
    enabled = {o.key for o in dra.GPUCLUSTER_OPERANDS if o.enabled(spec)}
    assert enabled == {"dra-kubelet-plugin", "dcgm-exporter", "dra-validator"}


def test_builtin_crd_has_the_upstream_identity():
    if not CHART_CRD.exists():
        pytest.skip(f"{CHART_CRD} is absent: only the project's CI has ../shared")
    upstream = yaml.safe_load(CHART_CRD.read_text())
    ours = yaml.safe_load(gpucluster.BUILTIN_CRD.read_text())
    assert ours["metadata"]["name"] == upstream["metadata"]["name"] == gpucluster.CRD_NAME
    for key in ("group", "names", "scope"):
        assert ours["spec"][key] == upstream["spec"][key], key
    (mine,), (theirs,) = ours["spec"]["versions"], upstream["spec"]["versions"]
    assert mine["name"] == theirs["name"] == dra.GPUCLUSTER_API[1]
    assert mine["subresources"] == theirs["subresources"]
    schema, their_schema = mine["schema"]["openAPIV3Schema"], theirs["schema"]["openAPIV3Schema"]
    assert schema["x-kubernetes-validations"] == their_schema["x-kubernetes-validations"]
    state = schema["properties"]["status"]["properties"]["state"]
    assert state["enum"] == their_schema["properties"]["status"]["properties"]["state"]["enum"]
