"""The stand-in's state in the cluster: the profile and faults ``sim up``/``sim set`` chose, in
ConfigMap ``kube-system/gpuconf-sim-standin``, which the controller loop (another process) reads
each pass; and the handshake that tells ``sim set`` when a whole pass has seen the new state."""

from __future__ import annotations

import json
import time

from conformance.cluster.client import Cluster, create_or_replace, read_or_none
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.common.console import Progress
from conformance.common.errors import NotConverged
from conformance.sim.objects import STANDIN_LABEL
from conformance.sim.operator_plan import SimState

CONFIG_NAMESPACE = "kube-system"

CONFIG_MAP = "gpuconf-sim-standin"

SYNC_REQUEST_KEY = "sync-request"  # see wait_for_a_full_pass

SYNC_DONE_KEY = "sync-done"


def save_state(cluster: Cluster, state: SimState) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": CONFIG_NAMESPACE,
                         "labels": {STANDIN_LABEL: "true"}},
            "data": {"state.json": json.dumps(state.__dict__)}}
    create_or_replace(
        lambda: cluster.core.create_namespaced_config_map(CONFIG_NAMESPACE, body),
        lambda: cluster.core.replace_namespaced_config_map(CONFIG_MAP, CONFIG_NAMESPACE, body))


def state_map(cluster: Cluster):
    return read_or_none(cluster.core.read_namespaced_config_map, CONFIG_MAP, CONFIG_NAMESPACE)


def load_state(cluster: Cluster) -> SimState | None:
    cm = state_map(cluster)
    return None if cm is None else state_in(cm)


def state_in(cm) -> SimState:
    """The state a read of the ConfigMap holds."""
    return SimState(**json.loads(cm.data["state.json"]))


def acknowledge_pass(cluster: Cluster, cm) -> None:
    """At the end of a controller pass: answer the sync request the pass read at its start
    (:func:`wait_for_a_full_pass`)."""
    request = (cm.data or {}).get(SYNC_REQUEST_KEY)
    if request and cm.data.get(SYNC_DONE_KEY) != request:
        cluster.core.patch_namespaced_config_map(CONFIG_MAP, CONFIG_NAMESPACE,
                                                 {"data": {SYNC_DONE_KEY: request}})


def wait_for_a_full_pass(cluster: Cluster, progress: Progress, timeout: float = 60.0) -> None:
    """Until the controller loop has run one whole pass that began after this call.

    ``reconcile`` writes the state first and the objects after it, while the loop keeps
    running in its own process: a pass that read the new state with the old sharing ConfigMap
    (or the old state with the new nodes) writes what neither asked for. A pass that begins
    after ``reconcile`` returned reads only the final objects and writes them right, and the
    loop's passes never overlap, so once it is done nothing stale is left to land."""
    token = f"{time.time_ns():x}"
    cluster.core.patch_namespaced_config_map(CONFIG_MAP, CONFIG_NAMESPACE,
                                             {"data": {SYNC_REQUEST_KEY: token}})

    def pass_done() -> bool:
        cm = state_map(cluster)
        return cm is not None and (cm.data or {}).get(SYNC_DONE_KEY) == token

    if pass_done():
        return
    progress("waiting for the stand-in's controller loop to apply the new state")
    try:
        wait_for("a whole pass of the stand-in's controller loop", pass_done,
                 timeout=timeout, interval=0.2)
    except WaitTimeout:
        raise NotConverged(f"the stand-in's controller loop did not complete a pass within "
                           f"{timeout:.0f}s: see logs/standin.log of the sim") from None
