#!/usr/bin/env python3
"""Fuzz target D3: the inbound frame decoder of ``bot_protocol`` (docs/reliability.md, B1).

Contract: every input either decodes to a validated message or raises
:class:`~bot_protocol.ProtocolError` with a documented :class:`~bot_protocol.ErrorCode`.
Any other exception, a decoded batch that breaks its own invariants (a NaN that got
through, a shape that disagrees with the spec), an input taking over a second, or an RSS
above the limit is a crash.

Each input is driven through:

- ``decode_from_bot`` with a scalar-reward session spec (what the server runs per frame);
- ``message_from_bot("tr", ...)`` with a terms-reward spec on whatever map the frame holds,
  so the batch validator sees every map the fuzzer builds, whatever its ``t`` says;
- ``decode_from_server`` (the bot SDK's side of the same boundary).

Usage (see ``fuzz/README.md``)::

    python fuzz/fuzz_decode.py -max_total_time=60 -rss_limit_mb=1024 -timeout=1 -max_len=1048576 fuzz/corpus/decode
    python fuzz/fuzz_decode.py --self-test -runs=5000 fuzz/corpus/decode    # plain Python, no atheris
    python fuzz/fuzz_decode.py --make-corpus fuzz/corpus/decode            # (re)write the seed corpus

Without atheris installed the first command falls back to ``--self-test`` (random
mutations of the corpus in plain Python, same flags), so it always runs.

This file also holds the small runner that ``fuzz_weights.py`` shares.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import random
import resource
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing

try:
    import atheris
except ImportError:  # the plain-Python self-test still works
    atheris = None

OWN_FLAGS = ("--self-test", "--make-corpus")


TARGETS = ("fuzz_decode.py", "fuzz_weights.py")


def fuzzing(argv: list[str]) -> bool:
    """True when this process is a fuzz target that hands control to atheris/libFuzzer."""
    return atheris is not None and bool(argv) and Path(argv[0]).name in TARGETS and not any(flag in argv for flag in OWN_FLAGS)


def instrumented() -> contextlib.AbstractContextManager[object]:
    """Instrument ``bot_protocol`` for coverage feedback when atheris drives the run
    (not when a test imports this file for its contract checks)."""
    if fuzzing(sys.argv):
        return atheris.instrument_imports(include=["bot_protocol"])
    return contextlib.nullcontext()


with instrumented():
    import numpy as np

    from bot_protocol import (
        FLAG_TERMINAL,
        FLAG_TRUNCATED,
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
        Weights,
        Welcome,
        decode_from_bot,
        decode_from_server,
        encode,
    )
    from bot_protocol.codec import message_from_bot, unpack

MAX_FRAME = 1 << 20
"""The server's default ``max_message_bytes``, also the decoder's ``max_bin_len``."""
SCALAR_SPEC = SessionSpec(obs_dim=4, act_dim=2, n_agents=3, reward=RewardMode.SCALAR, limits=Limits(max_batch=64))
TERMS_SPEC = SessionSpec(obs_dim=4, act_dim=2, n_agents=3, reward=RewardMode.TERMS, limits=Limits(max_batch=64))
MIXED_SPEC = SessionSpec(
    obs_dim=4, act_dim=1, n_agents=3, reward=RewardMode.SCALAR, limits=Limits(max_batch=64), branches=(3, 2), state_size=2
)
"""A mixed action space (one continuous dim, discrete branches of 3 and 2) with masks, from a recurrent actor (a
2-entry state): the checked reader, ``dact``/``mask``/``state`` and the action rules (docs/protocol.md §3.7)."""

DECODE_CODES = frozenset(
    {
        ErrorCode.UNDECODABLE,
        ErrorCode.BAD_VERSION,
        ErrorCode.UNKNOWN_TYPE,
        ErrorCode.BAD_FIELD,
        ErrorCode.SHAPE,
        ErrorCode.NONFINITE,
        ErrorCode.RANGE,
        ErrorCode.UNEXPECTED,
    }
)
"""Codes the decoder may raise (docs/protocol.md §7); anything else is a contract break."""
ACTION_CODES = DECODE_CODES | {ErrorCode.BAD_ACTION, ErrorCode.BAD_MASK, ErrorCode.ILLEGAL_ACTION}
"""What a session with discrete branches may raise besides: the action rules."""

FLOAT_COLUMNS = ("obs", "act", "logp", "rew", "terms", "next_obs", "score")


# ── the contract ─────────────────────────────────────────────────────────────


def check_error(exc: ProtocolError, codes: frozenset[ErrorCode] = DECODE_CODES) -> None:
    if not isinstance(exc.code, ErrorCode) or exc.code not in codes:
        raise AssertionError(f"undocumented error code {exc.code!r}")
    if not isinstance(exc.message, str):
        raise AssertionError("ProtocolError.message must be text")


def check_batch(batch: TransitionBatch, spec: SessionSpec) -> None:
    """A decoded batch satisfies everything the server relies on downstream."""
    n = batch.n
    limits = spec.limits
    if not 1 <= n <= limits.max_batch:
        raise AssertionError(f"n={n} outside [1, {limits.max_batch}]")
    space = spec.actions
    expect = {
        "agent": (n,),
        "episode": (n,),
        "flags": (n,),
        "obs": (n, spec.obs_dim),
        "act": (n, space.packed_width if spec.branches else spec.act_dim),
        "logp": (n,),
    }
    for name, shape in expect.items():
        if getattr(batch, name).shape != shape:
            raise AssertionError(f"{name} has shape {getattr(batch, name).shape}, expected {shape}")
    flags = batch.flags
    if not np.isin(flags, (0, FLAG_TERMINAL, FLAG_TRUNCATED)).all():
        raise AssertionError("a flag outside {0, 1, 2} passed")
    if int(batch.agent.max()) >= spec.n_agents:
        raise AssertionError("an agent id >= n_agents passed")
    n_trunc = int((flags == FLAG_TRUNCATED).sum())
    n_ended = int((flags != 0).sum())
    if batch.next_obs is None or batch.next_obs.shape != (n_trunc, spec.obs_dim):
        raise AssertionError("next_obs rows disagree with the truncation flags")
    if spec.reward is RewardMode.SCALAR:
        if batch.rew is None or batch.rew.shape != (n,) or batch.terms is not None:
            raise AssertionError("scalar session without a (n,) rew column")
    else:
        if batch.terms is None or batch.terms.shape != (n, 5) or batch.rew is not None:
            raise AssertionError("terms session without a (n, 5) terms column")
        if batch.score is None or batch.score.shape != (n_ended,):
            raise AssertionError("score rows disagree with the end flags")
    if spec.branches:
        check_actions(batch, spec)
    if spec.state_size:
        if batch.state is None or batch.state.shape != (n, spec.state_size):
            raise AssertionError("a recurrent session's batch without a (n, state_size) state column")
    elif batch.state is not None:
        raise AssertionError("a state column passed in a memoryless session")
    for name in (*FLOAT_COLUMNS, "state"):
        column = getattr(batch, name)
        if column is None or column.size == 0:
            continue
        if column.dtype != np.float32:
            raise AssertionError(f"{name} is {column.dtype}, not float32")
        if not np.isfinite(column).all():
            raise AssertionError(f"a non-finite value passed in {name}")
        if float(np.abs(column).max()) > limits.max_abs:
            raise AssertionError(f"a value beyond max_abs passed in {name}")


def check_actions(batch: TransitionBatch, spec: SessionSpec) -> None:
    """A session with branches: the packed ``act`` holds finite continuous dims, in-range discrete actions, a 0/1
    mask with a legal action in every branch, and every action taken is one its own row's mask allows."""
    space = spec.actions
    cont, dact, legal = space.unpack(batch.act)
    if batch.dact is not None or batch.mask is not None:
        raise AssertionError("dact/mask left beside the packed act")
    if not np.isfinite(cont).all():
        raise AssertionError("a non-finite continuous action passed")
    start = 0
    for b, size in enumerate(spec.branches):
        if not ((dact[:, b] >= 0) & (dact[:, b] < size)).all():
            raise AssertionError(f"a discrete action beyond branch {b}'s {size} passed")
        allowed = legal[:, start : start + size]
        if not allowed.any(axis=1).all():
            raise AssertionError(f"a mask forbidding all of branch {b} passed")
        if not allowed[np.arange(batch.n), dact[:, b].astype(np.int64)].all():
            raise AssertionError(f"an action its own mask forbids passed in branch {b}")
        start += size


