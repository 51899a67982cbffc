"""The control messages of wire format v1, one frozen dataclass each: the module bot authors read.

``hello`` and ``welcome`` (the handshake, with the :class:`Limits` a connection is held
to), ``weights`` (a new actor and its :class:`Architecture`), ``credit`` (flow control),
``error`` and ``bye``, and the protocol's constants. Each message knows how to turn
itself into the plain msgpack map that goes on the wire (:meth:`to_wire`) and how to be
rebuilt from one (:meth:`from_wire`), checking every field on the way in with the
readers of :mod:`bot_protocol.fields`. Nothing here touches a socket;
:mod:`bot_protocol.codec` adds the msgpack framing and the one decode boundary.

The ``tr`` message lives in :mod:`bot_protocol.transitions`: it is the one message
tuned for throughput (the server's ingest fast path), and it builds on the
:class:`SessionSpec` defined here. Its names stay importable from this module too.
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from .actions import MAX_CONTINUOUS, ActionSpace, space_problem
from .conv import ConvSpec
from .errors import ErrorCode, ProtocolError

# "X as X": re-exported so these names import from this module too; their home is fields.py.
from .fields import F32 as F32
from .fields import MAX_U64 as MAX_U64
from .fields import U8 as U8
from .fields import U32 as U32
from .fields import check_floats as check_floats
from .fields import read_bytes, read_field, read_float, read_int, read_map, read_str
from .policy_id import PolicyId
from .recurrent import RecurrentSpec
from .tensors import encode_tensors

__all__ = [
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
    "Weights",
    "Welcome",
]

PROTOCOL_VERSION = 1
SUBPROTOCOL = "arena.v1"

MAX_NAME_LEN = 64
MAX_MESSAGE_TEXT = 256
MAX_OBS_DIM = 4096
MAX_ACT_DIM = MAX_CONTINUOUS
MAX_AGENTS = 4096


class RewardMode(enum.StrEnum):
    """How a bot reports reward: one float per step, or the raw terms the trainer shapes."""

    SCALAR = "scalar"
    TERMS = "terms"


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
            max_batch=read_int(m, "max_batch", 1, 1 << 20),
            max_message_bytes=read_int(m, "max_message_bytes", 1024, 1 << 30),
            credit_window=read_int(m, "credit_window", 1, 1 << 16),
            max_abs=read_float(m, "max_abs"),
        )


@dataclass(frozen=True)
class SessionSpec:
    """What one connection agreed to send: the shapes every ``tr`` is checked against.

    ``act_dim`` counts the continuous dims; ``branches`` the sizes of the discrete branches
    (empty for a continuous-only run, whose frames take the decoder's fast path).
    """

    obs_dim: int
    act_dim: int
    n_agents: int
    reward: RewardMode
    limits: Limits = field(default_factory=Limits)
    branches: tuple[int, ...] = ()
    state_size: int = 0
    """Entries of the recurrent state every row carries in its ``state`` column: the run's actor's
    (``weights.arch.recurrent``), never the bot's word; 0: a memoryless actor's rows, which send none."""

    @functools.cached_property
    def actions(self) -> ActionSpace:
        """The session's action space (built once: ``tr`` checks read it every frame)."""
        return ActionSpace(self.act_dim, self.branches)


@dataclass(frozen=True)
class Architecture:
    """The actor network a ``weights`` message describes (enough to run it anywhere).

    Every kind runs the same MLP: ``y = x``, then for each ``l{i}``:
    ``y = y @ l{i}.weight.T + l{i}.bias``, with ``activation`` between layers (not after
    the last).

    - ``"gaussian_mlp"`` (PPO): the action mean is ``y``; the exploration std is
      ``exp(clip(log_std, log_std_min, log_std_max))`` from the ``log_std`` tensor.
    - ``"tanh_mlp"`` (DDPG, TD3): the action is ``act_limit * tanh(y)``, deterministic;
      exploration noise is the bot's to add, as the ``explore`` settings say.
    - ``"mixed_mlp"`` (PPO with discrete branches): ``y[:continuous]`` is a Gaussian mean as
      in ``gaussian_mlp`` (``log_std`` has ``continuous`` entries, and is absent when that is 0);
      the rest is each branch's logits in turn, a categorical over the actions its mask allows.

    With ``obs_clip`` (any kind), the input is first normalized:
    ``x = clip((obs - obs_norm.mean) / obs_norm.std, -obs_clip, obs_clip)``, from two more tensors.
    With ``conv`` (any kind), a convolutional torso reads the image at the start of ``x`` and its
    output, then the rest of ``x``, is the MLP's input (:mod:`bot_protocol.conv`).
    """

    kind: str
    layers: tuple[int, ...]
    activation: str
    log_std_min: float = 0.0
    log_std_max: float = 0.0
    act_limit: float = 1.0
    """``tanh_mlp`` only: actions lie in [-act_limit, act_limit] on every dimension."""
    continuous: int = 0
    """``mixed_mlp`` only: the Gaussian dims, the first outputs of the last layer."""
    branches: tuple[int, ...] = ()
    """``mixed_mlp`` only: the discrete branches' sizes, whose logits follow the Gaussian mean."""
    obs_clip: float | None = None
    """Where normalized observations are clipped; None (the field absent): observations are not normalized."""
    conv: ConvSpec | None = None
    """A convolutional torso before the MLP; None (the field absent): the MLP reads the observation itself."""
    recurrent: RecurrentSpec | None = None
    """A recurrent core between the observation (or the torso) and the MLP, whose first layer reads its output;
    None (the field absent): a memoryless actor."""

    @property
    def obs_dim(self) -> int:
        """Observation entries the actor reads: the first layer's inputs (the MLP's, or the recurrent core's),
        or with ``conv`` the image's plus what follows it."""
        inputs = self.recurrent.inputs if self.recurrent is not None else self.layers[0]
        if self.conv is None:
            return inputs
        return self.conv.image_size + inputs - self.conv.features

    @property
    def actions(self) -> ActionSpace:
        """The action space this actor acts in (every output of the other kinds is a continuous dim)."""
        if self.kind == "mixed_mlp":
            return ActionSpace(self.continuous, self.branches)
        return ActionSpace(self.layers[-1])

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"kind": self.kind, "layers": list(self.layers), "activation": self.activation}
        if self.obs_clip is not None:
            wire["obs_clip"] = self.obs_clip
        if self.conv is not None:
            wire["conv"] = self.conv.to_wire()
        if self.recurrent is not None:
            wire["recurrent"] = self.recurrent.to_wire()
        if self.kind == "tanh_mlp":
            wire["act_limit"] = self.act_limit
            return wire
        if self.kind == "mixed_mlp":
            wire["continuous"] = self.continuous
            wire["branches"] = list(self.branches)
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
            continuous=int(arch.get("continuous", 0)),
            branches=tuple(int(b) for b in arch.get("branches", ())),
            obs_clip=None if arch.get("obs_clip") is None else float(arch["obs_clip"]),
            conv=None if arch.get("conv") is None else ConvSpec.from_wire(arch["conv"]),
            recurrent=None if arch.get("recurrent") is None else RecurrentSpec.from_wire(arch["recurrent"]),
        )

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Architecture:
        layers = read_field(m, "layers")
        if (
            not isinstance(layers, list | tuple)
            or len(layers) < 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= 65536 for x in layers)
        ):
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'layers' must list at least two sizes in [1, 65536]")
        kind = read_str(m, "kind", MAX_NAME_LEN)
        obs_clip = _obs_clip(m)
        recurrent = _recurrent(m, layers[0])
        conv = _conv(m, recurrent.inputs if recurrent is not None else layers[0])
        if kind == "tanh_mlp":
            act_limit = read_float(m, "act_limit")
            if not act_limit > 0:
                raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'act_limit' must be > 0, got {act_limit}")
            activation = read_str(m, "activation", MAX_NAME_LEN)
            return cls(
                kind=kind, layers=tuple(layers), activation=activation, act_limit=act_limit, obs_clip=obs_clip,
                conv=conv, recurrent=recurrent,
            )  # fmt: skip
        continuous, branches = _mixed_outputs(m, layers[-1]) if kind == "mixed_mlp" else (0, ())
        return cls(
            kind=kind,
            layers=tuple(layers),
            activation=read_str(m, "activation", MAX_NAME_LEN),
            log_std_min=read_float(m, "log_std_min"),
            log_std_max=read_float(m, "log_std_max"),
            continuous=continuous,
            branches=branches,
            obs_clip=obs_clip,
            conv=conv,
            recurrent=recurrent,
        )


