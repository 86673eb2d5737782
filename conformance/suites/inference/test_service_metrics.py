"""Inference / service metrics: the platform's monitoring system discovers a workload that
exposes Prometheus metrics and collects them (CNCF ``ai_service_metrics``, a MUST; KAR-0061),
checked as kubernetes-sigs/ai-conformance's TestAIServiceMetrics checks it.

Checklist:
- INF-MET-001 the query API answers vector(1); the inference stand-in (checks/service_metrics.py)
  is deployed and selected for scraping (--metrics-scrape-manifest, else a ServiceMonitor where
  that API is served, else its Service's prometheus.io/scrape annotations); exactly N requests
  go through the API server's service proxy; within --metrics-collection-timeout the monitoring
  system holds counter = N, histogram count = N and a queue-depth gauge for this run's label

Not run where it cannot be judged: on the sim (KWOK pods serve no HTTP), or where no query API
is given or found (--metrics-query).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import yaml

from conformance.checks import service_metrics as sm
from conformance.cluster import evidence as ev
from conformance.cluster import monitoring
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.plugin.api import finding, not_run, own_namespace


@pytest.fixture
def querier(cluster, gpu_env) -> monitoring.Querier:
    """The monitoring system's query API (not run where there is none to read)."""
    o = gpu_env.options
    if gpu_env.target == "sim":
        not_run("the sim's pods are KWOK's: they serve no HTTP, so no workload can be scraped")
    try:
        endpoint = sm.parse_endpoint(o.metrics_query) if o.metrics_query else \
            monitoring.find_prometheus(cluster)
    except ValueError as exc:
        not_run(str(exc))
    if endpoint is None:
        not_run("no monitoring query API given (--metrics-query) or found (no Service labelled "
                f"{' or '.join(sm.PROMETHEUS_SELECTORS)})")
    try:
        token = Path(o.metrics_query_token_file).read_text().strip() \
            if o.metrics_query_token_file else ""
    except OSError as exc:
        not_run(f"--metrics-query-token-file: {exc}")
    return monitoring.Querier(cluster, endpoint, token)


@pytest.mark.requirement("INF-MET-001")
def test_monitoring_collects_the_workloads_metrics(request, cluster, gpu_env, querier, attachments):
    o = gpu_env.options
    bad = [kv for kv in o.metrics_scrape_labels if "=" not in kv or kv.startswith("=")]
    if bad:
        not_run(f"--metrics-scrape-labels {bad[0]!r}: expected KEY=VALUE")
    labels = dict(kv.split("=", 1) for kv in o.metrics_scrape_labels)
    why = querier.preflight()
    if why:
        attachments.append(ev.Evidence("service-metrics.txt", f"preflight vector(1): {why}"))
        pytest.fail(f"the monitoring system's query API does not answer: {why}")
    namespace = own_namespace(request)
    run_id = secrets.token_hex(5)
    made = monitoring.ScrapeObjects()
    request.addfinalizer(made.delete)
    monitoring.deploy_stand_in(cluster, namespace, run_id, o.metrics_image)
    try:
        how = monitoring.apply_scrape(cluster, namespace, run_id, o.metrics_scrape_manifest,
                                      labels, made)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # the manifest: unreadable, bad YAML
        not_run(f"--metrics-scrape-manifest: {exc}")
    monitoring.wait_stand_in(cluster, namespace)
    monitoring.send_requests(cluster, namespace, sm.REQUESTS)

    checks = sm.expectations(run_id)
    lines = [f"{e.description}: not queried yet" for e in checks]

    def collected() -> bool:
        broken = monitoring.intact(cluster, namespace)
        if broken:
            raise sm.Spoiled(broken)
        done = True
        for i, e in enumerate(checks):
            try:
                ok, lines[i] = sm.status(e, sm.single_sample(querier.query(e.query)))
            except (OSError, sm.QueryError) as exc:
                ok, lines[i] = False, f"{e.description}: {exc}"
            done = done and ok
        return done

    report = (f"query API {querier.endpoint}; scrape selection: {how}; run {run_id}; "
              f"{sm.REQUESTS} requests")
    try:
        wait_for(f"the monitoring system to collect run {run_id}'s metrics", collected,
                 timeout=o.metrics_collection_timeout, interval=1.0)
    except WaitTimeout:
        attachments.append(ev.Evidence("service-metrics.txt", report + "\n" + "\n".join(lines)))
        pytest.fail(f"the monitoring system did not collect the workload's metrics within "
                    f"{o.metrics_collection_timeout:.0f}s ({'; '.join(lines)}): its scrape "
                    f"selection misses the workload or it does not scrape ({how})")
    except sm.Spoiled as exc:
        attachments.append(ev.Evidence("service-metrics.txt", report + "\n" + "\n".join(lines)))
        pytest.fail(str(exc))
    finding(request, f"{report}: " + "; ".join(lines))
