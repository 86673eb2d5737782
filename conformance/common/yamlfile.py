"""Reading a YAML file the user named: a bad file is a one-line usage error, not a traceback."""

from __future__ import annotations

from pathlib import Path

import yaml

from conformance.common.errors import UsageError


def load(path: str | Path, what: str, fix: str = ""):
    """The parsed document of ``path``; ``what`` names the file in the message ("kubeconfig")."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from None
    except yaml.YAMLError:
        raise UsageError(f"{what} {path} is not valid YAML" + (f": {fix}" if fix else "")) \
            from None
