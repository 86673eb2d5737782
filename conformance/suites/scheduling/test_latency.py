"""Scheduling / time to schedule GPU pods (a benchmark: it reports, it does not time out).

Checklist:
- SCHED-LAT-001 created -> bound latency of one-GPU pods, p50/p99/max, recorded in the results
"""

from __future__ import annotations

import statistics
import time

import pytest

from conformance.cluster import allocation, pods
from conformance.cluster.pods import PodSpec
from conformance.plugin.api import finding, record_measurement

SAMPLES = 10


@pytest.mark.requirement("SCHED-LAT-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_gpu_pod_scheduling_latency(request, cluster, gpu_env, require_device_plugin_nodes,
                                    namespace):
    _node, resource, free = allocation.require_free_node(
        cluster, require_device_plugin_nodes, "no schedulable GPU node has a free GPU to "
                                              "measure with")
    samples = []
    for _ in range(min(SAMPLES, free)):
        t0 = time.monotonic()
        name = pods.create(cluster, namespace, PodSpec("latency", gpus=1, resource=resource),
                           gpu_env.run_id)
        pods.wait_scheduled(cluster, namespace, name)
        samples.append(time.monotonic() - t0)
        pods.delete(cluster, namespace, name)
    samples.sort()
    figures = {"samples": len(samples), "p50_s": round(statistics.median(samples), 4),
               "p99_s": round(samples[min(len(samples) - 1, int(0.99 * len(samples)))], 4),
               "max_s": round(samples[-1], 4), "method": "create call -> spec.nodeName seen "
               "(client side, includes API round trips and the 0.1 s poll)"}
    record_measurement(request, "scheduling_latency", figures)
    finding(request, f"GPU pod scheduling latency over {len(samples)} pods: p50 "
                     f"{figures['p50_s']}s, p99 {figures['p99_s']}s")
