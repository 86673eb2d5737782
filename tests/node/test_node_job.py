"""The suites inside the node's cluster, for real: the suite's image (`make image`) imported into
the node's containerd, run by the real kubelet as `gpuconf job` (as the least-privilege
ServiceAccount) and as the Sonobuoy plugin (`sonobuoy run` of Sonobuoy v0.57.3 built here, its
aggregator and worker image made from that binary).

The image holds the checkout's code: ``ci/build-image.sh`` builds it unless its archive was built
from the same inputs (``make setup`` builds it; a change to a file the Dockerfile copies makes
it stale; building needs buildah and, the first time, debootstrap and the Debian mirror; without
buildah a stale image makes the tests skip with that reason). It is imported once for both
tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kubernetes import client

from conformance.binaries import binaries
from conformance.cluster import rbac
from conformance.cluster.waits import wait_for
from conformance.common.errors import UsageError
from conformance.node import lifecycle, suite_images
from conformance.run import job
from tests.node import node_env
from tests.node.node_env import NODE_NAME

pytestmark = pytest.mark.xdist_group(node_env.XDIST_GROUP)

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "deploy" / "sonobuoy" / "gpuconf-plugin.yaml"
JOB_NAME = f"ntest-job-{os.getpid() % 100000}"
SUITES = ("--suite", "stack")  # ~10 s in the Job's pod here
CLI_TIMEOUT_S = 300  # a Job or a plugin run took 10-40 s here
IMAGE_BUILD_TIMEOUT_S = 900  # from nothing ~110 s (debootstrap + pip from PyPI), busy CI slower


@pytest.fixture(scope="module")
def suite_image(node) -> str:
    """The checkout's suite image, built when stale and imported into the node once."""
    archive = suite_images.suite_archive()
    proc = subprocess.run(["bash", "ci/build-image.sh", "--no-smoke", "--out", str(archive)],
                          cwd=REPO, capture_output=True, text=True,
                          timeout=IMAGE_BUILD_TIMEOUT_S, check=False)
    if proc.returncode != 0 and shutil.which("buildah") is None:
        pytest.skip(f"the suite image at {archive} is not current and buildah is missing: "
                    "apt-get install buildah debootstrap")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    refs = suite_images.import_suite_image(NODE_NAME, archive, progress=lambda _m: None)
    assert f"docker.io/library/{job.DEFAULT_IMAGE}" in refs, refs
    return job.DEFAULT_IMAGE


def _gpuconf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S, check=False)


def _files(folder: Path) -> set[str]:
    """The folder's files (allure's, named by random UUIDs, as their folder)."""
    return {"allure-results/" if p.parts[0] == "allure-results" else str(p)
            for p in (f.relative_to(folder) for f in folder.rglob("*") if f.is_file())}


def _verdicts(folder: Path) -> dict[str, str]:
    doc = json.loads((folder / "results.json").read_text())
    return {r["id"]: r["verdict"] for r in doc["requirements"]}


def _testcases(junit: bytes) -> dict[str, bool]:
    """JUnit test case name -> skipped."""
    return {case.get("name"): case.find("skipped") is not None
            for case in ET.fromstring(junit).iter("testcase")}


