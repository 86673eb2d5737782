"""DRA rules: pools, devices and attributes of the NVIDIA DRA driver, judged against the node.

Pure: the views below are built by ``conformance.cluster.dra`` from a handful of list calls
(ResourceSlices, DeviceClasses, the driver's pods), whatever the node count; the rules take
them with the node's other sources of truth (GFD labels, node capacity) and say what is wrong.

The allocator's own rules are the reference for pools (KEP-4381 README, ``dra.md`` §1.4): a
pool is the set of slices of one driver with one ``pool.name``; only slices at the highest
``pool.generation`` count, and the pool is complete when their number equals
``pool.resourceSliceCount``. An incomplete pool is ignored by the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.checks.gpu_nodes import GpuNode
from conformance.nvidia import dra
from conformance.nvidia import driver as nv_driver
from conformance.nvidia import labels as L

DEVICE_PLUGIN, DRA, BOTH, NONE = "device-plugin", "dra", "both", "none"
CLUSTER_POLICY, GPU_CLUSTER = "ClusterPolicy", "GPUCluster"
MEMORY_TOLERANCE_MIB = 1  # NVML's total memory, read by GFD (MiB) and the driver (bytes)


# --- views ------------------------------------------------------------------------------------
def attribute_value(raw: Mapping[str, Any]) -> Any:
    """The value of a ``DeviceAttribute`` (exactly one of string/version/int/bool)."""
    for key in ("string", "version", "int", "bool"):
        if key in raw:
            return raw[key]
    return None


@dataclass(frozen=True)
class Device:
    name: str
    attributes: Mapping[str, Any]  # unqualified in the driver's domain, values unwrapped
    version_attributes: frozenset[str]  # the names published as ``version``
    capacity: Mapping[str, str]  # quantity texts
    consumes_counters: bool = False

    @property
    def type(self) -> str | None:
        return self.attributes.get("type")

    def attr(self, name: str) -> Any:
        return self.attributes.get(name)

    def memory_bytes(self) -> int | None:
        value = self.capacity.get("memory")
        if value is None:
            return None
        from kubernetes.utils import parse_quantity

        try:
            return int(parse_quantity(value))
        except ValueError:
            return None


def device_from_api(raw: Mapping[str, Any], driver: str) -> Device:
    attributes, versions = {}, set()
    for name, value in (raw.get("attributes") or {}).items():
        short = name[len(driver) + 1:] if name.startswith(driver + "/") else name
        attributes[short] = attribute_value(value or {})
        if "version" in (value or {}):
            versions.add(short)
    capacity = {name: str((value or {}).get("value")) for name, value
                in (raw.get("capacity") or {}).items()}
    return Device(str(raw.get("name")), attributes, frozenset(versions), capacity,
                  bool(raw.get("consumesCounters")))


@dataclass(frozen=True)
class Slice:
    name: str
    driver: str
    node: str | None
    pool: str
    generation: int
    slice_count: int
    devices: tuple[Device, ...] = ()
    counter_sets: int = 0


def slice_from_api(obj: Mapping[str, Any]) -> Slice:
    spec = obj.get("spec") or {}
    pool = spec.get("pool") or {}
    driver = str(spec.get("driver"))
    return Slice(str((obj.get("metadata") or {}).get("name")), driver, spec.get("nodeName"),
                 str(pool.get("name")), int(pool.get("generation") or 0),
                 int(pool.get("resourceSliceCount") or 0),
                 tuple(device_from_api(d, driver) for d in spec.get("devices") or []),
                 len(spec.get("sharedCounters") or []))


@dataclass(frozen=True)
class Pool:
    """One driver's pool: the slices at its current (highest) generation."""

    driver: str
    name: str
    node: str | None
    generation: int
    slices: tuple[Slice, ...]  # at ``generation``
    stale: int = 0  # slices of older generations still present

    @property
    def expected_slices(self) -> set[int]:
        return {s.slice_count for s in self.slices}

    @property
    def complete(self) -> bool:
        return self.expected_slices == {len(self.slices)}

    @property
    def devices(self) -> tuple[Device, ...]:
        return tuple(d for s in self.slices for d in s.devices)

    def describe(self) -> str:
        counts = "/".join(map(str, sorted(self.expected_slices))) or "?"
        return (f"pool {self.name} generation {self.generation}: {len(self.slices)} slice(s) "
                f"of resourceSliceCount {counts}, {len(self.devices)} device(s)")


