"""``gpuconf job`` (the suite as an in-cluster Job) and ``gpuconf sonobuoy-entrypoint``.

    gpuconf job render [--apply] ...   the Namespace, RBAC and Job as YAML (or create them)
    gpuconf job apply ...              create, wait with progress, fetch the results, delete
    gpuconf job fetch --name N         copy a Job's results back (through the API)
    gpuconf job delete --name N        remove a Job and its stored results
    gpuconf job inside ...             what the Job's container runs
    gpuconf sonobuoy-entrypoint ...    what the Sonobuoy plugin's container runs

`gpuconf run` options for the suites go after ``--`` (``-- --suite stack
--expected-driver-version 580.105.08``); the Job decides the target and the results folder.
"""

from __future__ import annotations

from pathlib import Path

from conformance import options
from conformance.cli.parser import Parser, add_cluster_arguments
from conformance.common.console import say
from conformance.common.errors import UsageError
from conformance.common.vocab import EXIT_OK

# The Job picks these itself: its cluster, its volume, one run.
_NOT_IN_JOB = ("--target", "--results", "--kubeconfig", "--context", "--matrix", "--keep",
               "--install-operator", "--profile", "--fault")


def _run_options(run_args: list[str]) -> options.Options:
    """`gpuconf run` flags for the suites in the Job, checked here (bad input exits 2)."""
    for arg in run_args:
        if arg.split("=", 1)[0] in _NOT_IN_JOB:
            raise UsageError(f"{arg.split('=', 1)[0]} cannot be passed to the suites of a Job "
                             "(it runs against its own cluster into its own volume)")
    parser = Parser(prog="gpuconf run (after --)")
    options.add_run_arguments(parser)
    return options.from_args(parser.parse_args(run_args))


def _spec(args):
    from conformance.run.job import JobSpec, check_name

    check_name(args.name)
    _run_options(args.run_args)
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive (got {args.timeout})")
    return JobSpec(name=args.name, image=args.image, run_args=list(args.run_args),
                   product_version=args.product_version, timeout_s=args.timeout,
                   image_pull_policy=args.image_pull_policy)


def _connect(args):
    from conformance.cluster.client import check_reachable, connect

    cluster = connect(args.kubeconfig, args.context)
    check_reachable(cluster)
    return cluster


def cmd_render(args) -> int:
    if args.apply:
        return cmd_apply(args)
    from conformance.run.job import render

    print(render(_spec(args)), end="")
    return EXIT_OK


def cmd_apply(args) -> int:
    from conformance.run.job import apply_and_wait

    spec = _spec(args)
    return apply_and_wait(_connect(args), spec, Path(args.results), say, keep=args.keep,
                          wait=not args.no_wait, results_wait_s=args.results_wait)


def cmd_fetch(args) -> int:
    from conformance.run.job import check_name, read_job
    from conformance.run.plan import check_writable, summarize
    from conformance.run.results_store import fetch

    out = Path(args.results)
    check_writable(out)
    cluster = _connect(args)
    check_name(args.name)
    fetch(cluster, args.name, out, wait_s=args.wait, progress=say,
          job_exists=lambda: read_job(cluster, args.name) is not None)
    say(f"results of Job {args.name} in {out}")
    summarize(out)
    return EXIT_OK


def cmd_delete(args) -> int:
    from conformance.run.job import NAMESPACE, check_name, delete

    check_name(args.name)
    if not delete(_connect(args), args.name, say):
        say(f"no Job {args.name} in {NAMESPACE} (its stored results, if any, are removed)")
    return EXIT_OK


def cmd_inside(args) -> int:
    from conformance.run.job import inside

    return inside(_run_options(args.run_args), Path(args.results), args.product_version, say)


def cmd_sonobuoy(args) -> int:
    from conformance.run.sonobuoy import sonobuoy_entrypoint

    return sonobuoy_entrypoint(_run_options(args.run_args), args.product_version, say)


