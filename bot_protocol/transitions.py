"""The ``tr`` message: a bot's experience as float32 columns, and the server's two-step ingest of it.

This is the one message whose cost scales with traffic: a saturated server reads
thousands of ``tr`` frames a second on its event loop, so its decoding is built for
that. :class:`TransitionHeader` checks a frame's structure in pure Python (byte lengths,
flags, integer fields, with an inline fast path for the well-formed frame), and
:func:`assemble_batches` then checks the values of a whole group of frames in one numpy
pass and joins them into one :class:`TransitionBatch` whose columns are views of one
buffer. Bots use the same class to send (``to_wire``) and the same checks hold for a
single frame (:meth:`TransitionBatch.from_wire`). The control messages, which this
module builds on (:class:`~bot_protocol.messages.SessionSpec` gives every shape), live
in :mod:`bot_protocol.messages`, apart from this performance-tuned code.

Float arrays travel as msgpack ``bin`` holding little-endian float32 in C order, so
a batch of thousands of steps is rebuilt with one ``np.frombuffer`` per field.

A session whose action space has discrete branches also sends ``dact`` (uint32) and maybe
``mask`` (uint8); its frames take the checked reader and :func:`_assemble_discrete`, and the
batch they become carries one packed float block in ``act``
(:meth:`~bot_protocol.actions.ActionSpace.pack`). A continuous-only session never reaches
that code: its frames are read and joined exactly as before branches existed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from .errors import ErrorCode, ProtocolError
from .fields import F32, MAX_U64, U8, U32, check_floats, f32_bytes, read_bytes, read_int
from .messages import Message, RewardMode, SessionSpec
from .policy_id import PolicyId

__all__ = [
    "FLAG_TERMINAL",
    "FLAG_TRUNCATED",
    "N_REWARD_TERMS",
    "TransitionBatch",
    "TransitionHeader",
    "assemble_batches",
]

FLAG_TERMINAL = 1
"""Bit 0 of ``flags``: the episode ended naturally (death, win); no bootstrap."""
FLAG_TRUNCATED = 2
"""Bit 1 of ``flags``: the episode was cut (time limit); the future is bootstrapped from ``next_obs``."""

N_REWARD_TERMS = 5
"""Columns of ``terms``: my energy delta, enemy energy delta (the damage I dealt, negated), distance to enemy,
max distance, |gun bearing| (deg). See docs/protocol.md. The wire format fixes this width (the tank's terms);
a server's reward function must shape exactly this many (``server.rewards.check_reward_function``)."""


@dataclass(frozen=True, eq=False)
class TransitionBatch(Message):
    """Bot → server: ``n`` steps of experience as columns (rows of one agent in time order).

    ``next_obs`` has one row per step flagged truncated (in row order): the observation
    after the cut, used to bootstrap the value. ``score`` (terms mode only) has one row per
    step flagged terminal or truncated: the round score fed to ``computeRoundReward``.

    In a session with discrete branches a bot's batch also holds ``dact`` (n, n_branches),
    the action taken in each branch, and optionally ``mask`` (n, sum(branches)), 1 where an
    action was legal; ``act`` then holds the continuous dims alone (maybe none). A checked
    batch of such a session (what :func:`assemble_batches` returns) carries all three packed
    in ``act`` (``ActionSpace.pack``), and ``dact`` and ``mask`` are ``None``.
    """

    TYPE: ClassVar[str] = "tr"
    seq: int
    generation: int
    version: int
    agent: NDArray[np.uint32]
    episode: NDArray[np.uint32]
    obs: NDArray[np.float32]
    act: NDArray[np.float32]
    logp: NDArray[np.float32]
    flags: NDArray[np.uint8]
    rew: NDArray[np.float32] | None = None
    terms: NDArray[np.float32] | None = None
    next_obs: NDArray[np.float32] | None = None
    score: NDArray[np.float32] | None = None
    dact: NDArray[np.uint32] | None = None
    mask: NDArray[np.uint8] | None = None
    state: NDArray[np.float32] | None = None
    """(n, state_size): a recurrent policy's state before each row's step (the one it acted from); None: memoryless."""

    @property
    def n(self) -> int:
        return int(self.agent.shape[0])

    @property
    def policy_id(self) -> PolicyId:
        """The policy that acted these steps (the frame's ``gen`` and ``ver``)."""
        return PolicyId(self.generation, self.version)

    @property
    def nbytes(self) -> int:
        """Bytes of array payload (what the server's queue accounts)."""
        arrays = (
            self.agent, self.episode, self.obs, self.act, self.logp, self.flags, self.rew, self.terms, self.next_obs,
            self.state,
        )  # fmt: skip
        total = sum(a.nbytes for a in arrays if a is not None)
        if self.dact is not None:  # a bot's batch with branches (a checked one holds them packed in act)
            total += self.dact.nbytes + (0 if self.mask is None else self.mask.nbytes)
        return total

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "seq": self.seq,
            "gen": self.generation,
            "ver": self.version,
            "n": self.n,
            "agent": np.ascontiguousarray(self.agent, dtype=U32).tobytes(),
            "episode": np.ascontiguousarray(self.episode, dtype=U32).tobytes(),
            "obs": f32_bytes(self.obs),
            "act": f32_bytes(self.act),
            "logp": f32_bytes(self.logp),
            "flags": np.ascontiguousarray(self.flags, dtype=U8).tobytes(),
        }
        if self.dact is not None:
            wire["dact"] = np.ascontiguousarray(self.dact, dtype=U32).tobytes()
        if self.mask is not None:
            wire["mask"] = np.ascontiguousarray(self.mask, dtype=U8).tobytes()
        if self.rew is not None:
            wire["rew"] = f32_bytes(self.rew)
        if self.terms is not None:
            wire["terms"] = f32_bytes(self.terms)
        if self.next_obs is not None and len(self.next_obs):
            wire["next_obs"] = f32_bytes(self.next_obs)
        if self.score is not None and len(self.score):
            wire["score"] = f32_bytes(self.score)
        if self.state is not None:
            wire["state"] = f32_bytes(self.state)
        return wire

    @classmethod
    def from_wire(cls, m: Mapping[str, Any], spec: SessionSpec) -> TransitionBatch:
        """Rebuild and check a batch against the session's spec (never the bot's word alone)."""
        return assemble_batches([TransitionHeader.from_wire(m, spec)], spec, explain=True)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class TransitionHeader:
    """A ``tr`` frame whose structure is checked but whose values are not yet.

    Checking a frame takes two steps so that a server can check *many* frames with one
    numpy pass (:func:`assemble_batches`): numpy calls cost microseconds each whatever
    their size, and on the event loop they dominated the per-frame cost. This step is
    pure Python on byte lengths: sizes, flags, which fields the reward mode allows, and
    the integer header fields.
    """

    seq: int
    generation: int
    version: int
    n: int
    agent: bytes
    episode: bytes
    flags: bytes
    columns: dict[str, bytes]
    """Float columns by name, in wire order, each exactly the size its shape needs; then, in a
    session with discrete branches, ``dact`` and (when sent) ``mask``."""

    @property
    def policy_id(self) -> PolicyId:
        """The policy that acted this frame's steps: the server checks it against what it published."""
        return PolicyId(self.generation, self.version)

    @property
    def nbytes(self) -> int:
        """Payload bytes of the batch it becomes, as :attr:`TransitionBatch.nbytes` counts them (plus any score column).

        With discrete branches, the bytes received: the packed ``act`` it becomes is wider.
        """
        return len(self.agent) + len(self.episode) + len(self.flags) + sum(map(len, self.columns.values()))

    @classmethod
    def from_wire(cls, m: Mapping[str, Any], spec: SessionSpec) -> TransitionHeader:
        """Check a ``tr`` map's structure; raise the :class:`ProtocolError` naming the first fault.

        The well-formed frame takes a fast path of inline type and length checks (no
        helper calls, no per-frame dicts of expected sizes): this runs on the event loop for
        every frame, so its cost is a visible share of the loop's. Anything it does not fully
        recognise, valid or not, goes through :meth:`_from_wire_checked`, the reference
        that names the exact error; a property test holds the two to the same answers.
        A session with discrete branches or a recurrent state always takes the reference reader.
        """
        if spec.branches or spec.state_size:
            return cls._from_wire_checked(m, spec)
        get = m.get
        n, agent, raw_flags, episode = get("n"), get("agent"), get("flags"), get("episode")
        seq, gen, ver = get("seq"), get("gen"), get("ver")
        obs, act, logp = get("obs"), get("act"), get("logp")
        scalar = spec.reward is RewardMode.SCALAR
        value = get("rew" if scalar else "terms")
        if (
            type(n) is int
            and 0 < n <= spec.limits.max_batch
            and type(agent) is bytes
            and type(episode) is bytes
            and type(raw_flags) is bytes
            and type(obs) is bytes
            and type(act) is bytes
            and type(logp) is bytes
            and type(value) is bytes
            and len(agent) == 4 * n
            and len(episode) == 4 * n
            and len(raw_flags) == n
            and len(obs) == 4 * n * spec.obs_dim
            and len(act) == 4 * n * spec.act_dim
            and len(logp) == 4 * n
            and len(value) == (4 * n if scalar else 4 * n * N_REWARD_TERMS)
            and type(seq) is int
            and type(gen) is int
            and type(ver) is int
            and 0 <= seq <= MAX_U64
            and 0 <= gen <= MAX_U64
            and 0 <= ver <= MAX_U64
            and ("score" not in m and "terms" not in m if scalar else "rew" not in m)
            and "dact" not in m
            and "mask" not in m
            and "state" not in m
        ):
            columns = {"obs": obs, "act": act, "logp": logp, "rew" if scalar else "terms": value}
            if raw_flags.count(0) == n:  # no episode ends: nothing else may be sent
                if "next_obs" not in m and (scalar or "score" not in m):
                    return cls(seq, gen, ver, n, agent, episode, raw_flags, columns)
            else:
                n_terminal, n_truncated = raw_flags.count(FLAG_TERMINAL), raw_flags.count(FLAG_TRUNCATED)
                score: Any = get("score")
                next_obs: Any = get("next_obs")
                if (
                    raw_flags.count(0) + n_terminal + n_truncated == n
                    and (scalar or (type(score) is bytes and len(score) == 4 * (n_terminal + n_truncated)))
                    and (
                        type(next_obs) is bytes and len(next_obs) == 4 * n_truncated * spec.obs_dim
                        if n_truncated
                        else "next_obs" not in m  # present, even as nil, is the checked reader's case
                    )
                ):
                    if not scalar:
                        columns["score"] = score
                    if n_truncated:
                        columns["next_obs"] = next_obs
                    return cls(seq, gen, ver, n, agent, episode, raw_flags, columns)
        return cls._from_wire_checked(m, spec)

    @classmethod
    def _from_wire_checked(cls, m: Mapping[str, Any], spec: SessionSpec) -> TransitionHeader:
        """The field-by-field reader: every check in order, each failure named."""
        limits = spec.limits
        n = read_int(m, "n", 1, limits.max_batch)
        agent = read_bytes(m, "agent")
        if len(agent) != 4 * n:
            raise ProtocolError(
                ErrorCode.SHAPE, f"field 'agent' holds {len(agent)} bytes, expected {4 * n} for shape [{n}] <u4"
            )
        raw_flags = read_bytes(m, "flags")
        n_terminal, n_truncated = raw_flags.count(FLAG_TERMINAL), raw_flags.count(FLAG_TRUNCATED)
        if len(raw_flags) != n:
            raise ProtocolError(ErrorCode.SHAPE, f"field 'flags' holds {len(raw_flags)} bytes, expected {n}")
        if raw_flags.count(0) + n_terminal + n_truncated != n:  # 3 (both bits) is no state
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'flags' must be 0, 1 (terminal) or 2 (truncated) per step")
        n_ended = n_terminal + n_truncated
        widths = _widths(spec)
        if spec.reward is RewardMode.SCALAR:
            if "terms" in m or "score" in m:
                raise ProtocolError(ErrorCode.BAD_FIELD, "scalar-reward sessions send 'rew', not 'terms' or 'score'")
            rows = {"obs": n, "act": n, "logp": n, "rew": n}
        else:
            if "rew" in m:
                raise ProtocolError(ErrorCode.BAD_FIELD, "terms-reward sessions send 'terms' and 'score', not 'rew'")
            rows = {"obs": n, "act": n, "logp": n, "terms": n}
            if n_ended or "score" in m:
                rows["score"] = n_ended
        if n_truncated or "next_obs" in m:
            rows["next_obs"] = n_truncated
        if spec.state_size:
            rows["state"] = n
        elif "state" in m:
            raise ProtocolError(
                ErrorCode.BAD_FIELD, "field 'state' is sent only in runs whose actor is recurrent (weights.arch.recurrent)"
            )
        columns: dict[str, bytes] = {}
        discrete: dict[str, bytes] = {}
        for key, count in rows.items():
            if key in ("next_obs", "score") and key not in m:  # rows the flags call for: a row count of 0 (§7.1)
                raise ProtocolError(ErrorCode.SHAPE, f"field {key!r} is missing; the flags call for {count} row(s)")
            raw = b"" if key == "act" and not widths[key] and key not in m else read_bytes(m, key)
            expected = count * widths[key] * 4
            if len(raw) != expected:
                shape = [count, widths[key]] if key in _WIDE else [count]
                raise ProtocolError(
                    ErrorCode.SHAPE, f"field {key!r} holds {len(raw)} bytes, expected {expected} for shape {shape} <f4"
                )
            columns[key] = raw
            if key == "act":  # the discrete columns come right after the continuous ones
                discrete = _discrete_columns(m, spec, n)
        columns.update(discrete)
        seq, gen, ver = m.get("seq"), m.get("gen"), m.get("ver")
        if not (_is_u64(seq) and _is_u64(gen) and _is_u64(ver)):
            seq, gen, ver = read_int(m, "seq", 0, MAX_U64), read_int(m, "gen", 0, MAX_U64), read_int(m, "ver", 0, MAX_U64)
        episode = read_bytes(m, "episode")
        if len(episode) != 4 * n:
            raise ProtocolError(
                ErrorCode.SHAPE, f"field 'episode' holds {len(episode)} bytes, expected {4 * n} for shape [{n}] <u4"
            )
        return cls(int(seq), int(gen), int(ver), n, agent, episode, raw_flags, columns)  # type: ignore[arg-type]


