"""The suite as an in-cluster Job: render, apply, wait, delete, and what its pod runs.

Design (only the API, least privilege):

- ``gpuconf job render`` prints the shipped RBAC (``conformance/cluster/gpuconf-rbac.yaml``:
  namespace ``gpuconf-system``, ServiceAccount ``gpuconf``, its roles and admission policy) and
  a Job that runs the image of ``deploy/image/Dockerfile`` as that ServiceAccount. ``apply``
  creates them, waits with progress, fetches the results and deletes the Job.
- In the pod, ``gpuconf job inside`` runs the suites against the cluster it is in (the
  in-cluster ServiceAccount config: ``conformance.cluster.client.connect`` without a kubeconfig),
  writes the results folder to an emptyDir volume (``/results``: results.json, junit.xml,
  allure, the report, CTRF and the evidence bundle), then stores that folder through the API
  (``conformance.run.results_store``), where ``gpuconf job fetch`` reads it back.

The same suites run as a Sonobuoy plugin: ``conformance.run.sonobuoy``.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance import __version__
from conformance.cluster import rbac
from conformance.cluster.client import (
    Cluster,
    Conflict,
    NotFound,
    already_done,
    connect,
    read_or_none,
)
from conformance.cluster.waits import WaitTimeout, wait_for, wait_until_done
from conformance.common import interrupts
from conformance.common.console import Progress
from conformance.common.errors import NotConverged, UsageError
from conformance.common.redact import redact_text
from conformance.common.vocab import EXIT_FAILED, EXIT_OK
from conformance.options import Options
from conformance.report import bundle
from conformance.run.plan import RunPlan, check_writable, summarize
from conformance.run.results_store import JOB_LABEL, chunks, fetch, pack, store

NAMESPACE = rbac.NAMESPACE
SERVICE_ACCOUNT = rbac.SERVICE_ACCOUNT
DEFAULT_IMAGE = f"gpu-conformance:{__version__}"
DEFAULT_NAME = "gpuconf"
RESULTS_MOUNT = "/results"
# The pod's environment (set by the Job's downward API), read by `gpuconf job inside`.
ENV_JOB_NAME = "GPUCONF_JOB_NAME"
ENV_JOB_UID = "GPUCONF_JOB_UID"
ENV_NAMESPACE = "GPUCONF_NAMESPACE"
DEFAULT_TIMEOUT_S = 3600  # the Job's activeDeadlineSeconds: a whole run with GPU kernels
POLL_S = 3.0  # how often `wait_finished` looks at the Job again
# The results are stored before the container exits, so they are there when the Job
# completes; this covers an API server that is slow to show them.
RESULTS_GRACE_S = 60.0
JOB_DELETE_TIMEOUT_S = 60.0


# --- render ------------------------------------------------------------------------------------
@dataclass
class JobSpec:
    """What the Job runs: its name, image, `gpuconf run` flags and limits."""

    name: str = DEFAULT_NAME
    image: str = DEFAULT_IMAGE
    run_args: list[str] = field(default_factory=list)
    product_version: str | None = None
    timeout_s: int = DEFAULT_TIMEOUT_S
    image_pull_policy: str = "IfNotPresent"

    def labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": "gpu-conformance",
                "app.kubernetes.io/part-of": "gpu-conformance",
                "app.kubernetes.io/component": "job", JOB_LABEL: self.name}


def check_name(name: str) -> None:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?", name):
        raise UsageError(f"job name {name!r} is not a DNS label of at most 40 characters "
                         "(lowercase letters, digits, '-'): pass another --name")


def job_manifest(spec: JobSpec) -> dict[str, Any]:
    """The Job: one pod, never restarted, as the least-privilege ServiceAccount."""
    check_name(spec.name)
    args = ["--results", RESULTS_MOUNT]
    if spec.product_version:
        args += ["--product-version", spec.product_version]
    if spec.run_args:
        args += ["--", *spec.run_args]

    def label_env(name: str, label: str) -> dict[str, Any]:
        return {"name": name, "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.labels['{label}']"}}}

    container = {
        "name": "gpuconf",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["gpuconf", "job", "inside"],
        "args": args,
        "env": [label_env(ENV_JOB_NAME, "job-name"),
                label_env(ENV_JOB_UID, "batch.kubernetes.io/controller-uid"),
                {"name": ENV_NAMESPACE, "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.namespace"}}},
                {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                      "limits": {"memory": "1Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "results", "mountPath": RESULTS_MOUNT},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": spec.name, "namespace": NAMESPACE, "labels": spec.labels()},
        "spec": {
            "backoffLimit": 0,  # a conformance run is not retried behind the user's back
            "activeDeadlineSeconds": spec.timeout_s,
            "template": {
                "metadata": {"labels": spec.labels()},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "runAsGroup": 65532, "fsGroup": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "results", "emptyDir": {}},
                                {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def render(spec: JobSpec) -> str:
    """Every object `apply` creates, as one multi-document YAML (``kubectl apply -f -``)."""
    docs = [*rbac.documents(), job_manifest(spec)]
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)


# --- apply, wait, delete -----------------------------------------------------------------------
def _policy_current(cluster: Cluster, progress: Progress) -> None:
    """`rbac.apply` leaves existing objects as they are; an admission policy applied by an
    older gpuconf would refuse the Job's results, so it is brought to the shipped one."""
    shipped = next(d for d in rbac.documents() if d["kind"] == "ValidatingAdmissionPolicy")
    api = client.AdmissionregistrationV1Api(cluster.api_client)
    live = api.read_validating_admission_policy(shipped["metadata"]["name"])
    expressions = [v.expression for v in live.spec.validations or []]
    if expressions != [v["expression"] for v in shipped["spec"]["validations"]]:
        body = {**shipped, "metadata": {**shipped["metadata"],
                                        "resourceVersion": live.metadata.resource_version}}
        api.replace_validating_admission_policy(shipped["metadata"]["name"], body)
        progress(f"updated ValidatingAdmissionPolicy/{shipped['metadata']['name']} to the "
                 "shipped one (it lets the Job store its results)")


