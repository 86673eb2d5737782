"""``gpuconf requirements`` (the catalog) and ``gpuconf validate-sharing`` (a sharing config)."""

from __future__ import annotations

import json
from pathlib import Path

from conformance import catalog
from conformance.common.console import say
from conformance.common.errors import UsageError
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


def cmd_validate_sharing(args) -> int:
    """Check a device plugin sharing config file before it goes into a cluster."""
    from conformance.nvidia.sharing import sharing_config_warnings, validate_sharing_config

    try:
        text = Path(args.file).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    errors = validate_sharing_config(text)
    if errors:
        raise UsageError(f"invalid sharing config {args.file}: " + "; ".join(errors))
    for warning in sharing_config_warnings(text):
        say(f"warning: {warning}")
    print(f"{args.file}: valid device plugin sharing config")
    return EXIT_OK


def register(sub) -> None:
    req = sub.add_parser("requirements", help="the requirement catalog")
    req.add_argument("--json", action="store_true", help="as JSON")
    req.add_argument("select", nargs="*", metavar="ID", help="IDs or prefixes")
    req.set_defaults(func=cmd_requirements)

    vs = sub.add_parser("validate-sharing", help="check a device plugin sharing config file")
    vs.add_argument("file", metavar="FILE", help="the config (YAML)")
    vs.set_defaults(func=cmd_validate_sharing)
