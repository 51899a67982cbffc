"""Typed messages of wire format v1, one frozen dataclass each.

Each message knows how to turn itself into the plain msgpack map that goes on the
wire (:meth:`to_wire`) and how to be rebuilt from one (:meth:`from_wire`), checking
every field on the way in. Nothing here touches a socket; :mod:`bot_protocol.codec`
adds the msgpack framing and the one decode boundary.

Float arrays travel as msgpack ``bin`` holding little-endian float32 in C order, so
a batch of thousands of steps is rebuilt with one ``np.frombuffer`` per field.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from .errors import ErrorCode, ProtocolError
from .tensors import encode_tensors

__all__ = [
    "FLAG_TERMINAL",
    "FLAG_TRUNCATED",
    "N_REWARD_TERMS",
    "PROTOCOL_VERSION",
    "SUBPROTOCOL",
    "Architecture",
    "Bye",
    "Credit",
    "Error",
    "Hello",
    "Limits",
    "Message",
    "RewardMode",
    "SessionSpec",
    "TransitionBatch",
    "TransitionHeader",
    "Weights",
    "Welcome",
    "assemble_batches",
]

PROTOCOL_VERSION = 1
SUBPROTOCOL = "arena.v1"

FLAG_TERMINAL = 1
"""Bit 0 of ``flags``: the episode ended naturally (death, win); no bootstrap."""
FLAG_TRUNCATED = 2
"""Bit 1 of ``flags``: the episode was cut (time limit); the future is bootstrapped from ``next_obs``."""

N_REWARD_TERMS = 5
"""Columns of ``terms``: my energy delta, enemy energy delta (the damage I dealt, negated), distance to enemy,
max distance, |gun bearing| (deg). See docs/protocol.md."""

MAX_NAME_LEN = 64
MAX_MESSAGE_TEXT = 256
MAX_OBS_DIM = 4096
MAX_ACT_DIM = 256
MAX_AGENTS = 4096
MAX_U64 = 2**64 - 1

F32 = np.dtype("<f4")
U32 = np.dtype("<u4")
U8 = np.dtype("u1")


class RewardMode(enum.StrEnum):
    """How a bot reports reward: one float per step, or the raw terms the trainer shapes."""

    SCALAR = "scalar"
    TERMS = "terms"


# ── field readers: each raises ProtocolError naming the field ────────────────


def _get(m: Mapping[str, Any], key: str) -> Any:
    try:
        return m[key]
    except KeyError:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"missing field {key!r}") from None


def _int(m: Mapping[str, Any], key: str, lo: int, hi: int) -> int:
    value = _get(m, key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be an integer")
    if not lo <= value <= hi:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} = {value} outside [{lo}, {hi}]")
    return value


def _float(m: Mapping[str, Any], key: str) -> float:
    value = _get(m, key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not np.isfinite(value):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be a finite number")
    return float(value)


def _str(m: Mapping[str, Any], key: str, max_len: int = MAX_NAME_LEN) -> str:
    value = _get(m, key)
    if not isinstance(value, str):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be a string")
    if len(value) > max_len:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} longer than {max_len} characters")
    return value


def _map(m: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = _get(m, key)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be a map with string keys")
    return value


def _bytes(m: Mapping[str, Any], key: str) -> bytes:
    value = _get(m, key)
    if not isinstance(value, bytes):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field {key!r} must be bin")
    return value


def _block(m: Mapping[str, Any], key: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> NDArray[Any]:
    """A ``bin`` field reinterpreted as an array of exactly ``shape`` (no copy)."""
    raw = _bytes(m, key)
    expected = math.prod(shape) * dtype.itemsize
    if len(raw) != expected:
        raise ProtocolError(
            ErrorCode.SHAPE, f"field {key!r} holds {len(raw)} bytes, expected {expected} for shape {list(shape)} {dtype.str}"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def _floats(m: Mapping[str, Any], key: str, shape: tuple[int, ...], max_abs: float) -> NDArray[np.float32]:
    array = _block(m, key, F32, shape)
    check_floats(key, array, max_abs)
    return array


def check_floats(name: str, array: NDArray[np.float32], max_abs: float) -> None:
    """Reject NaN/Inf (``nonfinite``) and magnitudes above ``max_abs`` (``range``)."""
    if array.size == 0:
        return
    # Compared as Python floats (float64): a float32 bound would round an unusual max_abs and
    # let a value a hair above it through. errstate: a signalling NaN must not warn (with
    # warnings as errors that would escape as something other than ProtocolError).
    with np.errstate(invalid="ignore", over="ignore"):
        # Fast path: two reductions, no temporaries. NaN fails both comparisons and Inf the
        # bound, so anything wrong falls through to the exact checks below.
        if float(array.max()) <= max_abs and float(array.min()) >= -max_abs:
            return
        if not np.isfinite(array).all():
            raise ProtocolError(ErrorCode.NONFINITE, f"field {name!r} holds NaN or Inf")
        if float(np.abs(array).max()) > max_abs:
            raise ProtocolError(ErrorCode.RANGE, f"field {name!r} holds a value beyond ±{max_abs:g}")


def _f32_bytes(array: NDArray[Any]) -> bytes:
    return np.ascontiguousarray(array, dtype=F32).tobytes()


# ── shared value types ───────────────────────────────────────────────────────


@dataclass(frozen=True)
class Limits:
    """Limits the server enforces on one connection, announced in ``welcome``."""

    max_batch: int = 1024
    """Most steps (rows) in one ``tr`` message."""
    max_message_bytes: int = 1 << 20
    """Largest inbound message in bytes; bigger ones are closed with 1009 by the transport."""
    credit_window: int = 8
    """``tr`` messages a bot may have unacknowledged; ``credit`` messages replenish it."""
    max_abs: float = 1e6
    """Largest magnitude accepted in any float field."""

    def to_wire(self) -> dict[str, Any]:
        return {
            "max_batch": self.max_batch,
            "max_message_bytes": self.max_message_bytes,
            "credit_window": self.credit_window,
            "max_abs": self.max_abs,
        }

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Limits:
        return cls(
            max_batch=_int(m, "max_batch", 1, 1 << 20),
            max_message_bytes=_int(m, "max_message_bytes", 1024, 1 << 30),
            credit_window=_int(m, "credit_window", 1, 1 << 16),
            max_abs=_float(m, "max_abs"),
        )


@dataclass(frozen=True)
class SessionSpec:
    """What one connection agreed to send: the shapes every ``tr`` is checked against."""

    obs_dim: int
    act_dim: int
    n_agents: int
    reward: RewardMode
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Architecture:
    """The actor network a ``weights`` message describes (enough to run it anywhere).

    Both kinds run the same MLP: ``y = x``, then for each ``l{i}``:
    ``y = y @ l{i}.weight.T + l{i}.bias``, with ``activation`` between layers (not after
    the last).

    - ``"gaussian_mlp"`` (PPO): the action mean is ``y``; the exploration std is
      ``exp(clip(log_std, log_std_min, log_std_max))`` from the ``log_std`` tensor.
    - ``"tanh_mlp"`` (DDPG, TD3): the action is ``act_limit * tanh(y)``, deterministic;
      exploration noise is the bot's to add, as the ``explore`` settings say.
    """

    kind: str
    layers: tuple[int, ...]
    activation: str
    log_std_min: float = 0.0
    log_std_max: float = 0.0
    act_limit: float = 1.0
    """``tanh_mlp`` only: actions lie in [-act_limit, act_limit] on every dimension."""

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"kind": self.kind, "layers": list(self.layers), "activation": self.activation}
        if self.kind == "tanh_mlp":
            wire["act_limit"] = self.act_limit
        else:
            wire["log_std_min"] = self.log_std_min
            wire["log_std_max"] = self.log_std_max
        return wire

    @classmethod
    def from_mapping(cls, arch: Mapping[str, Any]) -> Architecture:
        """From an agent's exported description (trusted, trainer side)."""
        return cls(
            kind=str(arch["kind"]),
            layers=tuple(int(x) for x in arch["layers"]),
            activation=str(arch["activation"]),
            log_std_min=float(arch.get("log_std_min", 0.0)),
            log_std_max=float(arch.get("log_std_max", 0.0)),
            act_limit=float(arch.get("act_limit", 1.0)),
        )

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Architecture:
        layers = _get(m, "layers")
        if (
            not isinstance(layers, list | tuple)
            or len(layers) < 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= 65536 for x in layers)
        ):
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'layers' must list at least two sizes in [1, 65536]")
        kind = _str(m, "kind")
        if kind == "tanh_mlp":
            act_limit = _float(m, "act_limit")
            if not act_limit > 0:
                raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'act_limit' must be > 0, got {act_limit}")
            return cls(kind=kind, layers=tuple(layers), activation=_str(m, "activation"), act_limit=act_limit)
        return cls(
            kind=kind,
            layers=tuple(layers),
            activation=_str(m, "activation"),
            log_std_min=_float(m, "log_std_min"),
            log_std_max=_float(m, "log_std_max"),
        )


