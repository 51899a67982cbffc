"""The HTTP pieces both listening ports share: token checks, responses, TLS, the peer's address.

The bot port (:mod:`server.app`) and the dashboard (:mod:`server.dashboard`) answer plain
HTTP before any websocket exists (``/healthz``, ``/metrics``, the page, refusals); a token
must be compared the same way on both, and both serve the same certificate, so these
live once, here.
"""

from __future__ import annotations

import email.utils
import hmac
import http
import json
import ssl
from collections.abc import Mapping
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Response

__all__ = ["bearer_matches", "json_body", "page_response", "peer_address", "respond", "secret_matches", "tls_context"]


def secret_matches(supplied: str, token: str) -> bool:
    """Constant time: how long the comparison takes does not depend on where the two differ."""
    return hmac.compare_digest(supplied.encode(), token.encode())


def bearer_matches(headers: Headers, token: str) -> bool:
    """Whether the request's ``Authorization: Bearer <token>`` header carries ``token``."""
    scheme, _, value = headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and secret_matches(value.strip(), token)


def respond(connection: ServerConnection, status: http.HTTPStatus, body: str, content_type: str = "text/plain") -> Response:
    """A response of the bot port: websockets' own (``connection.respond``, which logs a refusal), typed as given."""
    response = connection.respond(status, body)
    # websockets' Headers keep every value set: replace respond()'s own Content-Type, do not add a second.
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = f"{content_type}; charset=utf-8" if "charset" not in content_type else content_type
    return response


def page_response(
    status: http.HTTPStatus,
    body: str | bytes,
    content_type: str = "text/plain; charset=utf-8",
    cache: bool = False,
) -> Response:
    """A response of the dashboard's port, made here (not by websockets: it serves a page, not refusals)."""
    data = body.encode() if isinstance(body, str) else body
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(data))),
            ("Content-Type", content_type if "charset" in content_type else f"{content_type}; charset=utf-8"),
            # The page's URL may carry ?token=: keep it out of caches and of Referer headers.
            ("Cache-Control", "max-age=300" if cache else "no-store"),
            ("Referrer-Policy", "no-referrer"),
            ("X-Content-Type-Options", "nosniff"),
        ]
    )
    return Response(status.value, status.phrase, headers, data)


def json_body(value: Mapping[str, Any]) -> str:
    """A JSON response body (one line, newline-terminated, as ``curl`` users expect)."""
    return json.dumps(value) + "\n"


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """TLS >= 1.2 with ``cert`` and ``key`` (PEM), or None without them: a token must not cross the network in clear."""
    if cert is None or key is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def peer_address(connection: ServerConnection) -> str:
    """The peer's IP address ('' when unknown, e.g. a unix socket)."""
    remote = connection.remote_address
    return str(remote[0]) if isinstance(remote, tuple) and remote else ""
