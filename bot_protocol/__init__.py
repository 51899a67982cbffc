"""Arena bot protocol v1: the wire format, a sans-I/O codec, a numpy policy and a bot client.

This package never imports torch or the server: a bot needs only numpy, msgpack and
websockets. ``docs/protocol.md`` is the contract it implements.
"""

from .actions import ActionSpace
from .batching import Step, StepRecorder
from .codec import decode_from_bot, decode_from_server, encode
from .conv import ConvSpec
from .errors import CloseCode, ErrorCode, ProtocolError
from .messages import (
    PROTOCOL_VERSION,
    SUBPROTOCOL,
    Architecture,
    Bye,
    Credit,
    Error,
    Hello,
    Limits,
    Message,
    RewardMode,
    SessionSpec,
    Weights,
    Welcome,
)
from .policy import MixedAction, Policy
from .policy_id import PolicyId
from .tensors import decode_tensors, encode_tensors
from .transitions import FLAG_TERMINAL, FLAG_TRUNCATED, N_REWARD_TERMS, TransitionBatch, TransitionHeader, assemble_batches

__all__ = [
    "FLAG_TERMINAL",
    "FLAG_TRUNCATED",
    "N_REWARD_TERMS",
    "PROTOCOL_VERSION",
    "SUBPROTOCOL",
    "ActionSpace",
    "Architecture",
    "Bye",
    "CloseCode",
    "ConvSpec",
    "Credit",
    "Error",
    "ErrorCode",
    "Hello",
    "Limits",
    "Message",
    "MixedAction",
    "Policy",
    "PolicyId",
    "ProtocolError",
    "RewardMode",
    "SessionSpec",
    "Step",
    "StepRecorder",
    "TransitionBatch",
    "TransitionHeader",
    "Weights",
    "Welcome",
    "assemble_batches",
    "decode_from_bot",
    "decode_from_server",
    "decode_tensors",
    "encode",
    "encode_tensors",
]
