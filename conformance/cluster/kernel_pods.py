"""gpu_kernels in pods without a custom image: the package is mounted from a ConfigMap into a
stock CuPy image (``cupy/cupy``, as the upstream node e2e GPU test uses), with NVML's pure-Python
binding (``pynvml.py`` of nvidia-ml-py) beside it. Results come back as one JSON log line.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from conformance.cluster import workloads
from conformance.cluster.client import Cluster, Conflict, already_done
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
    with already_done(Conflict):
        cluster.core.create_namespaced_config_map(namespace, body)



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
        node: str | None = None, gpus: int = 1,
        timeout: float = workloads.RUN_TIMEOUT_S) -> workloads.WorkloadResult:
    ensure_config_map(cluster, namespace, run_id)
    spec, volume = kernel_pod(args, image=image, node=node, gpus=gpus)
    return workloads.run_manifest(cluster, namespace, manifest(spec, volume, run_id),
                                  timeout=timeout)


def on_each_node(cluster: Cluster, run_id: str, args: list[str], *, image: str, nodes,
                 purpose: str, timeout: float,
                 gpus: Callable[[object], int] = lambda _node: 1,
                 ) -> dict[str, workloads.WorkloadResult]:
    """Run gpu_kernels ``args`` once on every GPU node GPU pods may land on, one after the
    other (each holding ``gpus(node)`` GPUs), in a namespace of its own that is always
    removed; the pods' results by node name."""
    from conformance.checks import taints
    from conformance.cluster import namespaces

    namespace = namespaces.create_namespace(cluster, purpose, run_id)
    results: dict[str, workloads.WorkloadResult] = {}
    try:
        for node in nodes:
            if not taints.untolerated_taints(node):
                results[node.name] = run(cluster, namespace, run_id, args, image=image,
                                         node=node.name, gpus=gpus(node), timeout=timeout)
    finally:
        namespaces.delete_namespace(cluster, namespace)
    return results


def no_result(result: workloads.WorkloadResult) -> str:
    """Why a kernel pod gave no JSON result, with its state and the end of its log."""
    return result.diagnosis or (f"{result.phase} without a result line on node {result.node}; "
                                f"its log: {result.logs.strip()[-300:] or '(empty)'}")