# ── messages ─────────────────────────────────────────────────────────────────


class Message:
    """Base of every wire message: ``TYPE`` is the ``t`` field."""

    TYPE: ClassVar[str]

    def to_wire(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class Hello(Message):
    """Bot → server, first message: who the bot is and the shapes it will send."""

    TYPE: ClassVar[str] = "hello"
    name: str
    obs_dim: int
    act_dim: int
    n_agents: int = 1
    reward: RewardMode = RewardMode.SCALAR
    client: str = ""
    """Free text naming the client library and version (logged, never parsed)."""

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "n_agents": self.n_agents,
            "reward": str(self.reward),
            "client": self.client,
        }

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Hello:
        reward = _str(m, "reward")
        if reward not in RewardMode.__members__.values():
            raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'reward' must be 'scalar' or 'terms', got {reward!r}")
        name = _str(m, "name")
        if not name or not name.isprintable():
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'name' must be non-empty printable text")
        return cls(
            name=name,
            obs_dim=_int(m, "obs_dim", 1, MAX_OBS_DIM),
            act_dim=_int(m, "act_dim", 1, MAX_ACT_DIM),
            n_agents=_int(m, "n_agents", 1, MAX_AGENTS),
            reward=RewardMode(reward),
            client=_str(m, "client") if "client" in m else "",
        )


