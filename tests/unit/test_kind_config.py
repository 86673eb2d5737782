"""kind cluster configs with GPU passthrough: validated structurally (no Docker engine here)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

KIND_DIR = Path(__file__).resolve().parents[2] / "kind-config"
CONFIGS = ("single-gpu.yaml", "multi-node.yaml", "heterogeneous.yaml")
DEVICES_DIR = "/var/run/nvidia-container-devices/"
GPU_NODE_LABEL = "gpuconf.io/gpu-node"
GPU_TYPE_LABEL = "gpuconf.io/gpu-type"

# Fields of kind's v1alpha4 Cluster, Node and Mount types (sigs.k8s.io/kind/pkg/apis/config).
CLUSTER_FIELDS = {"kind", "apiVersion", "name", "nodes", "networking", "featureGates",
                  "runtimeConfig", "kubeadmConfigPatches", "kubeadmConfigPatchesJSON6902",
                  "containerdConfigPatches", "containerdConfigPatchesJSON6902"}
NODE_FIELDS = {"role", "image", "labels", "extraMounts", "extraPortMappings",
               "kubeadmConfigPatches", "kubeadmConfigPatchesJSON6902"}
MOUNT_FIELDS = {"hostPath", "containerPath", "readOnly", "selinuxRelabel", "propagation"}
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def load(name: str) -> dict:
    return yaml.safe_load((KIND_DIR / name).read_text())


def gpu_workers(config: dict) -> list[dict]:
    return [n for n in config["nodes"]
            if n["role"] == "worker" and (n.get("labels") or {}).get(GPU_NODE_LABEL) == "true"]


def device_mounts(node: dict) -> list[dict]:
    return [m for m in node.get("extraMounts") or []
            if m["containerPath"].startswith(DEVICES_DIR)]


@pytest.mark.parametrize("name", CONFIGS)
def test_is_a_kind_cluster(name: str) -> None:
    config = load(name)
    assert config["kind"] == "Cluster"
    assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert set(config) <= CLUSTER_FIELDS
    for node in config["nodes"]:
        assert set(node) <= NODE_FIELDS
        assert node["role"] in ("control-plane", "worker")
        for mount in node.get("extraMounts") or []:
            assert set(mount) <= MOUNT_FIELDS
    assert [n["role"] for n in config["nodes"]].count("control-plane") == 1


@pytest.mark.parametrize("name", CONFIGS)
def test_every_gpu_worker_gets_the_device_passthrough_mount(name: str) -> None:
    config = load(name)
    workers = gpu_workers(config)
    assert workers, "a GPU config needs at least one GPU worker"
    for node in workers:
        mounts = device_mounts(node)
        assert mounts, f"GPU worker without {DEVICES_DIR}* mount"
        assert all(m["hostPath"] == "/dev/null" for m in mounts)
    for node in config["nodes"]:
        if node not in workers:
            assert not device_mounts(node), "only GPU workers get GPUs"


@pytest.mark.parametrize("name", CONFIGS)
def test_workers_do_not_share_a_gpu(name: str) -> None:
    devices = [m["containerPath"].removeprefix(DEVICES_DIR)
               for node in gpu_workers(load(name)) for m in device_mounts(node)]
    assert len(devices) == len(set(devices))
    if "all" in devices:
        assert devices == ["all"], "a worker with all GPUs must be the only GPU worker"


def merge(into: dict, patch: dict) -> None:
    """Merge TOML tables the way containerd merges config patches."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


@pytest.mark.parametrize("name", CONFIGS)
def test_containerd_patches_register_the_nvidia_runtime(name: str) -> None:
    merged: dict = {}
    for patch in load(name)["containerdConfigPatches"]:
        merge(merged, tomllib.loads(patch))
    cri = merged["plugins"]["io.containerd.grpc.v1.cri"]
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert cri["enable_cdi"] is True


@pytest.mark.parametrize("name", CONFIGS)
def test_labels_are_valid_kubernetes_labels(name: str) -> None:
    for node in load(name)["nodes"]:
        for key, value in (node.get("labels") or {}).items():
            assert LABEL_KEY.match(key), key
            assert isinstance(value, str) and LABEL_VALUE.match(value), (key, value)


def test_single_gpu_passes_all_gpus_to_one_worker() -> None:
    workers = gpu_workers(load("single-gpu.yaml"))
    assert len(workers) == 1
    assert [m["containerPath"] for m in device_mounts(workers[0])] == [f"{DEVICES_DIR}all"]


def test_multi_node_has_several_gpu_workers_and_a_cpu_worker() -> None:
    config = load("multi-node.yaml")
    assert len(gpu_workers(config)) >= 2
    cpu = [n for n in config["nodes"] if n["role"] == "worker" and n not in gpu_workers(config)]
    assert cpu and not any(device_mounts(n) for n in cpu)


def test_heterogeneous_has_distinct_gpu_types() -> None:
    workers = gpu_workers(load("heterogeneous.yaml"))
    types = {n["labels"][GPU_TYPE_LABEL] for n in workers}
    assert len(types) >= 2
    assert all(GPU_TYPE_LABEL in n["labels"] for n in workers)
    majors = {n["labels"]["gpuconf.io/expected-compute-major"] for n in workers}
    assert len(majors) >= 2