def create_job(cluster: Cluster, spec: JobSpec, progress: Progress) -> dict[str, Any]:
    rbac.apply(cluster, progress)
    _policy_current(cluster, progress)
    batch = client.BatchV1Api(cluster.api_client)
    try:
        job = batch.create_namespaced_job(NAMESPACE, job_manifest(spec))
    except Conflict:
        raise UsageError(f"a Job named {spec.name} already exists in {NAMESPACE}: "
                         f"`gpuconf job delete --name {spec.name}`, or pass another "
                         "--name") from None
    progress(f"created Job {NAMESPACE}/{spec.name} (image {spec.image})")
    return job.to_dict()


def read_job(cluster: Cluster, name: str):
    """The Job ``name``, or None when there is none."""
    return read_or_none(client.BatchV1Api(cluster.api_client).read_namespaced_job, name,
                        NAMESPACE)


def _finished(job) -> str | None:
    """'Complete' or 'Failed' once the Job is done, else None."""
    for cond in (job.status.conditions or []) if job and job.status else []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return cond.type
    return None


def _pod_state(cluster: Cluster, name: str) -> str:
    pods = cluster.core.list_namespaced_pod(NAMESPACE, label_selector=f"job-name={name}").items
    if not pods:
        return "no pod yet"
    pod = pods[-1]
    where = f"on node {pod.spec.node_name}" if pod.spec.node_name else "not scheduled yet"
    state = pod.status.phase or "Pending"
    for cs in pod.status.container_statuses or []:
        if cs.state and cs.state.waiting and cs.state.waiting.reason:
            state += f" ({cs.state.waiting.reason})"
        elif cs.state and cs.state.terminated:
            state += f" (exit {cs.state.terminated.exit_code})"
    return f"pod {pod.metadata.name} {where}, {state}"


def wait_finished(cluster: Cluster, name: str, timeout_s: float, progress: Progress) -> str:
    """Wait for the Job to finish, saying what its pod does (each change at once, the wait's
    own lines meanwhile); 'Complete' or 'Failed'."""
    start = time.monotonic()
    said: list[str] = []
    outcome: list[str] = []

    def pending() -> str | None:
        job = read_job(cluster, name)
        if job is None:
            raise NotConverged(f"Job {NAMESPACE}/{name} disappeared while waiting for it")
        try:
            state = _pod_state(cluster, name)
        except ApiException as exc:
            state = f"pod state unknown ({exc.status} {exc.reason})"
        if state not in said[-1:]:
            progress(f"Job {name}: {state} ({time.monotonic() - start:.0f}s)")
            said.append(state)
        if done := _finished(job):
            outcome.append(done)
            return None
        return state

    try:
        seconds = wait_until_done(f"Job {NAMESPACE}/{name} to finish", pending,
                                  timeout=timeout_s, interval=POLL_S, progress=progress,
                                  tolerate_api_errors=False)
    except WaitTimeout as exc:
        raise NotConverged(f"{exc}: `gpuconf job fetch --name {name}` once it does") from None
    progress(f"Job {name} {outcome[0].lower()} after {seconds:.0f}s")
    return outcome[0]


