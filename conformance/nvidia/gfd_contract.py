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
from dataclasses import dataclass
from pathlib import Path

from conformance.nvidia import labels as L

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
    if "-MIG-" in labels.get(L.PRODUCT, ""):
        return MIG_SINGLE
    return FULL_GPU


@functools.lru_cache(maxsize=len(CONTRACT_FILES))
def packaged_contract(name: str) -> tuple[re.Pattern[str], ...]:
    """The patterns of a packaged contract file, loaded once."""
    return tuple(load_label_contract(contract_path(name)))


# The oldest contract the suite knows: the labels of the standalone GFD's first release
# (NVIDIA/gpu-feature-discovery v0.1.0, 2019: its README's "Labels" table, 13 labels; written
# as its tests/expected-output.txt of then, without the vGPU lines added later). Its driver
# version labels are nvidia.com/cuda.driver.major/.minor/.rev, before cuda.driver-version.*.
FIRST_CONTRACT = "first-contract-v0.1.0.txt"
FIRST_RELEASE = (0, 1, 0)
_BEFORE = 99  # (0, 14, 99): some release before v0.15.0
STANDALONE = (0, 14, _BEFORE)  # added by a standalone GFD release after v0.1.0, before v0.15.0

# Labels the v0.20.0 contract requires that older GFD releases did not write, with the first
# release that wrote them. Sources: the first contract (above) has none of them; the
# standalone GFD added gpu.replicas (time-slicing) and mig.capable in a later release (which
# one the sources here do not pin: STANDALONE, "after v0.1.0"), and the device plugin's
# contract has them from v0.15.0 on; device plugin v0.15.0 imported GFD, added MPS sharing
# (CHANGELOG "Add support for MPS sharing": gpu.sharing-strategy, mps.capable) and the
# cuda.*-version labels (internal/lm/nvml.go marks them "New labels" beside the older
# cuda.driver.*/cuda.runtime.* it keeps); gpu.mode (the PCI class labeler) first appears in the
# v0.17.0 contract.
LABELS_ADDED: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("nvidia.com/gpu.replicas", STANDALONE),
    ("nvidia.com/mig.capable", STANDALONE),
    ("nvidia.com/cuda.driver-version.", (0, 15, 0)),
    ("nvidia.com/cuda.runtime-version.", (0, 15, 0)),
    ("nvidia.com/gpu.sharing-strategy", (0, 15, 0)),
    ("nvidia.com/mps.capable", (0, 15, 0)),
    ("nvidia.com/gpu.mode", (0, 17, 0)),
)
CONTRACT_RELEASE = (0, 20, 0)
_TAG = re.compile(r":v?(\d+)\.(\d+)\.(\d+)")


def _release_text(release: tuple[int, ...]) -> str:
    return "after v0.1.0" if release == STANDALONE else "in v" + ".".join(map(str, release))


def first_contract() -> tuple[re.Pattern[str], ...]:
    """The patterns of the oldest GFD contract the suite knows (:data:`FIRST_CONTRACT`)."""
    return _first_contract()


@functools.lru_cache(maxsize=1)
def _first_contract() -> tuple[re.Pattern[str], ...]:
    return tuple(load_label_contract(DATA_DIR / FIRST_CONTRACT))


@dataclass(frozen=True)
class GfdVersion:
    """Which GFD labelled a node: a release, and how it was found out (for the message)."""

    release: tuple[int, ...]
    source: str  # "image nvcr.io/nvidia/k8s-device-plugin:v0.17.1", "its labels", ...

    @property
    def text(self) -> str:
        major, minor, patch = self.release
        if self.release == FIRST_RELEASE and self.source == LABELS_SOURCE:
            return "older than v0.15.0"  # and than the release that added gpu.replicas
        if patch == _BEFORE:
            return f"older than v{major}.{minor + 1}.0"
        return f"v{major}.{minor}.{patch}"

    @property
    def first_contract(self) -> bool:
        """Whether the node is held to the oldest contract (:data:`FIRST_CONTRACT`)."""
        return self.release == FIRST_RELEASE

    @property
    def judged(self) -> str:
        """How the release was found and which contract holds: for a message."""
        return f"by {self.source}" + (", held to its first contract, v0.1.0"
                                      if self.first_contract else "")


