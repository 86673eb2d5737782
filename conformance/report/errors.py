"""Errors of the report and certification commands."""

from __future__ import annotations


class ReportInputError(Exception):
    """Results that cannot be read: missing, not JSON, another format or another version, or a
    bad comparison setting. The message is one line the user can act on; the CLI prints it and
    exits 2.
    """
