"""Child pytest runs for the tests, forked from a server that imported the heavy libraries once.

The integration and node tests run the suites in a child pytest (the run plan's command)
about a hundred times in ``make test``. Each child spent ~2.2 s of CPU before its first check
(measured: a run that deselects every test), half of it importing kubernetes, pytest,
cryptography and YAML; on the 2-core machine that CPU is the tests' wall time. Here one
server per test process imports them once and forks a child per run: the child is the same
``pytest.main`` over the same arguments, in its own process, with the caller's working
directory and environment, its output in a file.

The kubernetes client (v37) loads its API classes and models lazily, on first attribute access
(about 920 names, pydantic models built at import): a child that reaches the cluster spent
~2 s of CPU there. The server loads them all once (~4 s, once per test process).

Not preloaded: this project's modules and the pytest plugins' (xdist, allure-pytest,
pytest-kind). Pytest rewrites the asserts of modules of distributions that register plugins;
a module imported before the child's pytest starts would keep its plain asserts and warn.

Where the server cannot reproduce the command (another interpreter, another PYTHONPATH),
:func:`run` runs it as a subprocess, as before.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRELOAD = ("pytest", "kubernetes.client", "kubernetes.config", "kubernetes.watch", "urllib3",
           "yaml", "cryptography.x509", "cryptography.hazmat.primitives.asymmetric.rsa",
           "allure_commons", "execnet", "pluggy")
# the server's imports take seconds, minutes on a loaded 2-core machine
PRELOAD_TIMEOUT_S = 600
INTERRUPT_GRACE_S = 60.0  # a child past its timeout: its own cleanup after SIGINT
# What the server's interpreter fixed when it started: a command that needs other values
# runs as a subprocess.
INTERPRETER_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE")


class Server:
    """One fork server (a child process of this one) and its request pipe."""

    def __init__(self) -> None:
        self.env = {k: os.environ.get(k) for k in INTERPRETER_ENV}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.forkserver"], cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        self.lock = threading.Lock()
        self.ready = False

    def serves(self, cmd: list[str]) -> bool:
        return (self.proc.poll() is None and cmd[:3] == [sys.executable, "-m", "pytest"]
                and all(os.environ.get(k) == v for k, v in self.env.items()))

    def _reply(self, timeout: float | None) -> dict | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the fork server exited")
        return json.loads(line)

    def run(self, cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
        with self.lock, tempfile.NamedTemporaryFile("r", prefix="forked-pytest-",
                                                    suffix=".log") as out:
            request = {"argv": cmd[3:], "cwd": os.getcwd(), "env": dict(os.environ),
                       "output": out.name}
            if not self.ready:
                self.ready = self._reply(PRELOAD_TIMEOUT_S) is not None
                if not self.ready:
                    raise RuntimeError(f"the fork server did not load in {PRELOAD_TIMEOUT_S} s")
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            pid = self._reply(30)["pid"]
            done = self._reply(timeout)
            if done is None:  # interrupted as a user would (the run cleans up, says where it
                os.kill(pid, signal.SIGINT)  # was), killed if that does not end it
                if self._reply(INTERRUPT_GRACE_S) is None:
                    os.kill(pid, signal.SIGKILL)
                    self._reply(None)
                raise subprocess.TimeoutExpired(cmd, timeout, output=out.read())
            return subprocess.CompletedProcess(cmd, done["rc"], out.read(), "")


_server: Server | None = None


def run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)`` for a child
    pytest (stdout and stderr together in ``stdout``), forked where the server can."""
    global _server
    if _server is None or _server.proc.poll() is not None:
        _server = Server()
    if not _server.serves(cmd):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return subprocess.CompletedProcess(cmd, proc.returncode, proc.stdout + proc.stderr, "")
    return _server.run(cmd, timeout)


# ---- the server ---------------------------------------------------------------------------
def _child(request: dict) -> None:
    """In the forked child: become the child pytest of ``request``; never returns."""
    code = 70
    try:
        fd = os.open(request["output"], os.O_WRONLY | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import pytest

        sys.argv = [sys.executable, *request["argv"]]
        code = int(pytest.main(request["argv"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _load_lazy_exports(module) -> None:
    """Resolve every name a lazily loading package exports (its ``_exports`` table)."""
    for name in getattr(module, "_exports", {}):
        getattr(module, name)


def preload() -> None:
    """What every child would otherwise load again: PRELOAD, the kubernetes client's lazy
    exports, and inspect's table of module files (a failing check's traceback asks
    inspect.getmodule, whose first call walks every loaded module: ~0.1 s a child)."""
    import importlib
    import inspect

    for name in PRELOAD:
        importlib.import_module(name)
    _load_lazy_exports(sys.modules["kubernetes.client"])
    inspect.getmodule(preload.__code__)


def serve() -> None:
    preload()
    # What is loaded now lives as long as every child: out of the collector's sight, a child's
    # collections (pytest runs gc.collect() at its end, ~0.18 s each over these modules) and
    # its generation-2 passes skip it. Measured: a forked default suite run ~16 % less CPU.
    gc.collect()
    gc.freeze()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve()