def version_from_image(image: str) -> GfdVersion | None:
    """The GFD release an image runs: the device plugin image's tag (GFD ships in it since
    v0.15.0), or the standalone ``gpu-feature-discovery`` image (before that, as old as v0.14)."""
    match = _TAG.search(image or "")
    if not match:
        return None
    release = tuple(int(x) for x in match.groups())
    if "gpu-feature-discovery:" in image:  # the standalone image predates the import
        release = min(release, (0, 14, _BEFORE))
    return GfdVersion(release, f"image {image}")


LABELS_SOURCE = "the labels it wrote"


def version_from_labels(labels: Mapping[str, str]) -> GfdVersion:
    """The newest release whose labels the node carries ("label generation"), when no image
    says which GFD runs: a node without any of a release's new labels was labelled by an older
    GFD."""
    for added in sorted({a for _p, a in LABELS_ADDED}):
        new_labels = tuple(p for p, a in LABELS_ADDED if a == added)
        if not any(k.startswith(new_labels) for k in labels):
            if added == STANDALONE:  # none of the labels added after the first release
                return GfdVersion(FIRST_RELEASE, LABELS_SOURCE)
            return GfdVersion((added[0], added[1] - 1, _BEFORE), LABELS_SOURCE)
    return GfdVersion(CONTRACT_RELEASE, LABELS_SOURCE)


def _added_after(pattern: re.Pattern[str], release: tuple[int, ...]) -> tuple[int, ...] | None:
    key = _key_display(pattern)
    for prefix, added in LABELS_ADDED:
        # a GFD known only as "older than v0.15.0" may predate the standalone additions too
        if key.startswith(prefix) and (added > release or added == release == STANDALONE):
            return added
    return None


@dataclass
class GfdCheck:
    """What is wrong with a node's GFD labels, and what is only missing because GFD is old."""

    problems: list[str]
    too_old: list[str]  # "nvidia.com/gpu.mode (added in v0.17.0)" for an older GFD


def check_gfd_labels(labels: Mapping[str, str], version: GfdVersion | None = None) -> GfdCheck:
    """All contract problems of one GPU node: the contract :func:`select_contract` picks, then
    the vGPU one (its labels must all be present only where ``nvidia.com/vgpu.present=true``).

    With ``version`` older than the contract's release, a label that release did not write yet
    is not required: its absence is reported in ``too_old``, not as a problem. A label that is
    there must still match. Each problem names the contract file it comes from.
    """
    name = select_contract(labels)
    release = version.release if version else CONTRACT_RELEASE
    patterns = packaged_contract(name)
    required = [p for p in patterns if _added_after(p, release) is None]
    source = name
    if version is not None and version.first_contract and name == FULL_GPU:
        required, source = list(first_contract()), FIRST_CONTRACT  # as that release wrote it
    too_old = sorted({f"{_key_display(p)} (added {_release_text(added)})"
                      for p in patterns if (added := _added_after(p, release))
                      and not any(p.search(f"{k}={v}") for k, v in labels.items())})
    problems = [f"{source}: {p}" for p in check_label_contract(labels, required)]
    problems += [f"{name}: {p}" for p in check_label_contract(
        labels, [p for p in patterns if p not in required], require_all=False)]
    vgpu_required = labels.get("nvidia.com/vgpu.present") == "true"
    problems += [f"{VGPU}: {p}" for p in check_label_contract(
        labels, packaged_contract(VGPU), require_all=vgpu_required)]
    return GfdCheck(problems, too_old)