def _discrete_columns(m: Mapping[str, Any], spec: SessionSpec, n: int) -> dict[str, bytes]:
    """A frame's ``dact`` and ``mask``, their sizes checked; refused in a session without branches."""
    if not spec.branches:
        for key in ("dact", "mask"):
            if key in m:
                raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} is sent only by bots whose hello lists 'branches'")
        return {}
    space = spec.actions
    columns = {"dact": _sized(m, "dact", [n, space.n_branches], U32)}
    if "mask" in m:
        columns["mask"] = _sized(m, "mask", [n, space.n_logits], U8)
    return columns


def _sized(m: Mapping[str, Any], key: str, shape: list[int], dtype: np.dtype[Any]) -> bytes:
    """A required ``bin`` field of exactly ``shape`` (``bad_field`` when missing, ``shape`` when sized wrong)."""
    raw = read_bytes(m, key)
    expected, name = shape[0] * shape[1] * dtype.itemsize, dtype.str.lstrip("|")
    if len(raw) != expected:
        raise ProtocolError(
            ErrorCode.SHAPE, f"field {key!r} holds {len(raw)} bytes, expected {expected} for shape {shape} {name}"
        )
    return raw


_WIDE = ("obs", "act", "terms", "next_obs", "state")
_COLUMN_ORDER = ("obs", "act", "logp", "rew", "terms", "score", "next_obs", "state")