@dataclass(frozen=True)
class Weights(Message):
    """Server → bot: a new actor. ``tensors`` is a safetensors file; ``sha256`` its digest.

    ``explore`` (optional) replaces the bot's exploration settings from this version on;
    an absent or empty map keeps the ones it has (see ``Welcome.explore``).
    """

    TYPE: ClassVar[str] = "weights"
    generation: int
    version: int
    arch: Architecture
    tensors: bytes
    sha256: bytes
    explore: Mapping[str, float] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "gen": self.generation,
            "ver": self.version,
            "arch": self.arch.to_wire(),
            "tensors": self.tensors,
            "sha256": self.sha256,
        }
        if self.explore:
            wire["explore"] = dict(self.explore)
        return wire

    @classmethod
    def pack(
        cls,
        generation: int,
        version: int,
        arch: Architecture | Mapping[str, Any],
        tensors: Mapping[str, NDArray[np.float32]],
        explore: Mapping[str, float] | None = None,
    ) -> Weights:
        """Build a weights message from float32 arrays: safetensors blob plus its sha256."""
        if not isinstance(arch, Architecture):
            arch = Architecture.from_mapping(arch)
        blob = encode_tensors(tensors)
        return cls(generation, version, arch, blob, hashlib.sha256(blob).digest(), dict(explore or {}))

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Weights:
        digest = _bytes(m, "sha256")
        if len(digest) != 32:
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'sha256' must be 32 bytes")
        return cls(
            generation=_int(m, "gen", 0, MAX_U64),
            version=_int(m, "ver", 0, MAX_U64),
            arch=Architecture.from_wire(_map(m, "arch")),
            tensors=_bytes(m, "tensors"),
            sha256=digest,
            explore=_explore(m),
        )


def _explore(m: Mapping[str, Any]) -> dict[str, float]:
    """The optional ``explore`` map: string keys to finite numbers."""
    explore = _map(m, "explore") if "explore" in m else {}
    if len(explore) > 16:
        raise ProtocolError(ErrorCode.BAD_FIELD, "field 'explore' holds more than 16 settings")
    return {k: _float(explore, k) for k in explore}


