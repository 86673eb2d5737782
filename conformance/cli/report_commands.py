"""``gpuconf report``: HTML, Markdown and JSON reports from a results folder."""

from __future__ import annotations

from pathlib import Path

from conformance.common.console import say
from conformance.common.errors import UsageError
from conformance.common.vocab import EXIT_OK


def cmd_report(args) -> int:
    from conformance.report.build import build_report
    from conformance.report.load import load_results
    from conformance.run.plan import check_writable

    if not (args.output or args.bundle):
        raise UsageError("say where: -o OUT (the report) and/or --bundle DIR (the evidence "
                         "bundle: e2e.log, junit.xml, results.json, CTRF, report, PRODUCT.yaml)")
    if (args.product_version or args.product_metadata or args.evidence_url) and not args.bundle:
        raise UsageError("--product-version, --product-metadata and --evidence-url go with "
                         "--bundle DIR (PRODUCT.yaml points at the bundle's files)")
    if args.output:
        results = load_results(Path(args.results))
        out = Path(args.output)
        check_writable(out)
        for kind, path in build_report(results, out).items():
            print(f"{kind}: {path}")
    if args.bundle:
        from conformance.report import bundle, product

        metadata = (product.load_metadata(args.product_metadata) if args.product_metadata
                    else None)
        out = Path(args.bundle)
        check_writable(out)
        written = bundle.write_bundle(Path(args.results), out,
                                      product_version=args.product_version,
                                      product_metadata=metadata,
                                      evidence_url=args.evidence_url)
        for name, path in written.items():
            print(f"{name}: {path}")
        if product.FILENAME in written:
            left = product.submission_errors(written[product.FILENAME], args.product_version)
            say(f"{product.FILENAME} is a draft: {len(left)} point(s) left before the CNCF "
                "validation passes" + ("".join(f"\n  - {e}" for e in left) if left else ""))
    return EXIT_OK


def register(sub) -> None:
    rep = sub.add_parser("report", help="HTML + Markdown + JSON report from a results folder")
    rep.add_argument("results", metavar="RESULTS", help="a results folder or results.json")
    rep.add_argument("-o", "--output", metavar="OUT", help="report folder")
    rep.add_argument("--bundle", metavar="DIR",
                     help="write the evidence bundle as kubernetes-sigs/ai-conformance lays "
                          "its own (e2e.log, junit.xml, results.json) with CTRF, the report "
                          "and gpuconf-results.json; RESULTS must be the run's folder")
    from conformance.report.product import VERSIONS

    rep.add_argument("--product-version", choices=VERSIONS, metavar="V",
                     help="with --bundle: a CNCF AI Conformance PRODUCT.yaml draft for this "
                          f"checklist version ({', '.join(VERSIONS)})")
    rep.add_argument("--product-metadata", metavar="FILE",
                     help="YAML of PRODUCT.yaml metadata fields (vendorName, platformName, ...)")
    rep.add_argument("--evidence-url", metavar="URL",
                     help="where the bundle will be published: evidence links the report "
                          "sections there (default: paths relative to PRODUCT.yaml)")
    rep.set_defaults(func=cmd_report)
