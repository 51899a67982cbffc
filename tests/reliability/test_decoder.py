"""B1 of docs/reliability.md: the decoder and schema, case by case (D1–D13).

The contract (from websockets' and msgpack's OSS-Fuzz harnesses): every input either
decodes to a validated message or raises :class:`ProtocolError` with a documented
:class:`ErrorCode`. Any other exception is a failure. The oracle for "validated" is the
fuzz target's own checker (``fuzz/fuzz_decode.py``: ``one_input``, ``check_batch``), so
the Hypothesis cases here and the atheris runs of D3 enforce the same contract.

D1–D11 are sans-I/O. D10–D13 also run against a live server on 127.0.0.1 (port 0), where
each bad frame must move its ``frames_rejected{code=...}`` counter by exactly one and
enqueue nothing (``accounting()["received"]`` unchanged).

Cases already in ``tests/bot_protocol/test_messages.py`` are re-expressed here by id (so ``-k d7``
finds them); where one is covered exactly, the comment says so.

Regressions this file found and pins (fixed in the decoder): ``from_wire``'s one-pass
range check ran without ``np.errstate`` (a signalling NaN raised ``RuntimeWarning``, which
became ``error{internal}`` and close 1011 under ``-W error``) and compared float32 squares
(a value a hair above an unusual ``max_abs`` passed) — now float64 under ``errstate``
(``test_d11_no_numpy_warning_escapes_the_decoder``, ``test_d11_unusual_max_abs_*``); and
zero-length ext objects slipped past ``max_ext_len=0`` — now refused by an ``ext_hook``
(``test_d9_zero_length_ext_rejected``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import struct
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bot_protocol import (
    FLAG_TERMINAL,
    FLAG_TRUNCATED,
    N_REWARD_TERMS,
    SUBPROTOCOL,
    Architecture,
    Bye,
    Credit,
    Error,
    ErrorCode,
    Hello,
    Limits,
    ProtocolError,
    RewardMode,
    SessionSpec,
    TransitionBatch,
    TransitionHeader,
    Weights,
    Welcome,
    decode_from_bot,
    decode_from_server,
    decode_tensors,
    encode,
)
from bot_protocol.codec import MAX_CONTAINERS

from ..conftest import serving, timeout
from .conftest import ROOT, T2, examples, load_fuzz_target

MAX = 1 << 20
"""The server's default max_message_bytes (and the decoder's max_bin_len)."""
MIB = 1 << 20


FUZZ = load_fuzz_target("fuzz_decode")
SCALAR_SPEC: SessionSpec = FUZZ.SCALAR_SPEC  # obs 4, act 2, 3 agents, max_batch 64
TERMS_SPEC: SessionSpec = FUZZ.TERMS_SPEC
DECODE_CODES: frozenset[ErrorCode] = FUZZ.DECODE_CODES


def refusal(data: bytes, spec: SessionSpec | None = SCALAR_SPEC, server_side: bool = False) -> ErrorCode:
    """The code ``data`` is refused with; fails the test if it decodes or raises anything else."""
    with pytest.raises(ProtocolError) as info:
        if server_side:
            decode_from_server(data, MAX)
        else:
            decode_from_bot(data, spec, MAX)
    assert isinstance(info.value.code, ErrorCode)
    return info.value.code


def assert_refused(code: ErrorCode, data: bytes, spec: SessionSpec | None = SCALAR_SPEC, server_side: bool = False) -> None:
    assert refusal(data, spec, server_side) is code


def pk(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


# ── message strategies (D1, D2) ──────────────────────────────────────────────

u64 = st.integers(0, 2**64 - 1)
finite = st.floats(allow_nan=False, allow_infinity=False)


def text(max_size: int, min_size: int = 0) -> st.SearchStrategy[str]:
    return st.text(st.characters(exclude_categories=("Cs",)), min_size=min_size, max_size=max_size)


printable = st.text(st.characters(categories=("L", "M", "N", "P", "S"), include_characters=" "), min_size=1, max_size=64)

hellos = st.builds(
    Hello,
    name=printable,
    obs_dim=st.integers(1, 4096),
    act_dim=st.integers(1, 256),
    n_agents=st.integers(1, 4096),
    reward=st.sampled_from(RewardMode),
    client=text(64),
)
byes = st.builds(Bye, reason=text(256))
errors = st.builds(Error, code=text(64), msg=text(256), ref=st.none() | u64)
credits = st.builds(Credit, grant=st.integers(0, 1 << 16), ack=u64)
limits = st.builds(
    Limits,
    max_batch=st.integers(1, 1 << 20),
    max_message_bytes=st.integers(1024, 1 << 30),
    credit_window=st.integers(1, 1 << 16),
    max_abs=finite,
)
layer_sizes = st.lists(st.integers(1, 65536), min_size=2, max_size=8).map(tuple)
architectures = st.one_of(
    st.builds(
        Architecture,
        kind=text(64).filter(lambda k: k != "tanh_mlp"),
        layers=layer_sizes,
        activation=text(64),
        log_std_min=finite,
        log_std_max=finite,
    ),
    st.builds(
        Architecture,
        kind=st.just("tanh_mlp"),
        layers=layer_sizes,
        activation=text(64),
        act_limit=st.floats(min_value=0, exclude_min=True, allow_infinity=False),
    ),
)
explores = st.dictionaries(text(32), finite, max_size=16)
any_f32 = st.floats(width=32)  # NaN (with payloads), ±Inf, subnormals, -0.0: a weights blob carries raw bits


@st.composite
def tensor_maps(draw: st.DrawFn) -> dict[str, np.ndarray]:
    """Up to 4 named float32 tensors (0-3 dims), all cut from one ``hnp.arrays`` draw of raw float32 values."""
    names = draw(st.lists(text(16).filter(lambda name: name != "__metadata__"), unique=True, max_size=4))
    shapes = [draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)) for _ in names]
    pool = draw(hnp.arrays(np.float32, sum(int(np.prod(s)) for s in shapes), elements=any_f32))
    tensors, offset = {}, 0
    for name, shape in zip(names, shapes, strict=True):
        size = int(np.prod(shape))
        tensors[name] = pool[offset : offset + size].reshape(shape)
        offset += size
    return tensors


weights_messages = st.builds(
    Weights.pack, generation=u64, version=u64, arch=architectures, tensors=tensor_maps(), explore=explores
)
welcomes = st.builds(
    Welcome,
    bot_id=text(64),
    session=text(64),
    agent=text(64),
    limits=limits,
    credit=st.integers(0, 1 << 16),
    weights=weights_messages,
    explore=explores,
)


def f32_floor(x: float) -> float:
    """The largest float32 value <= x (Hypothesis' width-32 bounds must be float32 values)."""
    v = np.float32(x)
    if float(v) > x:
        v = np.nextafter(v, np.float32(-np.inf))
    return float(v)


def f32_within(max_abs: float) -> st.SearchStrategy[float]:
    bound = f32_floor(max_abs)
    return st.floats(min_value=-bound, max_value=bound, width=32)


specs = st.builds(
    SessionSpec,
    obs_dim=st.integers(1, 4),
    act_dim=st.integers(1, 3),
    n_agents=st.integers(1, 8),
    reward=st.sampled_from(RewardMode),
    limits=st.builds(Limits, max_batch=st.integers(1, 64)),
)


@st.composite
def batches(draw: st.DrawFn, spec: SessionSpec, elements: st.SearchStrategy[float] | None = None) -> TransitionBatch:
    """A valid batch for ``spec`` (or, with ``elements``, one whose floats come from there).

    All float columns are cut from one ``hnp.arrays`` draw (and the id columns from another):
    one array per column cost ~2 ms each, which made 1,000 examples take 20 s.
    """
    n = draw(st.integers(1, min(spec.limits.max_batch, 8)))
    floats = elements if elements is not None else f32_within(spec.limits.max_abs)
    flags = np.frombuffer(draw(st.binary(min_size=n, max_size=n)), np.uint8) % np.uint8(3)  # 0, 1 or 2
    n_trunc = int((flags == FLAG_TRUNCATED).sum())
    n_ended = int((flags != 0).sum())
    terms = spec.reward is RewardMode.TERMS
    shapes: dict[str, tuple[int, ...]] = {"obs": (n, spec.obs_dim), "act": (n, spec.act_dim), "logp": (n,)}
    shapes.update({"terms": (n, N_REWARD_TERMS), "score": (n_ended,)} if terms else {"rew": (n,)})
    shapes["next_obs"] = (n_trunc, spec.obs_dim)
    pool = draw(hnp.arrays(np.float32, sum(int(np.prod(s)) for s in shapes.values()), elements=floats))
    columns, offset = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        columns[name] = pool[offset : offset + size].reshape(shape)
        offset += size
    ids = np.frombuffer(draw(st.binary(min_size=8 * n, max_size=8 * n)), "<u4")
    return TransitionBatch(
        seq=draw(u64),
        generation=draw(u64),
        version=draw(u64),
        agent=ids[:n] % np.uint32(spec.n_agents),
        episode=ids[n:],
        flags=flags,
        **columns,
    )


spec_and_batch = specs.flatmap(lambda spec: st.tuples(st.just(spec), batches(spec)))

BATCH_COLUMNS = ("agent", "episode", "obs", "act", "logp", "flags", "rew", "terms", "next_obs", "score")


def assert_batches_bitwise_equal(a: TransitionBatch, b: TransitionBatch) -> None:
    assert (a.seq, a.generation, a.version) == (b.seq, b.generation, b.version)
    for name in BATCH_COLUMNS:
        x, y = getattr(a, name), getattr(b, name)
        if x is None:
            assert y is None, name
            continue
        assert y is not None, name
        assert x.shape == y.shape and x.dtype == y.dtype, name
        assert x.tobytes() == y.tobytes(), name


_VALID_SEEDS = {
    "hello",
    "hello_terms",
    "bye",
    "bye_empty",
    "error",
    "error_noref",
    "tr_scalar",
    "tr_scalar_one_row",
    "tr_terms",
    "tr_terms_open",
    "tr_mixed_masked_state",
    "tr_mixed_unmasked_state",
    "credit",
    "weights",
    "weights_tanh",
    "welcome",
}


def frame_pool(count: int = 400, seed: int = 0) -> list[bytes]:
    """Valid frames of every type built with numpy randomness (deterministic): the committed seeds, and
    hello/bye/error/credit/weights/welcome/tr (both specs, 1-64 rows, random flags) with random fields.
    Drawing from this pool costs Hypothesis one integer, so D1's 5,000 T1 examples spend their time
    decoding rather than generating; T2 adds fully Hypothesis-built frames."""
    rng = np.random.default_rng(seed)
    frames = list(VALID_SEED_FRAMES)
    words = ["bot", "ü-bot 🤖", "x" * 64, "", "a b", "名前"]
    for i in range(count):
        kind = i % 7
        if kind == 0:
            name = words[int(rng.integers(len(words)))] or "b"
            message: Any = Hello(name, int(rng.integers(1, 4097)), int(rng.integers(1, 257)), int(rng.integers(1, 4097)))
        elif kind == 1:
            message = Bye(words[int(rng.integers(len(words)))])
        elif kind == 2:
            message = Error(words[int(rng.integers(len(words)))], "m" * int(rng.integers(0, 257)), int(rng.integers(0, 2**63)))
        elif kind == 3:
            message = Credit(int(rng.integers(0, 1 << 16)), int(rng.integers(0, 2**63)))
        elif kind == 4:
            message = FUZZ._weights(int(rng.integers(0, 1000)))
        else:
            n = int(rng.integers(1, 65))
            flags = rng.choice([0, FLAG_TERMINAL, FLAG_TRUNCATED], size=n, p=[0.8, 0.1, 0.1]).tolist()
            message = FUZZ._batch(n, flags, kind == 6, int(rng.integers(0, 2**32)))
        frames.append(encode(message))
    return frames


VALID_SEED_FRAMES = sorted(data for name, data in FUZZ.seeds().items() if name.split(".")[0] in _VALID_SEEDS)
FRAME_POOL = frame_pool()
quick_frames = st.sampled_from(FRAME_POOL)
# Valid frames the fuzz-style strategies start from; T2 adds fully Hypothesis-built ones.
full_frames = st.one_of(
    hellos.map(encode),
    byes.map(encode),
    errors.map(encode),
    credits.map(encode),
    weights_messages.map(encode),
    welcomes.map(encode),
    batches(SCALAR_SPEC).map(encode),
    batches(TERMS_SPEC).map(encode),
)
valid_frames = st.one_of(quick_frames, full_frames) if T2 else quick_frames


def _flip(frame: bytes, edits: list[tuple[int, int]]) -> bytes:
    out = bytearray(frame)
    for pos, value in edits:
        out[pos % len(out)] = value
    return bytes(out)


def _flip_packed(frame: bytes, edits: bytes) -> bytes:
    """Byte edits packed 3 bytes each (2-byte position, new value): one Hypothesis draw for up to 8 edits."""
    return _flip(frame, [(int.from_bytes(edits[i : i + 2], "big"), edits[i + 2]) for i in range(0, len(edits) - 2, 3)])


d1_inputs = st.one_of(
    st.binary(max_size=2 * MAX),
    valid_frames,
    st.tuples(valid_frames, st.integers(0, 1 << 16)).map(lambda fi: fi[0][: fi[1] % (len(fi[0]) + 1)]),  # truncations
    st.tuples(valid_frames, st.binary(min_size=3, max_size=24)).map(lambda fe: _flip_packed(*fe)),  # byte flips
)


def contract(data: bytes) -> None:
    """The D1 contract on one input, through every decoder entry point (fuzz/fuzz_decode.py)."""
    FUZZ.one_input(data)
    try:
        message = decode_from_bot(data, None, MAX)  # before the handshake: no spec
    except ProtocolError as exc:
        FUZZ.check_error(exc)
    else:
        FUZZ.check_message(message, None)


# ── D1: the contract on arbitrary, valid, truncated and flipped inputs ───────


@settings(max_examples=examples(5000, 100_000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=d1_inputs)
def test_d1_any_input_decodes_or_raises_protocol_error(data):
    """Arbitrary bytes, valid frames, truncations and byte flips: a validated message or ProtocolError."""
    contract(data)


def _seed_frames() -> dict[str, bytes]:
    return {name: data for name, data in FUZZ.seeds().items() if name.endswith(".msgpack")}


def test_d1_every_truncation_and_single_byte_edit_of_each_seed_frame():
    """Exhaustively: every prefix of every seed frame, and three edits at every byte position."""
    for frame in _seed_frames().values():
        for i in range(len(frame) + 1):
            contract(frame[:i])
        for pos in range(len(frame)):
            for value in (frame[pos] ^ 0x01, frame[pos] ^ 0x80, 0xFF):
                contract(_flip(frame, [(pos, value)]))


def test_d1_valid_seed_frames_decode():
    """The committed valid seeds decode (else the exhaustive case above would prove little)."""
    ok = {
        name
        for name, frame in _seed_frames().items()
        if any(_decodes(lambda f=frame, s=s: decode_from_bot(f, s, MAX)) for s in (SCALAR_SPEC, TERMS_SPEC, FUZZ.MIXED_SPEC))
        or _decodes(lambda f=frame: decode_from_server(f, MAX))
    }
    expected = {n for n in _seed_frames() if n.split(".")[0] in _VALID_SEEDS}
    assert expected <= ok, expected - ok


def _decodes(fn: Callable[[], object]) -> bool:
    try:
        fn()
    except ProtocolError:
        return False
    return True


# ── D2: round trips, bitwise ─────────────────────────────────────────────────

D2 = settings(max_examples=examples(1000, 10_000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
D2_HEAVY = settings(max_examples=examples(300, 5_000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""weights/welcome and tr examples cost 12-14 ms each here (Hypothesis' numpy arrays): 300 in T1 keeps D2 near 15 s."""


BOT_MESSAGES = {"hello": hellos, "bye": byes, "error": errors}
SERVER_MESSAGES = {"credit": credits, "error": errors}


@pytest.mark.parametrize("kind", list(BOT_MESSAGES))
def test_d2_bot_messages_round_trip(kind):
    """hello, bye and error (bot → server), 1,000 each: decode(encode(m)) == m."""

    @D2
    @given(message=BOT_MESSAGES[kind])
    def round_trip(message):
        assert decode_from_bot(encode(message), None, MAX) == message

    round_trip()


@pytest.mark.parametrize("kind", list(SERVER_MESSAGES))
def test_d2_small_server_messages_round_trip(kind):
    """credit and error (server → bot), 1,000 each: decode(encode(m)) == m."""

    @D2
    @given(message=SERVER_MESSAGES[kind])
    def round_trip(message):
        assert decode_from_server(encode(message), MAX) == message

    round_trip()


def _assert_tensors_round_trip(weights: Weights, tensors: dict[str, np.ndarray]) -> None:
    decoded = decode_tensors(weights.tensors)
    assert decoded.keys() == tensors.keys()
    for name, array in tensors.items():
        assert decoded[name].shape == array.shape
        assert decoded[name].tobytes() == np.ascontiguousarray(array, "<f4").tobytes(), name  # NaN payloads too


@D2_HEAVY
@given(
    generation=u64,
    version=u64,
    arch=architectures,
    tensors=tensor_maps(),
    explore=explores,
    limits=limits,
    credit=st.integers(0, 8),
)
def test_d2_weights_and_welcome_round_trip_bitwise(generation, version, arch, tensors, explore, limits, credit):
    """weights and welcome: equal messages, and the float32 tensors come back bit for bit."""
    weights = Weights.pack(generation, version, arch, tensors, explore)
    out = decode_from_server(encode(weights), MAX)
    assert out == weights
    _assert_tensors_round_trip(out, tensors)
    welcome = Welcome("bot-1", "0123456789abcdef", "ppo", limits, credit, weights, explore)
    out_welcome = decode_from_server(encode(welcome), MAX)
    assert out_welcome == welcome
    _assert_tensors_round_trip(out_welcome.weights, tensors)


@D2_HEAVY
@given(spec_batch=spec_and_batch)
def test_d2_transition_batch_round_trip_bitwise(spec_batch):
    """tr (scalar and terms sessions): every column survives encode → decode bit for bit."""
    spec, batch = spec_batch
    out = decode_from_bot(encode(batch), spec, MAX)
    assert isinstance(out, TransitionBatch)
    assert_batches_bitwise_equal(batch, out)


# ── D3: the atheris targets, briefly (T1) or for 30 minutes (T2) ─────────────


def _atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def test_d3_fuzz_smoke(tmp_path):
    """Both fuzz targets run side by side (2 cores): atheris for 5 s each in T1 (30 min in T2),
    or, without atheris, the plain-Python self-test over the corpus plus random mutations.
    Any crash, timeout (> 1 s per input) or RSS above 1 GiB fails."""
    seconds = int(os.environ.get("ARENA_FUZZ_SECONDS", 1800 if T2 else 5))
    use_atheris = _atheris_available()
    procs = {}
    started = time.monotonic()
    for target, corpus in (("fuzz_decode", "decode"), ("fuzz_weights", "weights")):
        work = tmp_path / target
        (work / "new").mkdir(parents=True)
        common = ["-rss_limit_mb=1024", "-timeout=1", f"-max_len={MAX}", f"-artifact_prefix={work}/"]
        if use_atheris:  # new inputs go to the first (scratch) dir; the committed corpus is only read
            args = [f"-max_total_time={seconds}", *common, str(work / "new"), str(ROOT / "fuzz" / "corpus" / corpus)]
        else:
            budget = f"-max_total_time={seconds}" if T2 else "-runs=20000"
            args = ["--self-test", budget, "-seed=1", *common, str(ROOT / "fuzz" / "corpus" / corpus)]
        procs[target] = subprocess.Popen(
            [sys.executable, str(ROOT / "fuzz" / f"{target}.py"), *args],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    failures = []
    try:
        for target, proc in procs.items():
            try:
                out, _ = proc.communicate(timeout=timeout(seconds + 120))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                failures.append(f"{target}: hung\n{out[-3000:]}")
                continue
            work = tmp_path / target
            artifacts = sorted(p.name for p in work.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-")))
            # libFuzzer's own closing words are not ours to assert: under atheris, "finished" is a clean exit
            # after the whole time budget (an early exit 0 would mean the fuzzer never ran); the self-test prints ours.
            finished = time.monotonic() - started >= 0.9 * seconds if use_atheris else "0 crashes" in out
            if proc.returncode != 0 or artifacts or not finished:
                failures.append(f"{target}: exit {proc.returncode}, artifacts {artifacts}\n{out[-3000:]}")
    finally:
        for proc in procs.values():  # never leave a fuzzer running after a failure
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert not failures, "\n\n".join(failures)


def test_d3_committed_corpus_matches_the_seed_generators():
    """fuzz/corpus holds every seed the targets generate (rerun --make-corpus after changing seeds())."""
    for target, corpus in (("fuzz_decode", "decode"), ("fuzz_weights", "weights")):
        module = FUZZ if target == "fuzz_decode" else load_fuzz_target(target)
        directory = ROOT / "fuzz" / "corpus" / corpus
        missing = [name for name in module.seeds() if not (directory / name).is_file()]
        assert not missing, f"{directory}: missing {missing}; run python fuzz/{target}.py --make-corpus"


# ── D4: amplification frames ─────────────────────────────────────────────────


def _timed_refusals(data: bytes, code: ErrorCode, calls: int) -> list[float]:
    """Wall time of ``calls`` refusals, after one untimed warm-up call."""
    times = []
    for _ in range(calls + 1):
        start = time.perf_counter()
        try:
            decode_from_bot(data, SCALAR_SPEC, MAX)
        except ProtocolError as exc:
            assert exc.code is code
        else:
            raise AssertionError("decoded")
        times.append(time.perf_counter() - start)
    return times[1:]


def _peak_bytes(data: bytes) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with contextlib.suppress(ProtocolError):
            decode_from_bot(data, SCALAR_SPEC, MAX)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


ENVELOPE = b"\x83" + pk("v") + pk(1) + pk("t") + pk("hello") + pk("x")
"""A map of three entries whose third value follows: frames that look like a real message up front."""

AMPLIFIERS = {
    **{f"array32 of {b:#04x}": b"\xdd" + struct.pack(">I", MIB) + bytes([b]) * MIB for b in (0x90, 0x80, 0xC0)},
    **{f"map32 of {b:#04x}": b"\xdf" + struct.pack(">I", MIB // 2) + bytes([b]) * MIB for b in (0x90, 0x80, 0xC0)},
    **{f"hello.x = array32 of {b:#04x}": ENVELOPE + b"\xdd" + struct.pack(">I", MIB) + bytes([b]) * MIB for b in (0x90, 0x80)},
    # Headers within the 64-entry limit: the container counter (MAX_CONTAINERS) must stop it early.
    "array32(64) of 0x90 + 1 MiB": b"\xdd" + struct.pack(">I", 64) + b"\x90" * MIB,
    # The worst case measured: arrays of the maximum length (64) nested to msgpack's depth cap (1024)
    # before any container completes: ~0.2-0.35 ms and a 552 KiB peak (msgpack's own stack).
    "array32(64) of array16(64) ...": b"\xdd\x00\x00\x00\x40" + b"\xdc\x00\x40" * (MIB // 3),
    "map16(64) chain": b"\xde\x00\x40\xa1a" * (MIB // 5),
    "map32(32) of {str: 0x80}": b"\xdf\x00\x00\x00\x20" + b"\xa1k\x80" * (MIB // 3),
}


@pytest.mark.parametrize("name", list(AMPLIFIERS))
def test_d4_amplification_frames_rejected_fast_and_small(name):
    """1 MiB of 0x90/0x80/0xc0 in an array32/map32 (bare or in a hello): undecodable in < 1 ms
    (median; M11 measured 194 ms and 72 MiB with msgpack's defaults) with a tracemalloc peak < 1 MiB.
    Covered in part by tests/bot_protocol/test_codec.py::test_amplification_frame_rejected_cheaply."""
    data = AMPLIFIERS[name]
    times = _timed_refusals(data, ErrorCode.UNDECODABLE, 30)
    assert statistics.median(times) < 1e-3, f"median {statistics.median(times) * 1e3:.3f} ms"
    p90 = statistics.quantiles(times, n=10)[-1]  # one preemption on a loaded 2-core runner is not the decoder
    assert p90 < timeout(0.02), f"p90 {p90 * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms"
    assert _peak_bytes(data) < MIB


# ── D5: 4 G length headers ───────────────────────────────────────────────────

GIANT_HEADERS = {
    "array32": b"\xdd\xff\xff\xff\xff",
    "map32": b"\xdf\xff\xff\xff\xff",
    "str32": b"\xdb\xff\xff\xff\xff",
    "bin32": b"\xc6\xff\xff\xff\xff",
    "ext32": b"\xc9\xff\xff\xff\xff\x01",
}


@pytest.mark.parametrize("where", ["bare", "in hello"])
@pytest.mark.parametrize("kind", list(GIANT_HEADERS))
def test_d5_4g_length_headers_rejected_without_allocating(kind, where):
    """A 5–6 byte header claiming 4 G elements/bytes: undecodable in < 0.1 ms, nothing above 64 KiB
    allocated. Bare headers are also in tests/bot_protocol/test_codec.py::test_garbage_and_giant_headers_rejected."""
    data = GIANT_HEADERS[kind] if where == "bare" else ENVELOPE + GIANT_HEADERS[kind] + b"\x00" * 64
    times = _timed_refusals(data, ErrorCode.UNDECODABLE, 200)
    assert statistics.median(times) < 1e-4, f"median {statistics.median(times) * 1e6:.1f} µs"
    assert _peak_bytes(data) < 64 * 1024


# ── D6: nesting ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize("depth", [MAX_CONTAINERS + 1, 1025, 100_000])
@pytest.mark.parametrize(
    "unit", [b"\x91", b"\x81\xa1a", b"\x92\xc0", b"\x82\xa1v\x01\xa1a"], ids=["array", "map", "array2", "map2"]
)
def test_d6_deep_nesting_rejected(unit, depth):
    """1,025 and 100,000 levels (and just past MAX_CONTAINERS) of arrays or maps: undecodable, fast.
    Also in tests/bot_protocol/test_codec.py::test_deep_nesting_rejected (maps only)."""
    data = unit * depth + b"\xc0"
    start = time.perf_counter()
    assert_refused(ErrorCode.UNDECODABLE, data)
    assert_refused(ErrorCode.UNDECODABLE, ENVELOPE + data, None)
    assert time.perf_counter() - start < timeout(0.5)


def test_d6_schema_depth_is_accepted():
    """The limit is not tighter than the schema: welcome → weights → arch → layers decodes (depth 4)."""
    welcome = decode_from_server(FUZZ.seeds()["welcome.msgpack"], MAX)
    assert isinstance(welcome, Welcome) and len(welcome.weights.arch.layers) == 3


# ── D7: trailing bytes ───────────────────────────────────────────────────────

FROM_BOT = ["hello", "bye", "error", "tr_scalar"]
FROM_SERVER = ["credit", "weights", "welcome", "error"]


@pytest.mark.parametrize(
    "tail", [b"\x00", b"\xc0", b"\xc1", b"\x80", None], ids=["0x00", "nil", "0xc1", "empty-map", "frame-again"]
)
def test_d7_trailing_bytes_rejected(tail):
    """Any byte after a valid message, or a second message, is undecodable, for every message type.
    (tests/bot_protocol/test_codec.py::test_trailing_bytes_rejected covers hello + 0x00.)"""
    seeds = FUZZ.seeds()
    for name in FROM_BOT:
        frame = seeds[f"{name}.msgpack"]
        assert_refused(ErrorCode.UNDECODABLE, frame + (frame if tail is None else tail))
    for name in FROM_SERVER:
        frame = seeds[f"{name}.msgpack"]
        assert_refused(ErrorCode.UNDECODABLE, frame + (frame if tail is None else tail), server_side=True)


# ── D8: non-string map keys ──────────────────────────────────────────────────

BAD_KEYS = {
    "int": b"\x01",
    "negative int": b"\xff",
    "uint64": b"\xcf" + b"\xff" * 8,
    "float64": b"\xcb" + struct.pack(">d", 1.5),
    "float32": b"\xca" + struct.pack(">f", 1.5),
    "bin": b"\xc4\x01v",
    "bin 't'": b"\xc4\x01t",
    "array": b"\x91\x01",
    "empty array": b"\x90",
    "map": b"\x81\xa1a\x01",
    "nil": b"\xc0",
    "true": b"\xc3",
}


@pytest.mark.parametrize("key", list(BAD_KEYS))
def test_d8_non_string_keys_rejected_at_every_level(key):
    """int, float, bin, array, map, nil and bool keys: undecodable at the top level, in a nested map,
    and inside a server frame's nested maps (weights.arch). Partly in tests/bot_protocol/test_codec.py."""
    raw = BAD_KEYS[key]
    top = b"\x83" + pk("v") + pk(1) + pk("t") + pk("bye") + raw + pk(1)
    nested = b"\x83" + pk("v") + pk(1) + pk("t") + pk("bye") + pk("x") + b"\x81" + raw + pk(1)
    assert_refused(ErrorCode.UNDECODABLE, top)
    assert_refused(ErrorCode.UNDECODABLE, nested)
    weights = msgpack.unpackb(FUZZ.seeds()["weights.msgpack"], raw=False)
    arch_fields = weights["arch"]
    arch = bytes([0x80 | len(arch_fields)])
    arch += b"".join(pk(k) + pk(v) for k, v in arch_fields.items() if k != "activation") + raw + pk("tanh")
    frame = bytes([0x80 | len(weights)]) + b"".join(pk(k) + (arch if k == "arch" else pk(v)) for k, v in weights.items())
    assert_refused(ErrorCode.UNDECODABLE, frame, server_side=True)


def test_d8_bin_key_cannot_stand_in_for_a_str_key():
    """{b"v": 1, b"t": "bye"}: msgpack's strict_map_key admits bin keys; our decoder must not."""
    assert_refused(ErrorCode.UNDECODABLE, pk({b"v": 1, b"t": "bye"}))


# ── D9: ext types ────────────────────────────────────────────────────────────

EXTS = {
    "fixext1": b"\xd4\x01\x00",
    "fixext2": b"\xd5\x01\x00\x00",
    "fixext4 timestamp32": b"\xd6\xff\x00\x00\x00\x00",
    "fixext8 timestamp64": b"\xd7\xff" + b"\x00" * 8,
    "fixext16": b"\xd8\x7f" + b"\x00" * 16,
    "ext8 timestamp96 (-1 s)": pk(msgpack.Timestamp(-1, 0)),
    "ext8 type -128": b"\xc7\x02\x80ab",
    "ext16": b"\xc8\x00\x02\x01ab",
    "ext32": b"\xc9\x00\x00\x00\x02\x01ab",
}


def test_d9_timestamp_minus_one_is_the_96_bit_form():
    assert EXTS["ext8 timestamp96 (-1 s)"][:3] == b"\xc7\x0c\xff"  # ext type -1, 12 bytes


@pytest.mark.parametrize("ext", list(EXTS))
def test_d9_ext_types_rejected(ext):
    """Every ext form (type -1 timestamps included) is undecodable: alone, as a field value, as a key.
    Partly in tests/bot_protocol/test_codec.py::test_ext_types_and_non_string_keys_rejected."""
    raw = EXTS[ext]
    assert_refused(ErrorCode.UNDECODABLE, raw)
    assert_refused(ErrorCode.UNDECODABLE, ENVELOPE + raw)
    assert_refused(ErrorCode.UNDECODABLE, b"\x83" + pk("v") + pk(1) + pk("t") + pk("bye") + raw + pk(1))
    assert_refused(ErrorCode.UNDECODABLE, ENVELOPE + raw, server_side=True)


@pytest.mark.parametrize(
    "ext", [b"\xc7\x00\x05", b"\xc8\x00\x00\x7f", b"\xc9\x00\x00\x00\x00\x01"], ids=["ext8", "ext16", "ext32"]
)
def test_d9_zero_length_ext_rejected(ext):
    """A zero-length ext as the value of an extra field of a valid hello is refused like any other ext."""
    hello = msgpack.unpackb(encode(Hello("b", 4, 2)), raw=False)
    frame = bytes([0x80 | (len(hello) + 1)]) + b"".join(pk(k) + pk(v) for k, v in hello.items()) + pk("x") + ext
    assert_refused(ErrorCode.UNDECODABLE, frame, None)


# ── D10: wrong shapes ────────────────────────────────────────────────────────


def _good_batch(n: int = 4, flags: list[int] | None = None, terms: bool = False, seq: int = 0) -> TransitionBatch:
    """A valid batch for SCALAR_SPEC / TERMS_SPEC (agents 0..2)."""
    return FUZZ._batch(n, flags or [0] * n, terms, seq)


def _batch_for(n: int, n_agents: int, seq: int) -> TransitionBatch:
    """A valid scalar batch for the live server's spec (obs 4, act 2, ``n_agents`` from our hello)."""
    rng = np.random.default_rng(seq)
    return TransitionBatch(
        seq=seq,
        generation=0,
        version=0,
        agent=(np.arange(n) % n_agents).astype(np.uint32),
        episode=np.zeros(n, np.uint32),
        obs=rng.standard_normal((n, 4)).astype(np.float32),
        act=rng.standard_normal((n, 2)).astype(np.float32),
        logp=rng.standard_normal(n).astype(np.float32),
        flags=np.zeros(n, np.uint8),
        rew=rng.standard_normal(n).astype(np.float32),
        next_obs=np.zeros((0, 4), np.float32),
    )


def _mutated(batch: TransitionBatch, changes: dict[str, Any]) -> bytes:
    fields = msgpack.unpackb(encode(batch), raw=False)
    for key, value in changes.items():
        if value is _DROP:
            fields.pop(key)
        else:
            fields[key] = value
    return pk(fields)


_DROP = object()
f4 = np.float32


def _zeros(*shape: int, dtype: Any = f4) -> bytes:
    return np.zeros(shape, dtype).tobytes()


# (name, changes for a 4-row scalar batch with obs_dim 4, act_dim 2, code)
D10_CASES: list[tuple[str, dict[str, Any], ErrorCode]] = [
    ("obs one byte long", {"obs": _zeros(4, 4) + b"\x00"}, ErrorCode.SHAPE),
    ("obs one byte short", {"obs": _zeros(4, 4)[:-1]}, ErrorCode.SHAPE),
    ("obs one float long (not a multiple of 4*obs_dim)", {"obs": _zeros(4 * 4 + 1)}, ErrorCode.SHAPE),
    ("obs one row short", {"obs": _zeros(3, 4)}, ErrorCode.SHAPE),
    ("obs with obs_dim+1 columns", {"obs": _zeros(4, 5)}, ErrorCode.SHAPE),
    ("obs as float64", {"obs": _zeros(4, 4, dtype=np.float64)}, ErrorCode.SHAPE),
    ("obs as float16", {"obs": _zeros(4, 4, dtype=np.float16)}, ErrorCode.SHAPE),
    ("client-declared obs_dim is ignored", {"obs": _zeros(4, 5), "obs_dim": 5, "shape": [4, 5]}, ErrorCode.SHAPE),
    ("act with act_dim+1 columns", {"act": _zeros(4, 3)}, ErrorCode.SHAPE),
    ("act with act_dim-1 columns", {"act": _zeros(4, 1)}, ErrorCode.SHAPE),
    ("act as float64", {"act": _zeros(4, 2, dtype=np.float64)}, ErrorCode.SHAPE),
    ("logp 2-D", {"logp": _zeros(4, 2)}, ErrorCode.SHAPE),
    ("rew as float64", {"rew": _zeros(4, dtype=np.float64)}, ErrorCode.SHAPE),
    ("rew empty", {"rew": b""}, ErrorCode.SHAPE),
    ("agent one short", {"agent": _zeros(3, dtype=np.uint32)}, ErrorCode.SHAPE),
    ("episode as uint64", {"episode": _zeros(4, dtype=np.uint64)}, ErrorCode.SHAPE),
    ("flags one short", {"flags": bytes(3)}, ErrorCode.SHAPE),
    ("n larger than the columns", {"n": 5}, ErrorCode.SHAPE),
    ("n smaller than the columns", {"n": 3}, ErrorCode.SHAPE),
    ("n zero", {"n": 0}, ErrorCode.BAD_FIELD),
    ("n negative", {"n": -1}, ErrorCode.BAD_FIELD),
    ("n missing", {"n": _DROP}, ErrorCode.BAD_FIELD),
    ("n float", {"n": 4.0}, ErrorCode.BAD_FIELD),
    ("n bool", {"n": True}, ErrorCode.BAD_FIELD),
    ("n string", {"n": "4"}, ErrorCode.BAD_FIELD),
    ("n = max_batch + 1", {"n": 1025}, ErrorCode.BAD_FIELD),
    ("n = 2**64 - 1", {"n": 2**64 - 1}, ErrorCode.BAD_FIELD),
    ("flag 3 (both bits)", {"flags": bytes([0, 3, 0, 0])}, ErrorCode.BAD_FIELD),
    ("flag 4", {"flags": bytes([0, 4, 0, 0])}, ErrorCode.BAD_FIELD),
    ("flag 255", {"flags": bytes([255, 0, 0, 0])}, ErrorCode.BAD_FIELD),
    ("flags as an array", {"flags": [0, 0, 0, 0]}, ErrorCode.BAD_FIELD),
    ("flags missing", {"flags": _DROP}, ErrorCode.BAD_FIELD),
    ("obs as a msgpack array of floats", {"obs": [0.0] * 16}, ErrorCode.BAD_FIELD),
    ("obs as str", {"obs": "\x00" * 64}, ErrorCode.BAD_FIELD),
    ("obs missing", {"obs": _DROP}, ErrorCode.BAD_FIELD),
    ("truncation without next_obs", {"flags": bytes([0, 2, 0, 0])}, ErrorCode.SHAPE),
    ("truncation with 2 next_obs rows", {"flags": bytes([0, 2, 0, 0]), "next_obs": _zeros(2, 4)}, ErrorCode.SHAPE),
    ("next_obs rows without a truncation", {"next_obs": _zeros(1, 4)}, ErrorCode.SHAPE),
    ("terms in a scalar session", {"terms": _zeros(4, 5)}, ErrorCode.BAD_FIELD),
]


@pytest.mark.parametrize(("changes", "code"), [pytest.param(c, k, id=n) for n, c, k in D10_CASES])
def test_d10_wrong_shapes_refused(changes, code):
    """Shapes come from the session spec, never from the bot: every mismatch is shape or bad_field.
    Many of these are also in tests/bot_protocol/test_transitions.py::test_batch_shape_and_field_checks."""
    frame = _mutated(_good_batch(), changes)
    assert decode_from_bot(encode(_good_batch()), SCALAR_SPEC, MAX).n == 4  # the unmutated frame is fine
    assert_refused(code, frame)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"score": _zeros(1)}, ErrorCode.SHAPE),  # two rows end: two scores
        ({"score": _DROP}, ErrorCode.SHAPE),  # left out while rows end: a row count of 0 (§7.1)
        ({"terms": _zeros(4, 4)}, ErrorCode.SHAPE),
        ({"terms": _zeros(4, 5, dtype=np.float64)}, ErrorCode.SHAPE),
        ({"rew": _zeros(4)}, ErrorCode.BAD_FIELD),
        ({"next_obs": _zeros(2, 4)}, ErrorCode.SHAPE),
    ],
)
def test_d10_wrong_shapes_refused_in_terms_sessions(changes, code):
    """The terms-reward columns (terms, score, next_obs) are shape-checked the same way."""
    batch = _good_batch(4, [FLAG_TERMINAL, 0, FLAG_TRUNCATED, 0], terms=True)
    assert decode_from_bot(encode(batch), TERMS_SPEC, MAX).n == 4
    assert_refused(code, _mutated(batch, changes), TERMS_SPEC)


_FIELD_VALUES = st.one_of(
    st.just(_DROP),
    st.none(),
    st.booleans(),
    st.integers(-2, 2**64 + 1),
    st.floats(allow_nan=False),
    st.binary(max_size=200),
    st.sampled_from([b"", bytes(4), bytes(16), bytes(32), bytes(64), bytes(80), bytes(128)]),
    st.lists(st.integers(0, 3), max_size=5),
)
_TR_KEYS = ("n", "agent", "episode", "flags", "seq", "gen", "ver", "obs", "act", "logp", "rew", "terms", "score", "next_obs")


def _header_or_error(read: Callable[[], TransitionHeader]) -> tuple[str, Any]:
    try:
        header = read()
    except ProtocolError as exc:
        return ("error", (exc.code, exc.message))
    return ("header", (header.seq, header.generation, header.version, header.n, header.agent, header.episode,
                       header.flags, list(header.columns.items())))  # fmt: skip


@D2
@example(terms=False, flags=[FLAG_TERMINAL], changes={"next_obs": None})  # found by CI: nil is not absent
@example(terms=True, flags=[FLAG_TERMINAL], changes={"next_obs": None})
@example(terms=True, flags=[0], changes={"score": None})
@given(
    terms=st.booleans(),
    flags=st.lists(st.sampled_from([0, 0, 0, FLAG_TERMINAL, FLAG_TRUNCATED, 3]), min_size=1, max_size=6),
    changes=st.dictionaries(st.sampled_from(_TR_KEYS), _FIELD_VALUES, max_size=3),
)
def test_d10_fast_path_and_checked_reader_agree(terms, flags, changes):
    """TransitionHeader.from_wire's inline fast path gives exactly the reference reader's answer:
    the same header (columns in the same order), or the same error code and message."""
    valid = [f if f in (0, FLAG_TERMINAL, FLAG_TRUNCATED) else 0 for f in flags]
    batch = _good_batch(len(flags), valid, terms=terms)
    fields = msgpack.unpackb(encode(batch), raw=False)
    if flags != valid:
        fields["flags"] = bytes(flags)
    for key, value in changes.items():
        if value is _DROP:
            fields.pop(key, None)
        else:
            fields[key] = value
    spec = TERMS_SPEC if terms else SCALAR_SPEC
    fast = _header_or_error(lambda: TransitionHeader.from_wire(fields, spec))
    checked = _header_or_error(lambda: TransitionHeader._from_wire_checked(fields, spec))
    assert fast == checked


def test_d10_batch_larger_than_a_small_max_batch():
    """A consistent batch one row over the session's max_batch is refused (bad_field), at the limit accepted."""
    spec = SessionSpec(4, 2, 3, RewardMode.SCALAR, Limits(max_batch=8))
    assert decode_from_bot(encode(_good_batch(8)), spec, MAX).n == 8
    assert_refused(ErrorCode.BAD_FIELD, encode(_good_batch(9)), spec)


# ── D11: NaN, ±Inf and |x| > max_abs ─────────────────────────────────────────

NAN_BITS = st.builds(
    lambda sign, mantissa: (sign << 31) | (0xFF << 23) | mantissa, st.integers(0, 1), st.integers(1, 2**23 - 1)
)
INF_BITS = st.sampled_from([0x7F800000, 0xFF800000])


def _beyond(max_abs: float) -> st.SearchStrategy[int]:
    """Bit patterns of finite float32 values with |x| > max_abs."""
    lo = float(np.nextafter(np.float32(max_abs), np.float32(np.inf)))
    if np.float32(lo) <= max_abs:
        lo = float(np.nextafter(np.float32(lo), np.float32(np.inf)))
    big = st.floats(min_value=lo, max_value=float(np.finfo(np.float32).max), width=32)
    return st.tuples(big, st.booleans()).map(lambda v: int(np.array(-v[0] if v[1] else v[0], np.float32).view(np.uint32)))


SOUND_MAX_ABS = st.floats(float(np.float32(1e-3)), float(np.float32(3e38)), width=32)
"""max_abs values the one-pass check handles: float32 values not tiny (the test below covers the others)."""


@st.composite
def poisoned(draw: st.DrawFn) -> tuple[SessionSpec, bytes, str, ErrorCode]:
    """A valid batch with one float (field and position chosen by Hypothesis) made NaN, ±Inf or too big."""
    reward = draw(st.sampled_from(RewardMode))
    max_abs = draw(st.sampled_from([1e6, 1.0, 1e3]) | SOUND_MAX_ABS)
    spec = SessionSpec(draw(st.integers(1, 6)), draw(st.integers(1, 3)), 3, reward, Limits(max_batch=32, max_abs=max_abs))
    batch = draw(batches(spec))
    columns = [name for name in ("obs", "act", "logp", "rew", "terms", "next_obs", "score") if _size(batch, name)]
    name = draw(st.sampled_from(columns))
    kind = draw(st.sampled_from(["nan", "inf", "range"]))
    if kind == "range" and max_abs >= float(np.finfo(np.float32).max):
        kind = "inf"
    bits = draw({"nan": NAN_BITS, "inf": INF_BITS, "range": _beyond(max_abs)}[kind])
    column = getattr(batch, name).copy()
    column.reshape(-1).view(np.uint32)[draw(st.integers(0, column.size - 1))] = bits
    code = ErrorCode.RANGE if kind == "range" else ErrorCode.NONFINITE
    return spec, _mutated(batch, {name: column.tobytes()}), name, code


def _size(batch: TransitionBatch, name: str) -> int:
    column = getattr(batch, name)
    return 0 if column is None else column.size


@settings(max_examples=examples(200, 20_000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=poisoned())
def test_d11_bad_value_in_any_float_field_at_any_position(case):
    """NaN (any payload, either sign), ±Inf or a finite |x| > max_abs in any float column at any
    row/column: refused as nonfinite or range (the exact code for the kind). 100% rejected."""
    spec, frame, _name, code = case
    assert_refused(code, frame, spec)


@settings(max_examples=examples(200, 20_000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_d11_nothing_non_finite_or_out_of_range_ever_passes(data):
    """Property: batches of arbitrary float32 bits either decode with every value finite and within
    ±max_abs, or are refused as nonfinite/range. Nothing non-finite ever leaves from_wire."""
    max_abs = data.draw(st.sampled_from([1e6, 1.0]) | SOUND_MAX_ABS, label="max_abs")
    reward = data.draw(st.sampled_from(RewardMode), label="reward")
    spec = SessionSpec(3, 2, 2, reward, Limits(max_batch=16, max_abs=max_abs))
    edge = f32_floor(max_abs)
    elements = (
        st.floats(width=32)
        | f32_within(max_abs)
        | st.sampled_from([edge, -edge, float(np.nextafter(np.float32(edge), np.float32(np.inf)))])
    )
    batch = data.draw(batches(spec, elements=elements), label="batch")
    try:
        out = decode_from_bot(encode(batch), spec, MAX)
    except ProtocolError as exc:
        assert exc.code in (ErrorCode.NONFINITE, ErrorCode.RANGE), exc
        return
    assert isinstance(out, TransitionBatch)
    FUZZ.check_batch(out, spec)


def _batch_with_bits(bits: int, field: str = "obs") -> bytes:
    batch = _good_batch()
    column = getattr(batch, field).copy()
    column.reshape(-1).view(np.uint32)[1] = bits
    return _mutated(batch, {field: column.tobytes()})


@pytest.mark.parametrize(
    ("bits", "code"),
    [
        (0x7F800001, ErrorCode.NONFINITE),
        (0xFFA00000, ErrorCode.NONFINITE),
        (0x7F7FFFFF, ErrorCode.RANGE),
        (0x5F800000, ErrorCode.RANGE),
    ],
    ids=["sNaN", "-sNaN", "f32max", "2^64"],
)
def test_d11_no_numpy_warning_escapes_the_decoder(bits, code):
    """Under warnings-as-errors the decoder still answers only ProtocolError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_refused(code, _batch_with_bits(bits))


@pytest.mark.parametrize("max_abs", [123456.789, 1e-20, 1e-30])
def test_d11_unusual_max_abs_still_rejects_values_above_it(max_abs):
    """|x| > max_abs is refused for any configured max_abs > 0: here the smallest float32 above it."""
    spec = SessionSpec(4, 2, 3, RewardMode.SCALAR, Limits(max_abs=max_abs))
    above = np.float32(max_abs)
    if float(above) <= max_abs:
        above = np.nextafter(above, np.float32(np.inf))
    obs = np.zeros((1, 4), np.float32)
    obs[0, 0] = above
    fields = {"obs": obs.tobytes(), "act": _zeros(1, 2), "logp": _zeros(1), "rew": _zeros(1)}
    assert_refused(ErrorCode.RANGE, _mutated(_good_batch(1), fields), spec)


# ── live server: D10–D13 ─────────────────────────────────────────────────────

OBS_DIM, ACT_DIM = 4, 2  # running_server's PPO agent


async def open_bot(url: str, n_agents: int = 2) -> ClientConnection:
    """A raw websocket that has completed hello → welcome."""
    ws = await connect(url, subprotocols=[SUBPROTOCOL], compression=None)
    await ws.send(encode(Hello("raw", OBS_DIM, ACT_DIM, n_agents=n_agents)))
    async with asyncio.timeout(timeout(10)):
        assert isinstance(decode_from_server(await ws.recv()), Welcome)
    return ws


async def next_reply(ws: ClientConnection) -> Error:
    """The next error reply, skipping credit and weights messages."""
    async with asyncio.timeout(timeout(10)):
        while True:
            message = decode_from_server(await ws.recv())
            if isinstance(message, Error):
                return message


def rejected(server: Any) -> dict[str, float]:
    return server.metrics.by_label("frames_rejected", "code")


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after) if after.get(k, 0) != before.get(k, 0)}


async def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + timeout(seconds)
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


class QueueSpy:
    """Wraps the server queue's ``put``: records every accepted batch (the D11 "nothing reaches the queue" check)."""

    def __init__(self, server: Any) -> None:
        self.batches: list[TransitionBatch] = []
        self._put = server.queue.put
        server.queue.put = self

    def __call__(self, arrival: Any) -> bool:
        if arrival.batch is not None:
            self.batches.append(arrival.batch)
        return bool(self._put(arrival))


async def _send_bad_frames(server: Any, frames: list[tuple[str, bytes, ErrorCode, int | None]]) -> None:
    """Each frame is answered with its code (ref = its seq) and moves exactly its counter by one; nothing enqueued."""
    ws = await open_bot(server.url)
    received = server.accounting()["received"]
    for name, frame, code, ref in frames:
        before = rejected(server)
        await ws.send(frame)
        reply = await next_reply(ws)
        assert (reply.code, reply.ref) == (str(code), ref), name
        assert delta(before, rejected(server)) == {str(code): 1}, name
        assert server.accounting()["received"] == received, name
    await ws.send(encode(_batch_for(4, 2, seq=10_000)))  # the connection is still usable
    await wait_until(lambda: server.accounting()["received"] == received + 4)
    await ws.close()


async def test_d10_live_wrong_shapes_answered_counted_and_not_enqueued():
    """Every D10 frame against a live server: error{code, ref=seq}, frames_rejected{code} +1, nothing enqueued."""
    async with serving(error_budget=10_000) as server:
        frames = []
        for i, (name, changes, code) in enumerate(D10_CASES):
            frames.append((name, _mutated(_batch_for(4, 2, seq=i), changes), code, i))
        await _send_bad_frames(server, frames)


async def test_d11_live_nonfinite_and_range_answered_counted_and_never_enqueued():
    """NaN, ±Inf and 2e6 in each float column of a live stream: nonfinite/range, +1 each, and every
    batch that reaches the queue is finite (checked on every put)."""
    async with serving(error_budget=10_000) as server:
        spy = QueueSpy(server)
        frames = []
        seq = 0
        for name in ("obs", "act", "logp", "rew"):
            for value, code in (
                (np.nan, ErrorCode.NONFINITE),
                (np.inf, ErrorCode.NONFINITE),
                (-np.inf, ErrorCode.NONFINITE),
                (2e6, ErrorCode.RANGE),
            ):
                batch = _batch_for(4, 2, seq=seq)
                column = getattr(batch, name).copy()
                column.flat[seq % column.size] = value
                frames.append((f"{name}={value}", _mutated(batch, {name: column.astype(np.float32).tobytes()}), code, seq))
                seq += 1
        await _send_bad_frames(server, frames)
        assert len(spy.batches) == 1
        for batch in spy.batches:
            FUZZ.check_batch(batch, SessionSpec(OBS_DIM, ACT_DIM, 2, RewardMode.SCALAR, server.limits))


@pytest.mark.filterwarnings("error")
async def test_d11_live_signalling_nan_gets_nonfinite_not_1011():
    async with serving() as server:
        ws = await open_bot(server.url)
        await ws.send(_mutated(_batch_for(4, 2, 0), {"obs": _snan_obs()}))
        try:
            reply = await next_reply(ws)
        except ConnectionClosed:
            reply = None
        assert reply is not None and reply.code == "nonfinite", (reply, ws.close_code, ws.close_reason)
        await ws.close()


def _snan_obs() -> bytes:
    obs = np.zeros((4, OBS_DIM), np.float32)
    obs.reshape(-1).view(np.uint32)[5] = 0x7F800001
    return obs.tobytes()


async def test_d12_unknown_type_gets_error_and_the_10th_error_closes_1008():
    """Unknown t: error{unknown_type, ref=seq}, the connection stays open (a tr still goes through);
    the 10th error within the window is answered and then closed 1008 "too many errors"."""
    async with serving() as server:
        ws = await open_bot(server.url)
        received = server.accounting()["received"]
        for i in range(9):
            before = rejected(server)
            await ws.send(pk({"v": 1, "t": ["teleport", "weights", "welcome", "credit", "TR", ""][i % 6], "seq": 100 + i}))
            reply = await next_reply(ws)
            assert (reply.code, reply.ref) == ("unknown_type", 100 + i)
            assert delta(before, rejected(server)) == {"unknown_type": 1}
            if i == 0:
                await ws.send(encode(_batch_for(4, 2, seq=0)))
                await wait_until(lambda: server.accounting()["received"] == received + 4)
        before = rejected(server)
        await ws.send(pk({"v": 1, "t": "teleport"}))
        reply = await next_reply(ws)
        assert (reply.code, reply.ref) == ("unknown_type", None)
        with pytest.raises(ConnectionClosed):
            await next_reply(ws)
        assert (ws.close_code, ws.close_reason) == (1008, "too many errors")
        assert delta(before, rejected(server)) == {"unknown_type": 1}
        assert server.accounting()["received"] == received + 4


async def test_d12_errors_outside_the_window_do_not_accumulate():
    """Nine errors, a pause longer than error_window, nine more: still open; the next one closes."""
    window = timeout(0.8)
    async with serving(error_window=window) as server:
        ws = await open_bot(server.url)
        for _ in range(9):
            await ws.send(pk({"v": 1, "t": "teleport"}))
            assert (await next_reply(ws)).code == "unknown_type"
        await asyncio.sleep(window * 1.3)
        for _ in range(9):
            await ws.send(pk({"v": 1, "t": "teleport"}))
            assert (await next_reply(ws)).code == "unknown_type"
        await ws.send(pk({"v": 1, "t": "teleport"}))
        await next_reply(ws)
        with pytest.raises(ConnectionClosed):
            await next_reply(ws)
        assert ws.close_code == 1008
        assert rejected(server)["unknown_type"] == 19


BAD_VERSIONS = {"missing": _DROP, "2": 2, "0": 0, "true": True, "1.0": 1.0, "'1'": "1", "nil": None, "-1": -1}


async def test_d13_missing_or_unsupported_version_after_handshake_gets_error_then_1008():
    """After welcome, a frame without v == 1 is answered error{bad_version} (ref nil), then closed 1008
    "unsupported protocol version" at once, as during the handshake (§11); it counts
    frames_closed{reason="bad_version"} once and enqueues nothing."""
    async with serving() as server:
        received = server.accounting()["received"]
        for name, version in BAD_VERSIONS.items():
            ws = await open_bot(server.url)
            before = server.metrics.by_label("frames_closed", "reason")
            await ws.send(_mutated(_batch_for(4, 2, seq=0), {"v": version}))
            reply = await next_reply(ws)
            assert (reply.code, reply.ref) == ("bad_version", None), name
            with pytest.raises(ConnectionClosed):
                async with asyncio.timeout(timeout(10)):
                    await ws.recv()
            assert (ws.close_code, ws.close_reason) == (1008, "unsupported protocol version"), name
            # The connection ends on it: counted among the closes, not the (recoverable) rejections.
            assert delta(before, server.metrics.by_label("frames_closed", "reason")) == {"bad_version": 1}, name
            assert server.metrics.counter("frames_rejected", code="bad_version") == 0
        assert server.accounting()["received"] == received


async def test_d13_unsupported_version_in_hello_gets_error_then_1008():
    """During the handshake a bad v is answered error{bad_version}, then closed 1008."""
    async with serving() as server:
        for version in (_DROP, 2):
            hello = msgpack.unpackb(encode(Hello("raw", OBS_DIM, ACT_DIM)), raw=False)
            if version is _DROP:
                hello.pop("v")
            else:
                hello["v"] = version
            ws = await connect(server.url, subprotocols=[SUBPROTOCOL], compression=None)
            await ws.send(pk(hello))
            reply = await next_reply(ws)
            assert reply.code == "bad_version"
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1008 and "unsupported protocol version" in ws.close_reason
        assert not server.sessions
