"""The fault catalog of the sim: named ways a GPU cluster is broken in real life.

Each fault has a stable name, a one-line description, the symptom a user sees, and the suspect
from the design's symptom -> suspect table. The operator stand-in plays each one through the
API server (see ``standin.py``); the suites must catch every one under the right requirement.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.errors import UsageError


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    symptom: str
    suspect: str


FAULTS: tuple[Fault, ...] = (
    Fault("device-plugin-absent",
          "the device plugin DaemonSet is gone and no node advertises nvidia.com/gpu",
          "GPU pods stay Pending with 'Insufficient nvidia.com/gpu'",
          "Pending GPU pod -> device plugin/operator missing or no GPU on the node"),
    Fault("toolkit-absent",
          "the container toolkit DaemonSet is gone from every GPU node",
          "containers start but cannot see the GPU (no nvidia-smi, no libcuda)",
          "container cannot see the GPU -> container toolkit"),
    Fault("driver-version-mismatch",
          "one GPU node runs another driver version than the rest (and than expected)",
          "CUDA apps fail on one node with 'driver version is insufficient'",
          "driver version mismatch -> host-installed driver vs containerized driver"),
    Fault("gfd-absent",
          "GPU Feature Discovery is gone and its labels are missing from the nodes",
          "workloads selecting nvidia.com/gpu.product never schedule",
          "wrong/missing GPU type labels -> GPU Feature Discovery"),
    Fault("gfd-label-wrong",
          "nvidia.com/gpu.count on one node disagrees with the GPUs it advertises",
          "capacity planning and placement by labels use wrong numbers",
          "stale or wrong labels -> GPU Feature Discovery"),
    Fault("time-slicing-replicas-mislabelled",
          "nvidia.com/gpu.replicas disagrees with the sharing config and capacity",
          "more (or fewer) pods share a GPU than the labels promise",
          "sharing labels -> GFD / device plugin config out of sync (gpu-operator#1144)"),
    Fault("operand-crashloop",
          "the DCGM exporter pods crash-loop on every GPU node",
          "operand pods in CrashLoopBackOff; no GPU metrics",
          "operand not ready -> the crash-looping operand (read its previous logs)"),
    Fault("clusterpolicy-notready",
          "the ClusterPolicy reports status.state notReady",
          "the operator says the stack is not ready",
          "operator not ready -> the operand states it lists"),
    Fault("gpu-node-taint-missing-toleration",
          "one GPU node carries a NoExecute taint that operands and GPU pods do not tolerate",
          "operands missing on that node; GPU pods never land there",
          "Pending GPU pod / missing operands -> taint without matching toleration"),
    Fault("wrong-gpu-type-label",
          "one GPU node's nvidia.com/gpu.product names another GPU than it has",
          "a pod pinned to one GPU type lands on another",
          "wrong GPU type -> GFD product label (and missing nodeSelector checks)"),
    Fault("standin-ignores-changes",
          "the operator stand-in stops reconciling ClusterPolicy and node-label changes",
          "a ClusterPolicy change never reaches the operands",
          "operator reconcile loop stuck -> GPU Operator pod/logs"),
)

BY_NAME = {f.name: f for f in FAULTS}


def validate(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise UsageError(f"unknown fault {', '.join(map(repr, unknown))}; valid faults: "
                         + ", ".join(BY_NAME))
    return list(dict.fromkeys(names))
