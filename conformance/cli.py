"""``gpuconf``: the command line of gpu-conformance.

Exit codes: 0 every selected check passed; 1 a check failed; 2 bad input or a missing
precondition (one line on stderr, nothing left running); 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from conformance import catalog, interrupts
from conformance.errors import ComponentFailed, UsageError

SUITES = ("stack", "scheduling", "sharing", "operations")
SUITE_DIR = Path(__file__).resolve().parent


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, as argparse does, with the fix
        self.exit(2, f"gpuconf: error: {message} (see `{self.prog} --help`)\n")


def _say(msg: str) -> None:
    print(f"[gpuconf {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- sim -----------------------------------------------------------------------------------
def cmd_sim_up(args) -> int:
    from conformance.sim import cluster

    cluster.up(args.name, profile=args.profile, faults=args.fault, apiserver_port=args.port,
               chart=args.operator_chart, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
               progress=_say)
    state = cluster.running(args.name)
    print(f"export KUBECONFIG={state.kubeconfig}")
    return 0


def cmd_sim_down(args) -> int:
    from conformance.sim import cluster

    if not cluster.down(args.name, progress=_say):
        _say(f"no sim cluster named {args.name!r}")
    else:
        _say(f"sim {args.name!r} stopped and its data removed")
    return 0


def cmd_sim_status(args) -> int:
    from conformance.sim.controlplane import ControlPlane

    status = ControlPlane(args.name).status()
    if args.json:
        print(json.dumps(status, indent=2))
    elif not status.get("components"):
        print(f"sim {args.name!r}: not running")
    else:
        print(f"sim {args.name!r}: {'running' if status['running'] else 'DEGRADED'}  "
              f"kubernetes {status['kubernetes_version']}  profile {status['profile']}  "
              f"up {status['uptime_s']:.0f}s")
        print(f"  kubeconfig {status['kubeconfig']}  server {status['server']}")
        for name, comp in status["components"].items():
            print(f"  {name:<24} pid {comp['pid']:<8} {'running' if comp['running'] else 'DOWN'}")
    return 0 if status.get("running") or not status.get("components") else 1


def cmd_sim_set(args) -> int:
    from conformance.sim import cluster

    faults = [] if args.no_faults else (args.fault or None)
    new = cluster.set_state(args.name, profile=args.profile, faults=faults, progress=_say)
    _say(f"sim {args.name!r} now plays profile {new.profile}"
         + (f" with faults {', '.join(new.faults)}" if new.faults else " with no faults"))
    return 0


def cmd_sim_build(args) -> int:
    from conformance.build import binaries

    binaries.build(args.component)
    return 0


def cmd_sim_profiles(args) -> int:
    from conformance.sim import profiles

    for name, prof in profiles.PROFILES.items():
        print(f"{name:<22} {prof.node_count:>4} nodes {prof.physical_gpus:>5} GPUs  "
              f"{prof.description}")
    return 0


def cmd_sim_faults(args) -> int:
    from conformance.sim.faults import FAULTS

    for f in FAULTS:
        print(f"{f.name:<36} {f.description}\n{'':<36} symptom: {f.symptom}\n"
              f"{'':<36} suspect: {f.suspect}"
              + ("" if f.profile == "healthy" else f"\n{'':<36} shows on: --profile {f.profile}"))
    return 0


# ---- requirements / report / certify -------------------------------------------------------
def cmd_requirements(args) -> int:
    reqs = catalog.select(args.select) if args.select else list(catalog.REQUIREMENTS)
    if args.json:
        print(json.dumps([r.as_dict() for r in reqs], indent=2))
        return 0
    print(f"{'ID':<16} {'AREA':<11} {'LAYER':<18} {'SEVERITY':<9} {'TARGETS':<26} "
          f"{'CNCF AI CONFORMANCE':<40} TITLE")
    for r in reqs:
        print(f"{r.id:<16} {r.area:<11} {r.layer:<18} {r.severity:<9} "
              f"{','.join(r.targets):<26} {','.join(r.cncf) or '-':<40} {r.title}")
    return 0


def cmd_report(args) -> int:
    from reports.build import build_report
    from reports.errors import ReportInputError
    from reports.load import load_results

    try:
        results = load_results(Path(args.results))
    except ReportInputError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.output)
    _check_writable(out)
    paths = build_report(results, out)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def cmd_certify(args) -> int:
    if args.driver_version:
        from conformance.certify_flow import certify_driver

        return certify_driver(args)
    if not (args.baseline and args.candidate):
        raise UsageError("certify needs --baseline A --candidate B (two results folders), or "
                         "--driver-version V against a cluster")
    from reports.certify import compare
    from reports.errors import ReportInputError
    from reports.load import load_results

    try:
        base, cand = load_results(Path(args.baseline)), load_results(Path(args.candidate))
    except ReportInputError as exc:
        raise UsageError(str(exc)) from None
    result = compare(base, cand, tolerance=args.tolerance)
    print(result.to_markdown())
    if args.output:
        Path(args.output).write_text(json.dumps(result.to_dict(), indent=2))
    return 0 if result.certified else 1


def cmd_rbac(args) -> int:
    from conformance import rbac
    from conformance.cluster.client import check_reachable, connect

    if args.action == "show":
        print(rbac.MANIFEST.read_text())
        return 0
    cluster = connect(args.kubeconfig, args.context)
    check_reachable(cluster)
    if args.action == "apply":
        for item in rbac.apply(cluster):
            _say(f"applied {item}")
        return 0
    path = rbac.service_account_kubeconfig(cluster, Path(args.output))
    _say(f"wrote {path}: run `gpuconf run --kubeconfig {path}` as gpuconf-system/gpuconf")
    return 0


def cmd_validate_sharing(args) -> int:
    """Check a device plugin sharing config file before it goes into a cluster."""
    from conformance.sim.gfd import sharing_config_warnings, validate_sharing_config

    try:
        text = Path(args.file).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    errors = validate_sharing_config(text)
    if errors:
        raise UsageError(f"invalid sharing config {args.file}: " + "; ".join(errors))
    for warning in sharing_config_warnings(text):
        _say(f"warning: {warning}")
    print(f"{args.file}: valid device plugin sharing config")
    return 0


def cmd_cleanup(args) -> int:
    from conformance.cluster import namespaces
    from conformance.cluster.client import check_reachable, connect

    cluster = connect(args.kubeconfig, args.context)
    check_reachable(cluster)
    names = namespaces.sweep(cluster, args.run_id)
    _say(f"removed {len(names)} namespace(s) left by "
         + (f"run {args.run_id}" if args.run_id else "earlier gpuconf runs")
         + (": " + ", ".join(names) if names else ""))
    return 0


# ---- run -----------------------------------------------------------------------------------
def _check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuconf-write-test"):
            pass
    except OSError as exc:
        raise UsageError(f"results folder {folder} is not writable ({exc.strerror}): "
                         "pass another --results") from None


def cmd_run(args) -> int:
    if getattr(args, "matrix", None):
        return _run_matrix(args)
    return _run_once(args)


def _run_matrix(args) -> int:
    """One run per combination, each in results/<combination>/, then one matrix report."""
    import copy

    from conformance import matrix

    combos = matrix.load(args.matrix)
    root = Path(args.results)
    _check_writable(root)
    codes, done = [], []
    for combo in combos:
        _say(f"matrix combination {combo.name} ({combos.index(combo) + 1}/{len(combos)})")
        sub = copy.copy(args)
        sub.matrix = None
        sub.results = str(root / combo.name)
        sub.combination = combo.name
        sub.operator_version = combo.operator_version or args.operator_version
        sub.set_values = [*args.set_values, *combo.set_values()]
        sub.install_operator = True
        if (args.target or "sim") == "sim":
            sub.profile = combo.sim_profile
        sub.pytest_args = list(args.pytest_args)
        codes.append(_run_once(sub))
        done.append(root / combo.name)
    from reports.build import build_matrix_report
    from reports.load import load_results

    loaded = [load_results(d) for d in done if (d / "results.json").is_file()]
    if loaded:
        paths = build_matrix_report(loaded, root / "matrix-report")
        _say(f"matrix report: {paths.get('html')}")
    return max(codes) if codes else 2


def _run_once(args) -> int:
    from conformance.env import Options, auto_target

    if args.requirement:
        try:
            catalog.select(args.requirement)
        except catalog.UnknownRequirement as exc:
            raise UsageError(str(exc)) from None
    suites = args.suite or ["stack", "scheduling", "sharing"]
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise UsageError(f"unknown suite {unknown[0]!r}: choose from {', '.join(SUITES)}")
    results = Path(args.results)
    _check_writable(results)
    if args.fault:
        from conformance.sim.faults import validate

        validate(args.fault)
    if args.profile:
        from conformance.sim.profiles import get_profile

        try:
            get_profile(args.profile)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    options = Options(target=args.target, kubeconfig=args.kubeconfig, context=args.context)
    target = args.target or auto_target(options)
    if target == "existing":
        from conformance.cluster.client import check_reachable, connect

        check_reachable(connect(args.kubeconfig, args.context))
    elif target == "kind":
        from conformance.env import kind_precheck

        kind_precheck()
    if (args.fault or args.profile) and target != "sim":
        raise UsageError("--profile and --fault apply to the sim only (--target sim)")
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
    sim_name = None
    kubeconfig = args.kubeconfig
    installed = None
    try:
        if target == "sim":
            from conformance.sim import cluster as simcluster

            sim_name = f"run-{run_id[-6:]}"
            _say(f"no cluster given: starting the local simulated cluster {sim_name!r}")
            state = simcluster.up(sim_name, profile=args.profile or "healthy",
                                  faults=args.fault, chart=args.operator_chart,
                                  operator="chart" if args.install_operator else "standin",
                                  progress=_say)
            kubeconfig = str(state.kubeconfig)
        if args.install_operator:
            from conformance.operator_install import install_operator

            installed = install_operator(args, kubeconfig, target, progress=_say)
        if installed is not None:
            args.pytest_args = [*args.pytest_args, f"--helm-release={installed.release}"]
        code = _run_pytest(args, target, kubeconfig, results, run_id, suites, sim_name)
    finally:
        with interrupts.deferred():  # another Ctrl-C must not leave the operator or the sim
            _tear_down_run(args, installed, sim_name)
    return code


def _tear_down_run(args, installed, sim_name: str | None) -> None:
    if installed is not None and not args.keep:
        installed.uninstall(progress=_say)
    if sim_name and not args.keep:
        from conformance.sim import cluster as simcluster

        _say(f"stopping the sim {sim_name!r}")
        simcluster.down(sim_name, progress=lambda _m: None)
    elif sim_name:
        _say(f"kept the sim {sim_name!r}: `gpuconf sim down --name {sim_name}` removes it")


def _run_pytest(args, target: str, kubeconfig: str | None, results: Path, run_id: str,
                suites: list[str], sim_name: str | None) -> int:
    if getattr(args, "combination", None):
        args.pytest_args = [*args.pytest_args, f"--combination={args.combination}"]
    cmd = [sys.executable, "-m", "pytest", *[str(SUITE_DIR / s) for s in suites],
           f"--target={target}", f"--gpu-results={results}", f"--run-id={run_id}",
           f"--junitxml={results / 'junit.xml'}", f"--alluredir={results / 'allure-results'}",
           "--clean-alluredir", "-p", "no:cacheprovider", "-q", "-rfE",
           f"--rootdir={SUITE_DIR}", "-c", os.devnull]
    if kubeconfig:
        cmd.append(f"--kubeconfig={kubeconfig}")
    if args.context:
        cmd.append(f"--context={args.context}")
    if sim_name:
        cmd += [f"--sim-name={sim_name}", f"--sim-profile={args.profile or 'healthy'}"]
        cmd += [f"--sim-fault={f}" for f in args.fault or []]
    for req in args.requirement or []:
        cmd.append(f"--requirement={req}")
    for opt in ("expected_driver_version", "min_driver_version", "operator_namespace"):
        value = getattr(args, opt)
        if value:
            cmd.append(f"--{opt.replace('_', '-')}={value}")
    if args.disruptive:
        cmd.append("--disruptive")
    if args.workers:
        cmd += ["-n", args.workers]
    cmd += args.pytest_args
    _say(f"running suites {', '.join(suites)} against {target} (results in {results})")
    proc = subprocess.Popen(cmd)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        _say("interrupted: letting the suite delete what it created and write its results")
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        _print_summary(results)
        raise
    _write_report(results)
    _print_summary(results)
    if code == 5:
        raise UsageError("no checks were selected (check --requirement/--suite)")
    # pytest: 2 interrupted, 4 usage error (the plugin's one-line message was printed)
    return {0: 0, 1: 1, 2: 130, 4: 2}.get(code, code)


def _write_report(results: Path) -> None:
    if not (results / "results.json").is_file():
        return
    from reports.build import build_report
    from reports.load import load_results

    try:
        build_report(load_results(results), results / "report")
    except Exception as exc:  # the results are what matters; a report can be built later
        _say(f"could not build the report ({exc}): `gpuconf report {results} -o OUT` retries")


def _print_summary(results: Path) -> None:
    path = results / "results.json"
    if not path.is_file():
        return
    doc = json.loads(path.read_text())
    s = doc["summary"]
    failed = [r for r in doc["requirements"] if r["verdict"] == "fail"]
    verdict = "FAIL" if failed else "PASS"
    print(f"\ngpuconf {verdict}: {s['pass']} passed, {s['fail']} failed, {s['skip']} skipped, "
          f"{s['not-applicable']} not applicable, {s['not-run']} not run "
          f"({s['total']} requirements; target {doc['run']['target']})")
    for r in failed:
        print(f"  FAIL {r['id']:<15} {r['title']}\n       {r['message'][:300]}\n"
              f"       {r['diagnosis']}")
    print(f"results: {path}  report: {results / 'report' / 'report.html'}")


# ---- parser --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpuconf", description="Conformance and e2e checks for Kubernetes GPU "
                                            "clusters")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run the suites (the sim when no cluster is given)")
    run.add_argument("--target", choices=("existing", "kind", "sim", "local"))
    run.add_argument("--kubeconfig", metavar="PATH")
    run.add_argument("--context", metavar="NAME")
    run.add_argument("--results", default="results", metavar="DIR",
                     help="results folder (default ./results)")
    run.add_argument("--suite", action="append", choices=SUITES,
                     help="suite to run (repeatable; default stack, scheduling, sharing)")
    run.add_argument("--requirement", action="append", metavar="ID",
                     help="only these requirement IDs or prefixes (repeatable)")
    run.add_argument("--profile", help="sim profile (default healthy)")
    run.add_argument("--fault", action="append", metavar="NAME", help="sim fault (repeatable)")
    run.add_argument("--expected-driver-version", metavar="V")
    run.add_argument("--min-driver-version", metavar="V")
    run.add_argument("--operator-namespace", default="gpu-operator", metavar="NS")
    run.add_argument("--operator-chart", metavar="PATH")
    run.add_argument("--install-operator", action="store_true",
                     help="install the GPU Operator chart with Helm before the suites")
    run.add_argument("--operator-version", metavar="V")
    run.add_argument("--operator-values", metavar="FILE")
    run.add_argument("--set", action="append", default=[], metavar="K=V", dest="set_values")
    run.add_argument("--matrix", metavar="FILE",
                     help="run every combination of operator versions x values x sharing "
                          "configs in FILE (installs the operator for each)")
    run.add_argument("--keep", action="store_true",
                     help="keep the sim / the installed operator afterwards")
    run.add_argument("--disruptive", action="store_true")
    run.add_argument("-n", "--workers", metavar="N", help="pytest-xdist workers (e.g. auto)")
    run.add_argument("pytest_args", nargs="*", help="extra pytest arguments after --")
    run.set_defaults(func=cmd_run)

    sim = sub.add_parser("sim", help="the local simulated GPU cluster")
    simsub = sim.add_subparsers(dest="sim_command", required=True, parser_class=_Parser)
    up = simsub.add_parser("up", help="start a sim cluster")
    up.add_argument("--name", default="gpuconf")
    up.add_argument("--profile", default="healthy")
    up.add_argument("--fault", action="append", default=[], metavar="NAME")
    up.add_argument("--nodes", type=int, metavar="K", help="GPU nodes (overrides the profile)")
    up.add_argument("--gpus-per-node", type=int, metavar="G")
    up.add_argument("--port", type=int, metavar="PORT", help="API server port (default: free)")
    up.add_argument("--operator-chart", metavar="PATH",
                    help="take the ClusterPolicy CRD from this chart")
    up.set_defaults(func=cmd_sim_up)
    for name, func, helptext in (("down", cmd_sim_down, "stop a sim cluster and remove it"),
                                 ("status", cmd_sim_status, "show a sim cluster")):
        sp = simsub.add_parser(name, help=helptext)
        sp.add_argument("--name", default="gpuconf")
        if name == "status":
            sp.add_argument("--json", action="store_true")
        sp.set_defaults(func=func)
    st = simsub.add_parser("set", help="change the profile or faults of a running sim")
    st.add_argument("--name", default="gpuconf")
    st.add_argument("--profile")
    st.add_argument("--fault", action="append", metavar="NAME")
    st.add_argument("--no-faults", action="store_true")
    st.set_defaults(func=cmd_sim_set)
    b = simsub.add_parser("build", help="build missing control-plane binaries (Go)")
    b.add_argument("component", nargs="?", default="all",
                   choices=("all", "kubernetes", "etcd", "kwok", "helm"))
    b.set_defaults(func=cmd_sim_build)
    simsub.add_parser("profiles", help="list profiles").set_defaults(func=cmd_sim_profiles)
    simsub.add_parser("faults", help="list the fault catalog").set_defaults(func=cmd_sim_faults)

    req = sub.add_parser("requirements", help="the requirement catalog")
    req.add_argument("--json", action="store_true")
    req.add_argument("select", nargs="*", metavar="ID", help="IDs or prefixes")
    req.set_defaults(func=cmd_requirements)

    rep = sub.add_parser("report", help="HTML + Markdown + JSON report from a results folder")
    rep.add_argument("results", metavar="RESULTS")
    rep.add_argument("-o", "--output", required=True, metavar="OUT")
    rep.set_defaults(func=cmd_report)

    cert = sub.add_parser("certify", help="compare two runs, or certify a driver upgrade")
    cert.add_argument("--baseline", metavar="RESULTS")
    cert.add_argument("--candidate", metavar="RESULTS")
    cert.add_argument("--tolerance", type=float, default=0.05, metavar="FRACTION")
    cert.add_argument("--output", metavar="FILE", help="write the certification JSON here")
    cert.add_argument("--driver-version", metavar="V",
                      help="patch the ClusterPolicy driver version, roll out, re-run, compare")
    cert.add_argument("--kubeconfig", metavar="PATH")
    cert.add_argument("--context", metavar="NAME")
    cert.add_argument("--results", default="results-certify", metavar="DIR")
    cert.add_argument("--target", choices=("existing", "kind", "sim"),
                      help="what the cluster is (default existing; sim for a sim cluster)")
    cert.set_defaults(func=cmd_certify)

    rb = sub.add_parser("rbac", help="least-privilege RBAC for runs (show, apply, kubeconfig)")
    rb.add_argument("action", choices=("show", "apply", "kubeconfig"))
    rb.add_argument("--kubeconfig", metavar="PATH")
    rb.add_argument("--context", metavar="NAME")
    rb.add_argument("-o", "--output", default="gpuconf-sa.kubeconfig", metavar="FILE")
    rb.set_defaults(func=cmd_rbac)

    vs = sub.add_parser("validate-sharing", help="check a device plugin sharing config file")
    vs.add_argument("file", metavar="FILE")
    vs.set_defaults(func=cmd_validate_sharing)

    clean = sub.add_parser("cleanup", help="remove objects left by earlier runs")
    clean.add_argument("--kubeconfig", metavar="PATH")
    clean.add_argument("--context", metavar="NAME")
    clean.add_argument("--run-id", metavar="ID")
    clean.set_defaults(func=cmd_cleanup)
    return p


def _api_message(exc: ApiException) -> str:
    try:
        return json.loads(exc.body or "{}").get("message") or "(no message)"
    except ValueError:
        return (exc.body or "(no message)")[:300]


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM (a CI job cancelled) ends a run like Ctrl-C: cleanup runs, results are kept.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"gpuconf: error: {exc}", file=sys.stderr)
        return 2
    except catalog.UnknownRequirement as exc:
        print(f"gpuconf: error: {exc}", file=sys.stderr)
        return 2
    except ApiException as exc:  # the cluster refused a request the command needed
        print(f"gpuconf: error: the API server answered {exc.status} {exc.reason}: "
              f"{_api_message(exc)}", file=sys.stderr)
        return 1
    except ComponentFailed as exc:
        print(f"gpuconf: error: {exc}\n--- last lines of the {exc.component} log ---\n"
              f"{exc.log_tail}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gpuconf: interrupted; what was created is removed and the results so far kept",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
