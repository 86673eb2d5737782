"""The pod-autoscaling checks' decisions (conformance/checks/pod_autoscaling.py): which custom
metrics API to use, the metric option, and how far the checks scale."""

from __future__ import annotations

import pytest

from conformance.checks import pod_autoscaling as hpa
from conformance.checks.pod_autoscaling import MetricsApi


def _api(version: str, available: bool = True, message: str = "") -> MetricsApi:
    return MetricsApi(f"{version}.custom.metrics.k8s.io", "custom-metrics",
                      "custom-metrics-apiserver", available, message)


def test_no_api_service_is_not_applicable_and_names_what_was_looked_for():
    decision = hpa.choose_api([])
    assert decision.api is None and not decision.applicable
    assert "v1beta2.custom.metrics.k8s.io or v1beta1.custom.metrics.k8s.io" in decision.reason


def test_the_available_api_is_used_v1beta2_first():
    assert hpa.choose_api([_api("v1beta1"), _api("v1beta2")]).api == _api("v1beta2")
    assert hpa.choose_api([_api("v1beta2", False), _api("v1beta1")]).api == _api("v1beta1")


def test_a_registered_api_that_is_not_available_fails_with_its_reason():
    decision = hpa.choose_api([_api("v1beta2", False, "failing or missing response from "
                                                       "https://192.0.2.2:1/apis")])
    assert decision.api is None and decision.applicable
    assert "not Available" in decision.reason and "failing or missing response" in \
        decision.reason and "Service custom-metrics/custom-metrics-apiserver" in decision.reason


@pytest.mark.parametrize("text, metric", [(None, "gpuconf_gpu_load"), ("", "gpuconf_gpu_load"),
                                          ("queue_depth", "queue_depth"),
                                          ("vllm:num_requests_waiting",
                                           "vllm:num_requests_waiting")])
def test_metric_option(text, metric):
    assert hpa.parse_metric(text) == metric


@pytest.mark.parametrize("text", ["a/b", "1abc", "x y", "../x"])
def test_metric_option_refuses_what_is_no_metric_name(text):
    with pytest.raises(ValueError, match="--hpa-metric"):
        hpa.parse_metric(text)


@pytest.mark.parametrize("free, up", [(1, 2), (2, 2), (3, 3), (4, 3), (16, 3)])
def test_plan_scales_to_the_free_gpus(free, up):
    planned = hpa.plan(free)
    assert planned.up == up
    assert hpa.expected_replicas(planned.high) == up  # the high value asks for exactly that
    assert hpa.expected_replicas(planned.low) == 1 and planned.low < hpa.TARGET_PER_POD


def test_no_plan_without_a_free_gpu():
    assert hpa.plan(0) is None
