"""The operator versions in a run's fingerprint, as the report and certification show them."""

from __future__ import annotations

from kubernetes import client

from conformance.run.fingerprint import operator_versions


def _deployment(image: str, labels: dict[str, str]) -> client.V1Deployment:
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name="gpu-operator", labels=labels),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "gpu-operator"}),
            template=client.V1PodTemplateSpec(spec=client.V1PodSpec(containers=[
                client.V1Container(name="gpu-operator", image=image)]))))


def test_the_running_image_names_the_operator_version_not_the_charts_app_version():
    # the H200 node: the chart from NVIDIA's source tree, its operator.version set to the build
    dep = _deployment("nvcr.io/nvidia/gpu-operator:v26.7.0",
                      {"app.kubernetes.io/version": "main-latest",
                       "helm.sh/chart": "gpu-operator-v1.0.0-devel"})
    assert operator_versions(dep) == ("v26.7.0", "v1.0.0-devel")


def test_a_released_chart_and_a_digest_pinned_image():
    dep = _deployment("registry.local:5000/nvidia/gpu-operator@sha256:" + "0" * 64,
                      {"app.kubernetes.io/version": "v25.3.0",
                       "helm.sh/chart": "gpu-operator-v25.3.0"})
    assert operator_versions(dep) == ("v25.3.0", "v25.3.0")
    rc = _deployment("registry.local:5000/gpu-operator:25.3.0-rc.1",
                     {"helm.sh/chart": "gpu-operator-25.3.0-rc.1"})
    assert operator_versions(rc) == ("25.3.0-rc.1", "25.3.0-rc.1")


def test_no_labels_and_no_tag_says_nothing():
    assert operator_versions(_deployment("gpu-operator", {})) == (None, None)
