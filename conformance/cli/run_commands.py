"""``gpuconf run`` (the suites) and ``gpuconf certify`` (compare runs, certify a driver)."""

from __future__ import annotations

import json
from pathlib import Path

from conformance import options
from conformance.cli.parser import add_cluster_arguments
from conformance.common.console import say
from conformance.common.errors import UsageError
from conformance.common.vocab import EXIT_FAILED, EXIT_OK


def cmd_run(args) -> int:
    opts = options.from_args(args)
    if opts.matrix:
        from conformance.run.matrix import run_matrix

        return run_matrix(opts, args.pytest_args, say)
    from conformance.run.plan import RunPlan

    return RunPlan(opts, pytest_args=list(args.pytest_args)).execute(say)


def cmd_certify(args) -> int:
    if args.driver_version:
        from conformance.run.certify import certify_driver

        opts = options.Options(target=args.target, kubeconfig=args.kubeconfig,
                               context=args.context, results=args.results)
        return certify_driver(opts, args.driver_version, args.tolerance, say)
    if not (args.baseline and args.candidate):
        raise UsageError("certify needs --baseline A --candidate B (two results folders), or "
                         "--driver-version V against a cluster")
    from conformance.report.certify import compare
    from conformance.report.load import load_results

    result = compare(load_results(Path(args.baseline)), load_results(Path(args.candidate)),
                     tolerance=args.tolerance)
    print(result.to_markdown())
    if args.output:
        Path(args.output).write_text(json.dumps(result.to_dict(), indent=2))
    return EXIT_OK if result.certified else EXIT_FAILED


def register(sub) -> None:
    run = sub.add_parser("run", help="run the suites (the sim when no cluster is given)",
                         description="Run the conformance suites. With no cluster given, "
                                     "against the local simulated cluster.")
    options.add_run_arguments(run)
    run.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS",
                     help="extra pytest arguments, after --")
    run.set_defaults(func=cmd_run)

    cert = sub.add_parser("certify", help="compare two runs, or certify a driver upgrade")
    cert.add_argument("--baseline", metavar="RESULTS", help="results folder of the run before")
    cert.add_argument("--candidate", metavar="RESULTS", help="results folder of the run after")
    cert.add_argument("--tolerance", type=float, default=0.05, metavar="FRACTION",
                      help="measurement change tolerated before it is a regression (0.05)")
    cert.add_argument("--output", metavar="FILE", help="write the certification JSON here")
    cert.add_argument("--driver-version", metavar="V",
                      help="patch the ClusterPolicy driver version, roll out, re-run, compare")
    add_cluster_arguments(cert)
    cert.add_argument("--results", default="results-certify", metavar="DIR",
                      help="folder of the two runs (default results-certify)")
    cert.add_argument("--target", choices=("existing", "kind", "sim"),
                      help="what the cluster is (default existing; sim for a sim cluster)")
    cert.set_defaults(func=cmd_certify)
