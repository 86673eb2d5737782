"""DRA / allocation: the real scheduler allocates real claims against the driver's pools.

Checklist (dra-driver-nvidia-gpu test/e2e gpu_allocation_test.go and bats robustness tests,
v0.4.1; KEP-4381):
- DRA-ALLOC-001 a ResourceClaimTemplate for one gpu.nvidia.com device: the pod is scheduled,
  its claim allocated by gpu.nvidia.com from the pod's node's pool and reserved for the pod
- DRA-ALLOC-002 two claims on one node get two different devices
- DRA-ALLOC-003 CEL selectors on productName, cudaComputeCapability (>= 9.0: FP8 only on the new
  generation) and memory place a claim on a node exactly when its GPUs match by GFD's labels,
  one node of each GPU type tried (the e2e's [cel/*] specs, made two-sided)
- DRA-ALLOC-004 a claim for one GPU more than any DRA node has (by GFD's gpu.count) leaves its
  pod Pending with the scheduler's "cannot allocate all claims" at once, not after a timeout,
  and the claim unallocated (e2e [negative], which asks for two "h300"s)
- DRA-ALLOC-005 one ResourceClaim shared by three pods: one device, three reservations, one
  node (e2e [sharing])
- DRA-ALLOC-006 a claim for all the free devices of a node (at most 32, the most one claim may
  hold; "All" of them picked by uuid), its pod deleted: the claim goes and a new claim for the
  same devices is allocated (bats "claim released on delete")

The claims ask for ``gpu.nvidia.com`` devices, or ``mig.nvidia.com`` on a node whose GPUs are
all in MIG mode. Pods run the pause image under the restricted profile: on the sim nothing is
prepared on a node, on a real cluster the kubelet plugin prepares the claim.
"""

from __future__ import annotations

import time

import pytest

from conformance.cluster import dra as cluster_dra
from conformance.cluster import evidence as ev
from conformance.cluster import pods
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.nvidia import dra
from conformance.nvidia import labels as L
from conformance.plugin.api import finding, not_applicable, own_namespace

SHARERS = 3  # pods sharing one claim (the driver's e2e uses 4)
# The scheduler says "cannot allocate all claims" in the scheduling cycle that tries the pod:
# well under a second. A claim that only fails by timing out is the defect this bound catches.
UNSATISFIABLE_WITHIN_S = pods.PENDING_SETTLE_TIMEOUT_S
MEMORY_SHARE = 0.9  # the e2e's [cel/memory] asks for 90 % of the detected size
MAX_RESULTS = 32  # devices one claim may hold (resource.k8s.io AllocationResultsMaxSize)


def _claims_yaml(cluster, namespace: str) -> ev.Evidence:
    return ev.Evidence("resourceclaims.yaml",
                       ev.to_yaml(cluster_dra.list_claims(cluster, namespace)))


def _one_device(targets) -> dict:
    """A claim spec for one device of the first target's DeviceClass."""
    return cluster_dra.claim_spec(cluster_dra.request(device_class=targets[0].device_class))


def _pool_node(view, pool_name: str) -> str | None:
    return next((p.node for p in view.pools if p.name == pool_name), None)


@pytest.mark.requirement("DRA-ALLOC-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_template_claim_is_allocated_and_reserved(request, cluster, gpu_env, require_dra, targets,
                                                  namespace, attachments):
    tpl = cluster_dra.create_template(cluster, namespace, "one", _one_device(targets),
                                      gpu_env.run_id)
    pod = cluster_dra.create_claim_pod(cluster, namespace, "one", gpu_env.run_id, template=tpl)
    node, reason = cluster_dra.place(cluster, namespace, pod)
    attachments.append(_claims_yaml(cluster, namespace))
    assert node, (f"a pod with one {targets[0].device_class} claim was not scheduled: {reason}"
                  + require_dra.class_hint())
    claims = cluster_dra.wait_allocated(cluster, namespace, pod)
    devices = cluster_dra.devices_of(claims)
    assert len(devices) == 1, f"the claim holds {len(devices)} gpu.nvidia.com devices, not 1"
    pool, device = devices[0]
    assert _pool_node(require_dra, pool) == node, (
        f"the claim got {pool}/{device}, a pool of node {_pool_node(require_dra, pool)}, but "
        f"the pod runs on {node}")
    finding(request, f"{pod} on {node} holds {pool}/{device}, reserved for it")


