"""``gpuconf node ...``: this machine as a real Kubernetes node (``--target node``) by hand."""

from __future__ import annotations

import json

from conformance.cli.parser import Parser
from conformance.common.console import say
from conformance.common.vocab import EXIT_FAILED, EXIT_OK
from conformance.options import add_node_arguments


def cmd_up(args) -> int:
    from conformance.node import chart, lifecycle

    state = lifecycle.up(args.name, gpu_profile=args.gpu_profile, driver_root=args.driver_root,
                         dev_root=args.dev_root, nvidia_src=args.nvidia_src,
                         gpu_injection=args.gpu_injection,
                         chart_values=chart.load_values(args.node_values),
                         allow_compute_mode_change=args.allow_compute_mode_change, progress=say)
    print(f"export KUBECONFIG={state.kubeconfig}")
    return EXIT_OK


def cmd_reconfigure(args) -> int:
    from conformance.node import chart, lifecycle

    lifecycle.reconfigure(args.name, chart_values=chart.load_values(args.node_values),
                          allow_compute_mode_change=args.allow_compute_mode_change,
                          progress=say)
    say(f"node {args.name!r}: chart values applied and rolled out")
    return EXIT_OK


def cmd_down(args) -> int:
    from conformance.node import lifecycle

    if not lifecycle.down(args.name, progress=say):
        say(f"no node named {args.name!r}")
    return EXIT_OK


def cmd_status(args) -> int:
    from conformance.node import lifecycle

    status = lifecycle.status(args.name)
    if args.json:
        print(json.dumps(status, indent=2))
    elif "phase" not in status:
        print(f"node {args.name!r}: not up")
    else:
        gpu = status["gpu"]
        print(f"node {args.name!r} ({status['node']}): {status['phase']}, "
              f"{'running' if status['running'] else 'DEGRADED'}, ready "
              f"{status.get('ready', '?')}, {status.get('gpus_allocatable', '?')} "
              f"{status.get('gpu_resource') or 'nvidia.com/gpu'} allocatable, GPUs from "
              f"{gpu.get('source')} "
              f"{gpu.get('profile') or gpu.get('driver_root')}")
        print(f"  kubeconfig {status['kubeconfig']}")
        for name, comp in status["components"].items():
            print(f"  {name:<24} pid {comp['pid']:<8} {'running' if comp['running'] else 'DOWN'}")
    return EXIT_OK if status.get("running") or "phase" not in status else EXIT_FAILED


def cmd_image(args) -> int:
    from conformance.node import workload_image

    ref = workload_image.build_and_import(args.name, python=args.python, tag=args.tag,
                                          archive=args.output, progress=say,
                                          modules=tuple(args.module or ("cupy", "numpy")),
                                          require_gpu=not args.no_kernel_probe)
    print(ref)
    return EXIT_OK


def cmd_suite_image(args) -> int:
    from pathlib import Path

    from conformance.node import suite_images

    refs = suite_images.import_suite_image(args.name, Path(args.archive) if args.archive else None,
                                           progress=say)
    print(refs[0])
    return EXIT_OK


def cmd_sonobuoy_image(args) -> int:
    from conformance.node import suite_images

    print(suite_images.import_sonobuoy_image(args.name, progress=say))
    return EXIT_OK


def cmd_operator(args) -> int:
    from conformance.node import operator

    operator.install(args.name, chart=args.chart, progress=say, timeout=args.timeout,
                     sharing_config=args.sharing_config,
                     allow_compute_mode_change=args.allow_compute_mode_change)
    say(f"node {args.name!r}: the GPU Operator runs it (run the suites with --target node)")
    return EXIT_OK


