"""`gpuconf job` on the sim, as far as KWOK allows.

What is real here: `gpuconf job apply` (a process) creates the Namespace, the shipped RBAC and
the Job through the real API server; the real Job controller creates the pod, the real
scheduler binds it to a node, KWOK plays the kubelet (Running, then Succeeded: it runs no
container) and the real Job controller marks the Job Complete. The container's command is then
run here as a local process with the environment a pod gets: KUBERNETES_SERVICE_HOST/PORT, no
kubeconfig anywhere, and the ServiceAccount files (a token from the TokenRequest API bound to
that very pod, as the kubelet's projected token is, and the cluster CA), so the in-cluster code
path of `connect()` and the least-privilege RBAC and admission policy are what the suites and
the results upload go through. `apply` then fetches the results through the API, and
`gpuconf job fetch` / `gpuconf job delete` work on what the Job left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from conformance.cluster import rbac
from conformance.cluster.client import connect
from conformance.cluster.waits import wait_for
from conformance.run import job, results_store

NAME = f"itest-{os.getpid() % 100000}"
# Checks that hold on any cluster with the stack: as a Job the target is `existing`, where the
# GPU-only checks expect pods that really run (KWOK's do not).
SELECTION = ["--suite", "stack", "--requirement", "STACK-OP-001", "--requirement", "STACK-DP",
             "--requirement", "STACK-GFD"]
CTRF_SCHEMA = Path(__file__).resolve().parents[1] / "data" / "ctrf" / "ctrf-schema-0.0.json"


def gpuconf(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "conformance.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def job_pod(cluster, name: str):
    pods = cluster.core.list_namespaced_pod(job.NAMESPACE, label_selector=f"job-name={name}")
    return pods.items[0] if pods.items else None


def in_cluster_env(cluster, pod, folder: Path) -> dict[str, str]:
    """What the kubelet gives the Job's container: service env, ServiceAccount files, labels."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": 3600,
                        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                           "name": pod.metadata.name,
                                           "uid": pod.metadata.uid}}}
    token = cluster.core.create_namespaced_service_account_token(
        pod.spec.service_account_name, job.NAMESPACE, request).status.token
    sa = folder / "serviceaccount"
    sa.mkdir(parents=True)
    (sa / "token").write_text(token)
    (sa / "namespace").write_text(job.NAMESPACE)
    (sa / "ca.crt").write_text(Path(cluster.api_client.configuration.ssl_ca_cert).read_text())
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    home = folder / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(HOME=str(home), KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port,
               GPUCONF_SERVICE_ACCOUNT_DIR=str(sa),
               **{job.ENV_JOB_NAME: pod.metadata.labels["job-name"],
                  job.ENV_JOB_UID: pod.metadata.labels["batch.kubernetes.io/controller-uid"],
                  job.ENV_NAMESPACE: pod.metadata.namespace})
    return env


def test_render_is_what_apply_creates():
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "job", "render", "--name",
                           NAME, "--", *SELECTION], capture_output=True, text=True, timeout=60,
                          check=True)
    import yaml

    docs = list(yaml.safe_load_all(proc.stdout))
    assert [d["kind"] for d in docs[:-1]] == [d["kind"] for d in rbac.documents()]
    assert docs[-1] == job.job_manifest(job.JobSpec(name=NAME, run_args=SELECTION))


