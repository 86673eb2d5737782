"""NVIDIA DRA driver facts: versions, releases, DeviceClasses, attribute sets, GpuConfig sharing.

Upstream facts are compared with ../shared/upstream/dra-driver-nvidia-gpu-v0.4.1 where that tree
exists (the project's CI); elsewhere those tests skip and say so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from conformance.nvidia import dra

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
DRIVER_SRC = SHARED / "upstream" / "dra-driver-nvidia-gpu-v0.4.1"
OPERATOR_SRC = SHARED / "upstream" / "gpu-operator-v26.7.0"


def upstream(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: upstream data lives in ../shared, which only the "
                    "project's CI has")
    return path


# --- versions ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "published"), [
    ("580.95.05", "580.95.5"), ("580.105.08", "580.105.8"), ("9.0", "9.0.0"),
    ("13.0", "13.0.0"), ("570", "570.0.0"), ("12.8.1", "12.8.1")])
def test_semver_normalises_as_the_driver_does(text, published):
    assert dra.semver(text) == published
    assert dra.is_semver(published)


@pytest.mark.parametrize("text", ["580.105.08", "580.95.05.1", "v1.2.3", "1.2", "01.2.3", ""])
def test_strict_semver_refuses_what_the_api_server_refuses(text):
    assert not dra.is_semver(text)


def test_semver_refuses_non_versions():
    with pytest.raises(ValueError, match="dotted version"):
        dra.semver("580.95.x")
    assert dra.same_version("580.105.8", "580.105.08")
    assert dra.same_version("13.0.0", "13.0")
    assert not dra.same_version("580.105.8", "570.86.15")
    assert not dra.same_version("garbage", "1.0")


@pytest.mark.parametrize(("image", "release"), [
    ("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1", (0, 4, 1)),
    ("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.2", (0, 1, 2)),
    ("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1", (0, 2, 1)),
    ("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0-rc.1", (0, 3, 0)),
    ("nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0", (0, 5, 0)),
    ("localhost:5000/dra-driver", None), ("dra-driver:latest", None), (None, None)])
def test_release_from_the_image_tag(image, release):
    assert dra.release_of(image) == release


def test_attribute_sets_follow_the_release_history():
    old, mid, new = (dra.attribute_set(r) for r in ((0, 1, 0), (0, 2, 3), (0, 4, 1)))
    assert {"index", "minor", "pcieBusID"} <= old.gpu
    assert "index" not in mid.gpu and "pcieBusID" in mid.gpu
    assert dra.PCI_BUS_ID in new.gpu and "pcieBusID" not in new.allowed("gpu")
    assert new.exact and not old.exact
    assert "uuid" not in new.mig and "uuid" in new.allowed("mig")  # dynamic MIG has none
    assert dra.attribute_set(None) is None


def test_newest_attribute_set_is_the_bats_reference_list():
    """tests/bats/test_gpu_basic.bats and test_gpu_mig.bats of v0.4.1 list the attributes."""
    new = dra.attribute_set((0, 4, 1))
    for name, kind in (("test_gpu_basic.bats", "gpu"), ("test_gpu_mig.bats", "mig")):
        text = upstream(DRIVER_SRC / "tests" / "bats" / name).read_text()
        block = text[text.index("local reference=("):]
        block = block[:block.index(")")]
        reference = set(re.findall(r'"([^"]+)"', block))
        assert new.required(kind) <= reference <= new.allowed(kind), (name, reference)


# --- DeviceClasses ----------------------------------------------------------------------------
def _chart_classes() -> dict[str, dict]:
    templates = upstream(DRIVER_SRC / "deployments" / "helm" / "dra-driver-nvidia-gpu" /
                         "templates")
    out = {}
    for path in sorted(templates.glob("deviceclass-*.yaml")):
        # drop the chart's template lines ({{- if }}, {{ include }} of the apiVersion)
        text = "\n".join(line for line in path.read_text().splitlines()
                         if "{{" not in line and line.strip() != "---")
        doc = yaml.safe_load(text)
        out[doc["metadata"]["name"]] = doc
    return out


def test_device_classes_are_the_charts():
    chart = _chart_classes()
    assert set(chart) == set(dra.CLASS_BY_NAME)
    for name, doc in chart.items():
        expressions = [s["cel"]["expression"] for s in doc["spec"]["selectors"]]
        assert expressions == [dra.CLASS_BY_NAME[name].expression], name
    text = (DRIVER_SRC / "deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml"
            ).read_text()
    assert "extendedResourceName: nvidia.com/gpu" in text
    assert dra.GPU_CLASS.extended_resource == "nvidia.com/gpu"


def test_manifest_renders_v1_with_the_extended_resource():
    body = dra.GPU_CLASS.manifest()
    assert body["apiVersion"] == "resource.k8s.io/v1"
    assert body["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in dra.MIG_CLASS.manifest()["spec"]
    assert "extendedResourceName" not in dra.GPU_CLASS.manifest(extended_resource=False)["spec"]


def test_expressions_compare_without_whitespace_and_quote_style():
    assert dra.normalise_expression('device.driver == "gpu.nvidia.com"') == (
        dra.normalise_expression("device.driver=='gpu.nvidia.com'"))


def test_gpucluster_operands_are_the_operators_manifests():
    """The names, app labels and deploy labels of manifests/state-dra-* (operator source)."""
    import tarfile

    archive = upstream(SHARED / "upstream" / "src" / "gpu-operator-v26.7.0-src.tar.xz")
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers() if "/manifests/state-dra-" in m.name
                   and m.name.endswith(".yaml")}
        text = "\n".join(tar.extractfile(m).read().decode() for m in members.values())
    for op in dra.GPUCLUSTER_OPERANDS:
        if op.key in ("dcgm", "dcgm-exporter"):
            continue  # rendered by the operator's DCGM states, not these manifests
        assert f"name: {op.name}" in text, op.name
        assert f"app: {op.app}" in text, op.app
        if op.deploy_label:
            assert f"{op.deploy_label}: \"true\"" in text, op.deploy_label


def test_gpucluster_switches():
    plugin, controller, dcgm, exporter, _validator = dra.GPUCLUSTER_OPERANDS
    assert plugin.enabled({}) and exporter.enabled({})
    assert not controller.enabled({}) and not dcgm.enabled({})
    assert controller.enabled({"draDriver": {"computeDomains": {"enabled": True}}})
    assert not exporter.enabled({"dcgmExporter": {"enabled": False}})


# --- GpuConfig sharing ------------------------------------------------------------------------
ON = {dra.GATE_TIME_SLICING: True, dra.GATE_MPS: True}


def test_valid_configs_pass_with_their_gates():
    for config in (dra.gpu_config("TimeSlicing", interval="Short"), dra.gpu_config("TimeSlicing"),
                   dra.gpu_config("MPS", defaultActiveThreadPercentage=50,
                                  defaultPinnedDeviceMemoryLimit="10Gi")):
        verdict = dra.validate_sharing(config, ON)
        assert verdict.invalid == () and verdict.refused == (), config


def test_a_gate_that_is_off_is_a_refusal_not_an_invalid_config():
    verdict = dra.validate_sharing(dra.gpu_config("MPS"), {})
    assert verdict.invalid == ()
    assert verdict.refused == ('"MPS" is selected as the GPU sharing strategy, but the '
                               '"MPSSupport" feature gate is not enabled',)


@pytest.mark.parametrize(("config", "problem"), [
    (dra.gpu_config("Fractional"), "unknown GPU sharing strategy: Fractional"),
    (dra.gpu_config("TimeSlicing", interval="Fast"), "unknown time-slice interval: Fast"),
    (dra.gpu_config("MPS", defaultActiveThreadPercentage=150), "greater than 100"),
    (dra.gpu_config("MPS", defaultActiveThreadPercentage=-1), "must not be negative"),
    (dra.gpu_config("MPS", defaultPinnedDeviceMemoryLimit="10Ki"), "set too low"),
    ({"apiVersion": dra.CONFIG_API, "kind": "GpuConfig",
      "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}}}, "cannot use MpsConfig"),
    ({"apiVersion": dra.CONFIG_API, "kind": "GpuConfig",
      "sharing": {"strategy": "TimeSlicing", "timeSlicing": {}}}, "unknown field(s) timeSlicing"),
])
def test_invalid_configs_are_named(config, problem):
    verdict = dra.validate_sharing(config, ON)
    assert any(problem in p for p in verdict.invalid), verdict


def test_other_kinds_and_drivers_are_not_sharing_configs():
    assert dra.validate_sharing({"apiVersion": dra.CONFIG_API, "kind": "VfioDeviceConfig"},
                                {}).strategy is None
    spec = {"devices": {"requests": [], "config": [
        {"opaque": {"driver": "other.example.com", "parameters": {"x": 1}}},
        {"opaque": {"driver": dra.DRIVER, "parameters": dra.gpu_config("MPS")}}]}}
    assert dra.sharing_configs(spec) == [dra.gpu_config("MPS")]


def test_feature_gates_env():
    assert dra.parse_feature_gates("TimeSlicingSettings=true,MPSSupport=false,") == {
        "TimeSlicingSettings": True, "MPSSupport": False}
    assert dra.parse_feature_gates(None) == {}


# --- gpuconf validate-sharing on DRA claims ---------------------------------------------------
CLAIM_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: ts}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: INTERVAL}}
"""