def _recurrent(m: Mapping[str, Any], mlp_inputs: int) -> RecurrentSpec | None:
    """The optional ``recurrent`` field: a core whose output is the MLP's input (``size == layers[0]``), or None."""
    if "recurrent" not in m:
        return None
    core = m["recurrent"]
    inputs = core.get("inputs") if isinstance(core, Mapping) else None
    if not (type(inputs) is int and inputs >= 1):
        raise ProtocolError(ErrorCode.BAD_FIELD, "field 'recurrent.inputs' must be an integer >= 1")
    spec = RecurrentSpec.from_wire(core, inputs)
    if spec.size != mlp_inputs:
        raise ProtocolError(
            ErrorCode.BAD_FIELD, f"a recurrent core of size {spec.size} feeds the MLP, whose first layer takes {mlp_inputs}"
        )
    return spec


def _conv(m: Mapping[str, Any], mlp_inputs: int) -> ConvSpec | None:
    """The optional ``conv`` field: a torso whose output fits what reads it (the MLP or the core), or None when absent."""
    if "conv" not in m:
        return None
    conv = ConvSpec.from_wire(m["conv"])
    if conv.features > mlp_inputs:
        raise ProtocolError(
            ErrorCode.BAD_FIELD,
            f"the conv torso gives {conv.features} features, more than the MLP's {mlp_inputs} inputs (layers[0])",
        )
    return conv


