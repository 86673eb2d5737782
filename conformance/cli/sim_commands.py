"""``gpuconf sim ...``: the local simulated GPU cluster by hand."""

from __future__ import annotations

import json

from conformance.cli.parser import Parser
from conformance.common.console import say
from conformance.common.vocab import EXIT_FAILED, EXIT_OK


def cmd_up(args) -> int:
    from conformance.sim import cluster

    cluster.up(args.name, profile=args.profile, faults=args.fault, apiserver_port=args.port,
               chart=args.operator_chart, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
               progress=say)
    print(f"export KUBECONFIG={cluster.running(args.name).kubeconfig}")
    return EXIT_OK


def cmd_down(args) -> int:
    from conformance.sim import cluster

    if cluster.down(args.name, progress=say):
        say(f"sim {args.name!r} stopped and its data removed")
    else:
        say(f"no sim cluster named {args.name!r}")
    return EXIT_OK


def cmd_status(args) -> int:
    from conformance.controlplane.components import ControlPlane

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
    return EXIT_OK if status.get("running") or not status.get("components") else EXIT_FAILED


def cmd_set(args) -> int:
    from conformance.sim import cluster

    faults = [] if args.no_faults else (args.fault or None)
    new = cluster.set_state(args.name, profile=args.profile, faults=faults, progress=say)
    say(f"sim {args.name!r} now plays profile {new.profile}"
        + (f" with faults {', '.join(new.faults)}" if new.faults else " with no faults"))
    return EXIT_OK


def cmd_build(args) -> int:
    from conformance.binaries import binaries

    binaries.build(args.component)
    return EXIT_OK


def cmd_profiles(args) -> int:
    from conformance.sim import profiles

    for name, prof in profiles.PROFILES.items():
        print(f"{name:<22} {prof.node_count:>4} nodes {prof.physical_gpus:>5} GPUs  "
              f"{prof.description}")
    return EXIT_OK


def cmd_faults(args) -> int:
    from conformance.sim.faults import FAULTS

    for f in FAULTS:
        print(f"{f.name:<36} {f.description}\n{'':<36} symptom: {f.symptom}\n"
              f"{'':<36} suspect: {f.suspect}"
              + ("" if f.profile == "healthy" else f"\n{'':<36} shows on: --profile {f.profile}"))
    return EXIT_OK


def register(sub) -> None:
    sim = sub.add_parser("sim", help="the local simulated GPU cluster")
    simsub = sim.add_subparsers(dest="sim_command", required=True, parser_class=Parser)
    up = simsub.add_parser("up", help="start a sim cluster")
    _name(up)
    up.add_argument("--profile", default="healthy", help="profile (default healthy)")
    up.add_argument("--fault", action="append", default=[], metavar="NAME",
                    help="fault to inject (repeatable)")
    up.add_argument("--nodes", type=int, metavar="K", help="GPU nodes (overrides the profile)")
    up.add_argument("--gpus-per-node", type=int, metavar="G",
                    help="GPUs per node (overrides the profile)")
    up.add_argument("--port", type=int, metavar="PORT", help="API server port (default: free)")
    up.add_argument("--operator-chart", metavar="PATH",
                    help="take the ClusterPolicy CRD from this chart")
    up.set_defaults(func=cmd_up)
    down = simsub.add_parser("down", help="stop a sim cluster and remove it")
    _name(down)
    down.set_defaults(func=cmd_down)
    status = simsub.add_parser("status", help="show a sim cluster")
    _name(status)
    status.add_argument("--json", action="store_true", help="as JSON")
    status.set_defaults(func=cmd_status)
    st = simsub.add_parser("set", help="change the profile or faults of a running sim")
    _name(st)
    st.add_argument("--profile", help="the profile to play now")
    st.add_argument("--fault", action="append", metavar="NAME", help="fault (repeatable)")
    st.add_argument("--no-faults", action="store_true", help="remove every fault")
    st.set_defaults(func=cmd_set)
    b = simsub.add_parser("build", help="build missing control-plane binaries (Go)")
    b.add_argument("component", nargs="?", default="all",
                   choices=("all", "kubernetes", "etcd", "kwok", "helm", "kueue",
                            "karpenter", "sonobuoy", "metrics-adapter", "kind"))
    b.set_defaults(func=cmd_build)
    simsub.add_parser("profiles", help="list profiles").set_defaults(func=cmd_profiles)
    simsub.add_parser("faults", help="list the fault catalog").set_defaults(func=cmd_faults)


def _name(parser) -> None:
    parser.add_argument("--name", default="gpuconf", help="cluster name (default gpuconf)")
