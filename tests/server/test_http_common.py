"""The HTTP pieces both ports share (server/http_common.py): the bearer check, page responses, JSON bodies, TLS.

``respond`` and ``peer_address`` need a live websockets connection: the over-socket tests
(tests/server/test_app.py, tests/server/test_dashboard.py) cover them.
"""

from __future__ import annotations

import hmac
import http
import json
import ssl

import pytest
from websockets.datastructures import Headers

from server import http_common
from server.http_common import bearer_matches, json_body, page_response, secret_matches, tls_context
from tests.conftest import self_signed_certificate

TOKEN = "right-token-123"


@pytest.mark.parametrize(
    ("authorization", "matches"),
    [
        (f"Bearer {TOKEN}", True),
        (f"bearer {TOKEN}", True),  # the scheme is case-insensitive
        (f"Bearer   {TOKEN}  ", True),
        ("Bearer wrong-token-12", False),
        (f"Bearer {TOKEN}x", False),
        (f"Basic {TOKEN}", False),
        (TOKEN, False),  # no scheme
        ("Bearer", False),
        ("", False),
    ],
)
def test_bearer_matches_only_the_right_token_in_a_bearer_header(authorization, matches):
    assert bearer_matches(Headers({"Authorization": authorization}), TOKEN) is matches


def test_a_request_without_an_authorization_header_does_not_match():
    assert not bearer_matches(Headers(), TOKEN)
    assert not bearer_matches(Headers({"X-Token": TOKEN}), TOKEN)


def test_tokens_are_compared_in_constant_time(monkeypatch):
    """Every comparison goes through ``hmac.compare_digest`` on the two encoded strings, never ``==``."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(http_common.hmac, "compare_digest", spy)
    assert bearer_matches(Headers({"Authorization": "Bearer nope"}), TOKEN) is False
    assert secret_matches("tökén", "tökén") is True
    assert calls == [(b"nope", TOKEN.encode()), ("tökén".encode(), "tökén".encode())]


def test_page_responses_carry_their_length_type_and_no_cache_unless_asked():
    response = page_response(http.HTTPStatus.OK, "héllo", "text/html")
    assert (response.status_code, response.reason_phrase, response.body) == (200, http.HTTPStatus.OK.phrase, "héllo".encode())
    assert response.headers["Content-Length"] == str(len("héllo".encode()))
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-store" and response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["X-Content-Type-Options"] == "nosniff" and response.headers["Connection"] == "close"
    cached = page_response(http.HTTPStatus.NOT_FOUND, b"\x00", "text/css; charset=utf-8", cache=True)
    assert cached.status_code == 404 and cached.headers["Cache-Control"] == "max-age=300"
    assert cached.headers["Content-Type"] == "text/css; charset=utf-8"  # a given charset is kept, not doubled


def test_json_body_is_one_newline_terminated_line():
    body = json_body({"status": "ok", "nested": {"a": [1, 2]}})
    assert body.endswith("\n") and body.count("\n") == 1
    assert json.loads(body) == {"status": "ok", "nested": {"a": [1, 2]}}


def test_tls_needs_both_files_and_allows_nothing_older_than_tls_1_2(tmp_path):
    assert tls_context(None, None) is None
    cert, key = self_signed_certificate(tmp_path)
    assert tls_context(cert, None) is None and tls_context(None, key) is None
    context = tls_context(cert, key)
    assert isinstance(context, ssl.SSLContext) and context.minimum_version is ssl.TLSVersion.TLSv1_2
