"""`gpuconf rbac kubeconfig` writes a ServiceAccount token: the file is private from its first
byte, not made private after the token is already on disk."""

from __future__ import annotations

import json
import stat
import types
from pathlib import Path

import pytest

from conformance.cluster import rbac

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJnIn0.c2ln"


def _cluster() -> types.SimpleNamespace:
    answer = types.SimpleNamespace(status=types.SimpleNamespace(token=TOKEN))
    core = types.SimpleNamespace(create_namespaced_service_account_token=lambda *a: answer)
    conf = types.SimpleNamespace(host="https://127.0.0.1:6443", ssl_ca_cert=None)
    return types.SimpleNamespace(core=core, api_client=types.SimpleNamespace(configuration=conf))


def test_token_file_is_created_private(tmp_path: Path, monkeypatch):
    # A process killed between writing and a later chmod must not leave a readable token.
    def no_chmod(self, mode):
        raise KeyboardInterrupt("killed before chmod")

    monkeypatch.setattr(Path, "chmod", no_chmod)
    path = rbac.service_account_kubeconfig(_cluster(), tmp_path / "sa.kubeconfig")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["users"][0]["user"]["token"] == TOKEN


def test_an_existing_readable_file_becomes_private(tmp_path: Path):
    path = tmp_path / "sa.kubeconfig"
    path.write_text("old")
    path.chmod(0o644)
    rbac.service_account_kubeconfig(_cluster(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.fixture(autouse=True)
def _umask():
    import os

    old = os.umask(0o022)
    yield
    os.umask(old)
