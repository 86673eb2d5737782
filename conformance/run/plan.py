"""The run plan: one place that turns options into a pytest command and runs it.

``gpuconf run``, ``gpuconf certify --driver-version``, matrix runs, the integration tests and
the scale benchmark all build their pytest command here, and bring the environment the run
needs (a sim, a real node, an operator install) up and down here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from conformance import catalog, options
from conformance.cluster.client import check_reachable, connect
from conformance.common import interrupts
from conformance.common.console import Progress, quiet, say
from conformance.common.errors import UsageError
from conformance.common.runid import new_run_id, short
from conformance.common.vocab import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from conformance.node import chart, lifecycle
from conformance.options import Options
from conformance.report import ctrf
from conformance.report.build import build_report
from conformance.report.load import load_results
from conformance.report.model import overall, verdict_counts
from conformance.run import kind_engine, targets
from conformance.run.operator_install import install_operator
from conformance.sim import cluster as simcluster
from conformance.sim import faults, profiles

SUITE_DIR = Path(__file__).resolve().parents[1] / "suites"
PYTEST_TIMEOUT_AFTER_INTERRUPT_S = 120.0  # the suite deletes what it made, writes its results
# pytest's exit codes -> gpuconf's: 2 interrupted, 4 usage error (its one line was printed)
_PYTEST_EXIT = {0: EXIT_OK, 1: EXIT_FAILED, 2: EXIT_INTERRUPTED, 4: EXIT_USAGE}
_NO_TESTS_COLLECTED = 5


def suite_paths(suites: list[str]) -> list[str]:
    return [str(SUITE_DIR / s) for s in suites]


def check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuconf-write-test"):
            pass
    except OSError as exc:
        raise UsageError(f"results folder {folder} is not writable ({exc.strerror}): "
                         "pass another --results") from None


@dataclass
class RunPlan:
    """One run of the suites: what to run, against what, and where its results go."""

    options: Options
    run_id: str = field(default_factory=new_run_id)
    pytest_args: list[str] = field(default_factory=list)  # extra arguments after ``--``

    @property
    def suites(self) -> list[str]:
        return list(self.options.suite or options.DEFAULT_SUITES)

    @property
    def results(self) -> Path:
        return Path(self.options.results)

    # ---- the command ---------------------------------------------------------------------
    def pytest_command(self, *, target: str, kubeconfig: str | None,
                       sim_name: str | None = None,
                       paths: list[str] | None = None) -> list[str]:
        """The pytest command of this run against a cluster already up (or --target local).

        ``paths`` (relative to the suites folder, e.g. ``stack/test_operator.py``) narrow the
        run below whole suites.
        """
        results = self.results
        forwarded = self.options.replace(
            target=target, kubeconfig=kubeconfig, gpu_results=str(results), run_id=self.run_id,
            sim_name=sim_name or self.options.sim_name)
        if target != "sim":  # the sim's profile and faults mean nothing elsewhere
            forwarded = forwarded.replace(sim_profile="healthy", sim_fault=[])
        where = [str(SUITE_DIR / p) for p in paths] if paths else suite_paths(self.suites)
        cmd = [sys.executable, "-m", "pytest", *where,
               f"--junitxml={results / 'junit.xml'}", "-o", "junit_logging=log",
               f"--alluredir={results / 'allure-results'}", "--clean-alluredir",
               "-p", "no:cacheprovider", "-q", "-rfE", f"--rootdir={SUITE_DIR}",
               "-c", os.devnull, *options.pytest_flags(forwarded)]
        if self.options.workers:
            cmd += ["-n", self.options.workers]
        return cmd + self.pytest_args

    # ---- checks before anything starts ---------------------------------------------------
    def validate(self) -> str:
        """Check the input and the target; the target the run will check. Starts nothing."""
        opts = self.options
        if opts.requirement:
            catalog.select(opts.requirement)  # UnknownRequirement for a typo
        check_writable(self.results)
        target = opts.target or targets.auto_target(opts)
        if (opts.sim_fault or opts.sim_profile != "healthy") and target != "sim":
            raise UsageError("--profile and --fault apply to the sim only (--target sim)")
        node_flags = options.node_flags_set(opts)
        if node_flags and target != "node":
            raise UsageError(f"{', '.join(node_flags)}: for --target node only")
        if target == "sim":
            faults.validate(opts.sim_fault)
            profiles.get_profile(opts.sim_profile)
        elif target == "existing":
            check_reachable(connect(opts.kubeconfig, opts.context))
        elif target == "kind":
            kind_engine.preflight()
        elif target == "node" and opts.kubeconfig:  # a node already up
            if node_flags:
                raise UsageError(f"{', '.join(node_flags)}: for a node this run brings up, not "
                                 "with --kubeconfig")
            check_reachable(connect(opts.kubeconfig, opts.context))
        elif target == "node":
            lifecycle.check_inputs(gpu_profile=opts.gpu_profile, driver_root=opts.driver_root,
                                   dev_root=opts.dev_root, nvidia_src=opts.nvidia_src)
            chart.load_values(opts.node_values, options.run_flag("node_values"))
        return target

    # ---- the whole run -------------------------------------------------------------------
    def execute(self, progress: Progress = say) -> int:
        """Bring up what the run needs, run the suites, take it down; gpuconf's exit code."""
        target = self.validate()
        started = _Started(self, progress)
        try:
            kubeconfig = started.environment(target)
            code = self._run_pytest(target, kubeconfig, started.sim_name, progress)
        finally:
            with interrupts.deferred():  # another Ctrl-C must not leave the operator or the sim
                started.tear_down()
        return code

    def _run_pytest(self, target: str, kubeconfig: str | None, sim_name: str | None,
                    progress: Progress) -> int:
        cmd = self.pytest_command(target=target, kubeconfig=kubeconfig, sim_name=sim_name)
        progress(f"running suites {', '.join(self.suites)} against {target} "
                 f"(results in {self.results})")
        proc = subprocess.Popen(cmd)
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            progress("interrupted: letting the suite delete what it created and write its "
                     "results")
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=PYTEST_TIMEOUT_AFTER_INTERRUPT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
            summarize(self.results)
            raise
        if code == _NO_TESTS_COLLECTED:
            raise UsageError("no checks were selected (check --requirement/--suite/--target)")
        write_report(self.results, progress)
        verdict = summarize(self.results)
        code = _PYTEST_EXIT.get(code, code)
        # One verdict: a run that verified nothing is a FAIL here as in its report.
        return EXIT_FAILED if code == EXIT_OK and verdict != "PASS" else code