def pools(slices: Iterable[Slice], driver: str = dra.DRIVER) -> list[Pool]:
    """The pools of ``driver`` among ``slices``, by pool name."""
    grouped: dict[str, list[Slice]] = {}
    for s in slices:
        if s.driver == driver:
            grouped.setdefault(s.pool, []).append(s)
    out = []
    for name, members in sorted(grouped.items()):
        generation = max(s.generation for s in members)
        current = tuple(s for s in members if s.generation == generation)
        nodes = {s.node for s in current if s.node}
        out.append(Pool(driver, name, next(iter(nodes)) if len(nodes) == 1 else None, generation,
                        current, len(members) - len(current)))
    return out


@dataclass(frozen=True)
class PluginPod:
    """A pod of the NVIDIA DRA driver's kubelet plugin."""

    name: str
    namespace: str
    node: str | None
    ready: bool
    image: str | None
    gates: Mapping[str, bool] = field(default_factory=dict)

    @property
    def release(self) -> tuple[int, int, int] | None:
        return dra.release_of(self.image)


# --- which path serves a node -----------------------------------------------------------------
def allocation_path(node: GpuNode, has_pool: bool, runs_plugin: bool) -> str:
    """How a node hands out its GPUs: the device plugin (extended resources in its capacity),
    the DRA driver (a gpu.nvidia.com pool, or its kubelet plugin), both, or neither."""
    plugin = _advertises(node)
    dra_path = has_pool or runs_plugin
    if plugin and dra_path:
        return BOTH
    return DEVICE_PLUGIN if plugin else DRA if dra_path else NONE


def _advertises(node: GpuNode) -> bool:
    return any(L.gpu_resources(node.capacity).values())


def serving_stack(node: GpuNode, *, cluster_policy: bool, gpu_cluster: bool) -> str:
    """Which GPU Operator custom resource manages the node: GPUCluster (the DRA stack) or
    ClusterPolicy (the device plugin stack), or none (no operator labels on the node).

    In v26.7.0 only one of the two may exist; the node's deploy labels say which one labelled
    it (the GPUCluster sets ``gpu.deploy.dra-driver`` and sweeps the device plugin's)."""
    managed = node.label(L.GPU_PRESENT) == "true" or any(
        k.startswith(L.DEPLOY_PREFIX) for k in node.labels)
    if not managed:
        return NONE
    if gpu_cluster and (not cluster_policy or node.label(dra.DEPLOY_DRA_DRIVER) == "true"):
        return GPU_CLUSTER
    if cluster_policy:
        return CLUSTER_POLICY
    return GPU_CLUSTER if gpu_cluster else NONE


# --- DeviceClasses ----------------------------------------------------------------------------
def class_problems(classes: Iterable[Mapping[str, Any]]) -> list[str]:
    """What is wrong with the NVIDIA DeviceClasses against the chart's templates."""
    by_name = {str((c.get("metadata") or {}).get("name")): c for c in classes}
    problems = [f"DeviceClass {name} is missing" for name in dra.REQUIRED_CLASSES
                if name not in by_name]
    for name, known in dra.CLASS_BY_NAME.items():
        obj = by_name.get(name)
        if obj is None:
            continue
        spec = obj.get("spec") or {}
        expressions = [((s or {}).get("cel") or {}).get("expression", "")
                       for s in spec.get("selectors") or []]
        if [dra.normalise_expression(e) for e in expressions] != [
                dra.normalise_expression(known.expression)]:
            problems.append(f"DeviceClass {name} selects {expressions or 'every device'}, "
                            f"upstream selects [{known.expression!r}]")
        mapped = spec.get("extendedResourceName")
        if mapped and mapped != known.extended_resource:
            problems.append(f"DeviceClass {name} maps extendedResourceName {mapped}; upstream "
                            + (f"maps {known.extended_resource}" if known.extended_resource
                               else "maps none"))
    return problems


