"""Pod autoscaling (CNCF AI Conformance ``pod_autoscaling``): whether a cluster serves the custom
metrics API the HPA scales on, which metric the checks write, and how far they scale.

Pure decisions over what the cluster's APIServices say (``cluster/pod_autoscaling.py`` reads
them and drives the HPA, ``suites/scheduling/test_pod_autoscaling.py`` runs the checks).

Facts (Kubernetes v1.36.3, autoscaling/v2; sigs.k8s.io/custom-metrics-apiserver v1.37.0):

- The HPA controller (kube-controller-manager) reads custom metrics from the aggregated API
  ``custom.metrics.k8s.io`` (v1beta2, else v1beta1), registered by an APIService that points at
  the adapter's Service (Prometheus Adapter, KEDA's, or custom-metrics-apiserver's test adapter).
- An ``Object`` metric with an ``AverageValue`` target asks for ceil(value / target) replicas
  (pkg/controller/podautoscaler/replica_calculator.go GetObjectPerPodMetricReplicas), so the
  value the check writes sets the replica count it expects.
- ``behavior.scaleDown.stabilizationWindowSeconds``: the HPA scales down to the highest
  recommendation of the window, and a new HPA starts its window at the replicas it found
  (horizontal.go maybeInitScaleDownStabilizationWindow): no scale-down before the window ends.
- The test adapter serves whatever value was last written at ``/write-metrics/<the read
  path>`` on its ``http`` port (test-adapter/provider/provider.go); the API server's service
  proxy reaches it (its README's ``kubectl proxy`` example).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUP = "custom.metrics.k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # the HPA's preference
WRITE_PORT = "http"  # the test adapter Service's port that serves /write-metrics
DEFAULT_METRIC = "gpuconf_gpu_load"
TARGET_PER_POD = 10  # the HPA's AverageValue target: each replica takes 10 units of load
MAX_REPLICAS = 3  # the scale-up target where that many GPUs are free
MIN_SCALE_UP = 2  # one pod more than the one it starts with
_METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_:.-]{0,127}$")


def api_service_names() -> list[str]:
    return [f"{v}.{GROUP}" for v in VERSIONS]


@dataclass(frozen=True)
class MetricsApi:
    """An APIService of custom.metrics.k8s.io: where it points and whether it is Available."""

    name: str
    service_namespace: str | None  # None: served by the API server itself (never for this group)
    service_name: str | None
    available: bool
    message: str = ""

    @property
    def backend(self) -> str:
        return (f"Service {self.service_namespace}/{self.service_name}" if self.service_name
                else "the API server itself")


@dataclass(frozen=True)
class ApiDecision:
    """The custom metrics API to use; or why none: ``applicable`` False where the cluster
    registers none (not-applicable), True where it registers one that is not Available (the
    checks fail: the HPA cannot read a metric)."""

    api: MetricsApi | None
    reason: str = ""
    applicable: bool = True


def choose_api(found: list[MetricsApi]) -> ApiDecision:
    """The preferred Available APIService (v1beta2 first), or why none."""
    if not found:
        return ApiDecision(None, f"no custom metrics API: the cluster registers no APIService "
                                 f"{' or '.join(api_service_names())} (no metrics adapter such "
                                 "as Prometheus Adapter or custom-metrics-apiserver)",
                           applicable=False)
    ordered = sorted(found, key=lambda a: api_service_names().index(a.name)
                     if a.name in api_service_names() else len(VERSIONS))
    for api in ordered:
        if api.available:
            return ApiDecision(api)
    first = ordered[0]
    return ApiDecision(None, f"the custom metrics API is registered but not Available: "
                             f"APIService {first.name} ({first.backend}): "
                             f"{first.message or 'no reason given'}")


def parse_metric(text: str | None) -> str:
    """The ``--hpa-metric`` option: a metric name the adapter serves at a URL path."""
    if not text:
        return DEFAULT_METRIC
    if not _METRIC_NAME.match(text):
        raise ValueError(f"--hpa-metric {text!r}: a metric name is letters, digits and _:.- "
                         "(starting with a letter or _)")
    return text


@dataclass(frozen=True)
class ScalePlan:
    """How far the up check scales: from 1 replica to ``up``; the metric values it writes."""

    up: int

    @property
    def high(self) -> int:
        """The metric above target: ``up`` replicas' worth of load."""
        return TARGET_PER_POD * self.up

    @property
    def low(self) -> int:
        """The metric below target (half a replica's load): one replica."""
        return TARGET_PER_POD // 2


def plan(free_gpus: int) -> ScalePlan | None:
    """Scale to as many one-GPU replicas as are free (at most MAX_REPLICAS, at least
    MIN_SCALE_UP: with one GPU free the new pod finds none, and the check says so); None when
    no GPU is free for even the first replica."""
    if free_gpus < 1:
        return None
    return ScalePlan(max(MIN_SCALE_UP, min(MAX_REPLICAS, free_gpus)))


def expected_replicas(value: int) -> int:
    """What the HPA asks for at ``value`` (ceil(value / target), at least 1)."""
    return max(1, -(-value // TARGET_PER_POD))
