"""Redaction of tokens, certificates and Secret data in everything the suite writes.

Applied to log records, failure evidence, allure attachments and reports. It errs on the side
of hiding: a long base64 run that might be a key is replaced too.
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

_PATTERNS: tuple[re.Pattern[str], ...] = (
    # PEM blocks (certificates, private keys)
    re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?-----END [A-Z0-9 ]+-----", re.S),
    # JSON Web Tokens (service-account tokens): three base64url segments starting eyJ
    re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    # Authorization headers
    re.compile(r"(?i)(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    # kubeconfig / Secret fields holding credentials
    re.compile(
        r"(?i)(\"?(?:token|password|client-key-data|client-certificate-data|"
        r"certificate-authority-data|id-token|refresh-token|secret)\"?\s*[:=]\s*\"?)"
        r"[^\s\",}]{6,}"
    ),
)


def redact_text(text: str) -> str:
    """Return ``text`` with anything that looks like a credential replaced."""
    if not text:
        return text
    out = text
    for pattern in _PATTERNS:
        if pattern.groups:
            out = pattern.sub(lambda m: m.group(1) + REDACTED, out)
        else:
            out = pattern.sub(REDACTED, out)
    return out


def redact_object(obj):
    """Redact a Kubernetes object (dict): Secret data and anything credential-like in strings."""
    if isinstance(obj, dict):
        if obj.get("kind") == "Secret":
            obj = dict(obj)
            for key in ("data", "stringData"):
                if obj.get(key):
                    obj[key] = {k: REDACTED for k in obj[key]}
        return {k: redact_object(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_object(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj
