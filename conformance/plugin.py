"""pytest plugin of gpu-conformance (entry point ``pytest11: gpu_conformance``).

Options live in one group, markers are registered from help strings, the cluster is connected
lazily (the first test that needs it), every test gets its own labelled namespace that is always
deleted, and each test's outcome is recorded against its requirement ID for ``results.json``.
"""

from __future__ import annotations

import json
import secrets
import signal
import time
from pathlib import Path

import pytest

from conformance import catalog, interrupts
from conformance.cluster import evidence as ev
from conformance.cluster import namespaces
from conformance.env import TARGETS, Env, Options, resolve, teardown
from conformance.errors import UsageError
from conformance.results import NOT_APPLICABLE_PREFIX, RunResults, TestOutcome, clip

MARKERS = (
    "requirement(id): the catalog requirement (conformance/catalog.py) this check implements",
    "gpu: the check needs real GPUs (skipped on the sim)",
    "target(*names): targets where the check applies (existing, kind, sim, local)",
    "disruptive: the check changes the cluster and runs only with --disruptive",
)
RESULTS_KEY = pytest.StashKey["RunResults"]()
ENV_KEY = pytest.StashKey["Env | None"]()
PHASES_KEY = pytest.StashKey[dict]()
EVIDENCE_KEY = pytest.StashKey[list]()
USER_PROPERTY = "gpuconf.outcome"
MEASUREMENT_PROPERTY = "gpuconf.measurement"


# ---- options -------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-conformance", "GPU cluster conformance (gpuconf)")
    # --kubeconfig is pytest-kind's option; this plugin reads it too.
    group.addoption("--context", metavar="NAME", help="kubeconfig context to use")
    group.addoption("--target", choices=TARGETS, default=None,
                    help="existing: the kubeconfig's cluster; kind: create one with pytest-kind "
                         "from kind-config/; sim: the local simulated cluster; local: this host's "
                         "GPUs without Kubernetes. Default: existing if a context answers, "
                         "else sim")
    group.addoption("--operator-namespace", default="gpu-operator", metavar="NS",
                    help="namespace of the GPU Operator (default: gpu-operator)")
    group.addoption("--operator-chart", metavar="PATH",
                    help="GPU Operator Helm chart (path) for installs; default NVIDIA's repo")
    group.addoption("--expected-driver-version", metavar="V",
                    help="driver version every GPU node must run, e.g. 580.105.08")
    group.addoption("--min-driver-version", metavar="V",
                    help="lowest acceptable driver version")
    group.addoption("--restart-threshold", type=int, default=1, metavar="N",
                    help="operand restarts allowed (default 1, as the operator's own e2e)")
    group.addoption("--requirement", action="append", default=[], metavar="ID",
                    help="run only these requirement IDs or ID prefixes (repeatable)")
    group.addoption("--gpu-results", metavar="DIR",
                    help="write results.json (and evidence/) into DIR")
    group.addoption("--run-id", metavar="ID", help="label value for this run's objects")
    group.addoption("--combination", metavar="NAME",
                    help="name of the matrix combination this run is (kept in the results)")
    group.addoption("--helm-release", metavar="NAME",
                    help="the operator's Helm release, when this run installed it")
    group.addoption("--sim-name", default="gpuconf", metavar="NAME",
                    help="sim cluster name (default gpuconf)")
    group.addoption("--sim-profile", default="healthy", metavar="PROFILE",
                    help="profile when the plugin starts the sim itself")
    group.addoption("--sim-fault", action="append", default=[], metavar="FAULT",
                    help="fault to inject when the plugin starts the sim itself")
    group.addoption("--kind-config", default="single-gpu.yaml", metavar="FILE",
                    help="kind config in kind-config/ for --target kind")
    group.addoption("--cuda-image", default=Options.cuda_image, metavar="IMAGE",
                    help="image for nvidia-smi pods on real GPUs")
    group.addoption("--workload-image", default=Options.workload_image, metavar="IMAGE",
                    help="CuPy image the gpu_kernels pods run in (module mounted from a "
                         "ConfigMap)")
    group.addoption("--disruptive", action="store_true",
                    help="also run checks that change the cluster (and restore it)")
    group.addoption("--reconcile-timeout", type=float, default=Options.reconcile_timeout,
                    metavar="S", help="how long disruptive checks wait for the operator to react")
    group.addoption("--keep-namespaces", action="store_true",
                    help="keep the namespaces of failed tests for debugging")


