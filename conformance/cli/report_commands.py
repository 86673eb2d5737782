"""``gpuconf report``: HTML, Markdown and JSON reports from a results folder."""

from __future__ import annotations

from pathlib import Path

from conformance.common.vocab import EXIT_OK


def cmd_report(args) -> int:
    from conformance.report.build import build_report
    from conformance.report.load import load_results
    from conformance.run.plan import check_writable

    results = load_results(Path(args.results))
    out = Path(args.output)
    check_writable(out)
    for kind, path in build_report(results, out).items():
        print(f"{kind}: {path}")
    return EXIT_OK


def register(sub) -> None:
    rep = sub.add_parser("report", help="HTML + Markdown + JSON report from a results folder")
    rep.add_argument("results", metavar="RESULTS", help="a results folder or results.json")
    rep.add_argument("-o", "--output", required=True, metavar="OUT", help="report folder")
    rep.set_defaults(func=cmd_report)
