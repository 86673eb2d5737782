"""Driver version comparison (NVIDIA versions are dotted integers: 580.105.08)."""

from __future__ import annotations


def parse(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.strip().split("."))
    except ValueError:
        raise ValueError(f"not a driver version: {version!r} (expected e.g. 580.105.08)") from None


def at_least(version: str, minimum: str) -> bool:
    return parse(version) >= parse(minimum)
