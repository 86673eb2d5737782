"""The GPU Feature Discovery label contract: upstream's regexes, and checking node labels with them.

The contract is k8s-device-plugin v0.20.0 ``tests/expected-output*.txt``, packaged unmodified in
``conformance/data/gfd-contract/``. How upstream applies it (``cmd/gpu-feature-discovery/
main_test.go`` ``checkResult``): every line of a file is compiled as a Go regexp; GFD's output
(one ``key=value`` line per label) is split into lines, and each line must satisfy
``regexp.MatchString`` for at least one of them. ``MatchString`` is unanchored (a search), so a
pattern matches a label line when it matches any part of it: ``nvidia\\.com\\/gpu\\.product=
[A-Za-z_-]+`` accepts ``nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`` on its first letter, and the
bracketed "alternatives" such as ``[none|mps|time-slicing]`` are character classes that test one
character. Lines that contain ``vgpu`` are checked only against ``expected-output-vgpu.txt``.

A node carries many labels that are not GFD's (``kubernetes.io/*``, ``nvidia.com/gpu.deploy.*``,
...), so :func:`check_label_contract` applies upstream's direction to the labels the contract
governs (those whose key matches the key part of some pattern) and adds the direction a
conformance check needs: every pattern must be matched by some label, or the label is missing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

UPSTREAM = "NVIDIA/k8s-device-plugin"
UPSTREAM_VERSION = "v0.20.0"
DATA_DIR = Path(__file__).resolve().parent / "data" / "gfd-contract"

FULL_GPU = "expected-output.txt"  # no MIG devices (identical to expected-output-mig-none.txt)
MIG_NONE = "expected-output-mig-none.txt"
MIG_SINGLE = "expected-output-mig-single.txt"
MIG_MIXED = "expected-output-mig-mixed.txt"
VGPU = "expected-output-vgpu.txt"
CONTRACT_FILES = (FULL_GPU, MIG_NONE, MIG_SINGLE, MIG_MIXED, VGPU)

_MIXED_COUNT = re.compile(r"^nvidia\.com/mig-.+\.count$")
_KEY_SPLIT = re.compile(r"(?<!\\)=")


def contract_path(name: str) -> Path:
    """The packaged copy of contract file ``name`` (one of :data:`CONTRACT_FILES`)."""
    if name not in CONTRACT_FILES:
        raise ValueError(f"unknown GFD contract file {name!r}; known: {', '.join(CONTRACT_FILES)}")
    return DATA_DIR / name


def load_label_contract(path: str | Path) -> list[re.Pattern[str]]:
    """The patterns of one contract file: each line a regex, as upstream's ``checkResult`` reads it.

    Trailing newlines are dropped (``strings.TrimRight(expected, "\\n")``); a blank line would be
    a pattern that matches everything, so blank lines are skipped.
    """
    text = Path(path).read_text(encoding="utf-8")
    return [re.compile(line) for line in text.rstrip("\n").split("\n") if line.strip()]


@functools.lru_cache(maxsize=512)
def _key_pattern(pattern: str) -> re.Pattern[str]:
    """The part of ``pattern`` before its first unescaped ``=``: which label keys it governs."""
    return re.compile(_KEY_SPLIT.split(pattern, maxsplit=1)[0])


def _key_display(pattern: re.Pattern[str]) -> str:
    key = _KEY_SPLIT.split(pattern.pattern, maxsplit=1)[0]
    return key.replace("\\.", ".").replace("\\/", "/")


def check_label_contract(labels: Mapping[str, str], patterns: Sequence[re.Pattern[str]], *,
                         require_all: bool = True) -> list[str]:
    """What in ``labels`` breaks the contract ``patterns``; an empty list when nothing does.

    Two rules, both with upstream's unanchored matching of ``key=value`` lines:

    - governed labels: a label whose key matches the key part of some pattern (the text before
      its ``=``) must satisfy at least one of those patterns (upstream's ``checkResult``);
    - ``require_all``: every pattern must be satisfied by some label line. A pattern no label
      key matches is reported as a missing label.
    """
    lines = {key: f"{key}={value}" for key, value in labels.items()}
    missing: list[re.Pattern[str]] = []
    mismatched: dict[str, list[re.Pattern[str]]] = {}
    if require_all:
        for pattern in patterns:
            if any(pattern.search(line) for line in lines.values()):
                continue
            governed = [k for k in lines if _key_pattern(pattern.pattern).fullmatch(k)]
            if not governed:
                missing.append(pattern)
            for key in governed:
                mismatched.setdefault(key, []).append(pattern)
    for key, line in lines.items():
        owners = [p for p in patterns if _key_pattern(p.pattern).fullmatch(key)]
        if owners and not any(p.search(line) for p in owners):
            have = mismatched.setdefault(key, [])
            have.extend(p for p in owners if p not in have)
    problems = [f"missing label {_key_display(p)} (nothing matches /{p.pattern}/)"
                for p in missing]
    problems += [f"label {lines[key]!r} does not match "
                 + " or ".join(f"/{p.pattern}/" for p in pats)
                 for key, pats in mismatched.items()]
    return problems


def select_contract(labels: Mapping[str, str]) -> str:
    """The contract file that applies to a GPU node's labels.

    Mixed MIG when the node has ``nvidia.com/mig-<profile>.count`` labels, single MIG when
    ``nvidia.com/gpu.product`` names a MIG device (``...-MIG-<profile>``), else full GPUs. The
    label ``nvidia.com/mig.strategy`` alone does not decide it: under the operator (default
    strategy ``single``) GFD writes it on nodes without any MIG device too.
    """
    if any(_MIXED_COUNT.match(k) for k in labels):
        return MIG_MIXED
    if "-MIG-" in labels.get("nvidia.com/gpu.product", ""):
        return MIG_SINGLE
    return FULL_GPU


@functools.lru_cache(maxsize=len(CONTRACT_FILES))
def packaged_contract(name: str) -> tuple[re.Pattern[str], ...]:
    """The patterns of a packaged contract file, loaded once."""
    return tuple(load_label_contract(contract_path(name)))


def check_gfd_labels(labels: Mapping[str, str]) -> list[str]:
    """All contract problems of one GPU node: the contract :func:`select_contract` picks, then
    the vGPU one (its labels must all be present only where ``nvidia.com/vgpu.present=true``).

    Each problem names the contract file it comes from.
    """
    name = select_contract(labels)
    problems = [f"{name}: {p}" for p in check_label_contract(labels, packaged_contract(name))]
    vgpu_required = labels.get("nvidia.com/vgpu.present") == "true"
    problems += [f"{VGPU}: {p}" for p in check_label_contract(
        labels, packaged_contract(VGPU), require_all=vgpu_required)]
    return problems
