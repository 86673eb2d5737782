"""Gang scheduling (CNCF AI Conformance ``gang_scheduling``): which all-or-nothing mechanism a
cluster offers, which queue the checks use, and how big a gang and its blockers are.

Pure decisions over what the cluster's discovery and Kueue objects say (``cluster/gang.py``
reads them, ``suites/scheduling/test_gang.py`` runs the checks).

Mechanisms, by the API group that betrays them (what each serves, at the versions pinned here):

- Kueue (``kueue.x-k8s.io``: ClusterQueue, LocalQueue; v0.17.0 serves v1beta2): a Job admitted
  as one Workload, quota for all its pods or none. The one this suite drives.
- Volcano (``scheduling.volcano.sh`` PodGroup, Queue) and scheduler-plugins coscheduling
  (``scheduling.x-k8s.io`` PodGroup with ``minMember``): a second scheduler or plugin.
- Kubernetes' own Workload API: in v1.36.3 ``scheduling.k8s.io/v1alpha2`` Workload and PodGroup
  (k8s.io/api v0.36.3 ``scheduling/v1alpha2/types.go``; v1alpha1 and ``spec.workloadRef`` of
  v1.35 are gone: ``core/v1/types.go`` tombstones workloadRef, pods name their group in
  ``spec.schedulingGroup.podGroupName``), behind the alpha gates GenericWorkload and
  GangScheduling (default off; GangScheduling depends on GenericWorkload,
  ``pkg/features/kube_features.go``) on the API server and kube-scheduler, and the API server's
  ``--runtime-config=scheduling.k8s.io/v1alpha2=true``. Discovery shows the API; whether the
  scheduler's gate is on it cannot.
- JobSet (``jobset.x-k8s.io``) groups Jobs but does not place them all-or-nothing by itself
  (it leaves that to Kueue or a gang scheduler): noted, never counted as a mechanism.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.nvidia.labels import GPU_RESOURCE

# --- Kueue facts (sigs.k8s.io/kueue v0.17.0) ----------------------------------------------------
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"  # apis/kueue/v1beta2, the storage version of v0.17.0
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"  # on a Job: the LocalQueue that admits it

KUEUE = "kueue"
VOLCANO = "volcano"
COSCHEDULING = "coscheduling"
WORKLOAD_API = "workload-api"
# mechanism -> (API group, a resource of it that only that mechanism serves)
MECHANISMS: dict[str, tuple[str, str]] = {
    KUEUE: (KUEUE_GROUP, "clusterqueues"),
    VOLCANO: ("scheduling.volcano.sh", "podgroups"),
    COSCHEDULING: ("scheduling.x-k8s.io", "podgroups"),
    WORKLOAD_API: ("scheduling.k8s.io", "podgroups"),
}
DRIVEN = (KUEUE,)  # the mechanisms these checks can run a gang on
JOBSET_GROUP = "jobset.x-k8s.io"

# How many one-GPU pods a gang has (fewer where fewer GPUs are free; at least MIN_GANG).
GANG_SIZE = 4
MIN_GANG = 2


def detect(served: Mapping[str, Collection[str]]) -> list[str]:
    """The gang mechanisms whose API the cluster serves (``served``: API group -> resources)."""
    return [name for name, (group, resource) in MECHANISMS.items()
            if resource in served.get(group, ())]


@dataclass(frozen=True)
class GangChoice:
    """The option ``--gang-queue MECHANISM[:QUEUE]`` parsed (``queue`` None: pick one)."""

    mechanism: str
    queue: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> GangChoice | None:
        if not text:
            return None
        mechanism, _, queue = text.partition(":")
        if mechanism not in MECHANISMS:
            raise ValueError(f"--gang-queue {text!r}: the mechanism is one of "
                             f"{', '.join(MECHANISMS)}")
        return cls(mechanism, queue or None)


@dataclass(frozen=True)
class Decision:
    """The mechanism to drive, or why none: ``applicable`` False when the cluster offers no
    gang scheduler at all (the checks are not-applicable), True when it offers one these checks
    cannot use (they are not run)."""

    mechanism: str | None
    reason: str = ""
    applicable: bool = True


def choose_mechanism(detected: list[str], choice: GangChoice | None,
                     served: Mapping[str, Collection[str]]) -> Decision:
    if choice is not None:
        if choice.mechanism not in detected:
            group, resource = MECHANISMS[choice.mechanism]
            return Decision(None, f"--gang-queue names {choice.mechanism}, but the cluster "
                                  f"serves no {resource} in API group {group}")
        detected = [choice.mechanism]
    if not detected:
        jobset = (f"; JobSet ({JOBSET_GROUP}) is served, but it places no gang by itself"
                  if JOBSET_GROUP in served else "")
        return Decision(None, "no gang scheduler: the cluster serves none of Kueue "
                              "(kueue.x-k8s.io ClusterQueue), Volcano (scheduling.volcano.sh), "
                              "coscheduling (scheduling.x-k8s.io PodGroup) or the Workload API "
                              f"(scheduling.k8s.io PodGroup){jobset}", applicable=False)
    driven = [m for m in detected if m in DRIVEN]
    if driven:
        return Decision(driven[0])
    return Decision(None, f"found {', '.join(detected)}: these checks drive a gang through "
                          "Kueue only so far")


# --- Kueue ClusterQueues --------------------------------------------------------------------
@dataclass(frozen=True)
class ClusterQueue:
    """What the checks need of a Kueue ClusterQueue: its GPU quota, use, and namespaces."""

    name: str
    gpu_quota: int  # nominal nvidia.com/gpu quota summed over its flavors
    gpu_reserved: int  # what admitted workloads hold of it (status.flavorsReservation)
    namespace_selector: dict[str, Any] | None  # None: Kueue admits no namespace
    stopped: bool = False  # spec.stopPolicy other than None

    @property
    def gpu_free(self) -> int:
        return max(self.gpu_quota - self.gpu_reserved, 0)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ClusterQueue:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return cls(obj["metadata"]["name"], _quota(spec), _reserved(status),
                   spec.get("namespaceSelector"),
                   spec.get("stopPolicy", "None") not in ("None", None))


def _quota(spec: Mapping[str, Any]) -> int:
    return sum(_gpu_sum(flavor.get("resources") or [], "nominalQuota")
               for group in spec.get("resourceGroups") or []
               for flavor in group.get("flavors") or [])


def _reserved(status: Mapping[str, Any]) -> int:
    usage = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    return sum(_gpu_sum(flavor.get("resources") or [], "total") for flavor in usage)


def _gpu_sum(resources: list[Mapping[str, Any]], key: str) -> int:
    return sum(quantity_int(r.get(key, 0)) for r in resources if r.get("name") == GPU_RESOURCE)


def quantity_int(value: object) -> int:
    """A whole-number quantity (``8``, ``"8"``); GPUs are never fractional."""
    return int(str(value or 0))


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a label selector selects ``labels`` (a None selector selects nothing, as
    Kueue reads a ClusterQueue's absent namespaceSelector; ``{}`` selects everything)."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {"In": key in labels and labels[key] in values,
              "NotIn": key not in labels or labels[key] not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)
        if not ok:
            return False
    return True


def choose_queue(queues: list[ClusterQueue], wanted: str | None,
                 namespace_labels: Mapping[str, str]) -> tuple[ClusterQueue | None, str]:
    """(the ClusterQueue to use, "") or (None, why none can be used)."""
    if wanted is not None:
        found = [q for q in queues if q.name == wanted]
        if not found:
            return None, f"no Kueue ClusterQueue named {wanted!r} (--gang-queue kueue:{wanted})"
        candidates = found
    else:
        candidates = sorted(queues, key=lambda q: (-q.gpu_quota, q.name))
    usable = [q for q in candidates if q.gpu_quota > 0 and not q.stopped
              and selects(q.namespace_selector, namespace_labels)]
    if usable:
        return usable[0], ""
    if not candidates:
        return None, "Kueue is installed but has no ClusterQueue: pass --gang-queue kueue:NAME"
    return None, ("no Kueue ClusterQueue offers nvidia.com/gpu quota to this run's namespaces "
                  f"(checked {', '.join(q.name for q in candidates)}: quota 0, stopped, or a "
                  "namespaceSelector that does not select them): pass --gang-queue kueue:NAME")


# --- gang and blockers ----------------------------------------------------------------------
@dataclass(frozen=True)
class GangPlan:
    """A gang of ``size`` one-GPU pods; ``blockers`` one-GPU pods through the same queue leave
    free room for ``size - 1`` of them (the negative case)."""

    size: int
    free: int  # GPUs free both on the nodes and in the queue's quota
    blockers: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "blockers", self.free - (self.size - 1))


def plan(physical_free: int, queue_free: int, want: int = GANG_SIZE) -> GangPlan | None:
    """The gang for ``min(physical_free, queue_free)`` free GPUs; None under MIN_GANG.

    The blockers take what the tighter of the two limits leaves, so a queue that admits more
    than the nodes hold (quota over capacity) lets the gang in and shows a partial placement.
    """
    free = min(physical_free, queue_free)
    size = min(want, free)
    return GangPlan(size, free) if size >= MIN_GANG else None
