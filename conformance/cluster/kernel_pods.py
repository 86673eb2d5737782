"""gpu_kernels in pods without a custom image: the package is mounted from a ConfigMap into a
stock CuPy image (``cupy/cupy``, as the upstream node e2e GPU test uses), with NVML's pure-Python
binding (``pynvml.py`` of nvidia-ml-py) beside it. Results come back as one JSON log line.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from conformance.cluster import workloads
from conformance.cluster.client import Cluster
from conformance.cluster.namespaces import run_labels
from conformance.cluster.pods import PodSpec

CONFIG_MAP = "gpuconf-gpu-kernels"
MOUNT = "/opt/gpuconf"
PACKAGE = Path(__file__).resolve().parents[2] / "gpu_kernels"


def module_files() -> dict[str, tuple[str, str]]:
    """ConfigMap key -> (path under the mount, text) for gpu_kernels and pynvml.py."""
    files: dict[str, tuple[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        files[rel.replace("/", "__")] = (rel, path.read_text())
    spec = importlib.util.find_spec("pynvml")
    if spec is not None and spec.origin:
        files["pynvml.py"] = ("pynvml.py", Path(spec.origin).read_text())
    return files


def ensure_config_map(cluster: Cluster, namespace: str, run_id: str) -> None:
    files = module_files()
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "labels": run_labels(run_id)},
            "data": {key: text for key, (_path, text) in files.items()}}
    try:
        cluster.core.create_namespaced_config_map(namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def kernel_pod(args: list[str], *, image: str, gpus: int = 1, resource: str = "nvidia.com/gpu",
               node: str | None = None) -> tuple[PodSpec, dict]:
    """The pod spec and the volume patch that mounts the module (see :func:`run`)."""
    spec = PodSpec("gpu-kernels", gpus=gpus, resource=resource, image=image,
                   command=["python3", "-m", "gpu_kernels", *args, "--json"],
                   env={"PYTHONPATH": MOUNT, "PYTHONDONTWRITEBYTECODE": "1"},
                   node_selector={"kubernetes.io/hostname": node} if node else {})
    items = [{"key": k, "path": p} for k, (p, _t) in module_files().items()]
    volume = {"name": "gpu-kernels", "configMap": {"name": CONFIG_MAP, "items": items}}
    return spec, volume


def manifest(spec: PodSpec, volume: dict, run_id: str) -> dict:
    body = spec.manifest(run_labels(run_id))
    body["spec"]["volumes"] = [volume]
    body["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "gpu-kernels", "mountPath": MOUNT, "readOnly": True}]
    return body


def run(cluster: Cluster, namespace: str, run_id: str, args: list[str], *, image: str,
        node: str | None = None, gpus: int = 1) -> workloads.WorkloadResult:
    ensure_config_map(cluster, namespace, run_id)
    spec, volume = kernel_pod(args, image=image, node=node, gpus=gpus)
    return workloads.run_manifest(cluster, namespace, manifest(spec, volume, run_id))
