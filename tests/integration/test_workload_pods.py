"""GPU workload pods (gpu_kernels mounted from a ConfigMap into a stock CuPy image) pass the
API server's validation and the restricted Pod Security profile, and on the sim they are
scheduled for real while their GPU results are reported as not run."""

from __future__ import annotations

from conformance.cluster import kernel_pods, pods
from conformance.cluster.namespaces import create_namespace, delete_namespace


def test_kernel_pod_is_valid_and_restricted(sim_cluster):
    ns = create_namespace(sim_cluster, "workload-validation", "itest")  # enforces restricted
    try:
        kernel_pods.ensure_config_map(sim_cluster, ns, "itest")
        spec, volume = kernel_pods.kernel_pod(["membw", "--seconds", "5"],
                                              image="cupy/cupy:v13.3.0")
        body = kernel_pods.manifest(spec, volume, "itest")
        created, _status, headers = sim_cluster.core.create_namespaced_pod_with_http_info(
            ns, body, dry_run="All")
        assert created.spec.containers[0].security_context.run_as_non_root is True
        warnings = (headers or {}).get("Warning", "")
        assert "PodSecurity" not in warnings and "violate" not in warnings, warnings
        # and for real: the scheduler binds it to a GPU node of the sim
        sim_cluster.core.create_namespaced_pod(ns, body)
        node = pods.wait_scheduled(sim_cluster, ns, body["metadata"]["name"])
        assert node.startswith("gpu-")
    finally:
        delete_namespace(sim_cluster, ns)


def test_privileged_pod_is_refused_in_test_namespaces(sim_cluster):
    ns = create_namespace(sim_cluster, "psa-probe", "itest")
    try:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "priv"},
                "spec": {"containers": [{"name": "c", "image": "x",
                                         "securityContext": {"privileged": True}}]}}
        import pytest
        from kubernetes.client.exceptions import ApiException

        with pytest.raises(ApiException) as refused:
            sim_cluster.core.create_namespaced_pod(ns, body, dry_run="All")
        assert refused.value.status == 403 and "restricted" in refused.value.body
    finally:
        delete_namespace(sim_cluster, ns)


def test_configmap_carries_the_whole_module():
    files = kernel_pods.module_files()
    paths = {p for p, _t in files.values()}
    assert "gpu_kernels/__main__.py" in paths and "gpu_kernels/kernels/membw.py" in paths
    assert sum(len(t) for _p, t in files.values()) < 900_000  # ConfigMaps hold at most 1 MiB
