"""Container health probe for ``arena serve``: exit 0 when ``/healthz`` answers 200, else 1.

Docker runs it inside the server's container (``HEALTHCHECK`` in docker/Dockerfile).
``/healthz`` needs no token and is answered before any admission limit, so the probe
never counts against the per-address caps. Set ``ARENA_HEALTH_URL`` when the server
listens elsewhere, e.g. ``https://127.0.0.1:8765/healthz`` under ``--tls-cert``: a
loopback probe does not verify the certificate, which names the public host, not
127.0.0.1. Standard library only, so it runs with any Python in the image.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8765/healthz"
TIMEOUT_S = 4.0
"""Below the image's ``HEALTHCHECK --timeout`` (5 s), so the probe reports instead of being killed."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def probe(url: str, timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    """GET ``url``; healthy only on HTTP 200. Returns (healthy, one line for ``docker inspect``)."""
    parts = urllib.parse.urlsplit(url)
    context = None
    if parts.scheme == "https" and _is_loopback(parts.hostname or ""):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            body = response.read(4096).decode("utf-8", "replace").strip()
            return response.status == 200, f"{response.status} {body}"
    except urllib.error.HTTPError as exc:  # 503: the trainer is dead or restarting
        return False, f"{exc.code} {exc.read(4096).decode('utf-8', 'replace').strip()}"
    except (OSError, ValueError) as exc:  # refused, timed out, TLS error, bad URL
        return False, f"unreachable: {exc}"


def main() -> int:
    healthy, line = probe(os.environ.get("ARENA_HEALTH_URL", DEFAULT_URL))
    print(line)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
