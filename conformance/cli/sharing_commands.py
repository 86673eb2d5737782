"""``gpuconf validate-sharing``: check device plugin sharing configs before they go into a
cluster, and say what the nodes will advertise and how GFD will label them.

Takes what users write: a plain config, a ConfigMap holding several configs under its
``data:`` keys (NVIDIA's docs and the operator's own tests/plugin-config.yaml), or a
ClusterPolicy whose ``spec.devicePlugin.config`` names the ConfigMap (in the same file, or
read from the cluster with --kubeconfig) and its default key.

DRA sharing is checked the same way: ResourceClaims and ResourceClaimTemplates whose
``gpu.nvidia.com`` opaque config is a GpuConfig / MigDeviceConfig (or such a config alone), as
the NVIDIA DRA driver's strict decoder and Validate() judge it; a strategy whose feature gate
the driver runs without (``--dra-feature-gates``) is the driver's refusal.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from conformance.cli.parser import add_cluster_arguments
from conformance.common.console import say
from conformance.common.errors import UsageError
from conformance.common.vocab import EXIT_OK
from conformance.nvidia import dra, sharing
from conformance.nvidia.clusterpolicy import ClusterPolicy


def _documents(path: str) -> list[dict]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise UsageError(f"{path}: expected a sharing config, a ConfigMap or a ClusterPolicy")
    return docs


def _configs(docs: list[dict], args) -> tuple[dict[str, object], str | None, str]:
    """(key -> config document, the default key, where they come from)."""
    by_kind = {d.get("kind"): d for d in docs}
    policy = by_kind.get("ClusterPolicy")
    cm = by_kind.get("ConfigMap")
    default = None
    if policy is not None:
        ref = ClusterPolicy(policy).device_plugin_config
        if ref is None:
            raise UsageError("the ClusterPolicy sets no spec.devicePlugin.config: it does not "
                             "share GPUs")
        default = ref.default
        if cm is None or cm.get("metadata", {}).get("name") != ref.name:
            cm = _configmap_from_cluster(args, ref.name)
    if cm is not None:
        data = cm.get("data") or {}
        if not data:
            raise UsageError("the ConfigMap has no data keys (one sharing config per key)")
        return dict(data), default, f"ConfigMap {cm.get('metadata', {}).get('name', '?')}"
    if len(docs) > 1:
        raise UsageError("several YAML documents but no ConfigMap or ClusterPolicy among them")
    return {"(file)": docs[0]}, None, "a plain config"


def _configmap_from_cluster(args, name: str) -> dict:
    if not args.kubeconfig and not args.context:
        raise UsageError(f"the ClusterPolicy names ConfigMap {name}, which is not in the file: "
                         "add it to the file, or pass --kubeconfig to read it from the cluster")
    from conformance.cluster.client import check_reachable, connect

    cluster = connect(args.kubeconfig, args.context)
    check_reachable(cluster)
    data = cluster.core.read_namespaced_config_map(name, args.operator_namespace).data or {}
    return {"kind": "ConfigMap", "metadata": {"name": name}, "data": data}


_DRA_KINDS = ("ResourceClaim", "ResourceClaimTemplate", dra.GPU_CONFIG, dra.MIG_CONFIG)


def _dra_configs(docs: list[dict]) -> list[tuple[str, dict]] | None:
    """(where, GpuConfig) of DRA documents; None when the file is not about DRA."""
    if not any(d.get("kind") in _DRA_KINDS for d in docs):
        return None
    out = []
    for doc in docs:
        kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name", "?")
        if kind in (dra.GPU_CONFIG, dra.MIG_CONFIG):
            out.append((f"{kind} (file)", doc))
        elif kind in ("ResourceClaim", "ResourceClaimTemplate"):
            spec = doc.get("spec") or {}
            spec = spec.get("spec", spec) if kind == "ResourceClaimTemplate" else spec
            out += [(f"{kind} {name}", p) for p in dra.sharing_configs(spec)]
    if not out:
        raise UsageError(f"no {dra.DRIVER} opaque config in the claims of the file")
    return out


def cmd_validate_dra_sharing(args, configs: list[tuple[str, dict]]) -> int:
    gates = dra.parse_feature_gates(args.dra_feature_gates)
    verdicts = [(where, dra.validate_sharing(p, gates)) for where, p in configs]
    errors = [f"{w}: {e}" for w, v in verdicts for e in v.invalid]
    if args.dra_feature_gates is not None:
        errors += [f"{w}: the driver refuses it: {r}" for w, v in verdicts for r in v.refused]
    if errors:
        raise UsageError(f"invalid DRA sharing config in {args.file}: " + "; ".join(errors))
    for where, verdict in verdicts:
        print(f"{where}: {verdict.strategy or 'no sharing'}")
        for refusal in verdict.refused:
            say(f"warning: {where}: needs the driver's feature gate: {refusal} (alpha, off by "
                "default; pass --dra-feature-gates to check against the driver's)")
    print(f"{args.file}: {len(verdicts)} valid DRA sharing config(s)")
    return EXIT_OK


def cmd_validate_sharing(args) -> int:
    docs = _documents(args.file)
    dra_configs = _dra_configs(docs)
    if dra_configs is not None:
        return cmd_validate_dra_sharing(args, dra_configs)
    configs, default, source = _configs(docs, args)
    errors = []
    if default is not None and default not in configs:
        errors.append(f"the default config {default!r} is not a key of the {source}")
    for key, doc in configs.items():
        errors += [f"{key}: {e}" for e in sharing.validate_sharing_config(doc)]
    if errors:
        raise UsageError(f"invalid sharing config in {args.file}: " + "; ".join(errors))
    for key, doc in configs.items():
        for warning in sharing.sharing_config_warnings(doc):
            say(f"warning: {key}: {warning}")
        config = sharing.SharingConfig.from_document(
            yaml.safe_load(doc) if isinstance(doc, str) else doc)
        title = key + (" (default)" if key == default else "")
        if config is None:
            print(f"{title}: no sharing (whole GPUs)")
            continue
        print(f"{title}: {config.strategy}")
        for line in sharing.capacity_lines(config, args.gpus):
            print(f"  advertises {line}")
        labels = ", ".join(f"{k}={v}" for k, v in sharing.gfd_sharing_labels(config).items())
        print(f"  GFD labels {labels}")
    print(f"{args.file}: {len(configs)} valid device plugin sharing config(s) ({source})")
    return EXIT_OK


def register(sub) -> None:
    vs = sub.add_parser("validate-sharing", help="check device plugin sharing configs (a "
                                                 "config, a ConfigMap or a ClusterPolicy) or "
                                                 "DRA GpuConfig sharing in claims")
    vs.add_argument("file", metavar="FILE", help="YAML: a config, a ConfigMap of configs, a "
                                                 "ClusterPolicy (with its ConfigMap), or DRA "
                                                 "ResourceClaims / templates / GpuConfigs")
    vs.add_argument("--dra-feature-gates", metavar="GATES", default=None,
                    help="the DRA driver's FEATURE_GATES (e.g. TimeSlicingSettings=true): a "
                         "strategy whose gate is off is then an error, not a warning")
    vs.add_argument("--gpus", type=int, default=8, metavar="N",
                    help="GPUs per node, for the advertised count (default 8)")
    add_cluster_arguments(vs)
    vs.add_argument("--operator-namespace", default="gpu-operator", metavar="NS",
                    help="where the ClusterPolicy's ConfigMap is (with --kubeconfig)")
    vs.set_defaults(func=cmd_validate_sharing)
