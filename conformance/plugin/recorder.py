"""The session's recorder: outcomes in, ``results.json`` out.

One :class:`Recorder` is registered per pytest process as a plugin object (the way
pytest-xdist registers its session object), so its hooks run with its own state instead of
module globals. On xdist workers it only holds the environment; the controller collects every
worker's outcomes from the test reports, sweeps the run's namespaces and writes the results.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cluster import namespaces
from conformance.common import interrupts
from conformance.common.errors import UsageError
from conformance.options import Options
from conformance.plugin import api
from conformance.plugin.results import RunResults, TestOutcome
from conformance.run import fingerprint, targets
from conformance.run.targets import Env

PLUGIN_NAME = "gpuconf-recorder"


class Recorder:
    def __init__(self, config: pytest.Config, options: Options, run_id: str) -> None:
        self.config = config
        self.options = options
        self.is_worker = hasattr(config, "workerinput")
        self.results = RunResults(
            run_id=run_id, target=options.target or "auto", profile=options.sim_profile,
            faults=list(options.sim_fault), combination=options.combination,
            pytest_args=list(config.invocation_params.args))
        self.env: Env | None = None

    @classmethod
    def of(cls, config: pytest.Config) -> Recorder:
        return config.pluginmanager.get_plugin(PLUGIN_NAME)

    # ---- the environment (resolved on first use) ------------------------------------------
    def environment(self) -> Env:
        if self.env is None:
            try:
                self.env = targets.resolve(self.options, self.results.run_id)
            except UsageError as exc:
                pytest.exit(f"gpuconf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
            self.results.target = self.env.target
        return self.env

    # ---- hooks ---------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for key, value in report.user_properties:
            if key == api.OUTCOME:
                self.results.add(TestOutcome(**json.loads(value)))
            elif key == api.MEASUREMENT:
                data = json.loads(value)
                self.results.add_measurement(data["family"], data["value"])

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # The sweep and the results file must not be cut short by a second interrupt: a
        # signal that arrives now is remembered, and the run reported interrupted afterwards.
        with interrupts.deferred() as late:
            self._finish(exitstatus, late)
        if late:
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    # ---- end of the session --------------------------------------------------------------
    def _finish(self, exitstatus: int, late: interrupts.Deferred) -> None:
        if self.is_worker:  # the controller sweeps and writes; a worker only lets go
            self._teardown()
            return
        results = self.results
        results.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(late)
        env = self.env or self._controller_env()
        if env is not None and env.cluster is not None:
            self._sweep(env)
            results.fingerprint = _safely(lambda: fingerprint.of_cluster(env))
            results.measurements.setdefault("api_requests", env.cluster.counter.by_verb)
        elif env is not None and env.target == "local":
            results.fingerprint = _safely(fingerprint.of_local_host)
        if results.target != "sim":  # the sim options mean nothing for other targets
            results.profile, results.faults = None, []
        folder = self.options.gpu_results
        if folder:
            code = pytest.ExitCode.INTERRUPTED if results.interrupted else int(exitstatus)
            path = results.write(Path(folder), int(code))
            self.config.get_terminal_writer().line(f"gpuconf: results written to {path}")
        self._teardown()

    def _controller_env(self) -> Env | None:
        """Under xdist the workers ran the tests; the controller connects to sweep."""
        if not self.options.kubeconfig:
            return None
        try:
            return targets.resolve(self.options, self.results.run_id)
        except Exception:
            return None

    def _sweep(self, env: Env) -> None:
        """Whatever a finalizer missed (an interrupt mid-setup) goes now."""
        try:
            namespaces.sweep(env.cluster, self.results.run_id)
        except Exception as exc:
            self.config.get_terminal_writer().line(
                f"gpuconf: cleanup of run {self.results.run_id} failed ({exc}); run "
                f"`gpuconf cleanup --run-id {self.results.run_id}`", red=True)

    def _teardown(self) -> None:
        if self.env is not None:
            targets.teardown(self.env)


def _safely(read) -> dict:
    """A fingerprint must never lose the results: a failure to take it is recorded instead."""
    try:
        return read()
    except Exception as exc:
        return {"error": f"no fingerprint: {exc}"}