@pytest.mark.requirement("DRA-ALLOC-002")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_two_claims_get_distinct_devices(request, cluster, gpu_env, require_dra, targets,
                                         attachments):
    target = next((t for t in targets if len(t.free) >= 2), None)
    if target is None:
        not_applicable("no DRA node has two free devices")
    namespace = own_namespace(request)
    tpl = cluster_dra.create_template(cluster, namespace, "two", cluster_dra.claim_spec(
        cluster_dra.request(device_class=target.device_class)), gpu_env.run_id)
    names = [cluster_dra.create_claim_pod(cluster, namespace, f"two-{i}", gpu_env.run_id,
                                          template=tpl, node=target.node.name) for i in (0, 1)]
    placed = [cluster_dra.place(cluster, namespace, n) for n in names]
    attachments.append(_claims_yaml(cluster, namespace))
    refused = [f"{n}: {r}" for n, (node, r) in zip(names, placed, strict=True) if not node]
    assert not refused, (f"two one-device claims on {target.node.name} ({len(target.free)} "
                         f"free) were not both allocated: {'; '.join(refused)}")
    held = [cluster_dra.devices_of(cluster_dra.wait_allocated(cluster, namespace, n))
            for n in names]
    assert held[0] != held[1] and not set(held[0]) & set(held[1]), (
        f"two claims on {target.node.name} got the same device: {held}")
    finding(request, f"two claims on {target.node.name}: {held[0]} and {held[1]}")


def _representatives(targets) -> list:
    """One node per GPU type (GFD product) that offers whole GPUs, by node name."""
    seen, out = set(), []
    for t in sorted(targets, key=lambda t: t.node.name):
        product = t.node.label(L.PRODUCT)
        if t.device_class == dra.GPU_CLASS.name and product and product not in seen:
            seen.add(product)
            out.append(t)
    return out


def _product_regex(product: str) -> str:
    """A regex on the lowercased NVML name that GFD sanitises into ``product``."""
    return "^" + "".join("[- ]" if c == "-" else "\\\\." if c == "." else c
                         for c in product.lower()) + "$"


def _selectors(reps) -> list[tuple[str, str, object]]:
    """(what, CEL expression, node -> does its GFD say it matches; None: unknown)."""
    attrs = f"device.attributes['{dra.DRIVER}']"
    first = reps[0].node.label(L.PRODUCT)
    memories = [t.node.int_label(L.MEMORY) for t in reps if t.node.int_label(L.MEMORY)]
    out = [("cudaComputeCapability >= 9.0",
            f"{attrs}.cudaComputeCapability.compareTo(semver('9.0.0')) >= 0",
            lambda n: None if n.int_label(L.COMPUTE_MAJOR) is None
            else n.int_label(L.COMPUTE_MAJOR) >= 9),
           (f"productName is {first}",
            f"{attrs}.productName.lowerAscii().matches('{_product_regex(first)}')",
            lambda n: n.label(L.PRODUCT) == first)]
    if memories:
        floor = int(max(memories) * MEMORY_SHARE)
        out.append((f"memory >= {floor}Mi",
                    f"device.capacity['{dra.DRIVER}'].memory.compareTo(quantity('{floor}Mi')) "
                    ">= 0", lambda n: None if n.int_label(L.MEMORY) is None
                    else n.int_label(L.MEMORY) >= floor))
    return out


