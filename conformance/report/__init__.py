"""Compliance reports and certification from gpuconf results (``results.json``).

- :func:`load_results` reads and checks a results folder or file.
- :func:`build_report` / :func:`build_matrix_report` write report.html, report.md and
  report.json.
- :func:`compare` certifies a candidate run against a baseline run.
"""

from conformance.report.build import build_matrix_report, build_report
from conformance.report.certify import CertificationResult, compare
from conformance.report.errors import ReportInputError
from conformance.report.load import load_results

__all__ = [
    "CertificationResult",
    "ReportInputError",
    "build_matrix_report",
    "build_report",
    "compare",
    "load_results",
]
