"""Per-address admission (server/admission.py) with an injected clock: blocks, caps, the handshake rate, exemptions.

The live server's 429 and TLS are tested over sockets in tests/reliability/test_tls_admission.py
(and the attack cases H11, H16 in tests/reliability/test_hostile.py).
"""

from __future__ import annotations

from server.admission import Admission


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_auth_failures_block_the_address_then_expire():
    clock = _Clock()
    admission = Admission(max_per_address=8, handshakes_per_s=None, limit_loopback=True, clock=clock)
    for _ in range(5):
        assert admission.check("10.0.0.1", authorized=False) is None  # answered 401 by the server
    refusal = admission.check("10.0.0.1", authorized=True)
    assert refusal is not None and refusal.status == 429 and refusal.retry_after == 60
    assert admission.check("10.0.0.2", authorized=True) is None  # other addresses are unaffected
    clock.now += 61
    assert admission.check("10.0.0.1", authorized=True) is None


def test_failures_outside_the_window_do_not_add_up():
    clock = _Clock()
    admission = Admission(handshakes_per_s=None, limit_loopback=True, clock=clock)
    for _ in range(8):
        admission.check("10.0.0.1", authorized=False)
        clock.now += 15  # 4 failures per minute at most
    assert admission.check("10.0.0.1", authorized=True) is None


def test_per_address_cap_and_handshake_rate():
    clock = _Clock()
    admission = Admission(max_per_address=2, handshakes_per_s=3, limit_loopback=True, clock=clock)
    for _ in range(2):
        assert admission.check("10.0.0.1", True) is None
        admission.opened("10.0.0.1")
    refusal = admission.check("10.0.0.1", True)
    assert refusal is not None and refusal.status == 429 and "connections" in refusal.reason
    refusal = admission.check("10.0.0.1", True)  # the 4th handshake within the same instant
    assert refusal is not None and "handshakes" in refusal.reason
    admission.closed("10.0.0.1")
    clock.now += 1
    assert admission.check("10.0.0.1", True) is None


def test_loopback_is_exempt_unless_asked():
    admission = Admission(max_per_address=1, handshakes_per_s=1)
    for _ in range(5):
        assert admission.check("127.0.0.1", False) is None
        admission.opened("127.0.0.1")
    assert admission.check("::1", True) is None


def test_retry_after_counts_down_the_block_in_whole_seconds():
    clock = _Clock()
    admission = Admission(handshakes_per_s=None, auth_failures=1, block_seconds=10.0, limit_loopback=True, clock=clock)
    admission.check("10.0.0.1", authorized=False)
    clock.now += 2.5
    refusal = admission.check("10.0.0.1", authorized=True)
    assert refusal is not None and refusal.retry_after == 8  # 7.5 s left, rounded up
    assert "failed authentications" in refusal.reason


def test_an_unknown_peer_counts_as_local_and_closing_never_goes_below_zero():
    """A unix socket's peer ('') is exempt; with ``limit_loopback`` loopback is limited like any address."""
    clock = _Clock()
    assert Admission(max_per_address=1, limit_loopback=False, clock=clock).exempt("")
    admission = Admission(max_per_address=1, handshakes_per_s=None, limit_loopback=True, clock=clock)
    admission.closed("10.0.0.9")  # never seen: nothing to do
    admission.opened("127.0.0.1")
    admission.closed("127.0.0.1")
    admission.closed("127.0.0.1")  # one close too many
    admission.opened("127.0.0.1")
    refusal = admission.check("127.0.0.1", True)
    assert refusal is not None and refusal.status == 429 and refusal.retry_after is None
