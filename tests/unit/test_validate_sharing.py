"""`gpuconf validate-sharing` on what users write: a plain config, a ConfigMap of configs (as
NVIDIA's docs and the operator's tests/plugin-config.yaml), a ClusterPolicy with its ConfigMap;
what each config makes the nodes advertise and how GFD labels them; bad input is one line."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conformance.cli.main import main

PLUGIN_CONFIG = textwrap.dedent("""\
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: plugin-config
    data:
      time-slicing: |-
        version: v1
        flags:
          migStrategy: none
        sharing:
          timeSlicing:
            renameByDefault: false
            resources:
              - name: nvidia.com/gpu
                replicas: 10
      mps: |-
        version: v1
        sharing:
          mps:
            resources:
              - name: nvidia.com/gpu
                replicas: 4
    """)
POLICY = textwrap.dedent("""\
    apiVersion: nvidia.com/v1
    kind: ClusterPolicy
    metadata:
      name: cluster-policy
    spec:
      devicePlugin:
        config:
          name: plugin-config
          default: time-slicing
    """)


def _run(tmp_path: Path, text: str, *extra: str) -> int:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return main(["validate-sharing", str(path), *extra])


def test_a_configmap_of_configs_says_what_each_advertises(tmp_path, capsys):
    assert _run(tmp_path, PLUGIN_CONFIG) == 0
    out = capsys.readouterr().out
    assert "nvidia.com/gpu: 10 per GPU; 8 GPUs -> 80" in out
    assert "nvidia.com/gpu: 4 per GPU; 8 GPUs -> 32 (one request > 1 is refused)" in out
    assert "nvidia.com/gpu.replicas=10" in out and "nvidia.com/mps.capable=true" in out
    assert "2 valid device plugin sharing config(s) (ConfigMap plugin-config)" in out


def test_the_gpu_count_of_the_nodes_is_an_option(tmp_path, capsys):
    assert _run(tmp_path, PLUGIN_CONFIG, "--gpus", "2") == 0
    assert "2 GPUs -> 20" in capsys.readouterr().out


def test_a_broken_key_is_named(tmp_path, capsys):
    broken = PLUGIN_CONFIG.replace("replicas: 10", "replicas: 1")
    assert _run(tmp_path, broken) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "time-slicing: sharing.timeSlicing.resources[0].replicas" in err


def test_a_clusterpolicy_with_its_configmap_checks_the_default_key(tmp_path, capsys):
    assert _run(tmp_path, POLICY + "---\n" + PLUGIN_CONFIG) == 0
    assert "time-slicing (default): time-slicing" in capsys.readouterr().out
    wrong = POLICY.replace("default: time-slicing", "default: nope") + "---\n" + PLUGIN_CONFIG
    assert _run(tmp_path, wrong) == 2
    assert "the default config 'nope' is not a key" in capsys.readouterr().err


def test_a_clusterpolicy_alone_asks_for_the_cluster(tmp_path, capsys):
    assert _run(tmp_path, POLICY) == 2
    assert "pass --kubeconfig" in capsys.readouterr().err


def test_a_plain_config_still_works(tmp_path, capsys):
    plain = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n" \
            "      replicas: 2\n"
    assert _run(tmp_path, plain) == 0
    assert "1 valid device plugin sharing config(s) (a plain config)" in capsys.readouterr().out