def extended_resource_classes(classes: Iterable[Mapping[str, Any]],
                              resource: str = dra.EXTENDED_RESOURCE) -> list[str]:
    """The DeviceClasses that serve ``resource`` (``spec.extendedResourceName``)."""
    return sorted(str((c.get("metadata") or {}).get("name")) for c in classes
                  if (c.get("spec") or {}).get("extendedResourceName") == resource)


# --- pools ------------------------------------------------------------------------------------
def pool_problems(node: str, node_pools: list[Pool], plugin: PluginPod | None) -> list[str]:
    """Whether ``node`` publishes exactly one complete, non-empty gpu.nvidia.com pool."""
    if not node_pools:
        if plugin is not None:
            state = "Ready" if plugin.ready else "not Ready"
            return [f"{node}: the DRA kubelet plugin {plugin.namespace}/{plugin.name} is {state} "
                    "but no gpu.nvidia.com ResourceSlice is published for the node (the API "
                    "server rejects a whole slice with a version attribute that is not semver; "
                    "see the plugin's log): claims for its GPUs stay Pending"]
        return [f"{node}: no gpu.nvidia.com ResourceSlice and no DRA kubelet plugin"]
    problems = []
    if len(node_pools) > 1:
        problems.append(f"{node}: {len(node_pools)} gpu.nvidia.com pools "
                        f"({', '.join(p.name for p in node_pools)}), the driver publishes one")
    for pool in node_pools:
        if not pool.complete:
            problems.append(f"{node}: incomplete {pool.describe()}: the scheduler ignores an "
                            "incomplete pool, so none of its devices can be allocated")
        elif not pool.devices:
            problems.append(f"{node}: {pool.describe()}: the pool offers no device")
    return problems


@dataclass(frozen=True)
class NodeTruth:
    """What a node's GFD labels say its GPUs are (None: not labelled)."""

    physical: int | None
    mig: dict[str, int]  # MIG devices by profile (mixed strategy labels)
    mig_single: tuple[str, int] | None  # (profile, devices) under the single strategy
    product: str | None
    memory_mib: int | None
    mig_memory_mib: dict[str, int]
    compute: str | None
    driver: str | None
    cuda: str | None


