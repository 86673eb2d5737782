"""Scheduling / pod autoscaling: the HPA scales GPU pods on a custom metric (CNCF Kubernetes AI
Conformance ``pod_autoscaling``, a MUST).

Checklist (a Deployment of one-GPU pods, an HPA on an Object metric of it served through the
custom metrics API, target 10 per replica; the check writes the metric, ``--hpa-metric`` names
it):
- SCHED-HPA-001 from 1 replica, the metric above target: the HPA grows the Deployment to N
  (N = the free GPUs, 2 to 3) and the new pods Run on GPU nodes
- SCHED-HPA-002 from N replicas, the metric below target: the HPA keeps N for its scale-down
  stabilization window (10 s here), then shrinks the Deployment to 1

Both are not-applicable where the cluster registers no custom metrics API, fail where it
registers one that is not Available, and are not run (with the reason) where its adapter takes
no metric writes (``checks/pod_autoscaling.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from conformance.checks import pod_autoscaling as hpa
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import allocation
from conformance.cluster import evidence as ev
from conformance.cluster import pod_autoscaling as scaling
from conformance.cluster.client import ApiException, NotFound
from conformance.plugin.api import finding, not_applicable, not_run
from conformance.plugin.fixtures import failed

WRITES = ("these checks write their metric through custom-metrics-apiserver's /write-metrics "
          "API (its test adapter, Service port 'http'), which this adapter does not serve")


@dataclass(frozen=True)
class Autoscaling:
    """What the checks scale on: the custom metrics API, the metric, the GPU nodes, and how
    far the GPUs free now let them scale."""

    api: hpa.MetricsApi | None
    why_not: str  # why the API cannot be used ("" when it can)
    metric: str
    nodes: list[GpuNode]
    plan: hpa.ScalePlan

    @property
    def where(self) -> str:
        return f"the HPA (custom metrics from {self.api.backend if self.api else 'nowhere'})"


@pytest.fixture
def autoscaling(request, cluster, gpu_env) -> Autoscaling:
    """The custom metrics API and the scale plan (not-applicable without the API)."""
    decision = hpa.choose_api(scaling.metrics_apis(cluster))
    if decision.api is None and not decision.applicable:
        not_applicable(decision.reason)
    try:
        metric = hpa.parse_metric(gpu_env.options.hpa_metric)
    except ValueError as exc:
        not_run(str(exc))
    if decision.api is not None and not scaling.has_write_port(cluster, decision.api):
        not_run(f"the custom metrics API's {decision.api.backend} has no port named "
                f"{hpa.WRITE_PORT!r}: {WRITES}")
    nodes = request.getfixturevalue("require_device_plugin_nodes")
    free = allocation.free_whole_gpus(cluster, nodes)
    planned = hpa.plan(free)
    if planned is None:
        not_run(f"no GPU free on the {len(nodes)} GPU node(s) for the Deployment's first pod")
    return Autoscaling(decision.api, decision.reason, metric, nodes, planned)


@pytest.fixture
def scaled(request, cluster, gpu_env, autoscaling, namespace, attachments):
    """A factory: the check's GPU Deployment at ``replicas``, its metric written at ``value``
    (the adapter must serve it before the HPA exists); deleted afterwards, the HPA's view
    attached to the report when the check fails."""
    def make(replicas: int, value: int) -> scaling.ScaledDeployment:
        # in the check's own body: an unavailable API fails it (the HPA can read no metric)
        assert autoscaling.api is not None, autoscaling.why_not
        target = scaling.create_deployment(cluster, namespace, replicas, gpu_env.run_id,
                                           image=gpu_env.options.cuda_image,
                                           metric=autoscaling.metric)

        def finish() -> None:  # runs before the namespace (and its dump) goes
            if failed(request.node):
                attachments.append(ev.Evidence("hpa.yaml",
                                               scaling.autoscaling_view(cluster, target)))
            scaling.delete(cluster, target)

        request.addfinalizer(finish)
        try:
            scaling.write_metric(cluster, autoscaling.api, target, value)
        except NotFound:
            not_run(f"the custom metrics API ({autoscaling.api.backend}) serves no "
                    f"/write-metrics: {WRITES}")
        except ApiException as exc:
            raise AssertionError(f"the custom metrics adapter ({autoscaling.api.backend}) did "
                                 f"not take the metric write: {exc.status} {exc.reason} "
                                 f"{(exc.body or '').strip()[:300]}") from None
        scaling.wait_served(cluster, autoscaling.api, target, value)
        return target

    return make


@pytest.mark.requirement("SCHED-HPA-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_hpa_scales_gpu_pods_up_on_a_custom_metric(request, cluster, gpu_env, autoscaling,
                                                    scaled):
    up = autoscaling.plan.up
    target = scaled(1, autoscaling.plan.high)
    scaling.wait_running_on_gpus(cluster, target, 1, autoscaling.nodes)
    scaling.create_hpa(cluster, target, up, gpu_env.run_id)
    scaling.wait_replicas(cluster, target, up, scaling.SCALE_TIMEOUT_S, autoscaling.nodes)
    now = scaling.wait_running_on_gpus(cluster, target, up, autoscaling.nodes)
    assert now.on_gpu_nodes == up, (
        f"{autoscaling.where} scaled Deployment {target.name} to {up} replicas at "
        f"{target.metric}={autoscaling.plan.high} (target {hpa.TARGET_PER_POD} per replica), "
        f"but the new pods found no GPU: {now}")
    finding(request, f"{autoscaling.where} scaled a GPU Deployment from 1 to {up} replicas "
                     f"on {target.metric}={autoscaling.plan.high} (target "
                     f"{hpa.TARGET_PER_POD} per replica); all {up} pods Run on GPU nodes")


@pytest.mark.requirement("SCHED-HPA-002")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_hpa_scales_gpu_pods_down_after_its_stabilization_window(request, cluster, gpu_env,
                                                                  autoscaling, scaled):
    up = autoscaling.plan.up
    target = scaled(up, autoscaling.plan.low)
    scaling.wait_replicas(cluster, target, up, scaling.SCALE_TIMEOUT_S, autoscaling.nodes)
    t0 = time.monotonic()
    scaling.create_hpa(cluster, target, up, gpu_env.run_id)
    scaling.wait_replicas(cluster, target, 1, scaling.SCALE_DOWN_TIMEOUT_S, autoscaling.nodes)
    took = time.monotonic() - t0
    assert took >= scaling.STABILIZATION_WINDOW_S, (
        f"{autoscaling.where} scaled Deployment {target.name} down {took:.1f}s after the HPA "
        f"was made, inside its {scaling.STABILIZATION_WINDOW_S}s scale-down stabilization "
        "window (behavior.scaleDown.stabilizationWindowSeconds ignored)")
    finding(request, f"{autoscaling.where} kept a GPU Deployment at {up} replicas through its "
                     f"{scaling.STABILIZATION_WINDOW_S}s stabilization window at "
                     f"{target.metric}={autoscaling.plan.low} (below target "
                     f"{hpa.TARGET_PER_POD}), then scaled it to 1 ({took:.0f}s after the HPA "
                     "was made)")