class _Started:
    """What a run brought up for itself, so that exactly that is taken down."""

    def __init__(self, plan: RunPlan, progress: Progress) -> None:
        self.plan = plan
        self.progress = progress
        self.sim_name: str | None = None
        self.node_name: str | None = None
        self.installed = None

    def environment(self, target: str) -> str | None:
        opts = self.plan.options
        kubeconfig = opts.kubeconfig
        if target == "sim" and not kubeconfig:  # a sim of its own (else the one given)
            self.sim_name = f"run-{short(self.plan.run_id)}"
            self.progress(f"no cluster given: starting the local simulated cluster "
                          f"{self.sim_name!r}")
            state = simcluster.up(self.sim_name, profile=opts.sim_profile, faults=opts.sim_fault,
                                  chart=opts.operator_chart,
                                  operator="chart" if opts.install_operator else "standin",
                                  progress=self.progress)
            kubeconfig = str(state.kubeconfig)
        elif target == "node" and not kubeconfig:  # this machine as a node, for this run
            self.node_name = f"run-{short(self.plan.run_id)}"
            self.progress(f"no cluster given: bringing this machine up as the real node "
                          f"{self.node_name!r}")
            state = lifecycle.up(self.node_name, gpu_profile=opts.gpu_profile,
                                 driver_root=opts.driver_root, dev_root=opts.dev_root,
                                 nvidia_src=opts.nvidia_src,
                                 chart_values=chart.load_values(
                                     opts.node_values, options.run_flag("node_values")),
                                 progress=self.progress)
            kubeconfig = str(state.kubeconfig)
        if opts.install_operator:
            self.installed = install_operator(opts, kubeconfig, target, progress=self.progress)
            if self.installed is not None:
                self.plan.options = opts.replace(helm_release=self.installed.release)
        return kubeconfig

    def tear_down(self) -> None:
        keep = self.plan.options.keep
        if self.installed is not None and not keep:
            self.installed.uninstall(progress=self.progress)
        if self.sim_name and not keep:
            self.progress(f"stopping the sim {self.sim_name!r}")
            simcluster.down(self.sim_name, progress=quiet)
        elif self.sim_name:
            self.progress(f"kept the sim {self.sim_name!r}: `gpuconf sim down --name "
                          f"{self.sim_name}` removes it")
        if self.node_name and not keep:
            self.progress(f"taking the node {self.node_name!r} down")
            lifecycle.down(self.node_name, progress=quiet)
        elif self.node_name:
            self.progress(f"kept the node {self.node_name!r}: `gpuconf node down --name "
                          f"{self.node_name}` removes it")


# ---- after the run ---------------------------------------------------------------------------
def write_report(results: Path, progress: Progress) -> None:
    if not (results / "results.json").is_file():
        return

    try:
        build_report(load_results(results), results / "report")
    except Exception as exc:  # the results are what matters; a report can be built later
        progress(f"could not build the report ({exc}): `gpuconf report {results} -o OUT` "
                 "retries")
    try:  # CTRF beside junit.xml, for the CI summaries that read it
        doc = ctrf.to_ctrf(load_results(results))
        (results / ctrf.FILENAME).write_text(json.dumps(doc, indent=2))
    except Exception as exc:
        progress(f"could not write {results / 'ctrf-report.json'} ({exc})")


def summarize(results: Path) -> str | None:
    """Print the run's verdict (the report's own verdict function) and its failures."""
    path = results / "results.json"
    if not path.is_file():
        return None

    doc = json.loads(path.read_text())
    counts = verdict_counts(doc["requirements"])
    verdict, reasons = overall(counts, doc["run"])
    print(f"\ngpuconf {verdict}: {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} skipped, {counts['not-applicable']} not applicable, "
          f"{counts['not-run']} not run ({counts['total']} requirements; target "
          f"{doc['run']['target']})" + (f": {'; '.join(reasons)}" if reasons else ""))
    for r in doc["requirements"]:
        if r["verdict"] == "fail":
            print(f"  FAIL {r['id']:<15} {r['title']}\n       {r['message'][:300]}\n"
                  f"       {r['diagnosis']}")
    print(f"results: {path}  report: {results / 'report' / 'report.html'}")
    return verdict