def _options(config: pytest.Config) -> Options:
    return Options(
        target=config.getoption("target"),
        kubeconfig=config.getoption("kubeconfig", None),
        context=config.getoption("context"),
        operator_namespace=config.getoption("operator_namespace"),
        operator_chart=config.getoption("operator_chart"),
        expected_driver_version=config.getoption("expected_driver_version"),
        min_driver_version=config.getoption("min_driver_version"),
        restart_threshold=config.getoption("restart_threshold"),
        sim_name=config.getoption("sim_name"),
        sim_profile=config.getoption("sim_profile"),
        sim_faults=list(config.getoption("sim_fault")),
        kind_config=config.getoption("kind_config"),
        cuda_image=config.getoption("cuda_image"),
        workload_image=config.getoption("workload_image"),
        disruptive=config.getoption("disruptive"),
        reconcile_timeout=config.getoption("reconcile_timeout"),
        keep_namespaces=config.getoption("keep_namespaces"),
        helm_release=config.getoption("helm_release"),
    )


# ---- configuration and collection ----------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    run_id = config.getoption("run_id") or (
        getattr(config, "workerinput", {}).get("gpuconf_run_id")
        or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3))
    config.stash[RESULTS_KEY] = RunResults(
        run_id=run_id, target=config.getoption("target") or "auto",
        profile=config.getoption("sim_profile"), faults=list(config.getoption("sim_fault")),
        combination=config.getoption("combination"),
        pytest_args=list(config.invocation_params.args))
    config.stash[ENV_KEY] = None
    from conformance import fixtures

    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "gpu_conformance_fixtures")
    if not hasattr(config, "workerinput"):
        # SIGTERM ends a run like Ctrl-C: finalizers delete what was created, results are kept.
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure_node(node) -> None:
    """xdist: workers share the controller's run ID, so one sweep finds all objects."""
    node.workerinput["gpuconf_run_id"] = node.config.stash[RESULTS_KEY].run_id


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    wanted = config.getoption("requirement")
    try:
        selected = {r.id for r in catalog.select(wanted)} if wanted else None
    except catalog.UnknownRequirement as exc:
        raise pytest.UsageError(str(exc)) from None
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("requirement")
        if marker is None:
            keep.append(item)
            continue
        req_id = marker.args[0]
        if req_id not in catalog.BY_ID:
            raise pytest.UsageError(f"{item.nodeid}: unknown requirement ID {req_id!r}")
        (keep if selected is None or req_id in selected else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"gpu-conformance: target={config.getoption('target') or 'auto'} "
            f"kubeconfig={config.getoption('kubeconfig', None) or '(default)'} "
            f"context={config.getoption('context') or '(current)'} "
            f"run-id={config.stash[RESULTS_KEY].run_id}"]


# ---- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def gpu_env(request: pytest.FixtureRequest) -> Env:
    """The resolved target and connected cluster (connects on first use)."""
    config = request.config
    env = config.stash[ENV_KEY]
    if env is None:
        try:
            env = resolve(_options(config), config.stash[RESULTS_KEY].run_id)
        except UsageError as exc:
            pytest.exit(f"gpuconf: {exc}", returncode=4)
        config.stash[ENV_KEY] = env
        config.stash[RESULTS_KEY].target = env.target
    return env


@pytest.fixture(scope="session")
def cluster(gpu_env: Env):
    """The connected cluster (skips on --target local)."""
    if gpu_env.cluster is None:
        pytest.skip(f"not-applicable: target {gpu_env.target} has no Kubernetes cluster")
    return gpu_env.cluster


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> list[ev.Evidence]:
    """Append :class:`Evidence` here; it is attached to the results when the test fails."""
    items: list[ev.Evidence] = []
    request.node.stash[EVIDENCE_KEY] = items
    return items


