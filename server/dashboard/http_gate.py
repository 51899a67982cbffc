"""The dashboard port's plain HTTP: the page and its assets, ``/healthz``, and the gate every
observer websocket passes before its upgrade.

Why apart from the observer server (:mod:`server.dashboard`): this is the whole security
surface of the port, and it answers from the request alone (plus two numbers the server
passes in), without touching a websocket. One module to audit for who gets the page and who
may observe: the token (header or ``?token=``), the ``Host`` check against DNS rebinding,
the bot port's shared admission, the same-origin check against cross-site websocket
hijacking, and the page's Content-Security-Policy (docs/security.md, "The dashboard").

The page's files are read from the package once, at construction (a few KiB): serving them
never touches the disk.
"""

from __future__ import annotations

import http
import importlib.resources
import urllib.parse

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from ..config import is_loopback
from ..http_common import bearer_matches, json_body, page_response, peer_address, secret_matches
from .config import DashboardHost

__all__ = ["OBSERVE_PATH", "DashboardHttp", "static_asset"]

OBSERVE_PATH = "/observe"
"""The observer websocket's path; every other path is plain HTTP."""

_STATIC: dict[str, tuple[str, str]] = {
    "/": ("dashboard.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/match.js": ("match.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
"""URL path → (file in ``server/dashboard/static``, content type). ``/`` needs the token; the rest is public code."""

_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""No inline script, no third party: the page can talk only to this port (CSP 3 ``'self'`` covers ws://)."""


class DashboardHttp:
    """Answers the dashboard port's HTTP requests; ``None`` lets an observer upgrade.

    Args:
        host: the server shown (its health, its admission, where refusals are counted).
        token: the token the page and the observer socket need (``None``: none, loopback only).
        max_observers: open observers beyond which an upgrade gets HTTP 503.
    """

    def __init__(self, host: DashboardHost, token: str | None, max_observers: int) -> None:
        self.host = host
        self._token = token
        self._max_observers = max_observers
        self._files = _load_static()

    def answer(self, connection: ServerConnection, request: Request, observers: int, closing: bool) -> Response | None:
        """The response to ``request``, or ``None`` to upgrade it to the observer websocket.

        ``observers`` (open now) and ``closing`` (the dashboard is shutting down) are the
        server's state the gate needs; it holds none of its own.
        """
        server = self.host
        path = urllib.parse.urlsplit(request.path).path
        if path == "/healthz":
            healthy, body = server.stats().health()
            body["observers"] = observers
            status = http.HTTPStatus.OK if healthy else http.HTTPStatus.SERVICE_UNAVAILABLE
            return page_response(status, json_body(body), "application/json")
        if path in _STATIC and path != "/":
            name, content_type = _STATIC[path]
            return page_response(http.HTTPStatus.OK, self._files[name], content_type, cache=True)
        if path == "/favicon.ico":
            return page_response(http.HTTPStatus.NO_CONTENT, b"")
        if path not in ("/", OBSERVE_PATH):
            return page_response(http.HTTPStatus.NOT_FOUND, "not found\n")
        if not self._host_allowed(request):
            server.metrics.inc("observers_rejected", reason="host")
            return page_response(http.HTTPStatus.FORBIDDEN, "unexpected Host header\n")
        authorized = self._authorized(request)
        # The bot port's admission, shared: bad tokens here count toward the same per-address
        # block, so a second port is no second chance at guessing the token.
        refusal = server.admission.check(peer_address(connection), authorized)
        if refusal is not None:
            server.metrics.inc("observers_rejected", reason="rate_limited")
            response = page_response(http.HTTPStatus(refusal.status), refusal.reason + "\n")
            if refusal.retry_after is not None:
                response.headers["Retry-After"] = str(refusal.retry_after)
            return response
        if not authorized:
            server.metrics.inc("observers_rejected", reason="unauthorized")
            response = page_response(http.HTTPStatus.UNAUTHORIZED, "missing or invalid token\n")
            response.headers["WWW-Authenticate"] = 'Bearer realm="arena"'
            return response
        if path == "/":
            name, content_type = _STATIC[path]
            response = page_response(http.HTTPStatus.OK, self._files[name], content_type)
            response.headers["Content-Security-Policy"] = _PAGE_CSP
            response.headers["X-Frame-Options"] = "DENY"
            return response
        if not self._same_origin(request):
            server.metrics.inc("observers_rejected", reason="origin")
            return page_response(http.HTTPStatus.FORBIDDEN, "cross-origin observer refused\n")
        if closing:
            return page_response(http.HTTPStatus.SERVICE_UNAVAILABLE, "dashboard shutting down\n")
        if observers >= self._max_observers:
            server.metrics.inc("observers_rejected", reason="capacity")
            return page_response(http.HTTPStatus.SERVICE_UNAVAILABLE, "too many observers\n")
        return None  # upgrade to the observer websocket

    def _authorized(self, request: Request) -> bool:
        """Bearer header (as bots) or ``?token=`` (browsers cannot set headers on a websocket)."""
        if self._token is None:
            return True
        if bearer_matches(request.headers, self._token):
            return True
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.path).query, max_num_fields=8)
        supplied = query.get("token", [""])[-1]
        return secret_matches(supplied, self._token)

    def _same_origin(self, request: Request) -> bool:
        """A browser's websocket must come from this page (cross-site websocket hijacking)."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True  # not a browser: auth alone decides
        return urllib.parse.urlsplit(origin).netloc.lower() == request.headers.get("Host", "").lower()

    def _host_allowed(self, request: Request) -> bool:
        """Without a token, only loopback host names (a DNS-rebinding page names its own host)."""
        if self._token is not None:
            return True
        return is_loopback(urllib.parse.urlsplit("//" + request.headers.get("Host", "")).hostname or "")


def static_asset(name: str) -> bytes:
    """One of the page's files by name, e.g. ``match.js`` (``drawFrame``, which ``arena replay`` reuses)."""
    if name not in {file for file, _ in _STATIC.values()}:
        raise KeyError(f"no dashboard asset named {name!r}")
    return (importlib.resources.files("server.dashboard") / "static" / name).read_bytes()


def _load_static() -> dict[str, bytes]:
    """The page's files, read once (a few KiB): serving them never touches the disk."""
    folder = importlib.resources.files("server.dashboard") / "static"
    return {name: (folder / name).read_bytes() for name, _ in _STATIC.values()}
