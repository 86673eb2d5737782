"""GFD's label contract: the packaged copy equals upstream's, every sim GPU node meets it, and
the contract check matches as upstream's Go check does.

Upstream facts are checked against ../shared/upstream where that tree exists (the project's CI);
elsewhere those tests skip.
"""

from __future__ import annotations

import re

import pytest
from sim_label_helpers import DEVICE_PLUGIN, gpu_nodes, labels_of, upstream

from conformance.nvidia import gfd_contract as contract
from conformance.sim import gfd
from conformance.sim.profiles import (
    PROFILES,
    get_profile,
)


@pytest.mark.parametrize("name", contract.CONTRACT_FILES)
def test_packaged_contract_equals_upstream(name):
    original = upstream(DEVICE_PLUGIN / "tests" / name)
    assert contract.contract_path(name).read_bytes() == original.read_bytes()


def test_packaged_contract_readme_names_origin():
    text = (contract.DATA_DIR / "README.md").read_text()
    assert "NVIDIA/k8s-device-plugin" in text and "v0.20.0" in text


def _contract(source: str, name: str) -> list[re.Pattern[str]]:
    if source == "upstream":
        return contract.load_label_contract(upstream(DEVICE_PLUGIN / "tests" / name))
    return list(contract.packaged_contract(name))


EXPECTED_CONTRACT = {"mig-single": contract.MIG_SINGLE, "mig-mixed": contract.MIG_MIXED,
                     "dra-mig": contract.MIG_MIXED}


@pytest.mark.parametrize("source", ["packaged", "upstream"])
@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_gpu_node_meets_the_gfd_contract(profile, source):
    prof = get_profile(profile)
    checked = 0
    for group, index, name in gpu_nodes(prof):
        labels = gfd.node_labels(group, index)
        chosen = contract.select_contract(labels)
        assert chosen == EXPECTED_CONTRACT.get(profile, contract.FULL_GPU), name
        problems = contract.check_label_contract(labels, _contract(source, chosen))
        problems += contract.check_label_contract(labels, _contract(source, contract.VGPU),
                                                  require_all=False)
        assert problems == [], f"{name}: {problems}"
        checked += 1
    assert checked == prof.gpu_node_count > 0


@pytest.mark.parametrize("profile", list(PROFILES))
def test_gfd_labels_alone_pass_upstreams_own_check(profile):
    """Upstream's checkResult: every GFD output line matches some regex of the applicable file."""
    for group in get_profile(profile).gpu_groups:
        labels = gfd.gfd_labels(group)
        patterns = list(contract.packaged_contract(contract.select_contract(labels)))
        vgpu = list(contract.packaged_contract(contract.VGPU))
        for key, value in labels.items():
            pats = vgpu if "vgpu" in key else patterns
            line = f"{key}={value}"
            # mig.strategy is not in expected-output.txt: GFD writes it on full-GPU nodes under
            # the operator's default strategy "single", which upstream's own test (strategy none)
            # never sees.
            if key == "nvidia.com/mig.strategy" and group.mig_layout == ():
                continue
            assert any(p.search(line) for p in pats), line


def test_contract_matches_like_go_regexp_matchstring():
    patterns = contract.load_label_contract(contract.contract_path(contract.FULL_GPU))
    labels = labels_of("healthy", "h100")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # digits: a search, not
    assert contract.check_label_contract(labels, patterns) == []  # a full match of [A-Za-z_-]+
    assert len(patterns) == 25


def test_contract_reports_missing_and_wrong_labels():
    patterns = list(contract.packaged_contract(contract.FULL_GPU))
    labels = labels_of("healthy", "h100")
    del labels["nvidia.com/gfd.timestamp"]
    labels["nvidia.com/gpu.count"] = "eight"
    labels["nvidia.com/gpu.family"] = "Hopper"
    problems = contract.check_label_contract(labels, patterns)
    assert len(problems) == 3, problems
    assert problems[0].startswith("missing label nvidia.com/gfd.timestamp")
    assert any("'nvidia.com/gpu.count=eight'" in p for p in problems)
    assert any("'nvidia.com/gpu.family=Hopper'" in p for p in problems)
    nine_digits = {**labels_of("healthy", "h100"), "nvidia.com/gfd.timestamp": "176722560"}
    assert len(contract.check_label_contract(nine_digits, patterns)) == 1


def test_contract_checks_every_governed_label_not_only_one():
    """A second MIG profile with a bad count fails although the first satisfies the pattern."""
    labels = labels_of("mig-mixed", "a100")
    patterns = list(contract.packaged_contract(contract.MIG_MIXED))
    assert contract.check_label_contract(labels, patterns) == []
    labels["nvidia.com/mig-3g.20gb.count"] = "many"
    problems = contract.check_label_contract(labels, patterns)
    assert problems == ["label 'nvidia.com/mig-3g.20gb.count=many' does not match "
                        "/nvidia\\.com\\/mig-[0-9]+g\\.[0-9]+gb\\.count=[0-9]+/"]


def test_contract_selection_and_vgpu():
    full = labels_of("healthy", "h100")
    assert full["nvidia.com/mig.strategy"] == "single"  # operator default, no MIG devices
    assert contract.select_contract(full) == contract.FULL_GPU
    assert contract.select_contract(labels_of("mig-single", "a100")) == contract.MIG_SINGLE
    assert contract.select_contract(labels_of("mig-mixed", "h100")) == contract.MIG_MIXED
    assert contract.check_gfd_labels(full).problems == []
    vgpu = {**full, "nvidia.com/vgpu.present": "true"}
    problems = contract.check_gfd_labels(vgpu).problems
    assert problems and all(p.startswith(contract.VGPU) for p in problems)
    assert any("vgpu.host-driver-branch" in p for p in problems)
    with pytest.raises(ValueError, match="known"):
        contract.contract_path("expected-output-foo.txt")
