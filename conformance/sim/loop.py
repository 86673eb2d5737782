"""The stand-in's controller loop as a process (``python -m conformance.sim.loop``, started by
``gpuconf sim up`` with its log in the sim's ``logs/standin.log``): a pass of
``controller.control_once`` every interval, a failed pass logged and the next one tried."""

from __future__ import annotations

import argparse
import logging
import time

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import connect
from conformance.sim import controller

log = logging.getLogger("gpuconf.standin")

LOOP_INTERVAL_S = 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.sim.loop",
                                     description="GPU Operator stand-in controller loop")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--interval", type=float, default=LOOP_INTERVAL_S)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cluster = connect(args.kubeconfig)
    log.info("stand-in controller loop started against %s", cluster.server)
    while True:
        try:
            controller.control_once(cluster)
        except ApiException as exc:
            log.warning("reconcile failed: %s %s", exc.status, exc.reason)
        except Exception as exc:
            log.warning("reconcile failed: %s", exc)
        time.sleep(args.interval)


if __name__ == "__main__":
    raise SystemExit(main())
