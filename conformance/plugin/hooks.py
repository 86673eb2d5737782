"""The plugin's entry point (``pytest11: gpu_conformance``): options, markers, selection,
outcomes and failure evidence.

Options come from the one table in ``conformance.options``. The cluster is connected lazily
(the first test that needs it), so ``--help`` and ``--collect-only`` work without one. Each
test's outcome is put on its teardown report, where the :class:`Recorder` of the controller
collects it, workers included.
"""

from __future__ import annotations

import json
import time

import pytest

from conformance import catalog, options
from conformance.cluster import waits
from conformance.common import interrupts
from conformance.common.runid import new_run_id
from conformance.common.vocab import NOT_APPLICABLE_PREFIX, NOT_RUN_PREFIX
from conformance.plugin import api, fixtures
from conformance.plugin.recorder import PLUGIN_NAME, Recorder
from conformance.plugin.results import TestOutcome, clip

MARKERS = (
    "requirement(id): the catalog requirement (conformance/catalog.py) this check implements",
    "gpu: the check needs real GPUs (skipped on the sim and on a mock-NVML node)",
    "target(*names): targets where the check applies (existing, kind, sim, node, local)",
    "disruptive: the check changes the cluster and runs only with --disruptive",
    "device_nodes: a real-GPU check that also proves itself with device nodes alone (runs on "
    "a mock-NVML node, whose GPUs can be listed and handed out but not opened)",
)
EVIDENCE_SECTION = "log (gpuconf evidence)"  # "Captured log ...": reaches JUnit's system-out


# ---- options and configuration ---------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_pytest_options(parser.getgroup("gpu-conformance",
                                               "GPU cluster conformance (gpuconf)"))


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    opts = options.from_pytest(config)
    run_id = (opts.run_id or getattr(config, "workerinput", {}).get("gpuconf_run_id")
              or new_run_id())
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(Recorder(config, opts, run_id), PLUGIN_NAME)
    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "gpu_conformance_fixtures")
    if not hasattr(config, "workerinput"):
        interrupts.interrupt_once()
    waits.set_reporter(_live_lines(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    waits.set_reporter(None)


def _live_lines(config: pytest.Config):
    """Long waits' progress, written to the terminal now, not captured with the test's output
    (under xdist, a worker's lines stay with the worker)."""
    def write(message: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        line = f"[gpuconf {time.strftime('%H:%M:%S')}] {message}"
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.ensure_newline()
            reporter.write_line(line)
    return write


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: workers share the controller's run ID, so one sweep finds all objects."""
    node.workerinput["gpuconf_run_id"] = Recorder.of(node.config).results.run_id


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
    recorder = Recorder.of(config)
    opts = recorder.options
    return [f"gpu-conformance: target={opts.target or 'auto'} "
            f"kubeconfig={opts.kubeconfig or '(default)'} "
            f"context={opts.context or '(current)'} run-id={recorder.results.run_id}"]


# ---- outcomes and evidence -------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    if call.when == "call" and call.excinfo is not None and not call.excinfo.errisinstance(
            pytest.skip.Exception):
        text = fixtures.evidence_text(item)
        if text:  # before the report is made, so the failing report carries it
            item.add_report_section("call", EVIDENCE_SECTION, text)
    report = yield
    phases = item.stash.setdefault(fixtures.PHASES_KEY, {})
    phases[report.when] = report
    if report.when == "teardown":
        try:
            outcome = _outcome(item, phases)
        except Exception as exc:  # recording must never break the run
            outcome = None
            report.sections.append(("gpuconf", f"could not record the outcome: {exc!r}"))
        if outcome is not None:
            report.user_properties.append((api.OUTCOME, json.dumps(outcome.__dict__)))
            _allure_attach(outcome)
    return report


# a skip's reason says what kind of skip it is (conformance.common.vocab)
_SKIP_KINDS = ((NOT_APPLICABLE_PREFIX, "not-applicable"), (NOT_RUN_PREFIX, "not-run"))


def _outcome(item: pytest.Item, phases: dict) -> TestOutcome | None:
    marker = item.get_closest_marker("requirement")
    decisive = phases.get("call") or phases.get("setup")
    if marker is None or decisive is None:
        return None
    failures = [r for r in phases.values() if r.failed]
    if failures:
        outcome, message = "failed", _message(failures[0])
    elif decisive.skipped:
        message = _message(decisive)
        outcome = next((o for prefix, o in _SKIP_KINDS if message.startswith(prefix)),
                       "skipped")
        for prefix, _kind in _SKIP_KINDS:
            message = message.removeprefix(prefix)
        message = message.strip()
    else:
        outcome, message = "passed", "; ".join(
            str(v) for k, v in item.user_properties if k == api.FINDING)
    evidence = [e.as_dict() for e in fixtures.evidence_of(item)]
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
