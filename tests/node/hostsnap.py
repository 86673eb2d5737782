"""What a node changes on its host, recorded before and compared after ``down``: mounts, links,
addresses, the kubelet's cgroups, the fixed host paths, the sysctls it may set, and processes
running the node's binaries."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, fields
from pathlib import Path

from conformance.binaries import binaries
from conformance.node import host
from conformance.node.procs import pids_running
from conformance.node.state import HOST_PATHS, RUN_ROOT


@dataclass(frozen=True)
class Snapshot:
    mounts: frozenset[str]
    links: frozenset[str]
    addresses: frozenset[str]
    cgroups: frozenset[str]
    paths: frozenset[str]
    sysctls: tuple[tuple[str, str], ...]
    processes: frozenset[str]
    root_shared: bool  # / a shared mount (node operator makes it one until down)

    def differences(self, other: Snapshot) -> list[str]:
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name == "sysctls":
                changed = [f"{k}: {v} -> {dict(b).get(k)}" for k, v in a if dict(b).get(k) != v]
                out += [f"sysctl {c}" for c in changed]
                continue
            if isinstance(a, bool):
                out += [f"{f.name}: {a} -> {b}"] if a != b else []
                continue
            out += [f"{f.name}: added {x}" for x in sorted(b - a)]
            out += [f"{f.name}: removed {x}" for x in sorted(a - b)]
        return out


def _ip(*args: str) -> list[str]:
    tool = host.ip_tool(None)
    if not tool:
        return []
    return subprocess.run([*tool, *args], capture_output=True, text=True,
                          check=False).stdout.splitlines()


# Podman's and buildah's own (the kind preflight's trivial container, the image build, the kind
# clusters of tests/integration/test_kind.py on another worker): while the node runs, other
# tools mount their storage and their containers' network namespaces (netavark names them
# netns-<id>; containerd's, the node's, are cni-<id>) and add their bridge (podman<N>) and its
# veths; the node makes none of these
PODMAN_BRIDGE = "podman"  # podman0, podman1, ...
PODMAN_NETNS = "netns-"
OTHER_TOOLS_MOUNTS = ("/var/lib/containers/storage", f"/run/netns/{PODMAN_NETNS}")


def _links() -> dict[str, str]:
    """This host's network links, name -> its `ip -o link` line."""
    return {line.split(":")[1].strip().split("@")[0]: line for line in _ip("-o", "link", "show")}


def _other_tools_link(name: str, line: str) -> bool:
    return (name.startswith(PODMAN_BRIDGE) or f" master {PODMAN_BRIDGE}" in line
            or f" link-netns {PODMAN_NETNS}" in line)


def take() -> Snapshot:
    nb = binaries.locate_node()
    ours = [nb.kubelet, nb.containerd, nb.containerd_shim, nb.runc, nb.nvidia_container_runtime]
    watched = [*HOST_PATHS, Path("/dev/kmsg"), RUN_ROOT]
    links = {name for name, line in _links().items() if not _other_tools_link(name, line)}
    return Snapshot(
        mounts=frozenset(m for m in (line.split()[4] for line in
                                     Path("/proc/self/mountinfo").read_text().splitlines())
                         if not m.startswith(OTHER_TOOLS_MOUNTS)),
        links=frozenset(links),
        addresses=frozenset(" ".join(line.split()[1:4:2]) for line in _ip("-o", "addr", "show")
                            if line.split()[1].split("@")[0] in links),
        cgroups=frozenset(str(p) for p in host.kubepods_cgroups()),
        paths=frozenset(str(p) for p in watched if p.exists()),
        sysctls=tuple(sorted(host.read_sysctls().items())),
        processes=frozenset(f"{b.name}:{pid}" for b in ours for pid in pids_running(str(b))),
        root_shared=host.is_shared(Path("/")),
    )