@pytest.mark.requirement("DRA-ALLOC-003")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_cel_selectors_place_only_on_matching_gpus(request, cluster, gpu_env, require_dra, targets,
                                                   attachments):
    reps = _representatives(targets)
    if not reps:
        not_applicable("no DRA node with GFD product labels offers whole GPUs to select by CEL")
    selectors = _selectors(reps)
    trials = []  # (what, node, expected, pod)
    namespace = own_namespace(request)
    for what, expression, truth in selectors:
        tpl = cluster_dra.create_template(cluster, namespace, "cel", cluster_dra.claim_spec(
            cluster_dra.request(selectors=[expression])), gpu_env.run_id)
        for t in reps:
            expected = truth(t.node)
            if expected is None or len(t.free) < len(selectors):
                continue
            pod = cluster_dra.create_claim_pod(cluster, namespace, "cel", gpu_env.run_id,
                                               template=tpl, node=t.node.name)
            trials.append((what, t.node, expected, pod))
    wrong, lines = [], []
    for what, node, expected, pod in trials:
        bound, reason = cluster_dra.place(cluster, namespace, pod, expect=expected)
        got = ""
        if bound:
            held = cluster_dra.devices_of(cluster_dra.wait_allocated(cluster, namespace, pod))
            got = ", ".join(f"{p}/{d}" for p, d in held)
        lines.append(f"{what} on {node.name} (GFD: {node.label(L.PRODUCT)}, compute "
                     f"{node.label(L.COMPUTE_MAJOR)}.{node.label(L.COMPUTE_MINOR)}, memory "
                     f"{node.label(L.MEMORY)} MiB): expected {'a GPU' if expected else 'none'}, "
                     + (f"allocated {got}" if bound else f"Pending: {reason}"))
        if bool(bound) != expected:
            wrong.append(lines[-1])
    attachments.append(ev.Evidence("cel-placement.txt", "\n".join(lines)))
    attachments.append(_claims_yaml(cluster, namespace))
    assert trials, "no node of any GPU type had enough free devices to try the selectors"
    assert not wrong, ("CEL selectors placed claims on GPUs their node's labels say do not "
                       "match (or missed ones that do): " + "; ".join(wrong)
                       + require_dra.class_hint())
    finding(request, f"{len(trials)} claim(s) with CEL selectors on {len(reps)} GPU type(s) "
                     "placed exactly on the matching GPUs")


@pytest.mark.requirement("DRA-ALLOC-004")
def test_unsatisfiable_claim_is_refused_at_once(request, cluster, gpu_env, require_dra, dra_nodes,
                                                namespace, attachments):
    by_node = require_dra.pools_by_node()
    most = max((n.int_label(L.COUNT) or sum(
        d.type == dra.TYPE_GPU for p in by_node.get(n.name, []) for d in p.devices)
        for n in dra_nodes), default=0)
    tpl = cluster_dra.create_template(cluster, namespace, "toomany", cluster_dra.claim_spec(
        cluster_dra.request(count=most + 1)), gpu_env.run_id)
    t0 = time.monotonic()
    pod = cluster_dra.create_claim_pod(cluster, namespace, "toomany", gpu_env.run_id,
                                       template=tpl)
    try:
        node, reason = pods.wait_placement(cluster, namespace, pod, UNSATISFIABLE_WITHIN_S)
    except WaitTimeout:
        node, reason = None, None
    took = time.monotonic() - t0
    attachments.append(ev.Evidence("events.txt", pods.scheduling_events(cluster, namespace, pod)))
    attachments.append(_claims_yaml(cluster, namespace))
    assert node is None, (f"a claim for {most + 1} GPUs, more than any DRA node has "
                          f"({most} by {L.COUNT}), was allocated on {node}: its pools offer "
                          "GPUs it does not have (stale or duplicated slices, DRA-POOL-001)")
    assert reason is not None, (f"the pod stayed Pending {UNSATISFIABLE_WITHIN_S:.0f}s without "
                                "a FailedScheduling reason from the scheduler")
    assert dra.UNSATISFIABLE_REASON in reason, (
        f"the pod is Pending for another reason than its claim: {reason}")
    allocated = cluster_dra.devices_of(cluster_dra.claims_of_pod(cluster, namespace, pod))
    assert not allocated, f"the unsatisfiable claim holds {allocated}"
    finding(request, f"a claim for {most + 1} GPUs refused after {took:.1f}s: {reason}")