def test_readme_documents_every_config_and_the_missing_engine() -> None:
    readme = (KIND_DIR / "README.md").read_text()
    for name in (*CONFIGS, "gpu-kind.sh"):
        assert name in readme
    assert "no Docker engine" in readme and "structurally" in readme
    assert "needs a host that has" in (KIND_DIR / "heterogeneous.yaml").read_text()



def test_no_gpu_config_runs_one_node_on_the_conflist_beside_it(tmp_path: Path) -> None:
    """no-gpu.yaml: one node, kind's CNI off, the ptp conflist beside it mounted where the
    node's containerd reads CNI configs; gpuconf hands kind a copy with that path absolute."""
    from conformance.run.kind_config import with_absolute_mounts

    config = load("no-gpu.yaml")
    assert set(config) <= CLUSTER_FIELDS and config["networking"]["disableDefaultCNI"] is True
    (only,) = config["nodes"]
    assert only["role"] == "control-plane" and set(only) <= NODE_FIELDS
    (mount,) = only["extraMounts"]
    assert mount["containerPath"] == "/etc/cni/net.d/10-gpuconf-ptp.conflist"
    conflist = json.loads((KIND_DIR / mount["hostPath"]).read_text())
    assert [p["type"] for p in conflist["plugins"]] == ["ptp", "portmap"]
    (ranges,) = conflist["plugins"][0]["ipam"]["ranges"]
    subnet = ipaddress.ip_network(ranges[0]["subnet"])
    assert subnet.subnet_of(ipaddress.ip_network(config["networking"]["podSubnet"]))

    resolved = with_absolute_mounts(KIND_DIR / "no-gpu.yaml", tmp_path)
    assert resolved.parent == tmp_path
    (node,) = yaml.safe_load(resolved.read_text())["nodes"]
    assert node["extraMounts"][0]["hostPath"] == str(KIND_DIR / mount["hostPath"])
    # a config whose mounts are absolute already is handed to kind as it is
    assert with_absolute_mounts(KIND_DIR / "single-gpu.yaml", tmp_path) == (
        KIND_DIR / "single-gpu.yaml")

# --- gpu-kind.sh against stub commands ---------------------------------------------------

SCRIPT = KIND_DIR / "gpu-kind.sh"

STUB = """#!/usr/bin/env bash
printf '%s\\n' "$(basename "$0") $*" >> "$STUB_LOG"
if [[ "$*" == *"bash -s"* || "$*" == *"apply -f -"* ]]; then
  cat >> "$STUB_LOG"
fi
case "$(basename "$0") $*" in
  "kind get nodes"*) printf 'demo-control-plane\\ndemo-worker\\ndemo-worker2\\n' ;;
  "docker exec demo-control-plane test -d"*) exit 1 ;;
  "docker exec demo-worker"*" ls /var/run/nvidia-container-devices") echo 0 ;;
  "docker exec demo-worker2 ls /var/run/nvidia-container-devices") echo 1 ;;
esac
exit 0
"""


@pytest.fixture
def stubs(tmp_path: Path) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "kind", "kubectl", "nvidia-ctk", "nvidia-smi", "systemctl", "sudo"):
        path = bin_dir / tool
        path.write_text(STUB)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "calls.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(log)}
    return env, log


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_script_parses_and_prints_usage() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0
    usage = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "gpu-kind.sh nodes NAME" in usage.stderr


def test_host_step_configures_docker_like_nvidias_demo(stubs) -> None:
    env, log = stubs
    assert run(env, "host").returncode == 0
    calls = log.read_text()
    assert "nvidia-ctk runtime configure --runtime=docker --set-as-default" in calls
    assert ("nvidia-ctk config --set accept-nvidia-visible-devices-as-volume-mounts=true "
            "--in-place") in calls
    assert "systemctl restart docker" in calls


def test_create_uses_the_config(stubs) -> None:
    env, log = stubs
    config = str(KIND_DIR / "single-gpu.yaml")
    assert run(env, "create", "demo", config).returncode == 0
    assert f"kind create cluster --name demo --config {config} --wait 5m" in log.read_text()
    assert run(env, "create", "demo", "/nope.yaml").returncode != 0


def test_nodes_step_prepares_only_gpu_workers(stubs) -> None:
    env, log = stubs
    result = run(env, "nodes", "demo", "--install-toolkit")
    assert result.returncode == 0, result.stderr
    calls = log.read_text()
    assert calls.count("nvidia-ctk runtime configure --runtime=containerd --set-as-default") == 2
    for worker in ("demo-worker", "demo-worker2"):
        assert f"docker exec -i {worker} bash -s" in calls  # device isolation
        assert f"docker exec {worker} bash -c" in calls  # toolkit install and configure
    assert "docker exec demo-control-plane bash" not in calls
    assert "umount -R /proc/driver/nvidia" in calls
    assert "kind: RuntimeClass" in calls and "handler: nvidia" in calls
    assert "kubectl --context kind-demo apply -f -" in calls


def test_nodes_step_without_toolkit_install(stubs) -> None:
    env, log = stubs
    assert run(env, "nodes", "demo").returncode == 0
    assert "nvidia-container-toolkit" not in log.read_text()


def test_delete_never_fails(stubs) -> None:
    env, log = stubs
    assert run(env, "delete", "demo").returncode == 0
    assert "kind delete cluster --name demo" in log.read_text()