def _validate(tmp_path, text: str, *flags: str) -> int:
    from conformance.cli.main import main

    path = tmp_path / "claim.yaml"
    path.write_text(text)
    return main(["validate-sharing", str(path), *flags])


def test_validate_sharing_takes_dra_claims(tmp_path, capsys):
    assert _validate(tmp_path, CLAIM_TEMPLATE.replace("INTERVAL", "Long")) == 0
    out, err = capsys.readouterr()
    assert "ResourceClaimTemplate ts: TimeSlicing" in out
    assert '"TimeSlicingSettings" feature gate is not enabled' in err  # a warning offline
    assert _validate(tmp_path, CLAIM_TEMPLATE.replace("INTERVAL", "Long"),
                     "--dra-feature-gates", "TimeSlicingSettings=true") == 0


def test_validate_sharing_refuses_bad_dra_configs_in_one_line(tmp_path, capsys):
    assert _validate(tmp_path, CLAIM_TEMPLATE.replace("INTERVAL", "Fast")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown time-slice interval: Fast" in err[0]
    assert _validate(tmp_path, CLAIM_TEMPLATE.replace("INTERVAL", "Long"),
                     "--dra-feature-gates", "MPSSupport=true") == 2
    assert "the driver refuses it" in capsys.readouterr().err
