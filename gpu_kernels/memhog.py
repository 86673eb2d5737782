"""Take and hold device memory (plain cudaMalloc, never managed memory), touching every byte."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

CHUNK = 1 << 30  # 1 GiB per cudaMalloc: a hog takes what it can even when one block would fail
PATTERN = 0xA5
OWN_SHARE_MARGIN = 0.9  # of what a copy sees free on its own: its request must fit its own share
LIMITED_VIEW = 0.9  # a copy that sees less than this of the GPU free on its own has a share


@dataclass
class Held:
    requested: int
    chunks: list[Any] = field(default_factory=list)
    held: int = 0
    error: str | None = None
    touched: bool = False

    @property
    def succeeded(self) -> bool:
        return self.error is None and self.held >= self.requested

    def as_dict(self) -> dict[str, Any]:
        return {"requested_bytes": self.requested, "held_bytes": self.held,
                "held_gib": round(self.held / 2**30, 3), "succeeded": self.succeeded,
                "touched_and_verified": self.touched, "error": self.error}

    def release(self) -> None:
        self.chunks.clear()


def allocate(cp: Any, nbytes: int, chunk: int = CHUNK) -> Held:
    """cudaMalloc ``nbytes`` in chunks, memset each and read a few bytes back."""
    held = Held(requested=nbytes)
    try:
        while held.held < nbytes:
            size = min(chunk, nbytes - held.held)
            mem = cp.cuda.Memory(size)  # direct cudaMalloc: no pool caching
            cp.cuda.runtime.memset(mem.ptr, PATTERN, size)
            held.chunks.append(mem)
            held.held += size
        cp.cuda.Device().synchronize()
        held.touched = all(_verify(cp, mem) for mem in held.chunks)
    except Exception as exc:  # OutOfMemoryError or CUDARuntimeError(cudaErrorMemoryAllocation)
        held.error = f"{type(exc).__name__}: {exc}"
    return held


def _verify(cp: Any, mem: Any) -> bool:
    """The pattern is there at the start and the end of a chunk."""
    view = cp.ndarray((mem.size,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(mem, 0))
    ends = cp.concatenate([view[:64], view[-64:]])
    return bool((ends == PATTERN).all())


def free_and_total(cp: Any) -> tuple[int, int]:
    free, total = cp.cuda.runtime.memGetInfo()
    return int(free), int(total)


def run(cp: Any, fraction: float, seconds: float) -> dict[str, Any]:
    """The ``memhog`` kind: hold ``fraction`` of free memory for ``seconds``."""
    free, total = free_and_total(cp)
    held = allocate(cp, int(free * fraction))
    if held.succeeded:
        time.sleep(seconds)
    free_during, _ = free_and_total(cp)
    out = {"fraction": fraction, "seconds": seconds, "free_before_bytes": free,
           "total_bytes": total, "free_while_held_bytes": free_during, **held.as_dict()}
    held.release()
    return out


def share_request(total: int, free_alone: int, fraction: float) -> int:
    """What the other copy asks for: ``fraction`` of the GPU, but no more than fits what it saw
    free on its own. Under MPS with a per-client pinned memory limit a copy sees its limit (less
    its context) as free; a request above that fails with or without a holder, which says nothing
    about isolation (the H100's 4-replica MPS run asked 19.79 GiB of a 19.77 GiB view)."""
    return min(int(total * fraction), int(free_alone * OWN_SHARE_MARGIN))


def beyond_share_request(free_alone: int, gpu_total: int | None) -> int | None:
    """A request 1 GiB beyond a copy's own view, where that view is a share of the GPU (smaller
    than :data:`LIMITED_VIEW` of it); None where the copy sees the whole GPU."""
    if gpu_total is None or free_alone >= LIMITED_VIEW * gpu_total:
        return None
    return free_alone + (1 << 30)
