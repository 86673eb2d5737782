"""Sharing / the device plugin's sharing config and what the nodes advertise from it.

Checklist (k8s-device-plugin README "Shared Access to GPUs"; gpu-operator update-clusterpolicy.sh
GPU sharing test):
- SHARE-CFG-001 the sharing config the ClusterPolicy names is valid (schema of api/config/v1)
- SHARE-CAP-001 every node that shares GPUs by a valid config advertises GPUs x replicas,
  under nvidia.com/gpu.shared when renameByDefault is set
- SHARE-LBL-001 nvidia.com/gpu.replicas, gpu.sharing-strategy and the -SHARED product suffix
  agree with the config (no -SHARED when renamed, k8s-device-plugin#732)
"""

from __future__ import annotations

import pytest

from conformance.checks import capacity
from conformance.cluster import evidence as ev
from conformance.cluster import views
from conformance.nvidia import labels as L
from conformance.nvidia.sharing import SharingConfig, validate_sharing_config
from conformance.plugin.api import not_applicable


@pytest.fixture
def configs(sharing_docs) -> views.SharingDocs:
    if sharing_docs is None:
        not_applicable("the device plugin has no sharing config (no ClusterPolicy "
                       "spec.devicePlugin.config, no config ConfigMap of the plugin chart)")
    return sharing_docs


@pytest.fixture
def shared_nodes(configs, require_gpu_nodes):
    """(node, its sharing config) for every GPU node a valid sharing config applies to."""
    out = []
    for node in require_gpu_nodes:
        _key, doc = configs.for_node(node)
        if isinstance(doc, dict) and not validate_sharing_config(doc):
            config = SharingConfig.from_document(doc)
            if config is not None:
                out.append((node, config))
    if not out:
        not_applicable("no GPU node uses a valid sharing config (an invalid one is "
                       "SHARE-CFG-001's)")
    return out


@pytest.mark.requirement("SHARE-CFG-001")
def test_sharing_config_is_valid(configs, attachments):
    attachments.append(ev.Evidence("sharing-config.yaml", ev.to_yaml(configs.docs)))
    problems = [f"{k or configs.config_map}: {e}" for k, e in configs.parse_errors.items()]
    for key, doc in configs.docs.items():
        problems += [f"{key}: {e}" for e in validate_sharing_config(doc)]
    if configs.default_key and configs.default_key not in configs.docs:
        problems.append(f"the default config {configs.default_key!r} is not a key of "
                        f"ConfigMap {configs.namespace}/{configs.config_map}")
    assert not problems, "invalid sharing config: " + "; ".join(problems[:8])


@pytest.mark.requirement("SHARE-CAP-001")
def test_shared_capacity_is_gpus_times_replicas(shared_nodes, attachments):
    wrong = []
    for node, config in shared_nodes:
        promised = capacity.promised_by_config(node, config)
        if promised is None:
            wrong.append(f"{node.name}: no {L.COUNT} label to know its physical GPUs")
            continue
        problem = capacity.shortfall(node, promised)
        if problem:
            wrong.append(f"{problem} ({node.label(L.COUNT)} GPUs x "
                         f"{config.replicas_for(L.GPU_RESOURCE)} replicas of the config)")
    attachments.append(ev.Evidence("shared-capacity.txt", "\n".join(
        f"{n.name}: {n.gpu_resources} count={n.label(L.COUNT)}" for n, _c in shared_nodes)))
    assert not wrong, ("the device plugin does not advertise what its sharing config says: "
                       + "; ".join(wrong[:8]))


@pytest.mark.requirement("SHARE-LBL-001")
def test_sharing_labels_agree_with_config(shared_nodes, attachments):
    wrong = []
    for node, config in shared_nodes:
        replicas = config.replicas_for(L.GPU_RESOURCE)
        if replicas <= 1:
            continue  # the config shares MIG devices only: gpu.* labels stay unshared
        label = node.int_label(L.REPLICAS)
        if label != replicas:
            wrong.append(f"{node.name}: gpu.replicas={label}, config says {replicas}")
        strategy = node.label(L.SHARING_STRATEGY)
        if strategy != config.strategy_label:
            wrong.append(f"{node.name}: gpu.sharing-strategy={strategy}, config says "
                         f"{config.strategy_label}")
        product = node.label(L.PRODUCT) or ""
        if config.rename_by_default == product.endswith(L.SHARED_SUFFIX):
            wrong.append(f"{node.name}: gpu.product={product} "
                         + ("must not end in -SHARED (renameByDefault)"
                            if config.rename_by_default else "should end in -SHARED"))
    attachments.append(ev.Evidence("sharing-labels.txt", "\n".join(
        f"{n.name}: product={n.label(L.PRODUCT)} replicas={n.label(L.REPLICAS)} "
        f"strategy={n.label(L.SHARING_STRATEGY)}" for n, _c in shared_nodes)))
    assert not wrong, "GFD's sharing labels disagree with the config: " + "; ".join(wrong[:8])
