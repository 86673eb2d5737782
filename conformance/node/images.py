"""Container images made without Docker or a registry: a docker-archive tar written here
(manifest.json + one config JSON + one layer tar per image), imported with
``ctr -n k8s.io images import`` and pinned, so the kubelet never tries to pull or collect them.

The NVIDIA and NFD images carry the binaries built by ``build-node.sh`` under the names the
upstream Helm charts use, so the real charts install them unchanged. Binaries linked against
glibc (cgo: NVML is loaded at run time) get this host's glibc beside them; the NVIDIA driver
libraries themselves are never in an image: CDI injects them from the host.

Archives are cached in ``<cache>/images/`` keyed by their content, so a bring-up only imports.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from conformance.binaries import binaries
from conformance.checks.smi import DEVICE_PROBE_IMAGE
from conformance.cluster.pods import DEFAULT_IMAGE as SUITE_POD_IMAGE
from conformance.common.errors import UsageError
from conformance.node.configs import SANDBOX_IMAGE
from conformance.nvidia import device_plugin_chart

MTIME = 1700000000  # fixed, so an archive's digest depends on its content only
PINNED_LABEL = "io.cri-containerd.pinned=pinned"
ARCHIVE_FORMAT = 1  # bump when the layout below changes (invalidates cached archives)
# glibc libraries an NVML library (the driver's or the mock) loads besides libc
GLIBC_EXTRA = ("libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2")


@dataclass(frozen=True)
class Entry:
    """One file of a layer: host file ``source`` (or ``data``, or a symlink to ``link``)."""

    path: str
    source: Path | None = None
    data: bytes | None = None
    link: str | None = None
    mode: int = 0o755


@dataclass
class Image:
    refs: list[str]
    entries: list[Entry]
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    workdir: str = "/"


BASE_DIRS = (("bin", 0o755), ("dev", 0o755), ("etc", 0o755), ("proc", 0o555), ("sys", 0o555),
             ("tmp", 0o1777), ("run", 0o755), ("var", 0o755), ("var/tmp", 0o1777),
             ("root", 0o700), ("usr", 0o755), ("usr/bin", 0o755))
PASSWD = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _add(tar: tarfile.TarFile, name: str, *, data: bytes | None = None, mode: int = 0o644,
         kind: bytes = tarfile.REGTYPE, link: str = "", source: Path | None = None) -> None:
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.mtime = kind, mode, MTIME
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    if kind == tarfile.SYMTYPE:
        ti.linkname = link
        tar.addfile(ti)
    elif source is not None:
        ti.size = source.stat().st_size
        with source.open("rb") as fh:
            tar.addfile(ti, fh)
    elif data is not None:
        ti.size = len(data)
        tar.addfile(ti, io.BytesIO(data))
    else:
        tar.addfile(ti)


def _write_layer(image: Image, out: Path) -> str:
    """The layer tar of ``image`` at ``out``; returns its sha256 (the diff id)."""
    dirs: dict[str, int] = dict(BASE_DIRS)
    for e in image.entries:
        parts = e.path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            # a folder holding files is traversable by anyone (pods run non-root), /root too
            d = "/".join(parts[:i])
            dirs[d] = dirs.get(d, 0o755) | 0o555
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            _add(tar, d, mode=dirs[d], kind=tarfile.DIRTYPE)
        _add(tar, "etc/passwd", data=PASSWD)
        _add(tar, "etc/group", data=GROUP)
        for e in sorted(image.entries, key=lambda e: e.path):
            name = e.path.strip("/")
            if e.link is not None:
                _add(tar, name, kind=tarfile.SYMTYPE, link=e.link, mode=0o777)
            else:
                _add(tar, name, data=e.data, source=e.source, mode=e.mode)
    digest = hashlib.sha256()
    with out.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _config(image: Image, diff_id: str) -> bytes:
    env = {"PATH": PATH_ENV, **image.env}
    cfg: dict = {"Env": [f"{k}={v}" for k, v in env.items()], "WorkingDir": image.workdir}
    if image.entrypoint:
        cfg["Entrypoint"] = image.entrypoint
    if image.cmd:
        cfg["Cmd"] = image.cmd
    if image.user:
        cfg["User"] = image.user
    return json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2023-11-14T22:13:20Z",
        "config": cfg, "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": "2023-11-14T22:13:20Z",
                     "created_by": "gpu-conformance conformance/node/images.py"}],
    }, sort_keys=True, separators=(",", ":")).encode()


def write_archive(images: list[Image], out: Path) -> None:
    """One docker-archive holding ``images`` (each its own layer), written atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        manifest, blobs, layers = [], {}, []
        for image in images:
            layer = Path(tmp) / f"layer-{len(layers)}.tar"
            diff_id = _write_layer(image, layer)
            layers.append((diff_id, layer))
            cfg = _config(image, diff_id)
            cname = hashlib.sha256(cfg).hexdigest() + ".json"
            blobs[cname] = cfg
            manifest.append({"Config": cname, "RepoTags": image.refs,
                             "Layers": [f"{diff_id}/layer.tar"]})
        partial = Path(tmp) / "archive.tar"
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            for diff_id, layer in layers:
                _add(tar, diff_id, mode=0o755, kind=tarfile.DIRTYPE)
                _add(tar, f"{diff_id}/VERSION", data=b"1.0")
                _add(tar, f"{diff_id}/layer.tar", source=layer)
            for name, data in blobs.items():
                _add(tar, name, data=data)
            _add(tar, "manifest.json", data=json.dumps(manifest).encode())
        partial.replace(out)


