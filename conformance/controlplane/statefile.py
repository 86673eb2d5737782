"""The one state-file type: what an environment's ``up`` wrote (``<root>/<name>/state.json``),
enough for ``down``, ``status`` and restarting one part of it.

The control plane's :class:`~conformance.controlplane.components.ClusterState` and the real
node's ``NodeState`` are dataclasses of this kind; each names its own root folder.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Self

STATE_FILE = "state.json"


class StateFile:
    """Mixin for a dataclass with a ``folder`` field, saved as JSON in that folder.

    ``save`` writes a temporary file and renames it over the old one, so a reader (``status``,
    the cleanup of an interrupted ``up``) never sees half a state.
    """

    folder: str

    @classmethod
    def root(cls) -> Path:
        """The folder holding one sub-folder per environment name."""
        raise NotImplementedError

    def save(self) -> None:
        path = Path(self.folder) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))  # type: ignore[call-overload]
        tmp.replace(path)

    @classmethod
    def load(cls, name: str) -> Self | None:
        path = cls.root() / name / STATE_FILE
        if not path.is_file():
            return None
        return cls(**json.loads(path.read_text()))
