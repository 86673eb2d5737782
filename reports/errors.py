"""Errors of the report and certification commands."""

from __future__ import annotations

from conformance.errors import UsageError


class ReportInputError(UsageError):
    """Results that cannot be read: missing, not JSON, another format or another version.

    The message is one line the user can act on; the CLI prints it and exits 2.
    """