def check_message(message: object, spec: SessionSpec | None, server_side: bool = False) -> None:
    allowed = (Welcome, Weights, Credit, Error) if server_side else (Hello, TransitionBatch, Bye, Error)
    if not isinstance(message, allowed):
        raise AssertionError(f"decoded to an unexpected type {type(message).__name__}")
    if isinstance(message, TransitionBatch):
        if spec is None:
            raise AssertionError("a 'tr' decoded without a session spec")
        check_batch(message, spec)


def one_input(data: bytes) -> None:
    """One fuzz input. Raises (a crash) only if the decoder breaks its contract."""
    try:
        message = decode_from_bot(data, SCALAR_SPEC, MAX_FRAME)
    except ProtocolError as exc:
        check_error(exc)
    else:
        check_message(message, SCALAR_SPEC)
    try:
        _, fields = unpack(data, MAX_FRAME)
    except ProtocolError as exc:
        check_error(exc)
        return
    try:
        batch = message_from_bot("tr", fields, TERMS_SPEC)
    except ProtocolError as exc:
        check_error(exc)
    else:
        check_message(batch, TERMS_SPEC)
    try:
        mixed = message_from_bot("tr", fields, MIXED_SPEC)
    except ProtocolError as exc:
        check_error(exc, ACTION_CODES)
    else:
        check_message(mixed, MIXED_SPEC)
    try:
        message = decode_from_server(data, MAX_FRAME)
    except ProtocolError as exc:
        check_error(exc)
    else:
        check_message(message, None, server_side=True)


