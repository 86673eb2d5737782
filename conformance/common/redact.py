"""The one redactor: tokens, keys, certificates and Secret data never reach a file or a terminal.

Applied to failure evidence, log records, allure attachments, results.json and every report
file. It errs on the side of hiding: over-redaction is acceptable, a leaked token is not.

- :func:`redact_shapes` masks what is a secret by its shape alone (PEM blocks, base64 of a PEM
  header, JWTs, ``Bearer``/``Basic`` credentials); it is safe on rendered HTML and JSON.
- :func:`redact_text` adds ``key: value`` pairs whose key names a credential (``token:``,
  ``"password": "..."``, ``--token=...``, kubeconfig ``client-key-data``): the key stays, the
  value goes.
- :func:`redact_object` walks a JSON-like tree: Secret ``data``/``stringData`` and any string
  under a credential-named key are masked, every other string goes through ``redact_text``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "[REDACTED]"

_CREDENTIAL_KEY = (r"token|passw(?:or)?d|secret|api[-_]?key|authorization|client-key-data|"
                   r"client-certificate-data|certificate-authority-data|private[-_]?key")
_SENSITIVE_KEY = re.compile(rf"(?i)({_CREDENTIAL_KEY})")

_SHAPES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?(?:-----END \1-----|\Z)", re.S),
     lambda m: f"-----BEGIN {m.group(1)}----- {MASK} -----END {m.group(1)}-----"),
    (re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]*"), MASK),  # base64 of "-----BEGIN"
    (re.compile(r"\beyJ[A-Za-z0-9_-]{6,}(?:\.[A-Za-z0-9_-]*)*"), MASK),  # JWT / JOSE header
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+"), lambda m: f"{m.group(1)} {MASK}"),
    (re.compile(r"(?i)\b(basic)\s+[A-Za-z0-9+/]{8,}={0,2}"), lambda m: f"{m.group(1)} {MASK}"),
)

# `token: x`, `"password": "x"`, `--token=x`: keep the key, drop the value. Key parts are
# bounded and start at a word boundary, so a long run of word characters costs linear time.
_KEY_VALUE = re.compile(
    rf"(?i)(?P<key>(?<![\w.-])[\w.-]{{0,40}}?(?:{_CREDENTIAL_KEY})[\w.-]{{0,40}}[\"']?[ \t]*"
    r"[:=][ \t]*)(?P<value>\[REDACTED\]|\"[^\"\n]*\"|'[^'\n]*'|[^\s,;}\]]+)")


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value == MASK:
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" else ""
    return f"{match.group('key')}{quote}{MASK}{quote}"


def redact_shapes(text: str) -> str:
    """Mask secrets recognisable by their shape alone (structure-safe for any text format)."""
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def redact_text(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``[REDACTED]``."""
    if not text:
        return text
    return _KEY_VALUE.sub(_mask_value, redact_shapes(text))


def redact_object(value: Any) -> Any:
    """A redacted copy of a JSON-like tree (a Kubernetes object, results, measurements)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        if value.get("kind") == "Secret":
            value = {**value, **{k: {name: MASK for name in value[k]}
                                 for k in ("data", "stringData") if value.get(k)}}
        return {key: (MASK if isinstance(item, str) and _is_sensitive_key(key)
                      else redact_object(item)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_object(item) for item in value]
    return value


def _is_sensitive_key(key: object) -> bool:
    return isinstance(key, str) and bool(_SENSITIVE_KEY.search(key))
