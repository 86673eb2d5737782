"""The one requirement catalog: every check in the suites carries one of these IDs.

A requirement says what must hold, which layer is suspected when it does not (the
symptom -> suspect table of the design), where it can be checked, and which CNCF
Kubernetes AI Conformance items (cncf/k8s-ai-conformance, AIConformance-1.3x) it
supports as evidence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from conformance.common.vocab import CLUSTER_TARGETS, Target

Area = Literal["stack", "scheduling", "sharing", "operations", "dra", "inference"]
Severity = Literal["critical", "major", "minor", "info"]

ALL_TARGETS: tuple[Target, ...] = CLUSTER_TARGETS
# Pods on real GPUs: a real node runs them (on the mock NVML it has no devices to show: the
# plugin's gate skips them there with the reason).
GPU_TARGETS: tuple[Target, ...] = ("existing", "kind", "node")
LOCAL_GPU: tuple[Target, ...] = ("existing", "kind", "node", "local")


@dataclass(frozen=True)
class Requirement:
    id: str
    title: str
    area: Area
    layer: str
    suspect: str  # the likely broken layer and what to look at when the check fails
    targets: tuple[Target, ...] = ALL_TARGETS
    severity: Severity = "major"
    cncf: tuple[str, ...] = ()
    needs_gpu: bool = False
    disruptive: bool = False
    tags: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        data = asdict(self)
        data["targets"] = list(self.targets)
        data["cncf"] = list(self.cncf)
        data["tags"] = list(self.tags)
        return data


def _r(*args, **kwargs) -> Requirement:
    return Requirement(*args, **kwargs)


_DEVICE_PLUGIN = "device plugin (nvidia-device-plugin-daemonset) or the operator that deploys it"
_GFD = "GPU Feature Discovery (gpu-feature-discovery DaemonSet) labels"
_DRA_CHART = "NVIDIA DRA driver (dra-driver-nvidia-gpu chart or the GPUCluster)"
_DRA_PLUGIN = "the DRA driver's kubelet plugin (gpu-kubelet-plugin) on the node"
_DRA_ALLOC = ("claims not allocated: the scheduler's DRA plugin, the pool (DRA-POOL-001) or the "
              "DeviceClass (DRA-API-001)")
_ADMISSION = ("a mutating admission webhook or policy rewrites GPU requests before the API "
              "server validates them (fractional-GPU add-ons do): list the cluster's mutating "
              "webhooks and admission policies")

REQUIREMENTS: tuple[Requirement, ...] = (
    # --- stack: the operator itself ---------------------------------------------------
    _r("STACK-OP-001", "GPU Operator Deployment is available", "stack", "operator",
       "GPU Operator deployment: check the operator pod's logs and events in its namespace",
       severity="critical", cncf=("driver_runtime_management", "robust_controller")),
    _r("STACK-OP-002", "ClusterPolicy exists and status.state is ready", "stack", "operator",
       "GPU Operator ClusterPolicy: an operand it manages is not ready (see the states listed)",
       severity="critical", cncf=("driver_runtime_management",)),
    _r("STACK-OP-003", "Helm release of the operator is deployed (when installed by the suite)",
       "stack", "operator", "Helm install of the gpu-operator chart",
       severity="minor", cncf=("driver_runtime_management",)),
    # --- stack: operand DaemonSets ------------------------------------------------------
    _r("STACK-DRV-001", "Driver DaemonSet rolled out on every GPU node", "stack", "driver",
       "containerized driver (nvidia-driver-daemonset); with a host-installed driver it must be "
       "disabled in the ClusterPolicy", severity="critical", cncf=("driver_runtime_management",)),
    _r("STACK-TK-001", "Container toolkit DaemonSet rolled out on every GPU node", "stack",
       "container-toolkit", "container toolkit (nvidia-container-toolkit-daemonset): containers "
       "cannot see the GPU without it", severity="critical",
       cncf=("driver_runtime_management", "secure_accelerator_access")),
    _r("STACK-DP-001", "Device plugin DaemonSet rolled out on every GPU node", "stack",
       "device-plugin", _DEVICE_PLUGIN, severity="critical", cncf=("secure_accelerator_access",)),
    _r("STACK-DCGM-001", "DCGM exporter DaemonSet rolled out on every GPU node", "stack",
       "dcgm-exporter", "DCGM exporter (nvidia-dcgm-exporter): no accelerator metrics without it",
       cncf=("accelerator_metrics",)),
    _r("STACK-GFD-001", "GPU Feature Discovery DaemonSet rolled out on every GPU node", "stack",
       "gfd", _GFD, cncf=("driver_runtime_management",)),
    _r("STACK-MIG-001", "MIG manager DaemonSet rolled out on every MIG-capable node (MIG on)",
       "stack", "mig-manager", "MIG manager (nvidia-mig-manager) on nodes labelled "
       "nvidia.com/mig.capable=true", severity="minor", cncf=("gpu_sharing",)),
    _r("STACK-VAL-001", "Operator validator DaemonSet rolled out on every GPU node", "stack",
       "validator", "operator validator (nvidia-operator-validator): one of driver, toolkit, "
       "CUDA or plugin validation fails on the node", cncf=("driver_runtime_management",)),
    _r("STACK-OPD-002", "Operand pods restart at most the allowed number of times", "stack",
       "operands", "the restarting operand: read its previous logs (kubectl logs -p)",
       cncf=("driver_runtime_management",)),
    # --- stack: device plugin resources -----------------------------------------------
    _r("STACK-DP-002", "Every GPU node advertises its GPU resource in capacity and allocatable",
       "stack", "device-plugin", "device plugin missing or unhealthy on the node: a GPU pod there "
       "stays Pending", severity="critical", cncf=("secure_accelerator_access",)),
    _r("STACK-DP-003", "Allocatable GPUs agree with nvidia.com/gpu.count x replicas", "stack",
       "device-plugin", "device plugin or GPU Feature Discovery: the amount advertised disagrees "
       "with the labels (a stale or wrong gpu.count/replicas label, or a plugin that did not "
       "apply its config)", cncf=("gpu_sharing",)),
    # --- stack: GFD labels -------------------------------------------------------------
    _r("STACK-GFD-002", "GPU node labels satisfy the upstream GFD label contract", "stack", "gfd",
       _GFD + ": missing or malformed labels", cncf=("driver_runtime_management",)),
    _r("STACK-GFD-003", "GFD labels agree with each other", "stack",
       "gfd", _GFD + ": stale or wrong labels (e.g. product vs compute capability, version "
       "labels vs their parts, replicas vs sharing strategy)",
       cncf=("driver_runtime_management",)),
    # --- stack: driver -----------------------------------------------------------------
    _r("STACK-DRV-002", "Nodes run the expected driver version (from GFD labels)", "stack",
       "driver", "driver version mismatch: a host-installed driver beside the containerized one, "
       "or an upgrade that did not roll out", severity="critical",
       cncf=("driver_runtime_management",)),
    _r("STACK-DRV-003", "NVML inside a pod reports the expected driver version", "stack",
       "driver", "driver version mismatch between the host driver and what containers load",
       targets=LOCAL_GPU, needs_gpu=True, cncf=("driver_runtime_management",)),
    # --- stack: toolkit (real GPUs) ----------------------------------------------------
    _r("STACK-TK-002", "A pod requesting one GPU sees exactly one GPU", "stack",
       "container-toolkit", "container toolkit / device plugin: wrong device list injected",
       targets=GPU_TARGETS, needs_gpu=True, severity="critical",
       cncf=("secure_accelerator_access",)),
    _r("STACK-TK-003", "A pod requesting no GPU sees no GPU", "stack", "container-toolkit",
       "container toolkit accepts NVIDIA_VISIBLE_DEVICES from unprivileged pods (set "
       "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false, volume-mounts)",
       targets=GPU_TARGETS, needs_gpu=True, severity="critical",
       cncf=("secure_accelerator_access",)),
    # --- stack: DCGM (real GPUs) -------------------------------------------------------
    _r("STACK-DCGM-002", "DCGM exporter serves DCGM_FI_DEV_* metrics for every GPU", "stack",
       "dcgm-exporter", "DCGM exporter: metrics endpoint unreachable or missing GPUs",
       targets=GPU_TARGETS, needs_gpu=True, cncf=("accelerator_metrics",)),
    _r("STACK-DCGM-003", "Metrics endpoint has per-accelerator utilization and memory series "
       "(as the ai-conformance test checks); temperature, power, interconnect reported",
       "stack", "dcgm-exporter", "DCGM exporter: its collectors (the counters CSV of its "
       "ConfigMap) leave out utilization or framebuffer fields, or drop the gpu/UUID labels",
       targets=GPU_TARGETS, needs_gpu=True, cncf=("accelerator_metrics",)),
    # --- stack: node-level NVML inventory ----------------------------------------------
    _r("STACK-NODE-001", "NVML enumerates every GPU with model, memory and a distinct UUID",
       "stack", "node", "driver/NVML on the node", targets=LOCAL_GPU, needs_gpu=True,
       cncf=("accelerator_metrics",)),
    _r("STACK-NODE-002", "Driver and CUDA versions are reported and agree across GPUs", "stack",
       "node", "driver installation on the node", targets=LOCAL_GPU, needs_gpu=True,
       cncf=("driver_runtime_management",)),
    _r("STACK-NODE-003", "ECC is enabled with no volatile uncorrectable errors", "stack", "node",
       "GPU hardware: uncorrectable ECC errors need a drain and reset", targets=LOCAL_GPU,
       needs_gpu=True, cncf=("accelerator_metrics",)),
    _r("STACK-NODE-004", "Compute mode allows the workloads scheduled onto the GPU", "stack",
       "node", "GPU compute mode (Exclusive/Prohibited blocks sharing)", targets=LOCAL_GPU,
       needs_gpu=True, severity="minor", cncf=("gpu_sharing",)),
    _r("STACK-NODE-005", "MIG mode is reported and consistent with the MIG strategy", "stack",
       "node", "MIG configuration (mig-manager) on the node", targets=LOCAL_GPU, needs_gpu=True,
       severity="minor", cncf=("gpu_sharing",)),
    _r("STACK-NODE-006", "No hardware or thermal slowdown throttles the GPU", "stack", "node",
       "GPU cooling/power: hardware slowdown or thermal throttling", targets=LOCAL_GPU,
       needs_gpu=True, severity="minor", cncf=("accelerator_metrics",)),
    _r("STACK-NODE-007", "PCIe link runs at its maximum generation and width", "stack", "node",
       "PCIe link downtrained (riser, slot or BIOS)", targets=LOCAL_GPU, needs_gpu=True,
       severity="minor", cncf=("accelerator_metrics",)),
    _r("STACK-BURN-001", "Burn-in at the power limit: every iteration's results stay correct on "
       "every GPU, and the board reaches its enforced power limit", "stack", "node",
       "GPU hardware or driver: a miscompare under load (bad memory or compute) — drain the "
       "node and run the vendor diagnostics; a board far below its power limit is throttled "
       "or misconfigured", targets=LOCAL_GPU, needs_gpu=True, severity="critical",
       cncf=("accelerator_metrics",)),
    # --- scheduling ----------------------------------------------------------------------
    _r("SCHED-INT-001", "A fractional nvidia.com/gpu request is refused by the API server",
       "scheduling", "api-server", _ADMISSION, cncf=("secure_accelerator_access",)),
    _r("SCHED-INT-002", "GPU requests follow the extended-resource rules (limits required, "
       "requests equal limits)", "scheduling", "api-server", _ADMISSION,
       cncf=("secure_accelerator_access",)),
    _r("SCHED-ALLOC-001", "GPUs are allocated whole: a full node leaves the next GPU pod Pending "
       "with Insufficient nvidia.com/gpu", "scheduling", "scheduler",
       "Pending GPU pod: device plugin/operator missing or no free GPU on the node",
       severity="critical", cncf=("secure_accelerator_access",)),
    _r("SCHED-ALLOC-002", "A multi-GPU request lands on one node that has them, or stays Pending",
       "scheduling", "scheduler", "GPU capacity per node (device plugin) or the scheduler",
       cncf=("secure_accelerator_access",)),
    _r("SCHED-PLACE-001", "A nodeSelector on nvidia.com/gpu.product places pods only on that "
       "GPU type", "scheduling", "gfd", "wrong GPU type: GFD product label wrong or missing",
       cncf=("driver_runtime_management",)),
    _r("SCHED-PLACE-002", "Node affinity on nvidia.com/gpu.compute.major >= 9 places pods only "
       "on Hopper or newer", "scheduling", "gfd",
       "wrong GPU type: GFD compute-capability labels wrong or missing",
       cncf=("driver_runtime_management",)),
    _r("SCHED-PLACE-003", "On a cluster of several GPU types, running GPU workloads select "
       "one (risk report)", "scheduling", "workload",
       "wrong GPU type: the listed workloads have no nodeSelector on GFD labels "
       "(nvidia.com/gpu.product) and land on whichever GPU is free", severity="minor"),
    _r("SCHED-TAINT-001", "Tainted GPU nodes accept GPU pods that tolerate nvidia.com/gpu and "
       "refuse pods that do not", "scheduling", "scheduler",
       "GPU node taints: a taint GPU workloads do not tolerate, or a missing toleration",
       cncf=("secure_accelerator_access",)),
    _r("SCHED-ISO-001", "Two pods each requesting one GPU get different GPUs", "scheduling",
       "device-plugin", "device plugin hands out the same device twice",
       targets=GPU_TARGETS, needs_gpu=True, severity="critical",
       cncf=("secure_accelerator_access",)),
    _r("SCHED-ISO-002", "A pod sees only its own GPU devices", "scheduling", "container-toolkit",
       "container toolkit injects more devices than allocated", targets=GPU_TARGETS,
       needs_gpu=True, severity="critical", cncf=("secure_accelerator_access",)),
    _r("SCHED-LAT-001", "Scheduling latency of GPU pods is measured (created -> bound)",
       "scheduling", "scheduler", "scheduler load or API server latency", severity="info"),
    _r("SCHED-GANG-001", "A gang of one-GPU pods is admitted whole: all its pods run at once "
       "and complete", "scheduling", "gang-scheduler",
       "gang never admitted: the gang scheduler's controller (Kueue: kueue-controller-manager) "
       "is down, or its queue (ClusterQueue) is stopped or out of nvidia.com/gpu quota",
       severity="critical", cncf=("gang_scheduling",)),
    _r("SCHED-GANG-002", "A gang that does not fit places none of its pods, and all of them "
       "once room is freed", "scheduling", "gang-scheduler",
       "partial gang: a queue whose quota exceeds the GPUs the nodes have (Kueue admits by "
       "quota, the scheduler places what fits; waitForPodsReady off), or a gang scheduler "
       "that does not hold back a gang that does not fit", cncf=("gang_scheduling",)),
    _r("SCHED-AUTOSCALE-001", "A GPU node pool grows for a pending one-GPU pod, the pod runs on "
       "the added node, and the pool shrinks back once the pod is gone", "scheduling",
       "node-autoscaler",
       "no scale-up: the pool offers no instance type with a GPU (Karpenter NodePool "
       "requirements, the node group's machine type), a pool limit, or the autoscaler is down; "
       "no scale-down: the pool's disruption settings (Karpenter consolidateAfter Never, a "
       "budget of 0; Cluster Autoscaler --scale-down-enabled=false or a scale-down-disabled "
       "annotation) or a pod that blocks draining", cncf=("cluster_autoscaling",)),
    _r("SCHED-HPA-001", "The HPA scales a GPU Deployment up on a custom metric above target, "
       "and the new pods Run on GPU nodes", "scheduling", "pod-autoscaler",
       "no scale-up: the custom metrics API (APIService v1beta2.custom.metrics.k8s.io and its "
       "adapter: Prometheus Adapter, custom-metrics-apiserver) is unavailable or serves no "
       "value, or the HPA controller (kube-controller-manager) is down; new pods Pending: no "
       "GPU free for them (nvidia.com/gpu allocatable, a cluster autoscaler for GPU nodes)",
       severity="critical", cncf=("pod_autoscaling",)),
    _r("SCHED-HPA-002", "The HPA scales a GPU Deployment down on a custom metric below target, "
       "after its scale-down stabilization window", "scheduling", "pod-autoscaler",
       "no scale-down: the custom metrics API (APIService v1beta2.custom.metrics.k8s.io and its "
       "adapter) is unavailable, or the HPA controller (kube-controller-manager) is down; an "
       "early one: behavior.scaleDown.stabilizationWindowSeconds is ignored",
       cncf=("pod_autoscaling",)),
    # --- sharing -------------------------------------------------------------------------
    _r("SHARE-CFG-001", "The device plugin sharing config is valid", "sharing", "device-plugin",
       "device plugin sharing ConfigMap: invalid time-slicing/MPS config",
       cncf=("gpu_sharing",)),
    _r("SHARE-CAP-001", "Shared capacity equals GPUs x replicas under the advertised name",
       "sharing", "device-plugin", "device plugin did not apply the sharing config (a plugin "
       "restart may be needed, gpu-operator#1144)", cncf=("gpu_sharing",)),
    _r("SHARE-LBL-001", "Sharing labels (-SHARED, gpu.replicas, gpu.sharing-strategy) agree "
       "with the config", "sharing", "gfd", _GFD + ": sharing labels disagree with the config",
       cncf=("gpu_sharing",)),
    _r("SHARE-OVS-001", "Oversubscription: GPUs x replicas one-slice pods schedule on a node and "
       "one more stays Pending", "sharing", "scheduler",
       "time-slicing replicas not advertised as configured", cncf=("gpu_sharing",)),
    _r("SHARE-FRGO-001", "failRequestsGreaterThanOne refuses a request for more than one "
       "shared GPU", "sharing", "device-plugin", "device plugin sharing config",
       cncf=("gpu_sharing",)),
    _r("SHARE-INT-001", "Time-sliced copies share one GPU fairly with bounded overhead",
       "sharing", "gpu", "time-slicing interference beyond the thresholds: expected without "
       "isolation; use MIG for guarantees", targets=LOCAL_GPU, needs_gpu=True,
       cncf=("gpu_sharing",)),
    _r("SHARE-ISO-001", "Finding: memory isolation between time-sliced copies", "sharing", "gpu",
       "time-slicing gives no memory isolation: one copy can starve the others; use MIG or MPS "
       "limits", targets=LOCAL_GPU, needs_gpu=True, severity="info", cncf=("gpu_sharing",)),
    _r("SHARE-ISO-002", "Finding: fault isolation between time-sliced copies", "sharing", "gpu",
       "a fault in one sharer affected another", targets=LOCAL_GPU, needs_gpu=True,
       severity="info", cncf=("gpu_sharing",)),
    _r("SHARE-LAT-001", "Finding: tail latency of a small-kernel client alone, beside "
       "time-sliced sharers and under MPS", "sharing", "gpu",
       "time-slicing makes every request wait for the sharers' time slices: latency-sensitive "
       "workloads need MIG or a GPU of their own", targets=LOCAL_GPU, needs_gpu=True,
       severity="info", cncf=("gpu_sharing",)),
    # --- operations (disruptive, opt-in) ---------------------------------------------------
    _r("OPS-REC-001", "A ClusterPolicy change reaches the operands", "operations", "operator",
       "GPU Operator reconcile loop", disruptive=True, cncf=("robust_controller",)),
    _r("OPS-REC-002", "nvidia.com/gpu.deploy.operands=false removes every operand from a node "
       "and restoring brings them back", "operations", "operator",
       "GPU Operator node labelling / DaemonSet node selectors", disruptive=True,
       cncf=("robust_controller",)),
    _r("OPS-REC-003", "A killed operator pod comes back", "operations", "operator",
       "GPU Operator Deployment", disruptive=True, cncf=("robust_controller",)),
    _r("OPS-WL-001", "GPU kernels run in pods and report one JSON result", "operations",
       "workload", "workload pod never started, was OOM-killed or crashed",
       targets=GPU_TARGETS, needs_gpu=True, cncf=("secure_accelerator_access",)),
    # --- inference: AI services on the platform (real pods, real HTTP) ------------------------
    _r("INF-MET-001", "The platform's monitoring system discovers a workload's Prometheus "
       "metrics and collects exactly what N requests produced (counter = N, histogram count "
       "= N, gauge present; as ai-conformance's TestAIServiceMetrics)", "inference",
       "monitoring", "the monitoring system (Prometheus): its query API unreachable, or its "
       "scrape selection (ServiceMonitor selector, scrape config, --metrics-scrape-manifest) "
       "misses the workload's Service", cncf=("ai_service_metrics",)),
    _r("INF-GW-001", "The Gateway API splits inference traffic by weight: a GatewayClass "
       "accepted, a Gateway programmed, an HTTPRoute weighting two stand-ins 80/20; the split "
       "measured from 200 answers is within 8 points of 80/20", "inference", "gateway",
       "the Gateway API implementation (GatewayClass controller): it ignores backendRef "
       "weights, or never accepts/programs the Gateway or the route", cncf=("ai_inference",)),
    _r("INF-GW-002", "The Gateway API routes by an OpenAI-style header: an HTTPRoute matching "
       "x-gateway-model-name sends every request for a model to that model's stand-in",
       "inference", "gateway", "the Gateway API implementation: an HTTPRoute header match "
       "that does not route (requests fall to another rule)", cncf=("ai_inference",)),
    _r("INF-GW-003", "The Gateway API Inference Extension's InferencePool API is served at "
       "inference.networking.k8s.io/v1 with its schema in force: a valid pool (dry run) comes "
       "back with the schema's defaults, one whose endpoint picker Service has no port is "
       "refused", "inference", "inference-extension", "the Inference Extension's CRDs: "
       "InferencePool not served at v1, or installed without its schema (anything admitted)",
       cncf=("advanced_inference_ingress",)),
    _r("INF-GW-004", "An HTTPRoute to an InferencePool of two stand-ins routes through the "
       "pool's endpoint picker: every request pinned to a pool member (the picker's test "
       "header) is answered by that member", "inference", "inference-extension",
       "the Gateway API implementation's Inference Extension support: the route to the pool "
       "never resolved or served, or requests sent past the picker's choice",
       cncf=("advanced_inference_ingress",)),
    # --- dra: the NVIDIA DRA driver (gpu.nvidia.com) on resource.k8s.io/v1 ------------------
    _r("DRA-API-001", "resource.k8s.io/v1 is served and the NVIDIA DRA driver's DeviceClasses "
       "carry the upstream selectors (extendedResourceName nvidia.com/gpu where set)", "dra",
       "deviceclass", _DRA_CHART + ": a DeviceClass missing or edited (a selector that "
       "matches no device leaves every claim Pending)", severity="critical",
       cncf=("dra_support",)),
    _r("DRA-POOL-001", "Every DRA GPU node publishes one complete gpu.nvidia.com pool "
       "(resourceSliceCount slices at the current generation)", "dra", "dra-kubelet-plugin",
       _DRA_PLUGIN + ": a missing or incomplete pool (an incomplete pool is ignored by the "
       "scheduler; a version attribute that is not semver gets the whole slice rejected)",
       severity="critical", cncf=("dra_support",)),
    _r("DRA-POOL-002", "A pool offers one device per physical GPU or per MIG device, never a "
       "MIG-enabled GPU beside its own MIG devices", "dra", "dra-kubelet-plugin",
       _DRA_PLUGIN + ": device discovery disagrees with GFD's count, or a GPU and its MIG "
       "devices are both allocatable (dra-driver-nvidia-gpu#719)",
       cncf=("dra_support", "gpu_sharing")),
    _r("DRA-ATTR-001", "Device attributes agree with the node: productName with gpu.product, "
       "driverVersion (semver) with the driver, cudaComputeCapability with gpu.compute.*, "
       "memory with gpu.memory", "dra", "dra-kubelet-plugin",
       _DRA_PLUGIN + " or GFD: device attributes and node labels describe different GPUs or "
       "drivers (CEL selectors and nodeSelectors then place workloads differently)",
       cncf=("driver_runtime_management", "dra_support")),
    _r("DRA-ATTR-002", "Devices carry exactly the attributes their driver release publishes "
       "(v25.8 dropped index/minor, v25.12 replaced pcieBusID), version attributes semver",
       "dra", "dra-kubelet-plugin", _DRA_PLUGIN + ": stale slices of an older release, or a "
       "plugin image other than the one running", cncf=("dra_support",)),
    _r("DRA-ALLOC-001", "A ResourceClaimTemplate for one gpu.nvidia.com device: the pod is "
       "scheduled, its claim allocated on the pod's node and reserved for the pod", "dra",
       "scheduler", _DRA_ALLOC, severity="critical",
       cncf=("dra_support", "secure_accelerator_access")),
    _r("DRA-ALLOC-002", "Two claims on one node get distinct devices", "dra", "scheduler",
       _DRA_ALLOC + ", or a pool that names one device twice", severity="critical",
       cncf=("dra_support", "secure_accelerator_access")),
    _r("DRA-ALLOC-003", "CEL selectors on productName, cudaComputeCapability and memory place "
       "claims only on the GPUs that match (FP8 only on the new generation)", "dra",
       "dra-kubelet-plugin", "wrong GPU type: device attributes disagree with the GPU "
       "(DRA-ATTR-001), or the selector is not what the workload needs",
       cncf=("dra_support", "driver_runtime_management")),
    _r("DRA-ALLOC-004", "A claim for more GPUs than any node has leaves the pod Pending with the "
       "scheduler's 'cannot allocate all claims', within seconds", "dra", "scheduler",
       "pools that offer GPUs a node does not have (stale or duplicated slices), or the "
       "scheduler's DRA plugin: the claim was allocated, or the pod waited without a reason",
       cncf=("dra_support",)),
    _r("DRA-ALLOC-005", "One claim shared by N pods: one device, N reservations", "dra",
       "scheduler", _DRA_ALLOC, cncf=("dra_support", "gpu_sharing")),
    _r("DRA-ALLOC-006", "Deleting the pods and their claims releases the devices", "dra",
       "controller-manager", "the resourceclaim controller (kube-controller-manager) or a "
       "finalizer keeps claims, so their devices stay allocated", cncf=("dra_support",)),
    _r("DRA-ER-001", "nvidia.com/gpu on a DRA-only node is served through a claim the "
       "scheduler creates (DRAExtendedResource)", "dra", "scheduler",
       "extended-resource mapping: the DRAExtendedResource gate, the DeviceClass's "
       "extendedResourceName, or the scheduler's claim", cncf=("dra_support",
                                                               "secure_accelerator_access")),
    _r("DRA-ER-002", "No node offers its GPUs through both the device plugin and DRA", "dra",
       "dra-kubelet-plugin", "DRA driver and device plugin on one node (the chart's "
       "gpuResourcesEnabledOverride): the same GPUs are admitted twice",
       severity="critical", cncf=("secure_accelerator_access",)),
    _r("DRA-SHARE-001", "GpuConfig sharing (TimeSlicing, MPS) in the cluster's claims and "
       "templates is valid and enabled in the driver", "dra", "dra-kubelet-plugin",
       "the claim's opaque GpuConfig (strategy, interval, MPS limits), or the driver's alpha "
       "feature gates TimeSlicingSettings / MPSSupport", cncf=("gpu_sharing",)),
    _r("DRA-SHARE-002", "Two pods time-slicing one GPU through a GpuConfig claim both run",
       "dra", "dra-kubelet-plugin", "the DRA driver refuses or fails the shared claim at "
       "prepare (its log; TimeSlicingSettings)", targets=GPU_TARGETS, needs_gpu=True,
       cncf=("gpu_sharing",)),
    _r("DRA-ISO-001", "A pod with a claim for N GPUs sees exactly N", "dra",
       "dra-kubelet-plugin", "the DRA driver's CDI spec injects other devices than the "
       "claim's", targets=GPU_TARGETS, needs_gpu=True, severity="critical",
       cncf=("secure_accelerator_access",)),
    _r("DRA-ISO-002", "A pod with no claim on a DRA node sees no GPU", "dra",
       "container-toolkit", "the container runtime exposes GPUs to pods without a claim "
       "(NVIDIA_VISIBLE_DEVICES accepted from unprivileged pods, a privileged default)",
       targets=GPU_TARGETS, needs_gpu=True, severity="critical",
       cncf=("secure_accelerator_access",)),
    _r("DRA-OP-001", "The GPU Operator's GPUCluster is ready and its operands (DRA kubelet "
       "plugin, controller, DCGM, exporter, validator) run on every node it serves", "dra",
       "operator", "GPU Operator GPUCluster (tech preview): the operand named, its "
       "DaemonSet's node selector or the operator's log", severity="critical",
       cncf=("driver_runtime_management", "robust_controller")),
)

BY_ID: dict[str, Requirement] = {r.id: r for r in REQUIREMENTS}


class UnknownRequirement(KeyError):
    """A requirement ID that is not in the catalog."""

    def __str__(self) -> str:
        return f"unknown requirement ID {self.args[0]!r} (see `gpuconf requirements`)"


def get(req_id: str) -> Requirement:
    try:
        return BY_ID[req_id]
    except KeyError:
        raise UnknownRequirement(req_id) from None


def select(patterns: list[str]) -> list[Requirement]:
    """Requirements whose ID equals a pattern or starts with it (``STACK-``, ``SCHED-ALLOC``).

    An unmatched pattern raises :class:`UnknownRequirement`, so a typo never selects nothing.
    """
    chosen: dict[str, Requirement] = {}
    for pattern in patterns:
        matches = [r for r in REQUIREMENTS if r.id == pattern or r.id.startswith(pattern)]
        if not matches:
            raise UnknownRequirement(pattern)
        chosen.update((r.id, r) for r in matches)
    return list(chosen.values())
