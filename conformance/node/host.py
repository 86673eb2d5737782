"""This machine's facts, what it must offer a node, and the host changes a node makes (mounts,
links, sysctls, cgroups), each undone by ``down``.

Facts handled here rather than by hand (../shared/research/realnode.md):
- cgroup v1 hierarchy (the development machine): kubelet 1.36 refuses it unless
  ``failCgroupV1: false``; cgroup v2 (the GPU machine): the controllers must be enabled at the root.
- root without CAP_SYS_RESOURCE (both machines): lowering oom_score_adj is refused, so containerd
  must ``restrict_oom_score_adj`` and the kubelet's own ``oomScoreAdj`` is 0.
- /dev/kmsg missing: the kubelet's OOM watcher needs it; created (and removed by ``down``).
- the kubelet sets kernel sysctls and the CNI bridge enables forwarding: restored by ``down``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import shutil
import socket
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from conformance.common.console import Progress

CAP_SYS_RESOURCE = 24
# Sysctls the kubelet (setupKernelTunables) and the bridge plugin (isGateway) may change.
SYSCTLS = (
    "kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
    "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding", "net/ipv6/conf/all/forwarding",
)
V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer")
V2_CONTROLLERS = ("cpuset", "cpu", "io", "memory", "pids")
V2_REQUIRED = ("cpu", "memory", "pids")
KUBELET_PORTS = {"kubelet": 10250, "kubelet healthz": 10248}
MNT_DETACH = 2
MS_BIND, MS_PRIVATE, MS_SHARED = 4096, 1 << 18, 1 << 20  # <sys/mount.h>


@dataclass(frozen=True)
class HostFacts:
    cgroup: str  # "v1" | "v2" | "none"
    cap_sys_resource: bool
    overlay: bool
    kmsg: bool
    root: bool
    ip_tool: list[str]

    def as_dict(self) -> dict:
        return {"cgroup": self.cgroup, "cap_sys_resource": self.cap_sys_resource,
                "snapshotter": "overlayfs" if self.overlay else "native",
                "kmsg_present": self.kmsg}


def cgroup_version() -> str:
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").is_file():
        return "v2"
    if all((root / c).is_dir() for c in ("cpu", "memory")):
        return "v1"
    return "none"


def has_capability(bit: int) -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool((int(line.split()[1], 16) >> bit) & 1)
    return False


def ip_tool(busybox: Path | None) -> list[str]:
    found = shutil.which("ip")
    if found:
        return [found]
    if busybox and busybox.is_file():
        return [str(busybox), "ip"]
    return []


def facts(busybox: Path | None = None) -> HostFacts:
    filesystems = Path("/proc/filesystems").read_text()
    return HostFacts(
        cgroup=cgroup_version(),
        cap_sys_resource=has_capability(CAP_SYS_RESOURCE),
        overlay="overlay" in filesystems.split(),
        kmsg=Path("/dev/kmsg").exists(),
        root=os.geteuid() == 0,
        ip_tool=ip_tool(busybox),
    )


def running_kubelets() -> list[int]:
    """PIDs of processes named kubelet (ours or anyone's) on this host: one node per host. A
    kubelet in a container (a kind node's) has PID, network and mount namespaces of its own:
    it takes none of the host's ports or paths, and is not counted."""
    found = []
    own = os.readlink("/proc/self/ns/pid")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if ((entry / "comm").read_text().strip() == "kubelet"
                    and os.readlink(entry / "ns" / "pid") == own):
                found.append(int(entry.name))
    return sorted(found)


def tcp_port_taken(port: int, host: str = "0.0.0.0") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def preflight_problems(f: HostFacts, *, bridge: str, networks: Iterable[str]) -> list[str]:
    """What stops a node here, one short phrase each (empty: the host can run one)."""
    problems: list[str] = []
    if not f.root:
        problems.append("not root (the kubelet, containerd and runc need root)")
    if f.cgroup == "none":
        problems.append("no cgroups mounted at /sys/fs/cgroup")
    elif f.cgroup == "v1":
        missing = [c for c in V1_CONTROLLERS if not Path(f"/sys/fs/cgroup/{c}").is_dir()]
        if missing:
            problems.append(f"cgroup v1 controllers not mounted: {', '.join(missing)}")
    else:
        have = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        missing = [c for c in V2_REQUIRED if c not in have]
        if missing:
            problems.append(f"cgroup v2 controllers not available: {', '.join(missing)}")
    if kubelets := running_kubelets():
        problems.append(f"a kubelet is already running (pid {', '.join(map(str, kubelets))})")
    for what, port in KUBELET_PORTS.items():
        if tcp_port_taken(port):
            problems.append(f"port {port} ({what}) is taken")
    if not f.ip_tool:
        problems.append("no `ip` command (install iproute2)")
    elif link_exists(f.ip_tool, bridge):
        problems.append(f"network link {bridge} already exists")
    taken = [n for n in networks if f.ip_tool and network_in_use(f.ip_tool, n)]
    if taken:
        problems.append(f"networks already routed here: {', '.join(taken)}")
    if kubelet_root_in_use():
        problems.append("/var/lib/kubelet holds another kubelet's state (remove it first)")
    return problems


def kubelet_root_in_use() -> bool:
    root = Path("/var/lib/kubelet")
    return root.is_dir() and any(root.iterdir())


# ---- sysctls ------------------------------------------------------------------------------
def read_sysctls(names: Iterable[str] = SYSCTLS) -> dict[str, str]:
    values = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = Path("/proc/sys", name).read_text().strip()
    return values


def restore_sysctls(saved: dict[str, str], progress: Progress) -> list[str]:
    """Put back every recorded sysctl that differs now; returns those that could not be."""
    failed = []
    for name, value in saved.items():
        path = Path("/proc/sys", name)
        try:
            now = path.read_text().strip()
            if now != value:
                path.write_text(value)
                progress(f"sysctl {name.replace('/', '.')}: {now} -> {value} (restored)")
        except OSError:
            failed.append(name)
    return failed


# ---- network ------------------------------------------------------------------------------
def _ip(tool: list[str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([*tool, *args], capture_output=True, text=True, check=check)


def link_exists(tool: list[str], name: str) -> bool:
    return _ip(tool, "link", "show", name, check=False).returncode == 0


def network_in_use(tool: list[str], cidr: str) -> bool:
    """True when an address or a route (other than the default) of this host overlaps ``cidr``."""
    net = ipaddress.ip_network(cidr)
    for line in _ip(tool, "-o", "-4", "addr", "show", check=False).stdout.splitlines():
        words = line.split()
        if "inet" in words:
            iface = ipaddress.ip_interface(words[words.index("inet") + 1])
            if iface.ip in net:
                return True
    for line in _ip(tool, "-4", "route", "show", check=False).stdout.splitlines():
        dest = line.split()[0] if line.strip() else "default"
        if dest != "default":
            with contextlib.suppress(ValueError):
                if ipaddress.ip_network(dest, strict=False).overlaps(net):
                    return True
    return False


def add_bridge(tool: list[str], name: str, cidr: str) -> None:
    _ip(tool, "link", "add", name, "type", "bridge")
    _ip(tool, "addr", "add", cidr, "dev", name)
    _ip(tool, "link", "set", name, "up")


def add_address(tool: list[str], cidr: str, dev: str) -> None:
    _ip(tool, "addr", "add", cidr, "dev", dev)


def remove_address(tool: list[str], cidr: str, dev: str) -> None:
    _ip(tool, "addr", "del", cidr, "dev", dev, check=False)


def delete_link(tool: list[str], name: str) -> None:
    if link_exists(tool, name):
        _ip(tool, "link", "del", name, check=False)


def veths_on(bridge: str) -> list[str]:
    """Host ends of pod veths still attached to ``bridge``."""
    brif = Path(f"/sys/class/net/{bridge}/brif")
    return sorted(p.name for p in brif.iterdir()) if brif.is_dir() else []


# ---- mounts -------------------------------------------------------------------------------
def mounts_under(roots: Iterable[Path]) -> list[str]:
    """Mount points at or below any of ``roots``, deepest first."""
    prefixes = [str(r).rstrip("/") for r in roots]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def _containing_mount(path: Path) -> tuple[str, list[str]]:
    """The mount point holding ``path`` and that mount's optional fields (``shared:N``...)."""
    best, fields = "/", []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        point = parts[4].replace("\\040", " ")
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fields = point, parts[6:parts.index("-")]
    return best, fields


def is_shared(path: Path) -> bool:
    """Whether the mount holding ``path`` propagates mounts (``shared:N`` in mountinfo)."""
    return any(f.startswith("shared:") for f in _containing_mount(path)[1])


def make_shared(path: Path) -> None:
    """Bind-mount ``path`` onto itself and make it shared, as systemd makes every mount at
    boot (undo: unmount it). A pod's Bidirectional volume needs a shared mount: the device
    plugin's MPS daemon mounts its shm below its root, and containerd refuses the container
    otherwise ("is mounted on / but it is not a shared mount")."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(str(path).encode(), str(path).encode(), None, MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot bind-mount {path} onto itself: {os.strerror(err)}")
    set_shared(path, True)


def set_shared(path: Path, shared: bool) -> None:
    """Make the mount at ``path`` (a mount point, e.g. /) shared, or private again. A pod's
    HostToContainer volume of ``/`` (the GPU Operator's validator mounts the host's root) needs
    / shared or slave, as systemd makes it at boot; containerd refuses the container otherwise."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(None, str(path).encode(), None, MS_SHARED if shared else MS_PRIVATE,
                  None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot change the propagation of {path}: {os.strerror(err)}")


def mount_point(path: Path) -> str:
    """The mount point holding ``path``."""
    return _containing_mount(path)[0]


def unmount_all(roots: Iterable[Path], progress: Progress) -> list[str]:
    """Unmount everything below ``roots`` (lazily when busy); returns what stayed mounted."""
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(3):  # a bind mount can stack on another: repeat until none is left
        points = mounts_under(roots)
        if not points:
            return []
        for point in points:
            if libc.umount2(point.encode(), 0) != 0:
                libc.umount2(point.encode(), MNT_DETACH)
        progress(f"unmounted {len(points)} mount(s) below {', '.join(map(str, roots))}")
    return mounts_under(roots)


def safe_rmtree(path: Path) -> list[str]:
    """Remove ``path`` without ever crossing into another filesystem (a mount that survived
    ``unmount_all`` is left alone and returned, never emptied)."""
    if not path.exists() and not path.is_symlink():
        return []
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return []
    kept: list[str] = []
    root_dev = path.lstat().st_dev

    def walk(d: Path) -> bool:
        empty = True
        for entry in os.scandir(d):
            p = Path(entry.path)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if st.st_dev != root_dev:
                    kept.append(str(p))
                    empty = False
                    continue
                if walk(p):
                    os.rmdir(p)
                else:
                    empty = False
            else:
                os.unlink(p)
        return empty

    if walk(path):
        path.rmdir()
    return kept


def first_missing(path: Path) -> Path | None:
    """The highest ancestor of ``path`` (or itself) that does not exist, None if all exist."""
    missing = None
    for p in [path, *path.parents]:
        if p.exists() or p.is_symlink():
            break
        missing = p
    return missing


# ---- cgroups ------------------------------------------------------------------------------
def enable_v2_controllers() -> list[str]:
    """Enable the controllers the kubelet needs in the root's subtree; returns those it enabled."""
    root = Path("/sys/fs/cgroup")
    have = root.joinpath("cgroup.controllers").read_text().split()
    enabled = root.joinpath("cgroup.subtree_control").read_text().split()
    added = []
    for c in V2_CONTROLLERS:
        if c in have and c not in enabled:
            with contextlib.suppress(OSError):
                root.joinpath("cgroup.subtree_control").write_text(f"+{c}")
                added.append(c)
    return added


def disable_v2_controllers(controllers: Iterable[str]) -> None:
    for c in controllers:
        with contextlib.suppress(OSError):
            Path("/sys/fs/cgroup/cgroup.subtree_control").write_text(f"-{c}")


def kubepods_cgroups() -> list[Path]:
    """The kubelet's cgroup trees (``kubepods`` at the root of each hierarchy)."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").is_file():
        candidates = [root / "kubepods", root / "kubepods.slice"]
    else:
        candidates = [d / "kubepods" for d in root.iterdir() if d.is_dir()]
    return [c for c in candidates if c.is_dir()]


def cgroup_pids(tree: Path) -> set[int]:
    pids: set[int] = set()
    for procs in tree.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            pids.update(int(p) for p in procs.read_text().split())
    return pids


def remove_cgroup_tree(tree: Path) -> bool:
    """rmdir the tree leaf-first (cgroup folders are removed with rmdir, never unlink)."""
    dirs = sorted((d for d in tree.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts))
    for d in [*dirs, tree]:
        with contextlib.suppress(OSError):
            d.rmdir()
    return not tree.exists()