@functools.lru_cache(maxsize=64)
def _widths_of(obs_dim: int, act_dim: int, state_size: int) -> dict[str, int]:
    return {
        "obs": obs_dim, "act": act_dim, "logp": 1, "rew": 1, "terms": N_REWARD_TERMS, "score": 1, "next_obs": obs_dim,
        "state": state_size,
    }  # fmt: skip


def _widths(spec: SessionSpec) -> dict[str, int]:
    return _widths_of(spec.obs_dim, spec.act_dim, spec.state_size)


def assemble_batches(headers: list[TransitionHeader], spec: SessionSpec, explain: bool) -> TransitionBatch | None:
    """Check the values of ``headers`` (frames of one session, in order) and join them into one batch.

    One join, one integer max over the IEEE bits of every float and one max over the
    agent ids, whatever the number of frames; columns are views into the joined buffer.
    The result is the frames' rows concatenated in order, so each agent's rows stay in
    time order, ``next_obs`` and ``score`` rows stay in flag order, and ``seq`` is the
    last frame's. All headers must share ``generation`` and ``version``.

    When a value is out of bounds: with ``explain`` raise the :class:`ProtocolError`
    naming the first culprit (``bad_field``, ``nonfinite`` or ``range``, then for a session
    with branches ``bad_action``, ``bad_mask`` or ``illegal_action``); without it, return
    ``None`` and let the caller check the frames one at a time.
    """
    if spec.branches:
        return _assemble_discrete(headers, spec, explain)
    return _assemble_floats(headers, spec, explain)


