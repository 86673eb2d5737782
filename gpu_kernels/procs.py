"""The parent's handle on a worker process (worker.py): spawn, talk, wait, clean up."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])


# The worker's errors that mean "cannot run here" rather than "ran and failed" (the exit code
# 3 contract): the names of cuda.CupyUnavailable, nvml.NvmlUnavailable, mps.MpsUnavailable.
UNAVAILABLE = ("CupyUnavailable", "NvmlUnavailable", "MpsUnavailable")


class WorkerError(RuntimeError):
    """A worker reported an error, died, or did not answer in time."""

    def __init__(self, message: str, returncode: int | None = None,
                 stderr_tail: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class WorkerUnavailable(WorkerError):
    """A worker could not run here at all (no CuPy, NVML, GPU or MPS): exit 3, a skip."""


class Worker:
    """One child process running ``python -m gpu_kernels.worker SPEC``."""

    def __init__(self, spec: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (PACKAGE_ROOT, full_env.get("PYTHONPATH")) if p)
        full_env["PYTHONUNBUFFERED"] = "1"
        self.spec = dict(spec)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpu_kernels.worker", json.dumps(self.spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=full_env)
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=30)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.messages.put(json.loads(line))
            except json.JSONDecodeError:
                self.stderr.append("stdout: " + line.rstrip())
        self.messages.put(None)  # end of output

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())

    def stderr_tail(self, lines: int = 8) -> str:
        return " | ".join(list(self.stderr)[-lines:])

    def send(self, cmd: str, **data: Any) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"cmd": cmd, **data}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._error(f"worker {self.pid} is gone ({exc})") from None

    def expect(self, event: str, timeout: float) -> dict[str, Any]:
        """The next message, which must be ``event``; WorkerError for anything else."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.messages.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise self._error(f"worker {self.pid} sent no {event!r} in {timeout:.0f} s") \
                    from None
            if msg is None:
                self.proc.wait(timeout=10)
                raise self._error(f"worker {self.pid} exited (code {self.proc.returncode}) "
                                  f"before {event!r}")
            if msg.get("event") == event:
                return msg
            if msg.get("event") == "error":
                error = str(msg.get("error"))
                if error.split(":", 1)[0] in UNAVAILABLE:  # no CuPy/NVML/GPU in the worker:
                    raise WorkerUnavailable(f"worker {self.pid}: {error}",  # not a failure
                                            self.proc.poll(), self.stderr_tail())
                raise self._error(f"worker {self.pid}: {error}")

    def _error(self, message: str) -> WorkerError:
        return WorkerError(message, self.proc.poll(), self.stderr_tail())

    def close(self, timeout: float = 20.0) -> int | None:
        """Wait for the process to end; kill it (this child only) if it does not."""
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=10)


def close_all(workers: list[Worker], timeout: float = 20.0) -> list[int | None]:
    return [w.close(timeout) for w in workers]
