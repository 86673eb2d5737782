"""What every stress workload offers the timing loops: one launch, its work, a check."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Param:
    """A workload option: ``--NAME`` on the kind's command, ``--KIND-NAME`` on experiments."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None


class Workload(ABC):
    """A kernel sized to fill the GPU. ``launch`` enqueues one launch and does not wait."""

    kind: str
    metric: str
    unit: str  # of the reported rate, e.g. "TB/s"
    work_unit: str  # of work_per_launch, e.g. "bytes"
    scale: float = 1e12  # work per second / scale = rate in ``unit``
    bar_key: str = ""  # the key of the default bar and datasheet peak; empty: ``kind``

    def __init__(self, cp: Any, seed: int | None = None) -> None:
        self.cp = cp
        self.seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        self.rng = cp.random.RandomState(self.seed)  # device arrays
        self.host_rng = random.Random(self.seed)  # host scalars
        self.work_per_launch: float = 0.0
        self.config: dict[str, Any] = {"seed": self.seed}

    @abstractmethod
    def launch(self) -> None:
        """Enqueue one launch on the current stream."""

    @abstractmethod
    def check(self) -> dict[str, Any]:
        """Poison the output, launch once, verify against a reference: {"ok": bool, ...}."""

    @abstractmethod
    def output(self) -> Any:
        """The device array a launch writes (after ``check`` it holds a verified result)."""

    @property
    def judged_as(self) -> str:
        """Which bar and datasheet peak apply: ``bar_key``, else the kind."""
        return self.bar_key or self.kind

    def rate(self, launches: float, seconds: float) -> float:
        return launches * self.work_per_launch / seconds / self.scale


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| (Frobenius) of two numpy arrays; inf when out has NaN."""
    import numpy as np

    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    denom = float(np.linalg.norm(ref))
    return float(np.linalg.norm(out - ref)) / (denom if denom > 0 else 1.0)
