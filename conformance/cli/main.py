"""``gpuconf``: builds the parser from the command modules and maps every error to one line.

Exit codes (gpu_kernels' contract, ``conformance.common.vocab``): 0 every selected check
passed; 1 a check failed, or the cluster or a component did not behave; 2 bad input or a
missing precondition (one line on stderr, nothing left running); 130 interrupted.
"""

from __future__ import annotations

import json
import sys

from kubernetes.client.exceptions import ApiException

from conformance import catalog
from conformance.cli import (
    catalog_commands,
    cluster_commands,
    job_commands,
    node_commands,
    report_commands,
    run_commands,
    sharing_commands,
    sim_commands,
)
from conformance.cli.parser import Parser
from conformance.common import interrupts
from conformance.common.errors import ComponentFailed, NotConverged, UsageError
from conformance.common.vocab import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from conformance.report.errors import ReportInputError

COMMAND_MODULES = (run_commands, sim_commands, report_commands, cluster_commands,
                   catalog_commands, sharing_commands, job_commands, node_commands)


def build_parser() -> Parser:
    parser = Parser(prog="gpuconf",
                    description="Conformance and e2e checks for Kubernetes GPU clusters")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def _api_message(exc: ApiException) -> str:
    try:
        return json.loads(exc.body or "{}").get("message") or "(no message)"
    except ValueError:
        return (exc.body or "(no message)")[:300]


def _error(message: str, code: int) -> int:
    print(f"gpuconf: error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    interrupts.sigterm_as_interrupt()
    try:
        return args.func(args)
    except (UsageError, catalog.UnknownRequirement, ReportInputError) as exc:
        return _error(str(exc), EXIT_USAGE)
    except NotConverged as exc:
        return _error(str(exc), EXIT_FAILED)
    except ApiException as exc:  # the cluster refused a request the command needed
        return _error(f"the API server answered {exc.status} {exc.reason}: "
                      f"{_api_message(exc)}", EXIT_FAILED)
    except ComponentFailed as exc:
        return _error(f"{exc}\n--- last lines of the {exc.component} log ---\n{exc.log_tail}",
                      EXIT_FAILED)
    except KeyboardInterrupt:
        print("gpuconf: interrupted; what was created is removed and the results so far kept",
              file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