def register(sub) -> None:
    node = sub.add_parser("node", help="this machine as a real Kubernetes node (--target node)",
                          description="The sim's control plane plus this machine as a real "
                                      "node: kubelet, containerd, runc, CNI and NVIDIA's device "
                                      "plugin, GFD and NFD from their upstream chart. Needs root.")
    nsub = node.add_subparsers(dest="node_command", required=True, parser_class=Parser)
    up = nsub.add_parser("up", help="start the control plane and this machine as a node")
    _name(up)
    add_node_arguments(up)  # --nvidia-src, --gpu-profile | --driver-root, --dev-root, ...
    _allow_compute_mode_change(up)
    up.add_argument("--gpu-injection", choices=("cdi", "runtime"),
                    help="how pods get their GPUs: cdi (the plugin's CDI spec, plain runc) or "
                         "runtime (the plugin's NVIDIA_VISIBLE_DEVICES, the NVIDIA runtime as "
                         "containerd's default, as the GPU Operator sets it up). Default: cdi, "
                         "or runtime where --driver-root has no dev/nvidiactl (the plugin's CDI "
                         "spec would be empty there)")
    up.set_defaults(func=cmd_up)
    rc = nsub.add_parser("reconfigure", help="helm upgrade the node's device plugin chart with "
                         "new values (e.g. time-slicing) and wait for the rollout")
    _name(rc)
    add_node_arguments(rc, ["node_values"], required=["node_values"])  # --chart-values
    _allow_compute_mode_change(rc)
    rc.set_defaults(func=cmd_reconfigure)
    down = nsub.add_parser("down", help="stop the node and its control plane; undo every host "
                           "change up made")
    _name(down)
    down.set_defaults(func=cmd_down)
    status = nsub.add_parser("status", help="show the node")
    _name(status)
    status.add_argument("--json", action="store_true", help="as JSON")
    status.set_defaults(func=cmd_status)
    img = nsub.add_parser("workload-image", help="build the gpu_kernels image from a Python "
                          "with CuPy on this host and import it into the node (no registry)")
    _name(img)
    img.add_argument("--python", metavar="PATH", default="python3",
                     help="the Python whose CuPy, NumPy and libraries go into the image "
                          "(default python3)")
    img.add_argument("--tag", metavar="IMAGE",
                     help="image reference (default gpuconf.local/gpu-kernels:<python+cupy>)")
    img.add_argument("--output", metavar="FILE",
                     help="also keep the docker-archive tar here (for `ctr images import` "
                          "elsewhere)")
    img.add_argument("--module", action="append", metavar="NAME",
                     help="a Python module the image must carry, with what it needs "
                          "(repeatable; default cupy and numpy)")
    img.add_argument("--no-kernel-probe", action="store_true",
                     help="build where CuPy imports but cannot run a kernel (a host without "
                          "the GPU): the libraries a kernel loads are then not found")
    img.set_defaults(func=cmd_image)
    si = nsub.add_parser("suite-image", help="import the suite's image (`make image`) into the "
                         "node, for `gpuconf job` and the Sonobuoy plugin (no registry)")
    _name(si)
    si.add_argument("--archive", metavar="FILE",
                    help="the docker-archive (default: the one `make image` writes)")
    si.set_defaults(func=cmd_suite_image)
    sb = nsub.add_parser("sonobuoy-image", help="make Sonobuoy's aggregator/worker image from "
                         "the Sonobuoy binary `make setup` built and import it into the node")
    _name(sb)
    sb.set_defaults(func=cmd_sonobuoy_image)
    op = nsub.add_parser("operator", help="install the GPU Operator (built from source by "
                         "build-node.sh gpu-operator) on the node, with the host's driver and "
                         "toolkit, and wait for its ClusterPolicy to be ready")
    _name(op)
    op.add_argument("--chart", metavar="DIR", required=True,
                    help="the gpu-operator Helm chart of the same tag (helm pull "
                         "nvidia/gpu-operator --version TAG --untar)")
    op.add_argument("--timeout", type=float, default=300.0, metavar="S",
                    help="how long to wait for the ClusterPolicy to be ready (default 300)")
    op.add_argument("--sharing-config", metavar="FILE",
                    help="a device plugin config (version: v1, sharing: timeSlicing or mps) "
                         "for the operator's plugin, applied as NVIDIA documents: ConfigMap "
                         "time-slicing-config, the ClusterPolicy's devicePlugin.config")
    _allow_compute_mode_change(op)
    op.set_defaults(func=cmd_operator)


def _name(parser) -> None:
    parser.add_argument("--name", default="gpuconf",
                        help="node (and control plane) name (default gpuconf)")


def _allow_compute_mode_change(parser) -> None:
    parser.add_argument("--allow-compute-mode-change", action="store_true",
                        help="let an MPS sharing config run on real GPUs: the plugin's MPS "
                             "control daemon changes their compute mode "
                             "(refused without this flag)")