@dataclass(frozen=True)
class Welcome(Message):
    """Server → bot, answer to ``hello``: identity, limits, first credit grant and the current weights."""

    TYPE: ClassVar[str] = "welcome"
    bot_id: str
    session: str
    agent: str
    limits: Limits
    credit: int
    weights: Weights
    explore: Mapping[str, float] = field(default_factory=dict)
    """Agent-specific exploration settings (empty for PPO, whose std travels in the weights)."""

    def to_wire(self) -> dict[str, Any]:
        return {
            "bot_id": self.bot_id,
            "session": self.session,
            "agent": self.agent,
            "limits": self.limits.to_wire(),
            "credit": self.credit,
            "weights": self.weights.to_wire(),
            "explore": dict(self.explore),
        }

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Welcome:
        return cls(
            bot_id=_str(m, "bot_id"),
            session=_str(m, "session"),
            agent=_str(m, "agent"),
            limits=Limits.from_wire(_map(m, "limits")),
            credit=_int(m, "credit", 0, 1 << 16),
            weights=Weights.from_wire(_map(m, "weights")),
            explore=_explore(m),
        )


@dataclass(frozen=True, eq=False)
class TransitionBatch(Message):
    """Bot → server: ``n`` steps of experience as columns (rows of one agent in time order).

    ``next_obs`` has one row per step flagged truncated (in row order): the observation
    after the cut, used to bootstrap the value. ``score`` (terms mode only) has one row per
    step flagged terminal or truncated: the round score fed to ``computeRoundReward``.
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

    @property
    def n(self) -> int:
        return int(self.agent.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of array payload (what the server's queue accounts)."""
        arrays = (self.agent, self.episode, self.obs, self.act, self.logp, self.flags, self.rew, self.terms, self.next_obs)
        return sum(a.nbytes for a in arrays if a is not None)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "seq": self.seq,
            "gen": self.generation,
            "ver": self.version,
            "n": self.n,
            "agent": np.ascontiguousarray(self.agent, dtype=U32).tobytes(),
            "episode": np.ascontiguousarray(self.episode, dtype=U32).tobytes(),
            "obs": _f32_bytes(self.obs),
            "act": _f32_bytes(self.act),
            "logp": _f32_bytes(self.logp),
            "flags": np.ascontiguousarray(self.flags, dtype=U8).tobytes(),
        }
        if self.rew is not None:
            wire["rew"] = _f32_bytes(self.rew)
        if self.terms is not None:
            wire["terms"] = _f32_bytes(self.terms)
        if self.next_obs is not None and len(self.next_obs):
            wire["next_obs"] = _f32_bytes(self.next_obs)
        if self.score is not None and len(self.score):
            wire["score"] = _f32_bytes(self.score)
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
    """Float columns by name, in wire order, each exactly the size its shape needs."""

    @property
    def nbytes(self) -> int:
        """Payload bytes of the batch it becomes, as :attr:`TransitionBatch.nbytes` counts them (plus any score column)."""
        return len(self.agent) + len(self.episode) + len(self.flags) + sum(map(len, self.columns.values()))

    @classmethod
    def from_wire(cls, m: Mapping[str, Any], spec: SessionSpec) -> TransitionHeader:
        """Check a ``tr`` map's structure; raise the :class:`ProtocolError` naming the first fault.

        The well-formed frame takes a fast path of inline type and length checks (no
        helper calls, no per-frame dicts of expected sizes): it ran ~9 µs per frame on the
        event loop, ~15% of a 64-step frame's cost there. Anything it does not fully
        recognise, valid or not, goes through :meth:`_from_wire_checked`, the reference
        that names the exact error; a property test holds the two to the same answers.
        """
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
        n = _int(m, "n", 1, limits.max_batch)
        agent = _bytes(m, "agent")
        if len(agent) != 4 * n:
            raise ProtocolError(
                ErrorCode.SHAPE, f"field 'agent' holds {len(agent)} bytes, expected {4 * n} for shape [{n}] <u4"
            )
        raw_flags = _bytes(m, "flags")
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
        columns: dict[str, bytes] = {}
        for key, count in rows.items():
            if key in ("next_obs", "score") and key not in m:  # rows the flags call for: a row count of 0 (§7.1)
                raise ProtocolError(ErrorCode.SHAPE, f"field {key!r} is missing; the flags call for {count} row(s)")
            raw = _bytes(m, key)
            expected = count * widths[key] * 4
            if len(raw) != expected:
                shape = [count, widths[key]] if key in _WIDE else [count]
                raise ProtocolError(
                    ErrorCode.SHAPE, f"field {key!r} holds {len(raw)} bytes, expected {expected} for shape {shape} <f4"
                )
            columns[key] = raw
        seq, gen, ver = m.get("seq"), m.get("gen"), m.get("ver")
        if not (_is_u64(seq) and _is_u64(gen) and _is_u64(ver)):
            seq, gen, ver = _int(m, "seq", 0, MAX_U64), _int(m, "gen", 0, MAX_U64), _int(m, "ver", 0, MAX_U64)
        episode = _bytes(m, "episode")
        if len(episode) != 4 * n:
            raise ProtocolError(
                ErrorCode.SHAPE, f"field 'episode' holds {len(episode)} bytes, expected {4 * n} for shape [{n}] <u4"
            )
        return cls(int(seq), int(gen), int(ver), n, agent, episode, raw_flags, columns)  # type: ignore[arg-type]