# ---- what the node's images contain ---------------------------------------------------------
def shared_libraries(binary: Path) -> list[Path]:
    """The shared libraries ``binary`` needs here (empty for a static binary), via ldd."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return []  # "not a dynamic executable"
    libs = []
    for line in proc.stdout.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m:
            libs.append(Path(m.group(1)))
    return libs


def glibc_entries(dynamic: list[Path]) -> list[Entry]:
    """The libraries of ``dynamic`` binaries at the paths the loader looks for them, plus the
    glibc libraries an NVML library loads (from the same folder as libc)."""
    wanted: dict[str, Path] = {}
    for b in dynamic:
        for lib in shared_libraries(b):
            wanted[str(lib)] = lib.resolve()
    libc = next((Path(p) for p in wanted if Path(p).name == "libc.so.6"), None)
    if libc is not None:
        for name in GLIBC_EXTRA:
            if (libc.parent / name).exists():
                wanted.setdefault(str(libc.parent / name), (libc.parent / name).resolve())
    return [Entry(path, source=real, mode=0o755) for path, real in sorted(wanted.items())]


def busybox_entries(busybox: Path) -> list[Entry]:
    proc = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=False)
    applets = sorted((set(proc.stdout.split()) | {"sh", "ls", "sleep", "cat"}) - {"busybox"})
    return [Entry("/bin/busybox", source=busybox),
            *(Entry(f"/bin/{a}", link="busybox") for a in applets)]


def node_images(nb: binaries.NodeBinaries) -> tuple[list[Image], dict[str, str]]:
    """The node's images and their references by role (the names the charts use)."""
    busybox_ref = f"docker.io/library/busybox:{nb.busybox_version.lstrip('v')}"
    dp_ref = f"{device_plugin_chart.IMAGE}:{nb.versions['NVIDIA_DEVICE_PLUGIN_VERSION']}"
    nfd_ref = f"registry.k8s.io/nfd/node-feature-discovery:{nb.versions['NFD_VERSION']}"
    bb = busybox_entries(nb.busybox)
    images = [
        # the CRI sandbox: nothing to pull, so the pause image is a busybox that sleeps; the
        # suites' placeholder pods run the same under the tag they name
        Image([SANDBOX_IMAGE, SUITE_POD_IMAGE], bb, entrypoint=["/bin/sleep", "2147483647"]),
        # also under the name the suites' device-node probe runs (checks/smi.py)
        Image([busybox_ref, DEVICE_PROBE_IMAGE], bb, cmd=["/bin/sh"]),
    ]
    # one image for the chart's four: the plugin, GFD, the config manager sidecars and
    # the MPS control daemon (upstream's image holds all four too)
    dp_bins = [nb.nvidia_device_plugin, nb.gpu_feature_discovery, nb.config_manager,
               nb.mps_control_daemon]
    # busybox, as upstream's image has a shell: the GPU Operator's plugin DaemonSet runs
    # `/bin/sh -c /bin/entrypoint.sh` (sh, cat, lsmod, grep), the MPS daemon's mount-shm
    # runs `mount -t tmpfs` (k8s.io/mount-utils)
    images.append(Image(
        [dp_ref],
        [*(Entry(f"/usr/bin/{b.name}", source=b) for b in dp_bins), *glibc_entries(dp_bins),
         *bb],
        # as upstream's image: the NVIDIA runtime gives every GPU to these containers
        env={"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
             "NVIDIA_DISABLE_REQUIRE": "true"},
    ))
    nfd_bins = [nb.nfd_master, nb.nfd_worker]
    images.append(Image(
        [nfd_ref], [*(Entry(f"/usr/bin/{b.name}", source=b) for b in nfd_bins),
                    *glibc_entries(nfd_bins)],
        user="65534:65534",  # as upstream's minimal image
        env={"GRPC_GO_LOG_SEVERITY_LEVEL": "INFO"},
    ))
    roles = {"pause": SANDBOX_IMAGE, "suite-pods": SUITE_POD_IMAGE, "busybox": busybox_ref,
             "device-plugin": dp_ref, "nfd": nfd_ref}
    return images, roles


def archive_refs(archive: Path) -> list[str]:
    """The image references a docker-archive holds (its manifest.json's RepoTags)."""
    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("manifest.json")
            manifest = json.loads(member.read()) if member else []
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
        raise UsageError(f"{archive}: not a docker-archive ({exc})") from exc
    return [ref for m in manifest for ref in m.get("RepoTags") or []]


def archive_key(images: list[Image]) -> str:
    """A digest of everything that goes into the archive (sources by path, size and mtime)."""
    h = hashlib.sha256(f"format {ARCHIVE_FORMAT}".encode())
    for image in images:
        h.update(json.dumps([image.refs, image.entrypoint, image.cmd, image.env, image.user,
                             image.workdir]).encode())
        for e in image.entries:
            src = ""
            if e.source is not None:
                st = e.source.stat()
                src = f"{e.source}:{st.st_size}:{st.st_mtime_ns}"
            h.update(f"{e.path}|{src}|{e.link}|{e.mode}|".encode())
            if e.data is not None:
                h.update(e.data)
    return h.hexdigest()[:16]


def cached_archive(images: list[Image]) -> tuple[Path, bool]:
    """The archive of ``images`` in the cache, written when missing; (path, was_cached)."""
    out = binaries.cache_dir() / "images" / f"node-images-{archive_key(images)}.tar"
    if out.is_file():
        return out, True
    for old in out.parent.glob("node-images-*.tar"):
        old.unlink(missing_ok=True)  # one archive at a time: the old one is stale
    write_archive(images, out)
    return out, False