# ── seed corpus ──────────────────────────────────────────────────────────────


def _batch(n: int, flags: list[int], terms: bool, seed: int) -> TransitionBatch:
    rng = np.random.default_rng(seed)
    f = np.array(flags, np.uint8)
    n_trunc = int((f == FLAG_TRUNCATED).sum())
    n_ended = int((f != 0).sum())
    return TransitionBatch(
        seq=seed,
        generation=0,
        version=seed,
        agent=(np.arange(n) % 3).astype(np.uint32),
        episode=np.arange(n, dtype=np.uint32) // 2,
        obs=rng.standard_normal((n, 4)).astype(np.float32),
        act=rng.standard_normal((n, 2)).astype(np.float32),
        logp=rng.standard_normal(n).astype(np.float32),
        flags=f,
        rew=None if terms else rng.standard_normal(n).astype(np.float32),
        terms=rng.standard_normal((n, 5)).astype(np.float32) if terms else None,
        next_obs=rng.standard_normal((n_trunc, 4)).astype(np.float32),
        score=rng.standard_normal(n_ended).astype(np.float32) if terms else None,
    )


def _mixed_batch(n: int, flags: list[int], seed: int, masked: bool = True) -> TransitionBatch:
    """A valid ``tr`` of :data:`MIXED_SPEC`: :func:`_batch`'s rows with one continuous dim, actions of branches 3
    and 2, masks (one other action of the first branch forbidden per row) and states."""
    rng = np.random.default_rng(seed + 1000)
    dact = np.stack([rng.integers(3, size=n), rng.integers(2, size=n)], axis=1).astype(np.uint32)
    mask = np.ones((n, 5), np.uint8)
    mask[np.arange(n), (dact[:, 0] + 1) % 3] = 0
    return dataclasses.replace(
        _batch(n, flags, terms=False, seed=seed),
        act=rng.standard_normal((n, 1)).astype(np.float32),
        dact=dact,
        mask=mask if masked else None,
        state=rng.standard_normal((n, 2)).astype(np.float32),
    )


def _weights(version: int = 3) -> Weights:
    rng = np.random.default_rng(version)
    tensors = {
        "l0.weight": rng.standard_normal((3, 4)).astype(np.float32),
        "l0.bias": np.zeros(3, np.float32),
        "l1.weight": rng.standard_normal((2, 3)).astype(np.float32),
        "l1.bias": np.zeros(2, np.float32),
        "log_std": np.full(2, -0.5, np.float32),
    }
    return Weights.pack(0, version, Architecture("gaussian_mlp", (4, 3, 2), "tanh", -20.0, 2.0), tensors)