def _assemble_floats(headers: list[TransitionHeader], spec: SessionSpec, explain: bool) -> TransitionBatch | None:
    """:func:`assemble_batches` of frames whose columns are all float32 (a continuous-only session's)."""
    first = headers[0]
    limits = spec.limits
    one = len(headers) == 1
    if one:
        keys = list(first.columns)
    else:
        if any(h.generation != first.generation or h.version != first.version for h in headers):
            raise ValueError("assemble_batches needs frames of one (generation, version)")
        present = set().union(*(h.columns for h in headers))
        keys = [key for key in _COLUMN_ORDER if key in present]
    agent = np.frombuffer(first.agent if one else b"".join(h.agent for h in headers), dtype=U32)
    if int(agent.max()) >= spec.n_agents:
        if not explain:
            return None
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'agent' names an agent >= n_agents ({spec.n_agents})")
    # Column-major join: every frame's obs, then every frame's act, ... so each merged
    # column is one contiguous slice of the joined buffer.
    if one:
        joined = np.frombuffer(b"".join(first.columns.values()), dtype=F32)
    else:
        joined = np.frombuffer(b"".join([h.columns.get(key, b"") for key in keys for h in headers]), dtype=F32)
    # One integer pass over the IEEE bits, no float arithmetic (so no FP warnings from a
    # signalling NaN): with the sign bit cleared, bit patterns order like magnitudes, and
    # NaN/Inf sort above every finite value. Only a failing batch is re-checked column by
    # column, in floats, to name the culprit and the reason.
    magnitudes = np.bitwise_and(joined.view(U32), _ABS_MASK)
    bad = magnitudes.size > 0 and int(magnitudes.max()) > _max_abs_bits(limits.max_abs)
    widths = _widths(spec)
    columns: dict[str, Any] = {}
    offset = 0
    for key in keys:
        size = (len(first.columns[key]) if one else sum(len(h.columns.get(key, b"")) for h in headers)) // 4
        column = joined[offset : offset + size]
        if bad:
            if not explain:
                return None
            check_floats(key, column, limits.max_abs)
        columns[key] = column.reshape(-1, widths[key]) if key in _WIDE else column
        offset += size
    if "next_obs" not in columns:
        columns["next_obs"] = _empty_rows(spec.obs_dim)
    if spec.reward is RewardMode.TERMS:
        columns.setdefault("score", _EMPTY_F32)
    # A frozen dataclass sets each field through object.__setattr__, a per-frame cost on the
    # event loop; the values are all checked above, so fill the instance directly.
    # Defaults (None) cover the columns this reward mode lacks.
    fields: dict[str, Any] = {"rew": None, "terms": None, "score": None, "state": None}
    fields.update(columns)
    batch = object.__new__(TransitionBatch)
    batch.__dict__.update(
        fields,
        seq=headers[-1].seq,
        generation=first.generation,
        version=first.version,
        agent=agent,
        episode=np.frombuffer(first.episode if one else b"".join(h.episode for h in headers), dtype=U32),
        flags=np.frombuffer(first.flags if one else b"".join(h.flags for h in headers), dtype=U8),
    )
    return batch


