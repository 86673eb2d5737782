"""The catalog and the option table as a user meets them: every requirement has a check,
every option has help, and what ``gpuconf run`` is given reaches the pytest run."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from conformance import catalog, options
from conformance.cli.main import build_parser
from conformance.run.plan import SUITE_DIR, RunPlan


class _Collected:
    def __init__(self) -> None:
        self.ids: set[str] = set()

    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            marker = item.get_closest_marker("requirement")
            if marker:
                self.ids.add(marker.args[0])


def test_every_catalog_requirement_has_a_collected_check():
    collected = _Collected()
    code = pytest.main([str(SUITE_DIR), "--collect-only", "-q", "-p", "no:cacheprovider",
                        f"--rootdir={SUITE_DIR}", "-c", "/dev/null"], plugins=[collected])
    assert code == 0
    missing = {r.id for r in catalog.REQUIREMENTS} - collected.ids
    assert missing == set(), f"catalog requirements no check implements: {sorted(missing)}"


def _run_help_lines() -> list[argparse.Action]:
    parser = build_parser()
    run = next(a for a in parser._subparsers._group_actions[0].choices.items()
               if a[0] == "run")[1]
    return [a for a in run._actions if a.dest != "help"]


def test_every_gpuconf_run_option_has_help():
    undocumented = [a.option_strings or [a.dest] for a in _run_help_lines() if not a.help]
    assert undocumented == []


def test_every_plugin_option_has_help():
    out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
                         capture_output=True, text=True, timeout=120).stdout
    group = out.split("GPU cluster conformance (gpuconf):", 1)[1].split("\n\n", 1)[0]
    for f in options._fields("both", "pytest"):
        if not f.metadata["registered_by"]:
            assert options._flag(f, pytest=True) in group, f.name


def test_kubeconfig_is_registered_where_pytest_kind_is_not_installed(monkeypatch):
    """The H200 run had the suite's wheels but not pytest-kind's: pytest refused --kubeconfig."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pytest_kind" else real(name, *a))
    parser = argparse.ArgumentParser()
    options.add_pytest_options(type("Group", (), {"addoption": parser.add_argument})())
    assert parser.parse_args(["--kubeconfig=/k"]).kubeconfig == "/k"


def test_run_options_reach_pytest_as_given():
    """`gpuconf run --workload-image X` was refused once although the README offered it."""
    args = build_parser().parse_args(["run", "--workload-image", "registry.local/cupy:1",
                                      "--expected-driver-version", "580.105.08",
                                      "--requirement", "STACK-DP", "-n", "2"])
    plan = RunPlan(options.from_args(args), run_id="20261203T000000Z-abcdef")
    cmd = plan.pytest_command(target="existing", kubeconfig="/k/config")
    assert "--workload-image=registry.local/cupy:1" in cmd
    assert "--expected-driver-version=580.105.08" in cmd
    assert "--requirement=STACK-DP" in cmd and "--kubeconfig=/k/config" in cmd
    assert "--run-id=20261203T000000Z-abcdef" in cmd and cmd[-2:] == ["-n", "2"]
    assert not [c for c in cmd if c.startswith(("--sim-profile", "--sim-fault"))]
