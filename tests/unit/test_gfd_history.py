"""A GFD older than the v0.15.0 labels (issue 32 point 3): a node labelled by GFD's first
release (nvidia.com/cuda.driver.major/.minor/.rev, no gpu.replicas, mig.capable or
cuda.driver-version.*) is held to that release's contract, its missing later labels are a
warning, and values that break the contract still fail."""

from __future__ import annotations

import pytest

from conformance.nvidia import gfd_contract as g

FIRST_RELEASE_LABELS = {  # GFD v0.1.0's README example node
    "nvidia.com/gfd.timestamp": "1555019244", "nvidia.com/cuda.driver.major": "418",
    "nvidia.com/cuda.driver.minor": "30", "nvidia.com/cuda.driver.rev": "40",
    "nvidia.com/cuda.runtime.major": "10", "nvidia.com/cuda.runtime.minor": "1",
    "nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/gpu.count": "8", "nvidia.com/gpu.family": "volta",
    "nvidia.com/gpu.machine": "DGX-1", "nvidia.com/gpu.memory": "16160",
    "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB",
}


def test_first_release_labels_are_a_warning_not_a_broken_contract() -> None:
    version = g.version_from_labels(FIRST_RELEASE_LABELS)
    assert version.first_contract and version.text == "older than v0.15.0"
    assert "first contract, v0.1.0" in version.judged
    check = g.check_gfd_labels(FIRST_RELEASE_LABELS, version)
    assert check.problems == []
    assert "nvidia.com/gpu.replicas (added after v0.1.0)" in check.too_old
    assert "nvidia.com/mig.capable (added after v0.1.0)" in check.too_old
    assert "nvidia.com/cuda.driver-version.full (added in v0.15.0)" in check.too_old


def test_a_standalone_gfd_image_does_not_require_the_later_labels() -> None:
    version = g.version_from_image("nvcr.io/nvidia/gpu-feature-discovery:v0.2.0")
    assert version is not None and version.text == "v0.2.0"
    assert g.check_gfd_labels(FIRST_RELEASE_LABELS, version).problems == []
    # the device plugin's image (GFD since v0.15.0) writes them: their absence is a failure
    new = g.version_from_image("nvcr.io/nvidia/k8s-device-plugin:v0.17.1")
    problems = g.check_gfd_labels(FIRST_RELEASE_LABELS, new).problems
    assert any("missing label nvidia.com/gpu.replicas" in p for p in problems)


@pytest.mark.parametrize("change,word", [
    ({"nvidia.com/gpu.count": "eight"}, "nvidia.com/gpu.count=eight"),
    ({"nvidia.com/cuda.driver.rev": None}, "missing label nvidia.com/cuda.driver.rev"),
    ({"nvidia.com/gpu.product": None}, "missing label nvidia.com/gpu.product"),
    ({"nvidia.com/gpu.compute.major": "nine"}, "gpu.compute.major=nine"),
])
def test_values_that_break_the_first_contract_still_fail(change: dict, word: str) -> None:
    labels = {k: v for k, v in {**FIRST_RELEASE_LABELS, **change}.items() if v is not None}
    problems = g.check_gfd_labels(labels, g.version_from_labels(labels)).problems
    assert any(word in p for p in problems), problems
    assert all(p.startswith(g.FIRST_CONTRACT) for p in problems)


def test_a_later_label_with_a_wrong_value_fails_even_on_an_old_gfd() -> None:
    labels = {**FIRST_RELEASE_LABELS, "nvidia.com/mps.capable": "maybe"}
    problems = g.check_gfd_labels(labels, g.version_from_labels(labels)).problems
    assert any("nvidia.com/mps.capable=maybe" in p for p in problems), problems


def test_older_than_v015_with_replicas_is_lenient_on_the_standalone_additions() -> None:
    labels = {**FIRST_RELEASE_LABELS, "nvidia.com/gpu.replicas": "1"}  # no mig.capable
    version = g.version_from_labels(labels)
    assert not version.first_contract and version.text == "older than v0.15.0"
    check = g.check_gfd_labels(labels, version)
    assert check.problems == [] and "nvidia.com/mig.capable (added after v0.1.0)" in (
        check.too_old)


def test_the_first_contract_is_the_current_one_less_the_labels_added_since() -> None:
    """The history is consistent: v0.20.0's full-GPU contract less every label LABELS_ADDED
    names is exactly the first release's contract."""
    added = tuple(prefix for prefix, _release in g.LABELS_ADDED)
    current = [p.pattern for p in g.packaged_contract(g.FULL_GPU)
               if not g._key_display(p).startswith(added)]
    assert sorted(current) == sorted(p.pattern for p in g.first_contract())
    text = (g.DATA_DIR / "README.md").read_text()
    assert g.FIRST_CONTRACT in text and "gpu-feature-discovery" in text
