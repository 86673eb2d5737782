"""kind's preflight refuses what the engine would refuse later, in one line with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.common.errors import UsageError
from conformance.run import kind_engine


def test_a_host_without_kernel_modules_is_told_to_make_the_folder(tmp_path: Path) -> None:
    missing = tmp_path / "lib" / "modules"
    with pytest.raises(UsageError) as exc:
        kind_engine.check_host_modules(missing)
    message = str(exc.value)
    assert "\n" not in message and f"mkdir -p {missing}" in message


def test_an_empty_modules_folder_serves(tmp_path: Path) -> None:
    kind_engine.check_host_modules(tmp_path)
