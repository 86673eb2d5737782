"""A fake cluster for the pod engines: the API calls they make, and a fake kubelet that runs
each pod's command as a process on this host with the fake CuPy (so gpu_kernels' pod side
runs for real, against the fake GPU).

Per pod (by its index in creation order) a :class:`PodPlay` says what the kubelet does: start
it late, never start it (a stuck image pull), give it another GPU or a MIG instance, serve its
log or refuse to (an API error, as a cluster without log access does), keep its termination
message or not. The barrier ConfigMap's data is written into the pod's barrier folder when the
pod starts (the volume as the kubelet mounts it); the termination message is the file the pod
wrote, as the kubelet reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fakes.harness import FAKES, ROOT

from conformance.cluster.client import Conflict, Forbidden


@dataclass
class PodPlay:
    start_delay_s: float = 0.0
    never_starts: bool = False
    gpu_index: int = 0
    mig_instance: int | None = None
    logs_readable: bool = True
    keep_termination_message: bool = True


@dataclass
class FakePod:
    body: dict[str, Any]
    play: PodPlay
    folder: Path
    proc: subprocess.Popen | None = None
    out: str = ""
    started: bool = False
    deleted: bool = False


class FakeCluster:
    """``cluster.core`` and ``cluster.logs`` in one object."""

    def __init__(self, tmp: Path, plays: dict[int, PodPlay] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.plays = plays or {}
        self.env = env or {}
        self.core = self.logs = self
        self.config_maps: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], FakePod] = {}
        self.created: list[dict[str, Any]] = []
        (tmp / "cupy").mkdir(parents=True, exist_ok=True)

    # ---- config maps
    def create_namespaced_config_map(self, namespace: str, body: dict[str, Any]) -> None:
        key = (namespace, body["metadata"]["name"])
        if key in self.config_maps:
            raise Conflict(status=409, reason="AlreadyExists")
        self.config_maps[key] = body

    def delete_namespaced_config_map(self, name: str, namespace: str) -> None:
        self.config_maps.pop((namespace, name), None)

    # ---- pods
    def create_namespaced_pod(self, namespace: str, body: dict[str, Any]) -> None:
        index = len(self.created)
        self.created.append(body)
        name = body["metadata"]["name"]
        folder = self.tmp / name
        (folder / "barrier").mkdir(parents=True)
        pod = FakePod(body, self.plays.get(index, PodPlay()), folder)
        self.pods[(namespace, name)] = pod
        if not pod.play.never_starts:
            threading.Timer(pod.play.start_delay_s, self._start, (namespace, pod)).start()

    def _start(self, namespace: str, pod: FakePod) -> None:
        if pod.deleted:
            return
        spec = pod.body["spec"]
        barrier = next(v["configMap"]["name"] for v in spec["volumes"]
                       if v["name"] == "gpuconf-barrier")
        for key, text in (self.config_maps.get((namespace, barrier)) or {}).get(
                "data", {}).items():
            (pod.folder / "barrier" / key).write_text(text)
        command = list(spec["containers"][0]["command"])
        plan = json.loads(command[-1])
        plan.update(barrier_dir=str(pod.folder / "barrier"),
                    termination_log=str(pod.folder / "termination-log"))
        command[-1] = json.dumps(plan)
        command[0] = sys.executable
        env = {**os.environ, "PYTHONPATH": f"{FAKES}{os.pathsep}{ROOT}",
               "FAKE_CUPY_DIR": str(self.tmp / "cupy"), **self.env,
               "FAKE_CUPY_GPU_INDEX": str(pod.play.gpu_index)}
        if pod.play.mig_instance is not None:
            env["FAKE_CUPY_MIG_INSTANCE"] = str(pod.play.mig_instance)
        pod.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        pod.started = True
        threading.Thread(target=self._collect, args=(pod,), daemon=True).start()

    @staticmethod
    def _collect(pod: FakePod) -> None:
        assert pod.proc is not None and pod.proc.stdout is not None
        for line in pod.proc.stdout:
            pod.out += line

    def read_namespaced_pod(self, name: str, namespace: str) -> SimpleNamespace:
        pod = self.pods[(namespace, name)]
        node = (pod.body["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")
        if pod.play.never_starts:
            state = SimpleNamespace(waiting=SimpleNamespace(reason="ErrImagePull"),
                                    terminated=None)
            return self._pod("Pending", node, [SimpleNamespace(state=state)])
        if not pod.started:
            return self._pod("Pending", node, [])
        assert pod.proc is not None
        code = pod.proc.poll()
        if code is None:
            state = SimpleNamespace(waiting=None, terminated=None)
            return self._pod("Running", node, [SimpleNamespace(state=state)])
        time.sleep(0.05)  # the collector's last lines
        message = ""
        path = pod.folder / "termination-log"
        if pod.play.keep_termination_message and path.exists():
            message = path.read_text()
        term = SimpleNamespace(exit_code=code, reason="Completed" if code == 0 else "Error",
                               message=message)
        state = SimpleNamespace(waiting=None, terminated=term)
        return self._pod("Succeeded" if code == 0 else "Failed", node,
                         [SimpleNamespace(state=state)])

    @staticmethod
    def _pod(phase: str, node: str | None, statuses: list) -> SimpleNamespace:
        return SimpleNamespace(
            status=SimpleNamespace(phase=phase, container_statuses=statuses, reason=None,
                                   message=None),
            spec=SimpleNamespace(node_name=node, containers=[]),
            metadata=SimpleNamespace(deletion_timestamp=None))

    def read_namespaced_pod_log(self, name: str, namespace: str, **kw: Any) -> Any:
        """The log as the client returns it: raw (``_preload_content=False``, how
        conformance.cluster.logs reads it) or text."""
        pod = self.pods[(namespace, name)]
        if not pod.play.logs_readable:
            raise Forbidden(status=403, reason="Forbidden")
        if kw.get("_preload_content", True):
            return pod.out
        return SimpleNamespace(data=pod.out.encode(), release_conn=lambda: None)

    def delete_namespaced_pod(self, name: str, namespace: str, **_kw: Any) -> None:
        pod = self.pods[(namespace, name)]
        pod.deleted = True
        if pod.proc is not None and pod.proc.poll() is None:
            pod.proc.kill()
            pod.proc.wait()

    def list_pod_for_all_namespaces(self, **_kw: Any) -> SimpleNamespace:
        return SimpleNamespace(items=[])

    def list_namespaced_event(self, namespace: str, **_kw: Any) -> SimpleNamespace:
        return SimpleNamespace(items=[])
