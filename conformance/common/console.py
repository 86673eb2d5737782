"""Progress lines on stderr: ``[gpuconf 07:50:08] what is happening``.

Every wait longer than a few seconds says what it waits for through one of these, so a user
watching a terminal or a CI log always sees the run move.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

Progress = Callable[[str], None]


def say(message: str, *, who: str = "gpuconf") -> None:
    print(f"[{who} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def quiet(_message: str) -> None:
    """A progress callback that drops what it is told (for callers that report elsewhere)."""
