"""``gpuconf requirements``: the requirement catalog."""

from __future__ import annotations

import json

from conformance import catalog
from conformance.common.vocab import EXIT_OK


def cmd_requirements(args) -> int:
    reqs = catalog.select(args.select) if args.select else list(catalog.REQUIREMENTS)
    if args.json:
        print(json.dumps([r.as_dict() for r in reqs], indent=2))
        return EXIT_OK
    print(f"{'ID':<16} {'AREA':<11} {'LAYER':<18} {'SEVERITY':<9} {'TARGETS':<26} "
          f"{'CNCF AI CONFORMANCE':<40} TITLE")
    for r in reqs:
        print(f"{r.id:<16} {r.area:<11} {r.layer:<18} {r.severity:<9} "
              f"{','.join(r.targets):<26} {','.join(r.cncf) or '-':<40} {r.title}")
    return EXIT_OK


def register(sub) -> None:
    req = sub.add_parser("requirements", help="the requirement catalog")
    req.add_argument("--json", action="store_true", help="as JSON")
    req.add_argument("select", nargs="*", metavar="ID", help="IDs or prefixes")
    req.set_defaults(func=cmd_requirements)