def node_truth(node: GpuNode) -> NodeTruth:
    lab = node.labels
    product = node.label(L.PRODUCT)
    mig, mig_memory = {}, {}
    single = None
    prefix = "nvidia.com/mig-"
    for key, value in lab.items():
        if key.startswith(prefix) and key.endswith(".count"):
            profile = key[len(prefix):-len(".count")]
            mig[profile] = _int(value) or 0
            memory = _int(lab.get(f"{prefix}{profile}.memory"))
            if memory is not None:
                mig_memory[profile] = memory
    base = product
    if product and "-MIG-" in product:  # single strategy: gpu.* describe the MIG devices
        base, _, profile = product.partition("-MIG-")
        count = node.int_label(L.COUNT) or 0
        single = (profile, count)
        if node.int_label(L.MEMORY) is not None:
            mig_memory[profile] = node.int_label(L.MEMORY) or 0
    if base:
        base = base.removesuffix(L.SHARED_SUFFIX)
    major, minor = lab.get(L.COMPUTE_MAJOR), lab.get(L.COMPUTE_MINOR)
    return NodeTruth(
        physical=None if single else node.int_label(L.COUNT), mig=mig, mig_single=single,
        product=base, memory_mib=None if single else node.int_label(L.MEMORY),
        mig_memory_mib=mig_memory, compute=f"{major}.{minor}" if major and minor else None,
        driver=nv_driver.version_from_labels(lab), cuda=lab.get(L.RUNTIME_FULL))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def device_count_problems(node: GpuNode, devices: Iterable[Device]) -> list[str]:
    """One device per physical GPU, or per MIG device, as GFD counts them; and no MIG-enabled
    GPU offered whole beside its own MIG devices (dra-driver-nvidia-gpu#719)."""
    devices = list(devices)
    truth = node_truth(node)
    gpus = [d for d in devices if d.type == dra.TYPE_GPU]
    migs = [d for d in devices if d.type == dra.TYPE_MIG]
    problems = []
    parents = {d.attr("parentUUID") for d in migs if d.attr("parentUUID")}
    doubled = [d.name for d in gpus if d.attr("uuid") in parents and not (
        d.consumes_counters and all(m.consumes_counters for m in migs
                                    if m.attr("parentUUID") == d.attr("uuid")))]
    if doubled:
        problems.append(f"{node.name}: GPU(s) {', '.join(sorted(doubled))} are offered whole and "
                        "as their own MIG devices (no shared counters keep them apart): one "
                        "GPU can be allocated twice")
    by_profile: dict[str, int] = {}
    for d in migs:
        by_profile[str(d.attr("profile"))] = by_profile.get(str(d.attr("profile")), 0) + 1
    if truth.mig_single is not None:
        profile, count = truth.mig_single
        if by_profile != {profile: count}:
            problems.append(f"{node.name}: GFD labels {count} x MIG {profile} (single strategy), "
                            f"the pool offers MIG {by_profile or 'none'}")
        return problems
    if truth.mig:
        want = {p: n for p, n in truth.mig.items() if n}
        if by_profile != want:
            problems.append(f"{node.name}: GFD labels MIG devices {want}, the pool offers "
                            f"{by_profile or 'none'}")
    if truth.physical is not None:
        whole = len(gpus) + len(parents - {d.attr("uuid") for d in gpus})
        if whole != truth.physical:
            problems.append(f"{node.name}: {truth.physical} GPU(s) by {L.COUNT}, the pool offers "
                            f"{len(gpus)} whole GPU(s)"
                            + (f" and MIG devices of {len(parents)} more" if parents else ""))
    return problems


def attribute_problems(node: GpuNode, devices: Iterable[Device],
                       expected_driver: str | None = None) -> list[str]:
    """Attributes that disagree with the node's GFD labels (and the expected driver)."""
    truth = node_truth(node)
    problems: list[str] = []
    seen: set[str] = set()

    def add(text: str) -> None:
        if text not in seen:
            seen.add(text)
            problems.append(text)

    for d in devices:
        where = f"{node.name}/{d.name}"
        product = d.attr("productName")
        if truth.product and product is not None and dra.product_label(str(product)) != (
                truth.product):
            add(f"{where}: productName {product!r} is {dra.product_label(str(product))} as a "
                f"label, GFD says {L.PRODUCT}={truth.product}")
        version = d.attr("driverVersion")
        for ref, source in ((truth.driver, "GFD's cuda.driver-version"),
                            (expected_driver, "the expected driver")):
            if ref and version is not None and not dra.same_version(str(version), ref):
                add(f"{where}: driverVersion {version} is not {ref} ({source}, "
                    f"{_semver_or(ref)} as semver)")
        cuda = d.attr("cudaDriverVersion")
        if truth.cuda and cuda is not None and not dra.same_version(str(cuda), truth.cuda):
            add(f"{where}: cudaDriverVersion {cuda}, GFD says {L.RUNTIME_FULL}={truth.cuda}")
        compute = d.attr("cudaComputeCapability")
        if truth.compute and compute is not None and not dra.same_version(str(compute),
                                                                          truth.compute):
            add(f"{where}: cudaComputeCapability {compute}, GFD says compute "
                f"{truth.compute} ({L.COMPUTE_MAJOR}/minor)")
        memory = d.memory_bytes()
        if memory is not None:
            mib = memory // 2**20
            want = (truth.mig_memory_mib.get(str(d.attr("profile")))
                    if d.type == dra.TYPE_MIG else truth.memory_mib)
            if want is not None and abs(mib - want) > MEMORY_TOLERANCE_MIB:
                label = L.MEMORY if d.type != dra.TYPE_MIG or truth.mig_single else (
                    f"nvidia.com/mig-{d.attr('profile')}.memory")
                add(f"{where}: memory {d.capacity.get('memory')} ({mib} MiB), GFD says "
                    f"{label}={want} MiB")
    return problems