def seeds() -> dict[str, bytes]:
    """Valid frames of every type, plus a few near-misses, named for what they are."""
    import msgpack

    hello = encode(Hello("seed-bot", 4, 2, 3, RewardMode.SCALAR, "fuzz"))
    tr = encode(_batch(6, [0, FLAG_TRUNCATED, 0, FLAG_TERMINAL, 0, 0], terms=False, seed=1))
    tanh_weights = Weights.pack(
        1,
        9,
        Architecture("tanh_mlp", (4, 3, 2), "relu", act_limit=2.0),
        {
            "l0.weight": np.ones((3, 4), np.float32),
            "l0.bias": np.zeros(3, np.float32),
            "l1.weight": np.ones((2, 3), np.float32),
            "l1.bias": np.zeros(2, np.float32),
        },
        {"noise": 0.1, "random": 0.0},
    )
    return {
        "hello.msgpack": hello,
        "hello_terms.msgpack": encode(Hello("t", 4, 2, 1, RewardMode.TERMS)),
        "bye.msgpack": encode(Bye("done")),
        "bye_empty.msgpack": encode(Bye()),
        "error.msgpack": encode(Error("bad_weights", "sha256 mismatch", 7)),
        "error_noref.msgpack": encode(Error("internal", "x")),
        "tr_scalar.msgpack": tr,
        "tr_scalar_one_row.msgpack": encode(_batch(1, [0], terms=False, seed=2)),
        "tr_terms.msgpack": encode(_batch(5, [FLAG_TERMINAL, 0, FLAG_TRUNCATED, 0, FLAG_TERMINAL], terms=True, seed=3)),
        "tr_terms_open.msgpack": encode(_batch(3, [0, 0, 0], terms=True, seed=4)),
        "tr_mixed_masked_state.msgpack": encode(_mixed_batch(6, [0, FLAG_TRUNCATED, 0, FLAG_TERMINAL, 0, 0], seed=5)),
        "tr_mixed_unmasked_state.msgpack": encode(_mixed_batch(2, [0, FLAG_TERMINAL], seed=6, masked=False)),
        "credit.msgpack": encode(Credit(grant=6, ack=41)),
        "weights.msgpack": encode(_weights()),
        "weights_tanh.msgpack": encode(tanh_weights),
        "welcome.msgpack": encode(Welcome("seed-bot-1", "0123456789abcdef", "ppo", Limits(), 8, _weights(), {})),
        # near-misses: each refused by exactly one rule
        "trailing_byte.msgpack": hello + b"\x00",
        "version_2.msgpack": msgpack.packb({"v": 2, "t": "hello"}),
        "unknown_type.msgpack": msgpack.packb({"v": 1, "t": "teleport", "seq": 3}),
        "int_key.msgpack": msgpack.packb({1: 1, "v": 1, "t": "bye"}),
        "ext_timestamp.msgpack": b"\x83\xa1v\x01\xa1t\xa3bye\xa1x\xd6\xff\x00\x00\x00\x00",
        "ext_zero_length.msgpack": b"\x83\xa1v\x01\xa1t\xa3bye\xa1x\xc7\x00\x05",
        "array32_4g.msgpack": b"\xdd\xff\xff\xff\xff",
        "nested.msgpack": b"\x81\xa1a" * 20 + b"\xc0",
    }


# ── the runner (shared with fuzz_weights.py) ─────────────────────────────────


def _flag(argv: list[str], name: str, default: int) -> int:
    for arg in argv:
        if arg.startswith(f"-{name}="):
            return int(arg.split("=", 1)[1])
    return default


def _corpus(dirs: Iterable[str]) -> list[tuple[str, bytes]]:
    items = []
    for d in dirs:
        path = Path(d)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        items += [(str(p), p.read_bytes()) for p in files]
    return items


_INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0x90, 0xA0, 0xC0, 0xC1, 0xC4, 0xC6, 0xC9, 0xCA, 0xCB, 0xD9, 0xDB, 0xDD, 0xDF, 0xFF)
_WIDE = (
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\x00\x00\x00\x00",
    b"\x80\x00\x00\x00",
    b"\x00\x00\x80\x7f",
    b"\x00\x00\xc0\x7f",
)