@pytest.fixture
def namespace(request: pytest.FixtureRequest, cluster, gpu_env: Env, evidence) -> str:
    """A fresh labelled namespace for this test, deleted afterwards (dumped first on failure)."""
    name = namespaces.create_namespace(cluster, request.node.name, gpu_env.run_id)

    def finish() -> None:
        failed = _failed(request.node)
        if failed:
            evidence.extend(ev.namespace_dump(cluster, name))
        if not (failed and gpu_env.options.keep_namespaces):
            namespaces.delete_namespace(cluster, name)

    request.addfinalizer(finish)
    return name


@pytest.fixture(autouse=True)
def _requirement_gate(request: pytest.FixtureRequest) -> None:
    """Skip a check where its requirement cannot be checked, with the reason."""
    marker = request.node.get_closest_marker("requirement")
    needs_gpu = request.node.get_closest_marker("gpu") is not None
    disruptive = request.node.get_closest_marker("disruptive") is not None
    req = catalog.BY_ID.get(marker.args[0]) if marker else None
    if req is not None:
        needs_gpu = needs_gpu or req.needs_gpu
        disruptive = disruptive or req.disruptive
        _allure_labels(req)
    if not (needs_gpu or disruptive or req):
        return
    env: Env = request.getfixturevalue("gpu_env")
    if disruptive and not env.options.disruptive:
        pytest.skip("changes the cluster: run with --disruptive to include it")
    targets = req.targets if req else TARGETS
    target_marker = request.node.get_closest_marker("target")
    if target_marker is not None:
        targets = target_marker.args
    if env.target not in targets:
        if needs_gpu and env.target == "sim":
            pytest.skip("needs real GPUs: the sim simulates nodes and pods, not devices")
        pytest.skip(f"not-applicable: checked on {', '.join(targets)}, not on {env.target}")


def _allure_labels(req: catalog.Requirement) -> None:
    try:
        import allure
    except ImportError:
        return
    allure.dynamic.epic(req.area)
    allure.dynamic.feature(req.layer)
    allure.dynamic.story(req.id)
    allure.dynamic.title(f"{req.id}: {req.title}")
    allure.dynamic.severity(
        {"critical": "critical", "major": "normal", "minor": "minor", "info": "trivial"}[
            req.severity])


# ---- reporting -----------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    phases = item.stash.setdefault(PHASES_KEY, {})
    phases[report.when] = report
    if report.when == "teardown":
        try:
            outcome = _outcome(item, phases)
        except Exception as exc:  # recording must never break the run
            outcome = None
            report.sections.append(("gpuconf", f"could not record the outcome: {exc!r}"))
        if outcome is not None:
            report.user_properties.append((USER_PROPERTY, json.dumps(outcome.__dict__)))
            _allure_attach(outcome)
    return report


def _failed(item: pytest.Item) -> bool:
    phases = item.stash.get(PHASES_KEY, {})
    return any(r.failed for r in phases.values())


def _outcome(item: pytest.Item, phases: dict) -> TestOutcome | None:
    marker = item.get_closest_marker("requirement")
    if marker is None:
        return None
    decisive = phases.get("call") or phases.get("setup")
    if decisive is None:
        return None
    failed = [r for r in phases.values() if r.failed]
    if failed:
        outcome, message = "failed", _message(failed[0])
    elif decisive.skipped:
        message = _message(decisive)
        outcome = "not-applicable" if message.startswith(NOT_APPLICABLE_PREFIX) else "skipped"
        message = message.removeprefix(NOT_APPLICABLE_PREFIX).strip()
    else:
        outcome, message = "passed", "; ".join(
            str(v) for k, v in item.user_properties if k == "gpuconf.finding")
    evidence = [e.as_dict() for e in item.stash.get(EVIDENCE_KEY, [])]
    if outcome != "failed":
        evidence = [e for e in evidence if e["name"].startswith("finding")]
    for e in evidence:
        e["content"] = clip(e["content"])
    return TestOutcome(nodeid=item.nodeid, requirement=marker.args[0], outcome=outcome,
                       duration_s=sum(r.duration for r in phases.values()), message=message,
                       evidence=evidence)


def _message(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple):
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        # pytest appends the rewritten expression ("assert not [...]"); the sentence is enough
        text = crash.message.removeprefix("AssertionError: ")
        return text.split("\nassert ")[0].strip()
    return str(longrepr).strip().splitlines()[-1] if longrepr else ""