def test_job_runs_the_suites_in_the_node_and_fetch_brings_back_what_a_cli_run_writes(
        node, api, suite_image, tmp_path):
    """`gpuconf job apply` against the node: the real kubelet runs the suite image's container
    as ServiceAccount gpuconf; the results come back through the API, and `job fetch` gets the
    same files again; they are a CLI run's files (plus the evidence bundle) with its verdicts."""
    kubeconfig = ("--kubeconfig", str(node.kubeconfig))
    applied, fetched, cli = tmp_path / "applied", tmp_path / "fetched", tmp_path / "cli"
    try:
        run = _gpuconf("job", "apply", *kubeconfig, "--name", JOB_NAME, "--image", suite_image,
                       "--keep", "--results", str(applied), "--product-version", "1.37", "--",
                       *SUITES)
        assert run.returncode == 0, run.stdout + run.stderr
        pods = client.CoreV1Api(api).list_namespaced_pod(
            job.NAMESPACE, label_selector=f"job-name={JOB_NAME}").items
        assert len(pods) == 1, [p.metadata.name for p in pods]
        pod = pods[0]
        assert pod.spec.service_account_name == rbac.SERVICE_ACCOUNT
        assert pod.spec.node_name == lifecycle.status(NODE_NAME)["node"]  # the real kubelet
        (status,) = pod.status.container_statuses
        assert status.state.terminated.exit_code == 0, status.state
        assert status.image_id.startswith("sha256:"), status  # a container containerd ran
        got = _gpuconf("job", "fetch", *kubeconfig, "--name", JOB_NAME, "--results",
                       str(fetched))
        assert got.returncode == 0, got.stdout + got.stderr
    finally:
        gone = _gpuconf("job", "delete", *kubeconfig, "--name", JOB_NAME)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    ran = _gpuconf("run", "--target", "existing", *kubeconfig, "--results", str(cli), *SUITES)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    assert _files(applied) == _files(fetched)
    bundle = {f for f in _files(applied) if f.startswith("bundle/")}
    assert {"bundle/junit.xml", "bundle/results.json", "bundle/ctrf-report.json",
            "bundle/PRODUCT.yaml", "bundle/report/report.html"} <= bundle
    assert _files(applied) - bundle == _files(cli)
    assert _verdicts(applied) == _verdicts(cli)
    assert "pass" in _verdicts(applied).values()
    assert (_testcases((applied / "junit.xml").read_bytes())
            == _testcases((cli / "junit.xml").read_bytes()))
    ctrf = [{t["name"] for t in json.loads((f / "ctrf-report.json").read_text())["results"]
             ["tests"]} for f in (applied, cli)]
    assert ctrf[0] == ctrf[1]


def test_sonobuoy_runs_the_shipped_plugin_in_the_node_and_shows_our_junit(node, suite_image,
                                                                          tmp_path):
    """`sonobuoy run --plugin deploy/sonobuoy/gpuconf-plugin.yaml` (unchanged): the aggregator
    and the plugin pod run on the node, `sonobuoy retrieve` brings the tarball back and
    `sonobuoy results` reports the test cases of the plugin's junit.xml."""
    try:
        sonobuoy = str(binaries.require_sonobuoy())
    except UsageError as exc:
        pytest.skip(str(exc))
    suite_images.import_sonobuoy_image(NODE_NAME, progress=lambda _m: None)
    kubeconfig = ("--kubeconfig", str(node.kubeconfig))

    def call(*args: str) -> str:
        proc = subprocess.run([sonobuoy, *args], capture_output=True, text=True,
                              timeout=CLI_TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"sonobuoy {args[0]}: {proc.stdout}{proc.stderr}"
        return proc.stdout

    def run_status() -> str | None:
        """The run's status once it ended (`sonobuoy status`, what `run --wait` polls too)."""
        proc = subprocess.run([sonobuoy, "status", *kubeconfig, "--json"], capture_output=True,
                              text=True, timeout=CLI_TIMEOUT_S, check=False)
        try:
            status = json.loads(proc.stdout).get("status") if proc.returncode == 0 else None
        except ValueError:  # before the aggregator has said anything
            return None
        return status if status in ("complete", "failed") else None

    try:
        # dnscheck: the node has no cluster DNS (conformance/node/README.md); the plugin needs none
        call("run", *kubeconfig, "--plugin", str(PLUGIN), "--skip-preflight=dnscheck")
        # not `run --wait`: it looks every 20 s (a fixed poll interval in v0.57.3), so a run
        # done in 25 s was seen at 40 s
        status = wait_for("the Sonobuoy run to end", run_status, timeout=CLI_TIMEOUT_S,
                          interval=1.0, progress=lambda _m: None)
        assert status == "complete", f"the Sonobuoy run ended {status}"
        printed = call("retrieve", *kubeconfig, str(tmp_path)).strip().splitlines()[-1]
        tarball = str(tmp_path / Path(printed).name)
    finally:
        call("delete", *kubeconfig)  # not waiting for the namespace: the node goes down
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("plugins/gpuconf/results/global/junit.xml")
        assert member is not None
        cases = _testcases(member.read())
        names = set(tar.getnames())
    assert {"plugins/gpuconf/results/global/results.json",
            "plugins/gpuconf/results/global/PRODUCT.yaml"} <= names
    summary = call("results", tarball)
    skipped = sum(cases.values())
    assert "Plugin: gpuconf\nStatus: passed\n" in summary, summary
    assert f"Total: {len(cases)}\nPassed: {len(cases) - skipped}\nFailed: 0\n" in summary, summary
    detailed = [json.loads(line) for line in call("results", tarball, "--plugin", "gpuconf",
                                                  "--mode", "detailed").splitlines()
                if line.strip()]
    assert {d["name"] for d in detailed} == set(cases)
