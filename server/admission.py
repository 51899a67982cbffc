"""Per-address admission control for the HTTP handshake (sans-I/O; the clock is injected).

websockets leaves denial-of-service protection to a proxy; these are cheap first lines of
defence that run before any websocket exists (docs/security.md, "Limits"):

- at most ``max_per_address`` open connections from one address (HTTP 429);
- at most ``handshakes_per_s`` handshakes per second from one address, bursts of the same
  size (a token bucket; HTTP 429);
- ``auth_failures`` bad tokens within ``auth_window`` seconds block the address for
  ``block_seconds`` (HTTP 429 with ``Retry-After``), even with a good token: brute force
  gets nowhere, while other addresses are unaffected.

Loopback addresses are exempt unless ``limit_loopback``: local bots (``arena train``) and a
reverse proxy on the same host all arrive from 127.0.0.1, and the proxy is where per-client
limits belong in that deployment.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Admission", "Refusal"]

_PRUNE_ABOVE = 4096
"""Addresses tracked before idle entries are pruned (an address flood cannot grow memory)."""


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str
    retry_after: int | None = None


@dataclass
class _Address:
    open: int = 0
    tokens: float = 0.0
    refilled: float = 0.0
    failures: deque[float] = field(default_factory=deque)
    blocked_until: float = -math.inf


class Admission:
    def __init__(
        self,
        max_per_address: int | None = 8,
        handshakes_per_s: float | None = 20.0,
        auth_failures: int = 5,
        auth_window: float = 60.0,
        block_seconds: float = 60.0,
        limit_loopback: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_per_address = max_per_address
        self.handshakes_per_s = handshakes_per_s
        self.auth_failures = auth_failures
        self.auth_window = auth_window
        self.block_seconds = block_seconds
        self.limit_loopback = limit_loopback
        self._clock = clock
        self._addresses: dict[str, _Address] = {}

    def exempt(self, address: str) -> bool:
        if self.limit_loopback:
            return False
        try:
            return ipaddress.ip_address(address).is_loopback
        except ValueError:  # a unix socket or an unknown peer: treat as local
            return True

    def _entry(self, address: str) -> _Address:
        entry = self._addresses.get(address)
        if entry is None:
            if len(self._addresses) >= _PRUNE_ABOVE:
                self._prune()
            entry = self._addresses[address] = _Address(tokens=self.handshakes_per_s or 0.0, refilled=self._clock())
        return entry

    def _prune(self) -> None:
        now = self._clock()
        for address in [a for a, e in self._addresses.items() if e.open == 0 and e.blocked_until < now and not e.failures]:
            del self._addresses[address]

    def check(self, address: str, authorized: bool) -> Refusal | None:
        """Decide a handshake from ``address``; ``None`` admits it (call :meth:`opened` once it is open)."""
        if self.exempt(address):
            return None
        now = self._clock()
        entry = self._entry(address)
        if entry.blocked_until > now:
            return Refusal(429, "too many failed authentications from your address", math.ceil(entry.blocked_until - now))
        if self.handshakes_per_s is not None:
            rate = self.handshakes_per_s
            entry.tokens = min(rate, entry.tokens + (now - entry.refilled) * rate)
            entry.refilled = now
            if entry.tokens < 1.0:
                return Refusal(429, "too many handshakes from your address", 1)
            entry.tokens -= 1.0
        if not authorized:
            entry.failures.append(now)
            while entry.failures and entry.failures[0] <= now - self.auth_window:
                entry.failures.popleft()
            if len(entry.failures) >= self.auth_failures:
                entry.failures.clear()
                entry.blocked_until = now + self.block_seconds
            return None  # the caller answers 401 for this one; later ones get 429 while blocked
        if self.max_per_address is not None and entry.open >= self.max_per_address:
            return Refusal(429, f"more than {self.max_per_address} connections from your address")
        return None

    def opened(self, address: str) -> None:
        if not self.exempt(address):
            self._entry(address).open += 1

    def closed(self, address: str) -> None:
        if self.exempt(address):
            return
        entry = self._addresses.get(address)
        if entry is not None:
            entry.open = max(0, entry.open - 1)
