"""The GPU Operator on the node: what its chart is given, and what a wrong --chart says."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.binaries import binaries
from conformance.common.errors import UsageError
from conformance.node import images, operator


def _build(tmp_path: Path) -> binaries.OperatorBuild:
    return binaries.OperatorBuild(tmp_path / "gpu-operator-v26.7.0", "v26.7.0")


def test_the_host_driver_and_toolkit_stay_the_hosts(tmp_path):
    vals = operator.values(_build(tmp_path), driver_install_dir="/usr/local/nvidia")
    assert vals["driver"] == {"enabled": False}
    assert vals["toolkit"] == {"enabled": False}
    assert vals["hostPaths"]["driverInstallDir"] == "/usr/local/nvidia"
    # nothing this project does not build is deployed, and nothing is pulled
    assert all(vals[s] == {"enabled": False} for s in ("dcgm", "dcgmExporter", "migManager"))
    for section in ("operator", "validator"):
        assert vals[section]["version"] == "v26.7.0"
        assert vals[section]["imagePullPolicy"] == "Never"


def test_the_validators_workload_pods_are_off_because_vectoradd_is_not_built(tmp_path):
    vals = operator.values(_build(tmp_path), driver_install_dir="/")
    for check in ("cuda", "plugin"):
        assert {"name": "WITH_WORKLOAD", "value": "false"} in vals["validator"][check]["env"]


def test_a_chart_that_is_not_the_operators_is_refused_in_one_line(tmp_path):
    (tmp_path / "Chart.yaml").write_text("name: nvidia-device-plugin\nversion: 0.20.0\n")
    with pytest.raises(UsageError, match="not 'gpu-operator'"):
        operator.find_chart(tmp_path)
    with pytest.raises(UsageError, match="not a Helm chart"):
        operator.find_chart(tmp_path / "missing")


def test_an_unbuilt_operator_names_the_build_step(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCONF_CACHE", str(tmp_path))
    with pytest.raises(UsageError, match=r"build-node\.sh --nvidia-src DIR gpu-operator"):
        binaries.require_operator()


def test_the_image_holds_both_binaries_and_the_manifests_they_read(tmp_path):
    build = _build(tmp_path)
    for b in build.binaries:
        b.parent.mkdir(parents=True, exist_ok=True)
        b.write_bytes(b"\\x7fELF")
    for folder in build.manifest_dirs.values():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "0500_daemonset.yaml").write_text("kind: DaemonSet\n")
    nb = binaries.locate_node()
    if not nb.busybox.is_file() or not nb.nvidia_device_plugin.is_file():
        pytest.skip("node binaries not built here (make setup)")
    img = operator.image(build, nb)
    paths = {e.path for e in img.entries}
    assert {"/usr/bin/gpu-operator", "/usr/bin/nvidia-validator", "/bin/sh", "/bin/chroot",
            "/opt/gpu-operator/0500_daemonset.yaml",
            "/opt/gpu-operator/manifests/0500_daemonset.yaml",
            "/opt/validator/manifests/0500_daemonset.yaml"} <= paths
    assert img.refs == ["nvcr.io/nvidia/gpu-operator:v26.7.0"]


def test_a_host_without_modprobe_gets_nvidias_switch_for_dev_char_links(tmp_path):
    # the H200 machine: the validator's driver check crash-looped on "chroot: can't execute
    # '/sbin/modprobe'" until this switch (reports/evidence/h200-node-run-2026-12-04)
    vals = operator.values(_build(tmp_path), driver_install_dir="/", dev_char_symlinks=False)
    assert vals["validator"]["driver"]["env"] == [
        {"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"}]
    assert "driver" not in operator.values(_build(tmp_path), driver_install_dir="/")["validator"]


def test_the_plugin_image_runs_the_operators_entrypoint_script():
    # the operator's plugin DaemonSet runs `/bin/sh -c /bin/entrypoint.sh` (its ConfigMap:
    # cat, lsmod, grep, sleep); without a shell it crash-looped on the H200 ("stat /bin/sh")
    nb = binaries.locate_node()
    if not nb.busybox.is_file() or not nb.nvidia_device_plugin.is_file():
        pytest.skip("node binaries not built here (make setup)")
    imgs, roles = images.node_images(nb)
    plugin = next(i for i in imgs if roles["device-plugin"] in i.refs)
    paths = {e.path for e in plugin.entries}
    assert {"/bin/sh", "/bin/cat", "/bin/lsmod", "/bin/grep", "/bin/sleep",
            "/bin/mount", "/usr/bin/nvidia-device-plugin"} <= paths


TIME_SLICING_4 = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""


def test_a_sharing_config_follows_nvidias_time_slicing_flow(tmp_path):
    cfg = tmp_path / "ts.yaml"
    cfg.write_text(TIME_SLICING_4)
    text = operator.load_sharing_config(cfg, real_gpus=True)
    cm = operator.sharing_configmap(text)
    assert (cm.metadata.namespace, cm.metadata.name) == ("gpu-operator", "time-slicing-config")
    assert cm.data == {"any": TIME_SLICING_4}
    vals = operator.values(_build(tmp_path), driver_install_dir="/", sharing=True)
    assert vals["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "any"}
    assert "config" not in operator.values(_build(tmp_path), driver_install_dir="/")[
        "devicePlugin"]


def test_a_sharing_config_the_plugin_would_reject_is_one_line(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(TIME_SLICING_4.replace("replicas: 4", "replicas: 0"))
    with pytest.raises(UsageError, match=r"^--sharing-config .*bad\.yaml: .*replicas"):
        operator.load_sharing_config(cfg, real_gpus=False)
    with pytest.raises(UsageError, match="No such file"):
        operator.load_sharing_config(tmp_path / "missing.yaml", real_gpus=False)


def test_mps_on_real_gpus_needs_leave_to_change_the_compute_mode(tmp_path):
    cfg = tmp_path / "mps.yaml"
    cfg.write_text(TIME_SLICING_4.replace("timeSlicing", "mps"))
    with pytest.raises(UsageError, match="--allow-compute-mode-change"):
        operator.load_sharing_config(cfg, real_gpus=True)
    assert operator.load_sharing_config(cfg, real_gpus=True, allow_compute_mode_change=True)
    assert operator.load_sharing_config(cfg, real_gpus=False)