def delete(cluster: Cluster, name: str, progress: Progress, *, wait: bool = True) -> bool:
    """Delete the Job, its pod and its stored results; False when there was no Job."""
    batch = client.BatchV1Api(cluster.api_client)
    try:
        batch.delete_namespaced_job(name, NAMESPACE, propagation_policy="Background")
        found = True
    except NotFound:
        found = False
    for cm in chunks(cluster, name):  # owned by the Job; deleted here too, at once
        with already_done(NotFound):
            cluster.core.delete_namespaced_config_map(cm.metadata.name, NAMESPACE)
    if found and wait:
        wait_for(f"Job {NAMESPACE}/{name} to be deleted",
                 lambda: read_job(cluster, name) is None, timeout=JOB_DELETE_TIMEOUT_S,
                 interval=0.5)
    if found:
        progress(f"deleted Job {NAMESPACE}/{name} and its results")
    return found


def apply_and_wait(cluster: Cluster, spec: JobSpec, results: Path, progress: Progress, *,
                   keep: bool = False, wait: bool = True,
                   results_wait_s: float = RESULTS_GRACE_S) -> int:
    """Create the Job, wait for it, fetch its results into ``results``; the run's exit code.

    The Job is deleted afterwards (and on interrupt) unless ``keep``; when fetching fails it
    is kept, so that nothing is lost, and the line says how to fetch and delete it.
    """
    check_writable(results)
    create_job(cluster, spec, progress)
    if not wait:
        progress(f"not waiting: `gpuconf job fetch --name {spec.name} --results DIR` once it "
                 f"finishes, then `gpuconf job delete --name {spec.name}`")
        return EXIT_OK
    fetched = False
    try:
        outcome = wait_finished(cluster, spec.name, spec.timeout_s + 60, progress)
        fetch(cluster, spec.name, results, wait_s=results_wait_s, progress=progress,
              job_exists=lambda: read_job(cluster, spec.name) is not None)
        fetched = True
        progress(f"results of Job {spec.name} in {results}")
    except KeyboardInterrupt:
        with interrupts.deferred():
            progress(f"interrupted: deleting Job {spec.name} (its pod deletes what it created)")
            delete(cluster, spec.name, progress, wait=False)
        raise
    finally:
        if fetched and not keep:
            with interrupts.deferred():
                delete(cluster, spec.name, progress)
        elif not fetched:
            progress(f"kept Job {NAMESPACE}/{spec.name}: `gpuconf job fetch --name {spec.name}`"
                     f", then `gpuconf job delete --name {spec.name}`")
    verdict = summarize(results)
    if outcome == "Failed" and verdict is None:
        return EXIT_FAILED
    return EXIT_OK if verdict == "PASS" else EXIT_FAILED


# --- inside the pod ----------------------------------------------------------------------------
def run_suites(options: Options, results: Path, progress: Progress) -> int:
    """The suites against the cluster this process is in (no kubeconfig: in-cluster config)."""
    opts = options.replace(target="existing", kubeconfig=options.kubeconfig,
                           results=str(results))
    return RunPlan(opts).execute(progress)


def write_bundle(results: Path, product_version: str | None, progress: Progress) -> Path | None:
    """The evidence bundle of the run in ``results`` into ``results/bundle`` (None: no run)."""
    if not (results / "results.json").is_file() or not (results / "junit.xml").is_file():
        progress(f"no results in {results}: no evidence bundle")
        return None

    out = results / "bundle"
    bundle.write_bundle(results, out, product_version=product_version)
    progress(f"evidence bundle in {out}")
    return out


def inside(options: Options, results: Path, product_version: str | None,
           progress: Progress) -> int:
    """`gpuconf job inside`: run, bundle, store; the run's exit code.

    The Job's name and UID come from the pod's labels (downward API, see :func:`job_manifest`);
    the results are stored whatever the verdict, and also when the run stopped early.
    """
    job_name = os.environ.get(ENV_JOB_NAME) or ""
    if not job_name:
        raise UsageError(f"`gpuconf job inside` runs in the pod of a gpuconf Job ({ENV_JOB_NAME} "
                         "is not set): use `gpuconf job apply`, or `gpuconf run` outside one")
    check_name(job_name)
    cluster = connect(options.kubeconfig, options.context)
    code = EXIT_FAILED
    try:
        code = run_suites(options, results, progress)
    except UsageError as exc:
        progress(f"the run could not start: {redact_text(str(exc))}")
        (results / "error.txt").write_text(redact_text(str(exc)) + "\n")
        code = exc.exit_code
    finally:
        with interrupts.deferred():
            write_bundle(results, product_version, progress)
            run_id = _run_id(results)
            store(cluster, pack(results), job_name, os.environ.get(ENV_JOB_UID) or None,
                  run_id, progress)
    return code


def _run_id(results: Path) -> str:
    try:
        return str(json.loads((results / "results.json").read_text())["run"]["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return "none"