@pytest.mark.requirement("DRA-ALLOC-005")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_shared_claim_one_device_many_reservations(request, cluster, gpu_env, require_dra, targets,
                                                   namespace, attachments):
    claim = cluster_dra.create_claim(cluster, namespace, "shared", _one_device(targets),
                                     gpu_env.run_id)
    names = [cluster_dra.create_claim_pod(cluster, namespace, f"share-{i}", gpu_env.run_id,
                                          claim=claim) for i in range(SHARERS)]
    placed = {n: cluster_dra.place(cluster, namespace, n) for n in names}
    attachments.append(_claims_yaml(cluster, namespace))
    refused = [f"{n}: {r}" for n, (node, r) in placed.items() if not node]
    assert not refused, (f"pods sharing claim {claim} were not all scheduled: "
                         + "; ".join(refused)
                         + require_dra.class_hint())
    nodes = {node for node, _r in placed.values()}
    assert len(nodes) == 1, f"pods sharing one claim run on several nodes: {sorted(nodes)}"

    def all_reserved():
        found = [c for c in cluster_dra.list_claims(cluster, namespace)
                 if c["metadata"]["name"] == claim]
        return found if found and set(cluster_dra.reserved_for(found[0])) == set(names) else None

    try:
        shared = wait_for(f"claim {claim} reserved for {SHARERS} pods", all_reserved,
                               timeout=cluster_dra.ALLOCATION_TIMEOUT_S, interval=0.2)[0]
    except WaitTimeout:
        shared = next(c for c in cluster_dra.list_claims(cluster, namespace)
                      if c["metadata"]["name"] == claim)
    reserved = cluster_dra.reserved_for(shared)
    devices = cluster_dra.devices_of([shared])
    assert len(devices) == 1, f"claim {claim} holds {len(devices)} devices, not 1"
    assert sorted(reserved) == sorted(names), (
        f"claim {claim} is reserved for {sorted(reserved)}, not for the {SHARERS} pods "
        f"{sorted(names)}")
    finding(request, f"{SHARERS} pods on {nodes.pop()} share {devices[0][0]}/{devices[0][1]}")


@pytest.mark.requirement("DRA-ALLOC-006")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_deleting_pods_and_claims_releases_devices(request, cluster, gpu_env, require_dra, targets,
                                                   namespace, attachments):
    target = max(targets, key=lambda t: (min(len(t.free), MAX_RESULTS), t.node.name))
    devices = target.devices()
    chosen = target.free[:MAX_RESULTS]
    uuids = [devices[d].attr("uuid") for d in chosen]
    if all(uuids):  # exactly these devices: every one must be free again for a second claim
        req = cluster_dra.request(device_class=target.device_class, all_devices=True,
                                  selectors=[f"device.attributes['{dra.DRIVER}'].uuid in "
                                             f"{[str(u) for u in uuids]}"])
    else:
        req = cluster_dra.request(count=len(chosen), device_class=target.device_class)
    tpl = cluster_dra.create_template(cluster, namespace, "all", cluster_dra.claim_spec(req),
                                      gpu_env.run_id)
    first = cluster_dra.create_claim_pod(cluster, namespace, "all-0", gpu_env.run_id,
                                         template=tpl, node=target.node.name)
    node, reason = cluster_dra.place(cluster, namespace, first)
    assert node, (f"a claim for {len(chosen)} free devices of {target.node.name} was not "
                  f"allocated: {reason}" + require_dra.class_hint())
    claims = cluster_dra.wait_allocated(cluster, namespace, first)
    held = sorted(cluster_dra.devices_of(claims))
    pods.delete(cluster, namespace, first)
    cluster_dra.wait_claims_gone(cluster, namespace, [c["metadata"]["name"] for c in claims])
    second = cluster_dra.create_claim_pod(cluster, namespace, "all-1", gpu_env.run_id,
                                          template=tpl, node=target.node.name)
    node, reason = cluster_dra.place(cluster, namespace, second)
    attachments.append(_claims_yaml(cluster, namespace))
    assert node, (f"after the pod holding {len(chosen)} devices of {target.node.name} and its "
                  f"claim were deleted, a claim for the same devices stays Pending: {reason}")
    again = sorted(cluster_dra.devices_of(cluster_dra.wait_allocated(cluster, namespace,
                                                                      second)))
    assert again == held or not all(uuids), (
        f"the released devices {held} were not allocated again: got {again}")
    finding(request, f"{len(held)} device(s) of {target.node.name} released and allocated "
                     "again")
