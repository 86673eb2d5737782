"""The fault catalog of the sim: named ways a GPU cluster is broken in real life.

Each fault has a stable name, a one-line description, the symptom a user sees, and the suspect
from the design's symptom -> suspect table. The operator stand-in plays each one through the
API server (see ``standin.py``); the suites must catch every one under the right requirement.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.common.errors import UsageError

# What a default run checks; DRA faults are caught by the dra suite beside them.
SUITES: tuple[str, ...] = ("stack", "scheduling", "sharing")
DRA_SUITES: tuple[str, ...] = (*SUITES, "dra")
# An unavailable aggregated API stalls every namespace deletion (the namespace controller's
# discovery fails), so a whole run under hpa-metrics-api-down leaves every check's namespace
# Terminating; its fault test runs the pod-autoscaling checks alone and proves that too
# (tests/integration/test_pod_autoscaling.py).
HPA_SUITES: tuple[str, ...] = ("scheduling/test_pod_autoscaling.py",)


@dataclass(frozen=True)
class Fault:
    """A named way a GPU cluster is broken, with what it must do to a run of the suites.

    ``fails`` is exactly the set of requirements that fail when ``suites`` run under the fault
    (a fault that makes an unrelated check fail is as much a defect as a check that no fault
    can fail); ``word`` is named by their messages or diagnoses (the faulty layer). A fault
    with ``reconcile`` set breaks the operator's reaction to changes: no static run shows it,
    the disruptive operations suite does (``tests/integration/test_operations.py``).
    """

    name: str
    description: str
    symptom: str
    suspect: str
    profile: str = "healthy"  # the profile it shows on (sharing faults need shared GPUs)
    fails: frozenset[str] = frozenset()
    word: str = ""
    suites: tuple[str, ...] = SUITES
    reconcile: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "fails", frozenset(self.fails))


FAULTS: tuple[Fault, ...] = (
    Fault("device-plugin-absent",
          "the device plugin DaemonSet is gone and no node advertises nvidia.com/gpu",
          "GPU pods stay Pending with 'Insufficient nvidia.com/gpu'",
          "Pending GPU pod -> device plugin/operator missing or no GPU on the node",
          fails={"SCHED-ALLOC-001", "SCHED-ALLOC-002", "SCHED-LAT-001", "SCHED-PLACE-001",
                 "SCHED-PLACE-002", "STACK-DP-001", "STACK-DP-002"},
          word="device plugin"),
    Fault("toolkit-absent",
          "the container toolkit DaemonSet is gone from every GPU node",
          "containers start but cannot see the GPU (no nvidia-smi, no libcuda)",
          "container cannot see the GPU -> container toolkit",
          fails={"STACK-TK-001"},
          word="toolkit"),
    Fault("driver-version-mismatch",
          "one GPU node runs another driver version than the rest (and than expected)",
          "CUDA apps fail on one node with 'driver version is insufficient'",
          "driver version mismatch -> host-installed driver vs containerized driver",
          fails={"STACK-DRV-002"},
          word="driver"),
    Fault("gfd-absent",
          "GPU Feature Discovery is gone and its labels are missing from the nodes",
          "workloads selecting nvidia.com/gpu.product never schedule",
          "wrong/missing GPU type labels -> GPU Feature Discovery",
          fails={"SCHED-PLACE-001", "STACK-GFD-001", "STACK-GFD-002"},
          word="Feature Discovery"),
    Fault("gfd-label-wrong",
          "nvidia.com/gpu.count on one node disagrees with the GPUs it advertises",
          "capacity planning and placement by labels use wrong numbers",
          "stale or wrong labels -> GPU Feature Discovery",
          fails={"STACK-DP-003"},
          word="GPU Feature Discovery"),
    Fault("time-slicing-replicas-mislabelled",
          "nvidia.com/gpu.replicas disagrees with the sharing config and capacity",
          "more (or fewer) pods share a GPU than the labels promise",
          "sharing labels -> GFD / device plugin config out of sync (gpu-operator#1144)",
          profile="time-slicing",
          fails={"SHARE-LBL-001"},
          word="sharing labels"),
    Fault("operand-crashloop",
          "the DCGM exporter pods crash-loop on every GPU node",
          "operand pods in CrashLoopBackOff; no GPU metrics",
          "operand not ready -> the crash-looping operand (read its previous logs)",
          fails={"STACK-DCGM-001", "STACK-OPD-002"},
          word="DCGM"),
    Fault("clusterpolicy-notready",
          "the ClusterPolicy reports status.state notReady",
          "the operator says the stack is not ready",
          "operator not ready -> the operand states it lists",
          fails={"STACK-OP-002"},
          word="ClusterPolicy"),
    Fault("gpu-node-taint-missing-toleration",
          "one GPU node carries a NoExecute taint that operands and GPU pods do not tolerate",
          "operands missing on that node; GPU pods never land there",
          "Pending GPU pod / missing operands -> taint without matching toleration",
          fails={"SCHED-TAINT-001", "STACK-DCGM-001", "STACK-DP-001", "STACK-DRV-001",
                 "STACK-GFD-001", "STACK-MIG-001", "STACK-TK-001", "STACK-VAL-001"},
          word="taint"),
    Fault("wrong-gpu-type-label",
          "one GPU node's nvidia.com/gpu.product names another GPU than it has",
          "a pod pinned to one GPU type lands on another",
          "wrong GPU type -> GFD product label (and missing nodeSelector checks)",
          profile="heterogeneous",
          fails={"SCHED-PLACE-001", "STACK-GFD-003"},
          word="wrong GPU type"),
    Fault("operator-unavailable",
          "the GPU Operator pod crash-loops: its Deployment has no available replica",
          "ClusterPolicy edits and new GPU nodes are not reconciled; the operator pod is in "
          "CrashLoopBackOff",
          "operator not running -> GPU Operator Deployment (its previous logs and events)",
          fails={"STACK-OP-001"},
          word="GPU Operator deployment"),
    Fault("driver-crashloop",
          "the driver pods crash-loop on every GPU node; the validator waits for them forever",
          "no GPU workload starts; nvidia-operator-validator pods stay in Init",
          "driver not ready -> driver DaemonSet logs (kernel headers, Secure Boot, a driver "
          "already on the host)",
          fails={"STACK-DRV-001", "STACK-OPD-002", "STACK-VAL-001"},
          word="driver"),
    Fault("mig-manager-crashloop",
          "the MIG manager pods crash-loop on every MIG-capable node",
          "the MIG layout asked for in nvidia.com/mig.config is never applied",
          "MIG not configured -> MIG manager logs (GPUs in use, unknown mig.config name)",
          profile="mig-single",
          fails={"STACK-MIG-001", "STACK-OPD-002"},
          word="MIG manager"),
    Fault("gpu-request-rewriter",
          "a mutating admission policy turns fractional and request-only nvidia.com/gpu asks "
          "into one whole GPU",
          "a pod asking for 0.5 GPU is admitted and silently holds a whole one",
          "GPU requests not validated -> a mutating admission webhook or policy (fractional-GPU "
          "add-ons) rewrites them",
          fails={"SCHED-INT-001", "SCHED-INT-002"},
          word="admission"),
    Fault("compute-capability-label-wrong",
          "one A100 node's compute capability and family labels claim Hopper (9.0)",
          "FP8 pods that require nvidia.com/gpu.compute.major > 8 land on an A100 and fail",
          "wrong GPU type -> GFD compute labels (hand-set or stale node labels)",
          profile="heterogeneous",
          fails={"SCHED-PLACE-001", "SCHED-PLACE-002", "STACK-GFD-003"},
          word="compute-capability"),
    Fault("sharing-config-invalid",
          "the device plugin's sharing ConfigMap asks for replicas: 1, which the plugin "
          "refuses: it crash-loops",
          "time-slicing never takes effect; device plugin pods in CrashLoopBackOff",
          "sharing not applied -> device plugin sharing config (`gpuconf validate-sharing`) "
          "and the plugin's logs", profile="time-slicing",
          # the plugin and GFD crash-loop on it; the kubelet keeps the plugin's last capacity
          # with nothing allocatable (as the real node shows: tests/node/node_faults.py)
          fails={"SCHED-ALLOC-001", "SCHED-ALLOC-002", "SCHED-LAT-001", "SCHED-PLACE-001",
                 "SCHED-PLACE-002", "SHARE-CFG-001", "SHARE-OVS-001", "STACK-DP-001",
                 "STACK-DP-002", "STACK-GFD-001", "STACK-OPD-002"},
          word="sharing config"),
    Fault("sharing-config-not-applied",
          "the device plugin still advertises whole GPUs while the config and labels say "
          "4 replicas",
          "fewer pods fit on a GPU than the sharing config promises",
          "sharing not applied -> the device plugin was not restarted after its ConfigMap "
          "changed (operator config-manager)", profile="time-slicing",
          fails={"SHARE-CAP-001", "SHARE-OVS-001"},
          word="sharing config"),
    Fault("frgo-ignored",
          "failRequestsGreaterThanOne is set, but the device plugin admits a pod asking for "
          "2 shared GPUs",
          "a pod holds two time-slices of one GPU and believes it has two GPUs",
          "sharing limits not enforced -> device plugin version and its sharing config",
          profile="time-slicing-renamed",
          fails={"SHARE-FRGO-001"},
          word="device plugin"),
    Fault("unpinned-gpu-workload",
          "a team's GPU Deployment on a mixed-GPU cluster selects no GPU type",
          "its pods land on whichever GPU type is free: an A100 today, an H200 tomorrow",
          "wrong GPU type -> missing nodeSelector on GFD labels (nvidia.com/gpu.product)",
          profile="heterogeneous",
          fails={"SCHED-PLACE-003"},
          word="nodeSelector"),
    # --- gang scheduling: Kueue (sim/kueue.py plays them) -------------------------------------
    Fault("gang-quota-overcommitted",
          "the Kueue ClusterQueue's nvidia.com/gpu quota is twice the GPUs the nodes have "
          "(waitForPodsReady off)",
          "a distributed job is admitted when its pods do not all fit: some run, the rest stay "
          "Pending while the running ones hold their GPUs and wait for them",
          "partial gang -> the ClusterQueue's nominalQuota against the nodes' GPUs (and Kueue's "
          "waitForPodsReady)", profile="gang-kueue",
          fails={"SCHED-GANG-002"},
          word="partial gang"),
    Fault("gang-controller-down",
          "Kueue's controller manager is not running; its CRDs and ClusterQueue are still there",
          "every Job queued to Kueue stays suspended: no distributed job starts",
          "gang not admitted -> kueue-controller-manager (its pod, logs and webhook "
          "certificates)", profile="gang-kueue",
          fails={"SCHED-GANG-001", "SCHED-GANG-002"},
          word="Kueue"),
    # --- cluster autoscaling: Karpenter (sim/karpenter.py plays them) -------------------------
    Fault("autoscaling-no-gpu-instance-types",
          "the Karpenter NodePool's requirements allow only instance types without a GPU",
          "GPU pods stay Pending and no node is added for them; Karpenter says no instance "
          "type satisfies nvidia.com/gpu",
          "no scale-up -> the NodePool's requirements (node.kubernetes.io/instance-type, "
          "instance family) against the instance types that have GPUs",
          profile="autoscaling-karpenter",
          fails={"SCHED-AUTOSCALE-001"},
          word="instance type"),
    Fault("autoscaling-scale-down-disabled",
          "the Karpenter NodePool never removes empty nodes: disruption.consolidateAfter Never",
          "GPU nodes added for a burst stay (and are paid for) after their pods are gone",
          "no scale-down -> the NodePool's disruption settings (consolidateAfter, budgets)",
          profile="autoscaling-karpenter",
          fails={"SCHED-AUTOSCALE-001"},
          word="scale-down"),
    # --- pod autoscaling: the HPA on a custom metric (sim/metrics_adapter.py plays them) -------
    Fault("hpa-metrics-api-down",
          "the custom metrics adapter is not running; its APIServices (custom.metrics.k8s.io) "
          "and Service are still registered",
          "HPAs on custom metrics never scale (FailedGetObjectMetric, the APIService is "
          "unavailable: FailedDiscoveryCheck); deleted namespaces stay Terminating, their "
          "discovery failing for custom.metrics.k8s.io",
          "no scaling -> the custom metrics adapter behind APIService "
          "v1beta2.custom.metrics.k8s.io (its pod, logs and certificates)",
          profile="pod-autoscaling", fails={"SCHED-HPA-001", "SCHED-HPA-002"},
          word="custom metrics API", suites=HPA_SUITES),
    Fault("hpa-gpus-held",
          "another team's inference Deployment holds every GPU but one",
          "an HPA scales a GPU Deployment up, and its new pods stay Pending with "
          "'Insufficient nvidia.com/gpu'",
          "scaled pods Pending -> no GPU free for them: the GPU nodes' use (and a cluster "
          "autoscaler for GPU node groups)",
          profile="pod-autoscaling", fails={"SCHED-HPA-001"},
          word="found no GPU"),
    Fault("standin-ignores-changes",
          "the operator stand-in stops reconciling ClusterPolicy and node-label changes",
          "a ClusterPolicy change never reaches the operands",
          "operator reconcile loop stuck -> GPU Operator pod/logs", reconcile=True),
    # --- DRA: the NVIDIA DRA driver (sim/dra.py plays them) ---------------------------------
    Fault("dra-pool-incomplete",
          "one node's gpu.nvidia.com pool says resourceSliceCount 2 but publishes one slice",
          "claims never get that node's GPUs: the scheduler ignores an incomplete pool",
          "incomplete pool -> the DRA kubelet plugin of that node (its log, a crashed publish)",
          profile="dra",
          fails={"DRA-POOL-001"},
          word="incomplete pool", suites=DRA_SUITES),
    Fault("dra-version-not-semver",
          "one node's driverVersion attribute is nvidia-smi's 580.105.08, not semver: the API "
          "server rejects the whole ResourceSlice",
          "claims for that node's GPUs stay Pending while its DRA plugin pod looks Ready",
          "no ResourceSlice -> the DRA kubelet plugin's log (a version attribute the API "
          "server refused)", profile="dra",
          fails={"DRA-POOL-001"},
          word="not semver", suites=DRA_SUITES),
    Fault("dra-attributes-disagree",
          "one A100 node's devices claim productName H100 and cudaComputeCapability 9.0",
          "an FP8 claim selecting cudaComputeCapability >= 9.0 gets an A100",
          "device attributes vs GFD/NVML -> the DRA driver's device discovery",
          profile="dra",
          fails={"DRA-ALLOC-003", "DRA-ATTR-001"},
          word="GFD", suites=DRA_SUITES),
    Fault("dra-stale-pool",
          "an older install's slices (v25.3: index, minor, pcieBusID) were left behind beside "
          "one node's current pool: its GPUs are offered twice",
          "a claim for more GPUs than the node has is allocated; CEL selectors on "
          "resource.kubernetes.io/pciBusID miss half the devices",
          "stale ResourceSlices -> an old DRA driver install (its namespace, its Helm "
          "release) not removed when the new one came", profile="dra",
          fails={"DRA-ALLOC-004", "DRA-ATTR-002", "DRA-POOL-001", "DRA-POOL-002"},
          word="dropped in v25", suites=DRA_SUITES),
    Fault("dra-mig-parent-offered",
          "one MIG node offers each MIG-enabled GPU whole beside its own MIG devices "
          "(dra-driver-nvidia-gpu#719)",
          "a GPU and its MIG slices are allocated to different pods at once",
          "MIG devices and parent offered together -> the DRA driver's MIG discovery",
          profile="dra-mig",
          fails={"DRA-POOL-002"},
          word="MIG devices", suites=DRA_SUITES),
    Fault("dra-class-selector-wrong",
          "the gpu.nvidia.com DeviceClass selects type == 'GPU', which no device has",
          "every claim for a gpu.nvidia.com device stays Pending: cannot allocate all claims",
          "DeviceClass selector -> the DRA driver chart's DeviceClasses (hand-edited?)",
          profile="dra",
          # every claim for the class stays Pending: each allocation check says so, the cause
          fails={"DRA-ALLOC-001", "DRA-ALLOC-002", "DRA-ALLOC-003", "DRA-ALLOC-005",
                 "DRA-ALLOC-006", "DRA-API-001", "DRA-ER-001"},
          word="DeviceClass", suites=DRA_SUITES),
    Fault("dra-both-paths",
          "the DRA kubelet plugin also runs on a device plugin node: its GPUs are offered as "
          "nvidia.com/gpu and as gpu.nvidia.com devices",
          "more GPU pods are admitted on the node than it has GPUs (over-admission)",
          "GPUs offered twice -> DRA driver and device plugin on one node (the chart's "
          "gpuResourcesEnabledOverride)", profile="dra-mixed",
          fails={"DRA-ER-002"},
          word="both paths", suites=DRA_SUITES),
    Fault("dra-sharing-config-invalid",
          "a team's ResourceClaimTemplate asks for MPS with defaultActiveThreadPercentage 150",
          "its pods never start: the driver refuses the claim's GpuConfig at prepare",
          "DRA sharing config -> the claim's GpuConfig (and the driver's feature gates)",
          profile="dra",
          fails={"DRA-SHARE-001"},
          word="sharing config", suites=DRA_SUITES),
    Fault("dra-gpucluster-operand-down",
          "the GPUCluster's DCGM exporter pods crash-loop on every node it serves",
          "the GPUCluster stays notReady; no GPU metrics from the DRA nodes",
          "GPUCluster not ready -> the operand its Ready condition names (read its previous "
          "logs)", profile="dra-gpucluster",
          fails={"DRA-OP-001"},
          word="nvidia-dcgm-exporter-dra", suites=DRA_SUITES),
)

BY_NAME = {f.name: f for f in FAULTS}


def validate(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise UsageError(f"unknown fault {', '.join(map(repr, unknown))}; valid faults: "
                         + ", ".join(BY_NAME))
    return list(dict.fromkeys(names))