def test_job_end_to_end_on_the_sim(sim, sim_cluster, tmp_path):
    kubeconfig = str(sim.kubeconfig)
    fetched = tmp_path / "fetched"
    apply = gpuconf("job", "apply", "--name", NAME, "--kubeconfig", kubeconfig, "--results",
                    str(fetched), "--product-version", "1.37", "--keep", "--results-wait",
                    "300", "--", *SELECTION)
    try:
        # -- the Job's pod, real to the API server, the Job controller and the scheduler
        pod = wait_for("the Job's pod to be bound to a node",
                       lambda: (p := job_pod(sim_cluster, NAME)) and p.spec.node_name and p,
                       timeout=90, interval=0.5)
        assert pod.spec.service_account_name == rbac.SERVICE_ACCOUNT
        assert pod.metadata.owner_references[0].kind == "Job"
        events = sim_cluster.core.list_namespaced_event(
            job.NAMESPACE, field_selector=f"involvedObject.name={pod.metadata.name}").items
        scheduled = [e for e in events if e.reason == "Scheduled"]
        assert scheduled and pod.spec.node_name in scheduled[0].message
        wait_for("the Job to complete (KWOK ends the pod, the Job controller the Job)",
                 lambda: job._finished(job.read_job(sim_cluster, NAME)) == "Complete",
                 timeout=90, interval=0.5)

        # -- the container's command, run here in the pod's environment
        container = pod.spec.containers[0]
        assert container.command == ["gpuconf", "job", "inside"]
        args = [str(tmp_path / "volume") if a == job.RESULTS_MOUNT else a
                for a in container.args]
        env = in_cluster_env(sim_cluster, pod, tmp_path)
        assert not Path(env["HOME"], ".kube", "config").exists()
        inside = subprocess.run([sys.executable, "-m", "conformance.cli", "job", "inside",
                                 *args], env=env, capture_output=True, text=True, timeout=300,
                                check=False)
        assert inside.returncode == 0, inside.stdout[-3000:] + inside.stderr[-3000:]
        assert "403" not in inside.stdout + inside.stderr
        stored = results_store.chunks(sim_cluster, NAME)
        assert stored and all(cm.metadata.owner_references[0].uid == pod.metadata.labels[
            "batch.kubernetes.io/controller-uid"] for cm in stored)

        # -- apply sees them, fetches them through the API, says what it did
        out, err = apply.communicate(timeout=300)
    finally:
        if apply.poll() is None:
            apply.kill()
            apply.communicate()
    assert apply.returncode == 0, out[-3000:] + err[-3000:]
    assert f"created Job {job.NAMESPACE}/{NAME}" in err
    assert f"Job {NAME}: pod {pod.metadata.name} on node {pod.spec.node_name}" in err
    assert f"Job {NAME} complete after" in err
    assert "gpuconf PASS" in out
    doc = json.loads((fetched / "results.json").read_text())
    assert doc["run"]["target"] == "existing"
    assert {r["verdict"] for r in doc["requirements"] if r["tests"]} <= {"pass",
                                                                        "not-applicable"}
    for name in ("e2e.log", "junit.xml", "results.json", "ctrf-report.json", "PRODUCT.yaml",
                 "report/report.html"):
        assert (fetched / "bundle" / name).is_file(), name
    import jsonschema

    jsonschema.Draft7Validator(json.loads(CTRF_SCHEMA.read_text()),
                               format_checker=jsonschema.FormatChecker()).validate(
        json.loads((fetched / "ctrf-report.json").read_text()))
    token = (tmp_path / "serviceaccount" / "token").read_text()
    leaks = [str(p) for p in fetched.rglob("*") if p.is_file()
             and token in p.read_text(errors="replace")]
    assert not leaks

    # -- `job fetch` again (kept), then `job delete`: the Job, its pod and its results go
    again = subprocess.run([sys.executable, "-m", "conformance.cli", "job", "fetch", "--name",
                            NAME, "--kubeconfig", kubeconfig, "--results",
                            str(tmp_path / "again")], capture_output=True, text=True,
                           timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "results.json").read_bytes() == \
        (fetched / "results.json").read_bytes()
    gone = subprocess.run([sys.executable, "-m", "conformance.cli", "job", "delete", "--name",
                           NAME, "--kubeconfig", kubeconfig], capture_output=True, text=True,
                          timeout=120, check=False)
    assert gone.returncode == 0, gone.stderr
    assert job.read_job(sim_cluster, NAME) is None
    assert results_store.chunks(sim_cluster, NAME) == []
    wait_for("the Job's pod to be deleted", lambda: job_pod(sim_cluster, NAME) is None,
             timeout=60, interval=0.5)


def test_service_account_may_store_results_only_where_and_as_shipped(sim, sim_cluster,
                                                                     tmp_path):
    rbac.apply(sim_cluster)
    kubeconfig = rbac.service_account_kubeconfig(sim_cluster, tmp_path / "sa.kubeconfig")
    sa = connect(str(kubeconfig))

    def configmap(labels: dict[str, str]) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"probe-{time.monotonic_ns()}", "labels": labels}}

    results = {"app.kubernetes.io/component": results_store.COMPONENT}
    sa.core.create_namespaced_config_map(job.NAMESPACE, configmap(results), dry_run="All")

    def refused(namespace: str, labels: dict[str, str]) -> ApiException | None:
        try:
            sa.core.create_namespaced_config_map(namespace, configmap(labels), dry_run="All")
        except ApiException as exc:
            return exc
        return None

    # A new admission policy is enforced once the API server's informer has it (about a
    # second; longer on a loaded machine): wait for the first refusal, then hold each one.
    wait_for("the admission policy to refuse an unlabelled ConfigMap",
             lambda: refused(job.NAMESPACE, {}), timeout=60, tolerate_api_errors=False)
    for namespace, labels in ((job.NAMESPACE, {}), ("kube-system", results),
                              ("default", results)):
        exc = refused(namespace, labels)
        assert exc is not None and exc.status in (403, 422), (namespace, labels)


def test_fetch_of_an_unknown_job_is_bad_input(sim, tmp_path):
    for args in (["fetch", "--name", "no-such-job"], ["fetch", "--name", "Bad_Name"]):
        proc = subprocess.run([sys.executable, "-m", "conformance.cli", "job", *args,
                               "--kubeconfig", str(sim.kubeconfig), "--results", str(tmp_path)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpuconf: error: ")
