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


def _subcommand(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        parser = next(a for a in parser._actions
                      if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {s: a.help for a in parser._actions for s in a.option_strings}


def test_node_options_come_from_the_one_table():
    """The node flags were declared four times (options, node up, the run plan, the benchmark)
    and their help texts had drifted apart: each now comes from the table's node scope."""
    from conformance.node import bench

    node_fields = options._fields("node")
    assert {f.name for f in node_fields} == {"nvidia_src", "gpu_profile", "driver_root",
                                            "dev_root", "node_values"}
    run = _helps(_subcommand(build_parser(), "run"))
    up = _helps(_subcommand(build_parser(), "node", "up"))
    benchmark = _helps(bench.parser())
    for f in node_fields:
        table_help = f.metadata["help"]
        up_flag = f.metadata["node_flag"] or options._flag(f, pytest=False)
        assert up[up_flag] == table_help, f.name
        assert run[options._flag(f, pytest=False)] == f"(--target node) {table_help}", f.name
        if f.name in ("nvidia_src", "gpu_profile"):
            assert benchmark[up_flag] == table_help, f.name
    # gpuconf node up --chart-values and gpuconf run --node-values fill the same field
    args = build_parser().parse_args(["node", "up", "--chart-values", "v.yaml"])
    assert args.node_values == "v.yaml"


def test_node_options_given_without_a_node_are_named_by_their_run_flag():
    args = build_parser().parse_args(["run", "--gpu-profile", "2xH100", "--node-values", "v"])
    assert options.node_flags_set(options.from_args(args)) == ["--gpu-profile", "--node-values"]
    assert options.node_flags_set(options.Options()) == []


def test_node_up_refuses_a_mock_profile_with_a_driver_root():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["node", "up", "--gpu-profile", "2xH100", "--driver-root", "/"])