def _assemble_discrete(headers: list[TransitionHeader], spec: SessionSpec, explain: bool) -> TransitionBatch | None:
    """:func:`assemble_batches` for a session with branches: the float columns as ever, then ``dact`` and ``mask``.

    The float columns are joined and checked by the continuous code (on headers without the
    discrete columns); the discrete values are checked after them, and the batch's ``act``
    becomes the packed block the server carries.
    """
    space = spec.actions
    floats = [_float_part(h, space.continuous) for h in headers]
    batch = _assemble_floats(floats, spec, explain)
    if batch is None:
        return None
    dact = np.frombuffer(b"".join(h.columns["dact"] for h in headers), dtype=U32).reshape(-1, space.n_branches)
    mask = _joined_mask(headers, space.n_logits)
    try:
        space.check(dact, mask)
    except ProtocolError:
        if not explain:
            return None
        raise
    batch.__dict__["act"] = space.pack(batch.__dict__.get("act"), dact, mask)
    return batch


def _float_part(header: TransitionHeader, continuous: int) -> TransitionHeader:
    """``header`` with its float columns alone (and no ``act`` when there are no continuous dims)."""
    skip = ("dact", "mask") if continuous else ("act", "dact", "mask")
    columns = {key: raw for key, raw in header.columns.items() if key not in skip}
    return TransitionHeader(
        header.seq, header.generation, header.version, header.n, header.agent, header.episode, header.flags, columns
    )


