"""The sharing config validator: upstream README's examples and the sim's own configs accepted,
bad configs caught with their message, warnings and relaxed rules.

Upstream facts are checked against ../shared/upstream where that tree exists (the project's CI);
elsewhere those tests skip.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from sim_label_helpers import DEVICE_PLUGIN, upstream

from conformance.nvidia import sharing
from conformance.sim.profiles import (
    PROFILES,
    get_profile,
)


def ts(**resource) -> dict:
    return {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4, **resource}]}}}


README_EXAMPLES = [  # the concrete examples of README "Shared Access to GPUs", v0.20.0
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
    "      replicas: 10\n",
    "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 10\n",
    "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
    "      replicas: 10\n",
    "version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 10\n",
]


def _readme_sharing_examples(readme: Path) -> list[str]:
    """The README's sharing YAML blocks: templates filled in, its "..." ellipsis lines dropped."""
    fill = {"<bool>": "true", "<resource-name>": "nvidia.com/gpu", "<num-replicas>": "2"}
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", readme.read_text(), re.S):
        if "sharing:" not in block:
            continue
        for placeholder, value in fill.items():
            block = block.replace(placeholder, value)
        out.append("\n".join(line for line in block.splitlines() if line.strip() != "..."))
    return out


@pytest.mark.parametrize("text", README_EXAMPLES)
def test_validator_accepts_readme_examples(text):
    assert sharing.validate_sharing_config(text) == []
    assert sharing.sharing_config_warnings(text) == []


def test_validator_accepts_every_sharing_example_of_the_upstream_readme():
    examples = _readme_sharing_examples(upstream(DEVICE_PLUGIN / "README.md"))
    assert len(examples) == 6
    for text in examples:
        assert sharing.validate_sharing_config(text) == [], text
    assert set(README_EXAMPLES) <= {e + "\n" for e in examples}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_validator_accepts_the_sims_own_configs(profile):
    doc = get_profile(profile).sharing_config()
    if doc is not None:
        assert sharing.validate_sharing_config(doc) == []
        assert sharing.validate_sharing_config(yaml.safe_dump(doc)) == []


@pytest.mark.parametrize("doc, message", [
    (ts(replicas=1), "number of replicas must be >= 2"),
    (ts(replicas="4"), "must be an integer"),
    (ts(replicas=True), "must be an integer"),
    ({"sharing": ts()["sharing"]}, "version: missing"),
    ({**ts(), "version": "v2"}, "unknown version 'v2'"),
    ({"version": "v1", "sharing": {"timeSlicing": ts()["sharing"]["timeSlicing"],
                                   "mps": {"resources": [{"name": "nvidia.com/gpu",
                                                          "replicas": 2}]}}},
     "exactly one of timeSlicing and mps"),
    ({"version": "v1", "sharing": {}}, "exactly one of timeSlicing and mps"),
    ({"version": "v1"}, "sharing: missing"),
    ({"version": "v1", "sharing": {"mps": {"resources": [
        {"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}}}, "MPS supports only nvidia.com/gpu"),
    ({**ts(), "flags": {"migStrategy": "mixed"},
      "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
     "mixed is not supported with MPS"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": []}}}, "no resources specified"),
    ({"version": "v1", "sharing": {"timeSlicing": {}}}, "no resources specified"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"replicas": 2}]}}},
     "no resource name specified"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu"}]}}},
     "no replicas specified"),
    (ts(name="nvidia.com/gpu.shared"), "cannot be time-sliced"),
    (ts(name="nvidia.com/GPU"), "incorrect format"),
    ({**ts(), "sharng": {}}, "sharng: unknown field"),
    ({"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefualt": True, "resources": ts()["sharing"]["timeSlicing"]["resources"]}}},
     "renameByDefualt: unknown field"),
    (ts(replica=4), "replica: unknown field"),
    ({"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefault": "yes", "resources": ts()["sharing"]["timeSlicing"]["resources"]}}},
     "must be true or false"),
    (ts(devices="some"), "devices: must be 'all'"),
    (ts(devices=0), "devices: must be 'all'"),
    ({**ts(), "flags": {"migStrategy": "dual"}}, "is not one of none, single, mixed"),
    ("version: v1\nsharing: [", "not valid YAML"),
    ("- a list", "must be a mapping"),
])
def test_validator_catches(doc, message):
    errors = sharing.validate_sharing_config(doc)
    assert any(message in e for e in errors), errors


def test_validator_rules_that_are_warnings_or_relaxed():
    relaxed = {"sharing": ts()["sharing"]}
    assert sharing.validate_sharing_config(relaxed, require_version=False) == []
    assert sharing.validate_sharing_config(ts(name="gpu")) == []  # nvidia.com/ is prepended
    assert sharing.validate_sharing_config(ts(name="nvidia.com/mig-1g.5gb")) == []
    for doc, warning in [
        (ts(rename="nvidia.com/gpu-shared"), "rename"),
        (ts(devices=[0, "1", "GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"]), "devices"),
        ({**ts(), "resources": {"gpus": [{"pattern": "*", "name": "gpu"}]}}, "resources"),
        ({"version": "v1", "sharing": {"mps": {"failRequestsGreaterThanOne": False, "resources": [
            {"name": "nvidia.com/gpu", "replicas": 2}]}}}, "MPS always fails"),
        ({"version": "v1", "sharing": {"timeSlicing": {"resources": [
            {"name": "nvidia.com/gpu", "replicas": 2},
            {"name": "gpu", "replicas": 3}]}}}, "named twice"),
    ]:
        assert sharing.validate_sharing_config(doc) == [], doc
        assert any(warning in w for w in sharing.sharing_config_warnings(doc)), doc
    default_rename = {"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefault": True,
        "resources": [{"name": "nvidia.com/gpu", "rename": "nvidia.com/gpu.shared",
                       "replicas": 2, "devices": "all"}]}}}
    assert sharing.validate_sharing_config(default_rename) == []
    assert sharing.sharing_config_warnings(default_rename) == []