_WIDE = ("obs", "act", "terms", "next_obs")
_COLUMN_ORDER = ("obs", "act", "logp", "rew", "terms", "score", "next_obs")


@functools.lru_cache(maxsize=64)
def _widths_of(obs_dim: int, act_dim: int) -> dict[str, int]:
    return {"obs": obs_dim, "act": act_dim, "logp": 1, "rew": 1, "terms": N_REWARD_TERMS, "score": 1, "next_obs": obs_dim}


def _widths(spec: SessionSpec) -> dict[str, int]:
    return _widths_of(spec.obs_dim, spec.act_dim)


def assemble_batches(headers: list[TransitionHeader], spec: SessionSpec, explain: bool) -> TransitionBatch | None:
    """Check the values of ``headers`` (frames of one session, in order) and join them into one batch.

    One join, one integer max over the IEEE bits of every float and one max over the
    agent ids, whatever the number of frames; columns are views into the joined buffer.
    The result is the frames' rows concatenated in order, so each agent's rows stay in
    time order, ``next_obs`` and ``score`` rows stay in flag order, and ``seq`` is the
    last frame's. All headers must share ``generation`` and ``version``.

    When a value is out of bounds: with ``explain`` raise the :class:`ProtocolError`
    naming the first culprit (``bad_field``, ``nonfinite`` or ``range``); without it,
    return ``None`` and let the caller check the frames one at a time.
    """
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
    # A frozen dataclass sets each field through object.__setattr__ (about 8 us for 14
    # fields, per frame, on the event loop); the values are all checked above, so fill
    # the instance directly. Defaults (None) cover the columns this reward mode lacks.
    fields: dict[str, Any] = {"rew": None, "terms": None, "score": None}
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


def _absent(m: Mapping[str, Any], key: str, shape: tuple[int, ...]) -> NDArray[np.float32]:
    """A conditional field with zero rows: it may be left out or sent empty."""
    if key in m:
        return _block(m, key, F32, shape)
    return np.zeros(shape, dtype=F32)


@dataclass(frozen=True)
class Credit(Message):
    """Server → bot: ``grant`` more ``tr`` messages may be sent.

    ``ack`` is the highest ``seq`` accepted on this connection so far (0 before the first).
    """

    TYPE: ClassVar[str] = "credit"
    grant: int
    ack: int

    def to_wire(self) -> dict[str, Any]:
        return {"grant": self.grant, "ack": self.ack}

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Credit:
        return cls(grant=_int(m, "grant", 0, 1 << 16), ack=_int(m, "ack", 0, MAX_U64))


@dataclass(frozen=True)
class Error(Message):
    """Either direction: a stable ``code``, a human ``msg``, and the ``seq`` it refers to (if any)."""

    TYPE: ClassVar[str] = "error"
    code: str
    msg: str
    ref: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "msg": self.msg[:MAX_MESSAGE_TEXT], "ref": self.ref}

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Error:
        ref = m.get("ref")
        return cls(
            code=_str(m, "code"),
            msg=_str(m, "msg", MAX_MESSAGE_TEXT),
            ref=None if ref is None else _int(m, "ref", 0, MAX_U64),
        )


@dataclass(frozen=True)
class Bye(Message):
    """Bot → server: leaving on purpose. Open episodes are kept, cut as truncated."""

    TYPE: ClassVar[str] = "bye"
    reason: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"reason": self.reason}

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Bye:
        return cls(reason=_str(m, "reason", MAX_MESSAGE_TEXT) if "reason" in m else "")