def _obs_clip(m: Mapping[str, Any]) -> float | None:
    """The optional ``obs_clip`` field: a finite number > 0, or None when absent (no normalization)."""
    if "obs_clip" not in m:
        return None
    obs_clip = read_float(m, "obs_clip")
    if not obs_clip > 0:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'obs_clip' must be > 0, got {obs_clip}")
    return obs_clip


def _mixed_outputs(m: Mapping[str, Any], width: int) -> tuple[int, tuple[int, ...]]:
    """A ``mixed_mlp``'s ``continuous`` and ``branches``: a valid space whose outputs are the last layer's."""
    continuous = read_int(m, "continuous", 0, MAX_ACT_DIM)
    branches = read_branches(m, required=True)
    if continuous + sum(branches) != width:
        raise ProtocolError(
            ErrorCode.BAD_FIELD,
            f"a mixed_mlp's last layer has {width} outputs, but continuous + sum(branches) = {continuous + sum(branches)}",
        )
    return continuous, branches


def read_branches(m: Mapping[str, Any], required: bool = False) -> tuple[int, ...]:
    """The ``branches`` field: an array of discrete branch sizes (absent, when not ``required``: none)."""
    if "branches" not in m and not required:
        return ()
    branches = read_field(m, "branches")
    if not isinstance(branches, list | tuple) or not all(type(b) is int for b in branches):
        raise ProtocolError(ErrorCode.BAD_FIELD, "field 'branches' must be an array of integers")
    problem = space_problem(0, branches) if branches else None  # act_dim's part is its reader's to check
    if problem is not None:
        raise ProtocolError(ErrorCode.BAD_FIELD, problem)
    return tuple(branches)


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
    branches: tuple[int, ...] = ()
    """Sizes of the discrete branches; sent only when there are some (``act_dim`` then may be 0)."""

    @property
    def actions(self) -> ActionSpace:
        """The action space this bot declares."""
        return ActionSpace(self.act_dim, self.branches)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "name": self.name,
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "n_agents": self.n_agents,
            "reward": str(self.reward),
            "client": self.client,
        }
        if self.branches:
            wire["branches"] = list(self.branches)
        return wire

    @classmethod
    def from_wire(cls, m: Mapping[str, Any]) -> Hello:
        reward = read_str(m, "reward", MAX_NAME_LEN)
        if reward not in RewardMode.__members__.values():
            raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'reward' must be 'scalar' or 'terms', got {reward!r}")
        name = read_str(m, "name", MAX_NAME_LEN)
        if not name or not name.isprintable():
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'name' must be non-empty printable text")
        obs_dim = read_int(m, "obs_dim", 1, MAX_OBS_DIM)
        act_dim, branches = read_int(m, "act_dim", 0, MAX_ACT_DIM), read_branches(m)
        if act_dim == 0 and not branches:
            raise ProtocolError(ErrorCode.BAD_FIELD, "act_dim must be >= 1 unless 'branches' lists discrete actions")
        return cls(
            name=name,
            obs_dim=obs_dim,
            act_dim=act_dim,
            n_agents=read_int(m, "n_agents", 1, MAX_AGENTS),
            reward=RewardMode(reward),
            client=read_str(m, "client", MAX_NAME_LEN) if "client" in m else "",
            branches=branches,
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

    @property
    def policy_id(self) -> PolicyId:
        """The identity bots compare before adopting these weights (a property: the wire keeps two integers)."""
        return PolicyId(self.generation, self.version)

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
        digest = read_bytes(m, "sha256")
        if len(digest) != 32:
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'sha256' must be 32 bytes")
        return cls(
            generation=read_int(m, "gen", 0, MAX_U64),
            version=read_int(m, "ver", 0, MAX_U64),
            arch=Architecture.from_wire(read_map(m, "arch")),
            tensors=read_bytes(m, "tensors"),
            sha256=digest,
            explore=_explore(m),
        )


def _explore(m: Mapping[str, Any]) -> dict[str, float]:
    """The optional ``explore`` map: string keys to finite numbers."""
    explore = read_map(m, "explore") if "explore" in m else {}
    if len(explore) > 16:
        raise ProtocolError(ErrorCode.BAD_FIELD, "field 'explore' holds more than 16 settings")
    return {k: read_float(explore, k) for k in explore}


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
            bot_id=read_str(m, "bot_id", MAX_NAME_LEN),
            session=read_str(m, "session", MAX_NAME_LEN),
            agent=read_str(m, "agent", MAX_NAME_LEN),
            limits=Limits.from_wire(read_map(m, "limits")),
            credit=read_int(m, "credit", 0, 1 << 16),
            weights=Weights.from_wire(read_map(m, "weights")),
            explore=_explore(m),
        )


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
        return cls(grant=read_int(m, "grant", 0, 1 << 16), ack=read_int(m, "ack", 0, MAX_U64))


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
            code=read_str(m, "code", MAX_NAME_LEN),
            msg=read_str(m, "msg", MAX_MESSAGE_TEXT),
            ref=None if ref is None else read_int(m, "ref", 0, MAX_U64),
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
        return cls(reason=read_str(m, "reason", MAX_MESSAGE_TEXT) if "reason" in m else "")
