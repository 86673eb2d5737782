"""Keep secrets out of every report file.

Results are redacted by ``conformance.redact`` before they are written, but a report may be
built from results written by an older gpuconf or edited by hand, so the report redacts again:
first with ``conformance.redact.redact_text`` when it is importable, then with a small guard of
its own (PEM blocks, JWTs, bearer/basic credentials, ``token:``-style values, kubeconfig key
data). Over-redaction is acceptable; a leaked token is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "[REDACTED]"

try:  # the suite's own redactor, when this gpuconf has one
    from conformance.redact import redact_text as _suite_redact
except ImportError:  # pragma: no cover - depends on the installed conformance package
    _suite_redact = None

_SENSITIVE_KEY = re.compile(
    r"(?i)(token|passw(or)?d|secret|api[-_]?key|authorization|client-key-data|"
    r"client-certificate-data|private[-_]?key)"
)

# Shapes that are secrets wherever they appear; safe to apply to rendered HTML/JSON as well.
_SHAPES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (
        re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?(?:-----END \1-----|\Z)", re.S),
        lambda m: f"-----BEGIN {m.group(1)}----- {MASK} -----END {m.group(1)}-----",
    ),
    (re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]*"), MASK),  # base64 of "-----BEGIN"
    (re.compile(r"\beyJ[A-Za-z0-9_-]{6,}(?:\.[A-Za-z0-9_-]*)*"), MASK),  # JWT / JOSE header
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+"), lambda m: f"{m.group(1)} {MASK}"),
    (re.compile(r"(?i)\b(basic)\s+[A-Za-z0-9+/]{8,}={0,2}"), lambda m: f"{m.group(1)} {MASK}"),
)

# `token: x`, `"password": "x"`, `--token=x`: keep the key, drop the value.
# Key parts are bounded and start at a word boundary, so a long run of word characters costs
# linear time rather than quadratic backtracking.
_KEY_VALUE = re.compile(
    r"(?i)(?P<key>(?<![\w.-])[\w.-]{0,40}?(?:token|passw(?:or)?d|api[-_]?key|client-key-data|"
    r"client-certificate-data)[\w.-]{0,40}[\"']?[ \t]*[:=][ \t]*)"
    r"(?P<value>\[REDACTED\]|\"[^\"\n]*\"|'[^'\n]*'|[^\s,;}\]]+)"
)


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = value[0] if value[:1] in "\"'" else ""
    return f"{match.group('key')}{quote}{MASK}{quote}"


def redact_shapes(text: str) -> str:
    """Mask secrets recognisable by their shape alone (structure-safe for any text format)."""
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def redact(text: str) -> str:
    """Mask every secret the suite's redactor or this guard recognises in one string."""
    if _suite_redact is not None:
        text = _suite_redact(text)
    return _KEY_VALUE.sub(_mask_value, redact_shapes(text))


def redact_tree(value: Any) -> Any:
    """A copy of a JSON-like tree with every string redacted and sensitive keys masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {
            key: (MASK if isinstance(item, str) and _is_sensitive_key(key) else redact_tree(item))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_tree(item) for item in value]
    return value


def _is_sensitive_key(key: object) -> bool:
    return isinstance(key, str) and bool(_SENSITIVE_KEY.search(key))