def mutate(data: bytes, pool: list[bytes], rng: random.Random, max_len: int) -> bytes:
    """A few random libFuzzer-style edits: flips, interesting bytes, cuts, inserts, splices."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        pos = rng.randrange(len(out) + 1)
        if op == 0 and out:
            out[pos % len(out)] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[pos % len(out)] = rng.choice(_INTERESTING)
        elif op == 2:
            del out[pos:]
        elif op == 3:
            del out[pos : pos + rng.randint(1, 16)]
        elif op == 4:
            out[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 5 and out:
            start = rng.randrange(len(out))
            out[pos:pos] = out[start : start + rng.randint(1, 64)]
        elif op == 6:
            out[pos : pos + 4] = rng.choice(_WIDE)  # NaN/Inf bit patterns and 4 G lengths
        elif op == 7 and pool:
            other = rng.choice(pool)
            out = out[:pos] + other[rng.randrange(len(other) + 1) :]
        else:
            out += rng.randbytes(rng.randint(1, 8))
    return bytes(out[:max_len])


def self_test(target: Callable[[bytes], None], argv: list[str]) -> int:
    """Run ``target`` over the corpus, then over random mutations of it (no atheris needed).

    Honours the libFuzzer flags ``-runs``, ``-max_total_time``, ``-timeout``, ``-max_len``,
    ``-rss_limit_mb``, ``-seed`` and ``-artifact_prefix``, so the documented command works
    unchanged. Returns the process exit code: 0, or 1 on the first crash.
    """
    runs = _flag(argv, "runs", 2000)
    seconds = _flag(argv, "max_total_time", 0)
    per_input = _flag(argv, "timeout", 1)
    max_len = _flag(argv, "max_len", MAX_FRAME)
    rss_limit_mb = _flag(argv, "rss_limit_mb", 1024)
    rng = random.Random(_flag(argv, "seed", 0) or None)
    prefix = next((a.split("=", 1)[1] for a in argv if a.startswith("-artifact_prefix=")), "./")
    corpus = _corpus(a for a in argv[1:] if not a.startswith("-"))
    pool = [data for _, data in corpus] or [b""]
    start = time.monotonic()
    done = 0
    slowest = 0.0

    def inputs() -> Iterable[bytes]:
        yield from pool
        i = 0
        while (seconds and time.monotonic() - start < seconds) or (not seconds and i < runs):
            i += 1
            yield rng.randbytes(rng.randint(0, 64)) if i % 50 == 0 else mutate(rng.choice(pool), pool, rng, max_len)

    for data in inputs():
        t0 = time.perf_counter()
        try:
            target(data)
        except Exception:
            traceback.print_exc()
            return _crash(prefix, "crash", data)
        elapsed = time.perf_counter() - t0
        slowest = max(slowest, elapsed)
        if elapsed > per_input:
            print(f"self-test: one input took {elapsed:.2f} s (> -timeout={per_input})", file=sys.stderr)
            return _crash(prefix, "timeout", data)
        done += 1
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"self-test: {done} inputs ({len(corpus)} corpus + {done - len(corpus)} mutations) in "
        f"{time.monotonic() - start:.1f} s, slowest {slowest * 1e3:.2f} ms, max RSS {rss_mb:.0f} MiB, 0 crashes"
    )
    if rss_mb > rss_limit_mb:
        print(f"self-test: RSS {rss_mb:.0f} MiB over -rss_limit_mb={rss_limit_mb}", file=sys.stderr)
        return 1
    return 0


def _crash(prefix: str, kind: str, data: bytes) -> int:
    path = Path(f"{prefix}{kind}-{hashlib.sha1(data).hexdigest()}")
    with contextlib.suppress(OSError):
        path.write_bytes(data)
        print(f"self-test: {kind} input written to {path}", file=sys.stderr)
    return 1


def make_corpus(argv: list[str], default_dir: Path, make_seeds: Callable[[], Mapping[str, bytes]]) -> int:
    i = argv.index("--make-corpus")
    target = Path(argv[i + 1]) if len(argv) > i + 1 and not argv[i + 1].startswith("-") else default_dir
    target.mkdir(parents=True, exist_ok=True)
    written = make_seeds()
    for name, data in written.items():
        (target / name).write_bytes(data)
    print(f"wrote {len(written)} seeds to {target}")
    return 0


def main(
    target: Callable[[bytes], None],
    make_seeds: Callable[[], Mapping[str, bytes]],
    default_dir: Path,
    argv: list[str] | None = None,
) -> int:
    argv = list(sys.argv if argv is None else argv)
    if "--make-corpus" in argv:
        return make_corpus(argv, default_dir, make_seeds)
    if not fuzzing(argv):
        if atheris is None and "--self-test" not in argv:
            print("atheris is not installed: running the plain-Python self-test instead", file=sys.stderr)
        return self_test(target, [a for a in argv if a != "--self-test"])
    atheris.Setup(argv, target)
    atheris.Fuzz()  # exits the process
    return 0


if __name__ == "__main__":
    sys.exit(main(one_input, seeds, ROOT / "fuzz" / "corpus" / "decode"))
