"""Sharing / the device plugin's sharing config and what the nodes advertise from it.

Checklist (k8s-device-plugin README "Shared Access to GPUs"; gpu-operator update-clusterpolicy.sh
GPU sharing test):
- SHARE-CFG-001 the sharing config the ClusterPolicy names is valid (schema of api/config/v1)
- SHARE-CAP-001 every GPU node advertises GPUs x replicas, under nvidia.com/gpu.shared when
  renameByDefault is set
- SHARE-LBL-001 nvidia.com/gpu.replicas, gpu.sharing-strategy and the -SHARED product suffix
  agree with the config (no -SHARED when renamed, k8s-device-plugin#732)
"""

from __future__ import annotations

import pytest

from conformance import labels as L
from conformance.checks import sharing
from conformance.cluster import evidence as ev
from conformance.plugin import not_applicable
from conformance.sim.gfd import validate_sharing_config


@pytest.fixture(scope="module")
def sharing_docs(cluster, cluster_policy, gpu_env):
    docs = sharing.read(cluster, cluster_policy, gpu_env.options.operator_namespace)
    if docs is None:
        not_applicable("no device plugin sharing config (ClusterPolicy "
                       "spec.devicePlugin.config is unset)")
    return docs


def _node_doc(docs, node):
    key = node.label(L.DEVICE_PLUGIN_CONFIG) or docs.default_key
    return key, docs.docs.get(key)


@pytest.mark.requirement("SHARE-CFG-001")
def test_sharing_config_is_valid(sharing_docs, evidence):
    evidence.append(ev.Evidence("sharing-config.yaml", ev.to_yaml(sharing_docs.docs)))
    problems = [f"{k or sharing_docs.config_map}: {e}" for k, e in
                sharing_docs.parse_errors.items()]
    for key, doc in sharing_docs.docs.items():
        problems += [f"{key}: {e}" for e in validate_sharing_config(doc)]
    if sharing_docs.default_key and sharing_docs.default_key not in sharing_docs.docs:
        problems.append(f"the default config {sharing_docs.default_key!r} is not a key of "
                        f"ConfigMap {sharing_docs.namespace}/{sharing_docs.config_map}")
    assert not problems, "invalid sharing config: " + "; ".join(problems[:8])


def _shared_nodes(docs, nodes):
    out = []
    for node in nodes:
        key, doc = _node_doc(docs, node)
        if isinstance(doc, dict) and sharing.section(doc)[0]:
            out.append((node, key, doc))
    return out


@pytest.mark.requirement("SHARE-CAP-001")
def test_shared_capacity_is_gpus_times_replicas(sharing_docs, require_gpu_nodes, evidence):
    shared = _shared_nodes(sharing_docs, require_gpu_nodes)
    if not shared:
        not_applicable("no GPU node uses a sharing config")
    wrong = []
    for node, _key, doc in shared:
        _, cfg = sharing.section(doc)
        gpus = node.int_label(L.COUNT)
        if gpus is None:
            wrong.append(f"{node.name}: no {L.COUNT} label to know its physical GPUs")
            continue
        for resource, replicas in sharing.replicas_by_resource(doc).items():
            if resource != L.GPU_RESOURCE:
                continue  # MIG resources are counted per profile by STACK-DP-003
            name = resource + ".shared" if cfg.get("renameByDefault") else resource
            want, have = gpus * replicas, node.gpu_resources.get(name, 0)
            if have != want:
                wrong.append(f"{node.name}: {name} allocatable {have}, config implies "
                             f"{gpus} GPUs x {replicas} replicas = {want}")
    evidence.append(ev.Evidence("shared-capacity.txt", "\n".join(
        f"{n.name}: {n.gpu_resources} count={n.label(L.COUNT)}" for n, _k, _d in shared)))
    assert not wrong, "; ".join(wrong[:8])


@pytest.mark.requirement("SHARE-LBL-001")
def test_sharing_labels_agree_with_config(sharing_docs, require_gpu_nodes, evidence):
    shared = _shared_nodes(sharing_docs, require_gpu_nodes)
    if not shared:
        not_applicable("no GPU node uses a sharing config")
    wrong = []
    for node, _key, doc in shared:
        key, cfg = sharing.section(doc)
        replicas = sharing.replicas_by_resource(doc).get(L.GPU_RESOURCE)
        if replicas is None:
            continue
        label = node.int_label(L.REPLICAS)
        if label != replicas:
            wrong.append(f"{node.name}: gpu.replicas={label}, config says {replicas}")
        strategy = node.label(L.SHARING_STRATEGY)
        if strategy != sharing.strategy_label(key):
            wrong.append(f"{node.name}: gpu.sharing-strategy={strategy}, config says "
                         f"{sharing.strategy_label(key)}")
        product = node.label(L.PRODUCT) or ""
        renamed = bool(cfg.get("renameByDefault"))
        if renamed == product.endswith(L.SHARED_SUFFIX):
            wrong.append(f"{node.name}: gpu.product={product} "
                         + ("must not end in -SHARED (renameByDefault)" if renamed
                            else "should end in -SHARED"))
    evidence.append(ev.Evidence("sharing-labels.txt", "\n".join(
        f"{n.name}: product={n.label(L.PRODUCT)} replicas={n.label(L.REPLICAS)} "
        f"strategy={n.label(L.SHARING_STRATEGY)}" for n, _k, _d in shared)))
    assert not wrong, "; ".join(wrong[:8])
