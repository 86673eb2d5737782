"""The node's containerd: its configuration and start, ``ctr`` calls, pinned image imports,
and killing its containers on the way down.

Images are imported pinned (never pulled, never garbage-collected): the node has no registry.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from conformance.binaries import binaries
from conformance.cluster.waits import wait_for_process
from conformance.common.console import Progress
from conformance.common.errors import ComponentFailed
from conformance.common.processes import log_tail
from conformance.node import chart as chartmod
from conformance.node import configs, host, images, procs, workload_image
from conformance.node.state import NodeState
from conformance.options import DEFAULT_METRICS_IMAGE

# Measured here (2 cores): containerd answers in < 1 s; an import of hundreds of MB takes
# seconds on a warm page cache. The limits leave room on a loaded CI machine.
CONTAINERD_READY_TIMEOUT_S = 30.0
CTR_TIMEOUT_S = 120.0  # one image import (hundreds of MB on a cold page cache)
CTR_IMPORT_MIN_BYTES_PER_S = 10 << 20  # a larger archive (a CuPy image: ~1 GB) gets longer
TEARDOWN_CALL_TIMEOUT_S = 15.0


def start(state: NodeState, f: host.HostFacts, nb: binaries.NodeBinaries,
          progress: Progress) -> None:
    """Write containerd's, the CNI's and the NVIDIA runtime's configs; start containerd and
    wait until ``ctr version`` answers."""
    p = configs.Paths(state.path, Path(state.run_dir))
    snapshotter = state.host["snapshotter"]
    p.cni_conf_dir.mkdir(parents=True)
    (p.cni_conf_dir / "10-gpuconf.conflist").write_text(configs.cni_conflist(p))
    p.nvidia_runtime_config.write_text(
        configs.nvidia_runtime_toml(p, runc=nb.runc, nvidia_ctk=nb.nvidia_ctk))
    p.containerd_config.write_text(configs.containerd_toml(
        p, runc=nb.runc, nvidia_runtime=nb.nvidia_container_runtime, cni_bin=nb.cni_dir,
        snapshotter=snapshotter, restrict_oom_score_adj=not f.cap_sys_resource,
        default_runtime=configs.RUNTIME_CLASS
        if state.gpu.get("injection") == chartmod.RUNTIME_INJECTION else "runc"))
    p.resolv_conf.write_text("")  # pods resolve nothing: there is no cluster DNS
    env = {"PATH": f"{nb.containerd.parent}:{nb.runc.parent}:{os.environ.get('PATH', '')}",
           "NVIDIA_CTK_CONFIG_FILE_PATH": str(p.nvidia_runtime_config)}
    progress("starting containerd")
    t0 = time.monotonic()
    proc = procs.start(state, "containerd",
                       [str(nb.containerd), f"--config={p.containerd_config}",
                        "--log-level=info"], env=env)
    wait_for_process("containerd", proc, state.logs / "containerd.log",
                     lambda: ctr(state, nb, "version", timeout=5, check=False) == 0,
                     timeout=CONTAINERD_READY_TIMEOUT_S, progress=progress, what="answering")
    progress(f"containerd ready in {time.monotonic() - t0:.1f}s")


def _argv(state: NodeState, nb: binaries.NodeBinaries, namespace: str,
          args: tuple[str, ...]) -> list[str]:
    return [str(nb.ctr), f"--address={state.containerd_socket}", f"--namespace={namespace}",
            *args]


def ctr(state: NodeState, nb: binaries.NodeBinaries, *args: str, timeout: float,
        check: bool = True, namespace: str = "k8s.io") -> int:
    """Run ``ctr`` against the node's containerd, logged to ctr.log; its exit status (with
    ``check``: a ComponentFailed with the log's tail when it fails)."""
    log = state.logs / "ctr.log"
    argv = _argv(state, nb, namespace, args)
    with log.open("ab") as fh:
        fh.write(f"$ {' '.join(argv)}\n".encode())
        try:
            proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            if check:
                raise ComponentFailed("ctr", f"`ctr {args[0]}` timed out", log_tail(log)) from exc
            return 124
    if check and proc.returncode != 0:
        raise ComponentFailed("ctr", f"`ctr {' '.join(args[:2])}` failed", log_tail(log))
    return proc.returncode


def ctr_lines(state: NodeState, nb: binaries.NodeBinaries, *args: str,
              namespace: str = "k8s.io") -> list[str]:
    """``ctr``'s output as words; nothing when it fails or hangs (used on the way down)."""
    try:
        proc = subprocess.run(_argv(state, nb, namespace, args), capture_output=True, text=True,
                              timeout=TEARDOWN_CALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return []
    return proc.stdout.split() if proc.returncode == 0 else []


def import_node_images(state: NodeState, nb: binaries.NodeBinaries,
                       progress: Progress) -> None:
    """The node's own images (plugin, GFD, NFD, pause ...) from one cached archive."""
    imgs, roles = images.node_images(nb)
    # the inference stand-in's python3 (INF-*), under the suite's default image name
    imgs.append(workload_image.stdlib_image(DEFAULT_METRICS_IMAGE, nb.busybox))
    roles["python"] = DEFAULT_METRICS_IMAGE
    t0 = time.monotonic()
    archive, cached = images.cached_archive(imgs)
    if not cached:
        progress(f"wrote the node's images to {archive} in {time.monotonic() - t0:.1f}s "
                 "(cached for the next bring-up)")
    progress(f"importing {len(imgs)} images ({archive.stat().st_size >> 20} MiB, pinned)")
    t0 = time.monotonic()
    import_pinned(state, nb, archive, list(roles.values()))
    state.images = roles
    state.save()
    progress(f"images imported in {time.monotonic() - t0:.1f}s: {', '.join(roles.values())}")


def import_pinned(state: NodeState, nb: binaries.NodeBinaries, archive: Path,
                  refs: list[str]) -> None:
    """``ctr images import`` pinned (never pulled, never collected); ``refs`` must be there."""
    timeout = max(CTR_TIMEOUT_S, archive.stat().st_size / CTR_IMPORT_MIN_BYTES_PER_S)
    ctr(state, nb, "images", "import", f"--label={images.PINNED_LABEL}",
         f"--snapshotter={state.host['snapshotter']}", str(archive), timeout=timeout)
    listed = set(ctr_lines(state, nb, "images", "ls", "-q"))
    missing = [r for r in refs if r not in listed]
    if missing:
        raise ComponentFailed("ctr", f"images not imported: {', '.join(missing)}",
                              log_tail(state.logs / "ctr.log"))


def kill_all_tasks(state: NodeState, nb: binaries.NodeBinaries, progress: Progress) -> None:
    """SIGKILL and delete every container task (before containerd itself is stopped)."""
    tasks = ctr_lines(state, nb, "tasks", "ls", "-q")
    if tasks:
        progress(f"killing {len(tasks)} container(s)")
    for task in tasks:
        ctr(state, nb, "tasks", "kill", "--signal=SIGKILL", task,
            timeout=TEARDOWN_CALL_TIMEOUT_S, check=False)
    for task in tasks:
        ctr(state, nb, "tasks", "delete", "--force", task,
            timeout=TEARDOWN_CALL_TIMEOUT_S, check=False)
