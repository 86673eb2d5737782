"""``gpuconf rbac`` (least-privilege identity) and ``gpuconf cleanup`` (leftovers)."""

from __future__ import annotations

from pathlib import Path

from conformance.cli.parser import add_cluster_arguments
from conformance.common.console import say
from conformance.common.vocab import EXIT_OK


def _connect(args):
    from conformance.cluster.client import check_reachable, connect

    cluster = connect(args.kubeconfig, args.context)
    check_reachable(cluster)
    return cluster


def cmd_rbac(args) -> int:
    from conformance.cluster import rbac

    if args.action == "show":
        print(rbac.MANIFEST.read_text())
        return EXIT_OK
    cluster = _connect(args)
    if args.action == "apply":
        rbac.apply(cluster, say)
        return EXIT_OK
    path = rbac.service_account_kubeconfig(cluster, Path(args.output))
    say(f"wrote {path}: run `gpuconf run --kubeconfig {path}` as gpuconf-system/gpuconf")
    return EXIT_OK


def cmd_cleanup(args) -> int:
    from conformance.cluster import namespaces

    names = namespaces.sweep(_connect(args), args.run_id)
    say(f"removed {len(names)} namespace(s) left by "
        + (f"run {args.run_id}" if args.run_id else "earlier gpuconf runs")
        + (": " + ", ".join(names) if names else ""))
    return EXIT_OK


def register(sub) -> None:
    rb = sub.add_parser("rbac", help="least-privilege RBAC for runs (show, apply, kubeconfig)")
    rb.add_argument("action", choices=("show", "apply", "kubeconfig"),
                    help="show the manifest, apply it, or write a kubeconfig for its "
                         "ServiceAccount")
    add_cluster_arguments(rb)
    rb.add_argument("-o", "--output", default="gpuconf-sa.kubeconfig", metavar="FILE",
                    help="where `kubeconfig` writes (mode 0600)")
    rb.set_defaults(func=cmd_rbac)

    clean = sub.add_parser("cleanup", help="remove objects left by earlier runs")
    add_cluster_arguments(clean)
    clean.add_argument("--run-id", metavar="ID", help="only this run's objects")
    clean.set_defaults(func=cmd_cleanup)
