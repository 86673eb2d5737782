"""Which container engine kind would run its nodes on here, and whether it can run one.

kind runs each node as a privileged container: Docker by default, Podman with
``KIND_EXPERIMENTAL_PROVIDER=podman``. The preflight asks the engine for its info and, for Podman,
runs one trivial container (a static busybox as the whole root filesystem, so no image is
pulled); it stops with the engine's own refusal in one line when either fails: an engine
that cannot start a container cannot start a kind node. README's kind section records what
this refuses on a sandbox VM and why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from conformance.binaries import binaries
from conformance.common.errors import UsageError

# `podman info` / `docker info` answer in well under a second; a trivial container starts in
# one or two on a loaded 2-core machine: 60 s means the engine is stuck, not slow
ENGINE_PROBE_TIMEOUT_S = 60
PODMAN_PROVIDER = {"KIND_EXPERIMENTAL_PROVIDER": "podman"}
# runc and limits within the host's, where Podman's defaults are refused (build-kind-node.sh)
PODMAN_CONF = binaries.cache_dir() / "kind" / "containers.conf"
HOST_MODULES = Path("/lib/modules")  # kind mounts it into every node


@dataclass(frozen=True)
class Engine:
    """The engine kind will use: its CLI, and the environment that tells kind to use it."""

    name: str  # "docker" or "podman"
    cli: str
    kind_env: dict[str, str]


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=ENGINE_PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"no answer in {ENGINE_PROBE_TIMEOUT_S}s")


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def find_engine() -> Engine:
    """Docker when its daemon answers, else Podman when its info does; a usage error naming
    both refusals otherwise."""
    refused = []
    for name, env in (("docker", {}), ("podman", PODMAN_PROVIDER)):
        cli = shutil.which(name)
        if cli is None:
            refused.append(f"{name}: not installed")
            continue
        proc = _run([cli, "info"])
        if proc.returncode == 0:
            return Engine(name, cli, env)
        refused.append(f"{name} info: exit {proc.returncode}: {_last_line(proc)}")
    raise UsageError("--target kind needs a container engine that runs kind's nodes "
                     f"({'; '.join(refused)}): install Docker or Podman, or use --target sim / "
                     "--target existing")


def probe_container(engine: Engine, busybox: Path) -> None:
    """Run ``true`` in one Podman container whose root filesystem is a static busybox (no image
    to pull); a usage error with the engine's refusal (its exit status and last stderr line)
    otherwise."""
    with tempfile.TemporaryDirectory(prefix="gpuconf-kind-probe-") as root:
        shutil.copy2(busybox, Path(root) / "busybox")
        proc = _run([engine.cli, "run", "--rm", "--network", "none", "--rootfs", root,
                     "/busybox", "true"])
    if proc.returncode != 0:
        conf = PODMAN_CONF if PODMAN_CONF.is_file() and not os.environ.get("CONTAINERS_CONF") \
            else None
        hint = (f"export CONTAINERS_CONF={conf} (written by `make kind-node` for this host), or "
                if conf else "")
        raise UsageError(f"--target kind: podman cannot run a container here, so it cannot run "
                         f"kind's nodes (podman run --rootfs <busybox> true: exit "
                         f"{proc.returncode}: {_last_line(proc)}); {hint}see README, 'kind on "
                         "this machine'")


def check_host_modules(modules: Path = HOST_MODULES) -> None:
    """kind mounts the host's kernel modules into every node (read-only); the engine refuses a
    missing source (``statfs /lib/modules: no such file or directory``): a usage error naming
    the fix where the host has none (a VM whose kernel has no modules; an empty folder serves)."""
    if not modules.is_dir():
        raise UsageError(f"--target kind: kind mounts the host's {modules} into its nodes and "
                         f"this host has none (a kernel without modules): `mkdir -p {modules}` "
                         "(an empty folder serves), then run again")


def preflight() -> tuple[Path, Engine]:
    """The kind binary and an engine that can run a container, or the first refusal as a
    usage error (one line, exit 2): the engine's first, as without one no kind binary helps.
    Starts nothing that outlives it."""
    engine = find_engine()
    check_host_modules()
    if engine.name == "podman":  # Docker's daemon answering is as far as this checks
        busybox = binaries.locate_node().busybox
        if not busybox.is_file():
            raise UsageError("--target kind probes Podman with a static busybox: run "
                             "`conformance/binaries/build-node.sh busybox` (or `make setup`)")
        probe_container(engine, busybox)
    return Path(shutil.which("kind") or binaries.require_kind()), engine
