"""A Job's results folder, stored through the API in ConfigMaps and read back from them.

Design (only the API, least privilege):

- In the pod, ``gpuconf job inside`` packs the results folder into a gzipped tar and stores it
  through the API in ConfigMaps of its own namespace, in chunks below the object size limit,
  labelled with the Job's name and owned by the Job (deleting the Job deletes them). The only
  write this needs beyond a normal run is ``create configmaps`` in ``gpuconf-system`` for
  objects labelled ``app.kubernetes.io/component: gpuconf-results``, which the shipped
  admission policy allows and nothing more.
- ``gpuconf job fetch`` reads those ConfigMaps back (``get/list configmaps``), checks the
  SHA-256 and unpacks them: no ``kubectl cp``, no exec, no port-forward, no logs endpoint.

The Job's name is checked by the callers (``conformance.run.job.check_name``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path

from conformance.cluster.client import Cluster
from conformance.cluster.rbac import NAMESPACE
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.common.console import Progress
from conformance.common.errors import NotConverged, UsageError

COMPONENT = "gpuconf-results"  # the label the admission policy lets the ServiceAccount write
JOB_LABEL = "gpuconf.io/job"  # the Job's name, on the Job and on its stored results
RUN_LABEL = "gpuconf.io/run-id"
CHUNK_ANNOTATION = "gpuconf.io/chunk"
SHA_ANNOTATION = "gpuconf.io/sha256"
DATA_KEY = "bundle.tar.gz"
# A ConfigMap must stay below ~1 MiB in etcd; base64 makes 700 KiB of tar 933 KiB.
CHUNK_BYTES = 700 * 1024
POLL_S = 3.0  # how often `fetch` looks again for parts not stored yet


def pack(folder: Path) -> bytes:
    """A gzipped tar of ``folder``'s contents (paths relative to it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    return buf.getvalue()


def store(cluster: Cluster, data: bytes, job_name: str, job_uid: str | None, run_id: str,
          progress: Progress) -> list[str]:
    """Store ``data`` as ConfigMap parts of the Job (owned by it when its UID is known)."""
    digest = hashlib.sha256(data).hexdigest()
    pieces = [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    owner = ([{"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid,
               "controller": False, "blockOwnerDeletion": False}] if job_uid else None)
    names = []
    for index, piece in enumerate(pieces):
        name = f"{COMPONENT}-{job_name}-{index}"
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": NAMESPACE,
                             "labels": {"app.kubernetes.io/component": COMPONENT,
                                        "app.kubernetes.io/part-of": "gpu-conformance",
                                        JOB_LABEL: job_name, RUN_LABEL: run_id[:63]},
                             "annotations": {CHUNK_ANNOTATION: f"{index}/{len(pieces)}",
                                             SHA_ANNOTATION: digest},
                             **({"ownerReferences": owner} if owner else {})},
                "binaryData": {DATA_KEY: base64.b64encode(piece).decode()}}
        cluster.core.create_namespaced_config_map(NAMESPACE, body)
        names.append(name)
    progress(f"stored the results ({len(data) / 1024:.0f} KiB) in {len(names)} ConfigMap(s) "
             f"{NAMESPACE}/{COMPONENT}-{job_name}-*: `gpuconf job fetch --name {job_name}`")
    return names


def chunks(cluster: Cluster, job_name: str) -> list:
    """The ConfigMaps that hold the stored results of the Job ``job_name``."""
    return cluster.core.list_namespaced_config_map(
        NAMESPACE, label_selector=f"{JOB_LABEL}={job_name},app.kubernetes.io/component={COMPONENT}"
    ).items


def fetch(cluster: Cluster, name: str, out_dir: Path, *, job_exists: Callable[[], bool],
          wait_s: float = 0.0, progress: Progress | None = None) -> Path:
    """Unpack the results the Job `name` stored into ``out_dir``; the folder.

    ``job_exists`` tells, when nothing is stored, a Job that does not exist (bad input) from
    one that has not stored its results yet.
    """
    items: list = []

    def assembled():
        nonlocal items
        items = chunks(cluster, name)
        return _assemble(items)

    try:
        complete = wait_for(f"the results of Job {name}", assembled, timeout=wait_s,
                            interval=POLL_S, tolerate_api_errors=False,
                            state=lambda: f"{len(items)} part(s) so far",
                            progress=progress or (lambda _m: None))
    except WaitTimeout:
        complete = None
    if complete is None:
        if not items and not job_exists():
            raise UsageError(f"no Job {name} and no results of it in {NAMESPACE} "
                             "(`gpuconf job apply` creates one; --name picks it)")
        raise NotConverged(f"no complete results of Job {name} in {NAMESPACE} yet "
                           f"({len(items)} part(s)): the pod stores them when the suites end; "
                           "see `kubectl -n gpuconf-system logs job/" + name + "`")
    out_dir.mkdir(parents=True, exist_ok=True)
    _extract(complete, out_dir)
    return out_dir


def _assemble(items: list) -> bytes | None:
    """The tarball from its ConfigMap parts, or None while a part is missing."""
    parts: dict[int, bytes] = {}
    total, digest = None, None
    for cm in items:
        ann = cm.metadata.annotations or {}
        try:
            index, count = (int(x) for x in ann.get(CHUNK_ANNOTATION, "").split("/"))
        except ValueError:
            continue
        total, digest = count, ann.get(SHA_ANNOTATION)
        parts[index] = base64.b64decode((cm.binary_data or {}).get(DATA_KEY, ""))
    if total is None or len(parts) != total:
        return None
    data = b"".join(parts[i] for i in range(total))
    if hashlib.sha256(data).hexdigest() != digest:
        raise NotConverged("the stored results do not match their SHA-256 (a part was "
                           "replaced or truncated): re-run the Job")
    return data


def _extract(data: bytes, out_dir: Path) -> None:
    root = out_dir.resolve()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            target = (root / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
                raise NotConverged(f"refusing the results entry {member.name!r} (outside the "
                                   "folder, or not a plain file)")
        tar.extractall(root, filter="data")