def _product(parser) -> None:
    from conformance.report.product import VERSIONS

    parser.add_argument("--product-version", choices=VERSIONS, metavar="V",
                        help="also write a CNCF AI Conformance PRODUCT.yaml draft for this "
                             f"checklist version ({', '.join(VERSIONS)})")


def _run_args(parser) -> None:
    parser.add_argument("run_args", nargs="*", metavar="-- RUN_OPTIONS",
                        help="`gpuconf run` options for the suites, after --")


def _job_arguments(parser, *, cluster: bool) -> None:
    from conformance.run.job import DEFAULT_IMAGE, DEFAULT_NAME, DEFAULT_TIMEOUT_S

    parser.add_argument("--name", default=DEFAULT_NAME, metavar="NAME",
                        help=f"the Job's name (default {DEFAULT_NAME})")
    parser.add_argument("--image", default=DEFAULT_IMAGE, metavar="IMAGE",
                        help=f"the suite's image, built from deploy/image/Dockerfile (default "
                             f"{DEFAULT_IMAGE})")
    parser.add_argument("--image-pull-policy", default="IfNotPresent",
                        choices=("Always", "IfNotPresent", "Never"))
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"the Job's deadline in seconds (default {DEFAULT_TIMEOUT_S})")
    _product(parser)
    if cluster:
        add_cluster_arguments(parser)
        parser.add_argument("--results", default="results", metavar="DIR",
                            help="where the fetched results go (default ./results)")
        parser.add_argument("--keep", action="store_true",
                            help="keep the Job and its stored results afterwards")
        parser.add_argument("--no-wait", action="store_true",
                            help="create the Job and return (fetch it later)")
        parser.add_argument("--results-wait", type=float, default=60.0, metavar="S",
                            help="after the Job finished, how long to wait for its stored "
                                 "results (default 60)")
    _run_args(parser)


def register(sub) -> None:
    job = sub.add_parser("job", help="run the suites in the cluster as a Job (render, apply, "
                                     "fetch, delete)")
    jobsub = job.add_subparsers(dest="job_command", required=True, parser_class=Parser)

    render = jobsub.add_parser("render", help="print the Namespace, RBAC and Job (--apply: "
                                              "create them, as `job apply`)")
    _job_arguments(render, cluster=True)
    render.add_argument("--apply", action="store_true",
                        help="create them, wait, fetch the results, delete the Job")
    render.set_defaults(func=cmd_render)

    apply = jobsub.add_parser("apply", help="create the Job, wait with progress, fetch its "
                                            "results, delete it")
    _job_arguments(apply, cluster=True)
    apply.set_defaults(func=cmd_apply)

    fetch = jobsub.add_parser("fetch", help="copy a Job's results back (through the API)")
    fetch.add_argument("--name", default="gpuconf", metavar="NAME", help="the Job's name")
    fetch.add_argument("--results", default="results", metavar="DIR",
                       help="where they go (default ./results)")
    fetch.add_argument("--wait", type=float, default=0.0, metavar="S",
                       help="wait up to S seconds for them (default: do not wait)")
    add_cluster_arguments(fetch)
    fetch.set_defaults(func=cmd_fetch)

    delete = jobsub.add_parser("delete", help="delete a Job and its stored results")
    delete.add_argument("--name", default="gpuconf", metavar="NAME", help="the Job's name")
    add_cluster_arguments(delete)
    delete.set_defaults(func=cmd_delete)

    inside = jobsub.add_parser("inside", help="(in the Job's pod) run the suites, store the "
                                              "results")
    inside.add_argument("--results", default="/results", metavar="DIR",
                        help="the results volume (default /results)")
    _product(inside)
    _run_args(inside)
    inside.set_defaults(func=cmd_inside)

    sono = sub.add_parser("sonobuoy-entrypoint",
                          help="(in a Sonobuoy plugin pod) run the suites, hand the results to "
                               "Sonobuoy (SONOBUOY_RESULTS_DIR, done file)")
    _product(sono)
    _run_args(sono)
    sono.set_defaults(func=cmd_sonobuoy)