def _allure_attach(outcome: TestOutcome) -> None:
    if not outcome.evidence:
        return
    try:
        import allure
    except ImportError:
        return
    for item in outcome.evidence:
        allure.attach(item["content"], name=item["name"],
                      attachment_type=allure.attachment_type.TEXT)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "teardown":
        return
    for key, value in report.user_properties:
        if key == USER_PROPERTY:
            _CURRENT_RESULTS.add(TestOutcome(**json.loads(value)))
        elif key == MEASUREMENT_PROPERTY:
            data = json.loads(value)
            _CURRENT_RESULTS.measure(data["family"], data["value"])


class _ResultsProxy:
    """The controller's RunResults, reachable from hooks that get no config."""

    results: RunResults | None = None

    def add(self, outcome: TestOutcome) -> None:
        if self.results is not None:
            self.results.add(outcome)

    def measure(self, family: str, value) -> None:
        if self.results is not None:
            self.results.add_measurement(family, value)


_CURRENT_RESULTS = _ResultsProxy()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CURRENT_RESULTS.results = session.config.stash[RESULTS_KEY]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # The sweep and the results file must not be cut short by a second interrupt: a signal
    # that arrives now is remembered and the run is reported interrupted once they are done.
    with interrupts.deferred() as late:
        _finish_session(session, exitstatus, late)
    if late:
        session.exitstatus = pytest.ExitCode.INTERRUPTED


def _finish_session(session: pytest.Session, exitstatus: int,
                    late: interrupts.Deferred) -> None:
    config = session.config
    results = config.stash[RESULTS_KEY]
    env: Env | None = config.stash.get(ENV_KEY, None)
    is_worker = hasattr(config, "workerinput")
    results.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    if env is None and not is_worker and config.getoption("kubeconfig", None):
        env = _controller_env(config)  # xdist: the workers ran the tests, not this process
    if env is not None and env.cluster is not None and not is_worker:
        try:
            # Belt and braces: whatever a finalizer missed (an interrupt mid-setup) goes now.
            # Only the controller sweeps: a worker that finishes first must not delete the
            # namespaces of a worker still running.
            namespaces.sweep(env.cluster, results.run_id)
        except Exception as exc:
            config.get_terminal_writer().line(
                f"gpuconf: cleanup of run {results.run_id} failed ({exc}); run "
                f"`gpuconf cleanup --run-id {results.run_id}`", red=True)
        from conformance.fingerprint import fingerprint

        try:
            results.fingerprint = fingerprint(env)
        except Exception as exc:  # a fingerprint must never lose the results
            results.fingerprint = {"error": str(exc)}
        results.measurements.setdefault("api_requests", env.cluster.counter.by_verb)
    elif env is not None and env.target == "local" and not is_worker:
        from conformance.fingerprint import local_fingerprint

        try:
            results.fingerprint = local_fingerprint()
        except Exception as exc:  # no NVML here: the results still count
            results.fingerprint = {"error": f"no GPU inventory: {exc}"}
    if results.target != "sim":  # the sim options mean nothing for other targets
        results.profile, results.faults = None, []
    folder = config.getoption("gpu_results")
    if folder and not is_worker:
        if late:
            results.interrupted, exitstatus = True, pytest.ExitCode.INTERRUPTED
        path = results.write(Path(folder), int(exitstatus))
        config.get_terminal_writer().line(f"gpuconf: results written to {path}")
    if env is not None and config.stash.get(ENV_KEY, None) is env:
        teardown(env)


def _controller_env(config: pytest.Config) -> Env | None:
    try:
        return resolve(_options(config), config.stash[RESULTS_KEY].run_id)
    except Exception:
        return None


def finding(request: pytest.FixtureRequest, text: str) -> None:
    """Record a finding on a passing check (shown as its message in the report)."""
    request.node.user_properties.append(("gpuconf.finding", text))


def not_applicable(reason: str) -> None:
    pytest.skip(f"{NOT_APPLICABLE_PREFIX} {reason}")


def record_measurement(request: pytest.FixtureRequest, family: str, value) -> None:
    """Keep a figure (kernel, interference, latency) for results.json; works under xdist."""
    request.node.user_properties.append(
        (MEASUREMENT_PROPERTY, json.dumps({"family": family, "value": value}, default=str)))
