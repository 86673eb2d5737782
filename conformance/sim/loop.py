"""The stand-in's controller loop as a process (``python -m conformance.sim.loop``, started by
``gpuconf sim up`` with its log in the sim's ``logs/standin.log``): a pass of
``controller.control_once`` whenever the cluster changed, at most one every ``--interval``
and at least one every ``--resync`` when nothing did; a failed pass logged and the next one
tried.

It used to run a pass every second regardless: listing nodes, pods and DaemonSets that had
not changed cost ~5 % of a core per idle sim (the loop and its API server and etcd; measured
with the loop stopped and running). Watches (``cluster/changes.py``) tell it when to look.
"""

from __future__ import annotations

import argparse
import logging
import time

from kubernetes.client.exceptions import ApiException

from conformance.cluster import changes
from conformance.cluster.client import Cluster, connect
from conformance.nvidia import clusterpolicy, dra
from conformance.sim import controller

log = logging.getLogger("gpuconf.standin")

LOOP_INTERVAL_S = 1.0   # never more often than this (a fault that rewrites on every pass)
RESYNC_S = 10.0         # and at least this often (what no watch shows: time passing)


def watched(cluster: Cluster) -> list[changes.Watched]:
    """Everything a pass reads (conformance/sim/controller.py and what it calls)."""
    return [*changes.core_resources(cluster),
            changes.custom_resource(cluster, *clusterpolicy.API),
            changes.custom_resource(cluster, *dra.GPUCLUSTER_API),
            changes.custom_resource(cluster, dra.RESOURCE_GROUP, dra.RESOURCE_VERSION,
                                    "resourceslices"),
            changes.custom_resource(cluster, dra.RESOURCE_GROUP, dra.RESOURCE_VERSION,
                                    "deviceclasses")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.sim.loop",
                                     description="GPU Operator stand-in controller loop")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--interval", type=float, default=LOOP_INTERVAL_S)
    parser.add_argument("--resync", type=float, default=RESYNC_S)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cluster = connect(args.kubeconfig)
    log.info("stand-in controller loop started against %s", cluster.server)
    changed = changes.Changes(watched(cluster), on_error=log.debug)
    while True:
        started = time.monotonic()
        changed.event.clear()  # a change during this pass wakes the next one
        try:
            controller.control_once(cluster)
        except ApiException as exc:
            log.warning("reconcile failed: %s %s", exc.status, exc.reason)
        except Exception as exc:
            log.warning("reconcile failed: %s", exc)
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        changed.event.wait(args.resync)


if __name__ == "__main__":
    raise SystemExit(main())