def _joined_mask(headers: list[TransitionHeader], width: int) -> NDArray[np.uint8] | None:
    """Every frame's ``mask`` rows in order (all ones for a frame that sent none); ``None`` when none sent one."""
    if all("mask" not in h.columns for h in headers):
        return None
    raw = b"".join(h.columns.get("mask", b"\x01" * (h.n * width)) for h in headers)
    return np.frombuffer(raw, dtype=U8).reshape(-1, width)


_ABS_MASK = np.uint32(0x7FFFFFFF)


@functools.lru_cache(maxsize=16)
def _max_abs_bits(max_abs: float) -> int:
    """Bit pattern of the largest float32 whose value is at most ``max_abs`` (exactly)."""
    bound = np.float32(max_abs)
    if float(bound) > max_abs:  # rounded up: step back one float32
        bound = np.nextafter(bound, np.float32(0))
    return int(np.array(bound, dtype=F32).view(U32))


def _is_u64(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_U64


_EMPTY_F32: NDArray[np.float32] = np.zeros(0, dtype=F32)
_EMPTY_F32.flags.writeable = False
_EMPTY_ROWS: dict[int, NDArray[np.float32]] = {}


def _empty_rows(width: int) -> NDArray[np.float32]:
    """A shared read-only (0, width) array: the absent ``next_obs`` of most frames."""
    rows = _EMPTY_ROWS.get(width)
    if rows is None:
        rows = np.zeros((0, width), dtype=F32)
        rows.flags.writeable = False
        _EMPTY_ROWS[width] = rows
    return rows
