"""The report's own secret guard (applied on top of conformance.redact)."""

from __future__ import annotations

import time

import pytest
from test_report_fixtures import BEARER, JWT, PEM

from conformance.common.redact import MASK, redact_object, redact_shapes, redact_text


@pytest.mark.parametrize(("text", "secret"), [
    (f"Authorization: {BEARER}", "abc.def.ghi"),
    (f"sa token {JWT}", JWT),
    ("header eyJhbGciOi...JWT here", "eyJhbGciOi"),
    (PEM, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    ("token: s3cr3t", "s3cr3t"),
    ('{"password": "hunter2", "x": 1}', "hunter2"),
    ("--token=abc123 --v=2", "abc123"),
    ("client-key-data: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t", "LS0tLS1CRUdJTi"),
    ("Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
])
def test_secrets_are_masked(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert MASK in out


def test_ordinary_text_is_kept() -> None:
    text = "2 of 3 GPU nodes advertise no nvidia.com/gpu: gpu-node-0, gpu-node-1"
    assert redact_text(text) == text


def test_redaction_is_stable() -> None:
    once = redact_text("token: s3cr3t and password: hunter2")
    assert redact_text(once) == once


def test_sensitive_keys_are_masked_in_trees() -> None:
    tree = {"name": "sa", "token": "opaque-value", "nested": [{"client-key-data": "abc"}],
            "count": 3}
    out = redact_object(tree)
    assert out == {"name": "sa", "token": MASK, "nested": [{"client-key-data": MASK}],
                   "count": 3}
    assert tree["token"] == "opaque-value"  # the input is not modified


def test_shapes_alone_are_safe_for_json() -> None:
    text = '{"token_count": 5, "message": "Bearer abcdefgh"}'
    assert redact_shapes(text) == '{"token_count": 5, "message": "Bearer [REDACTED]"}'


def test_long_text_costs_linear_time() -> None:
    text = ("x" * 200_000) + " token " + ("a" * 39 + "token") * 5000
    start = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - start < 2.0