def _semver_or(version: str) -> str:
    try:
        return dra.semver(version)
    except ValueError:
        return version


def attribute_set_problems(node: str, devices: Iterable[Device],
                           release: tuple[int, int, int] | None) -> list[str]:
    """Devices whose attribute names are not those their driver release publishes."""
    expected = dra.attribute_set(release)
    problems = []
    for d in devices:
        if d.type not in (dra.TYPE_GPU, dra.TYPE_MIG):
            continue
        names = set(d.attributes)
        where = f"{node}/{d.name} ({d.type}, driver {dra.release_text(release)})"
        for name in sorted(d.version_attributes):
            if not dra.is_semver(str(d.attr(name))):
                problems.append(f"{where}: {name}={d.attr(name)} is not semver")
        dropped = sorted(names & set(dra.DROPPED))
        if expected is None:
            missing = sorted({"type", "productName", "driverVersion",
                              "cudaComputeCapability"} - names)
            if missing:
                problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        if expected.since >= (0, 3, 0) and dropped:
            problems.append(f"{where}: carries {', '.join(dropped)}, which "
                            + ", ".join(f"{n} (dropped in {dra.DROPPED[n]})" for n in dropped)
                            + ": the slice is stale or was written by an older plugin")
        missing = sorted(expected.required(d.type) - names)
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)} ({expected.label} publishes "
                            "them)")
        extra = sorted(names - expected.allowed(d.type) - set(dropped)) if expected.exact else []
        if extra:
            problems.append(f"{where}: unexpected {', '.join(extra)} ({expected.label} does not "
                            "publish them)")
    return problems


# --- both paths -------------------------------------------------------------------------------
def both_paths(node: GpuNode, devices: int) -> str | None:
    """A node that advertises GPUs through the device plugin and offers DRA devices too: the
    same GPUs can be handed out twice (over-admission)."""
    if not (_advertises(node) and devices):
        return None
    resources = ", ".join(f"{k}={v}" for k, v in sorted(L.gpu_resources(node.capacity).items())
                          if v)
    return (f"{node.name}: the device plugin advertises {resources} and the DRA driver offers "
            f"{devices} device(s) in a gpu.nvidia.com pool")


# --- the GPUCluster ---------------------------------------------------------------------------
def gpucluster_problems(obj: Mapping[str, Any]) -> list[str]:
    status = obj.get("status") or {}
    state = status.get("state")
    if state == dra.GPUCLUSTER_READY:
        return []
    reasons = [f"{c.get('type')}={c.get('status')} ({c.get('reason')}: {c.get('message')})"
               for c in status.get("conditions") or []
               if (c.get("type") == "Ready" and c.get("status") != "True")
               or (c.get("type") == "Error" and c.get("status") == "True")]
    return [f"GPUCluster {(obj.get('metadata') or {}).get('name')} status.state is {state!r}, "
            "not 'ready'" + (f": {'; '.join(reasons)}" if reasons else "")]
