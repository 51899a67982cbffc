"""Sans-I/O tests of bot_protocol.messages: the control messages round-trip, and hello's fields are checked."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from bot_protocol import (
    ActionSpace,
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
    Weights,
    Welcome,
    decode_from_bot,
    decode_from_server,
    encode,
)
from tests.bot_protocol.helpers import MAX, assert_code, reencode
from tests.bot_protocol.helpers import make_weights as _weights

# ── round trips ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "message",
    [
        Credit(grant=8, ack=0),
        Error("shape", "bad", 12),
        Error("internal", "oops", None),
        _weights(),
        Welcome("bot-1", "abc", "ppo", Limits(), 8, _weights(), {"noise": 0.1}),
    ],
)
def test_server_messages_round_trip(message):
    """Every server → bot message decodes to itself."""
    assert decode_from_server(encode(message)) == message


@pytest.mark.parametrize("message", [Hello("b", 4, 2), Hello("b", 4, 2, 7, RewardMode.TERMS), Bye("done"), Bye()])
def test_bot_messages_round_trip(message):
    """hello and bye decode to themselves."""
    assert decode_from_bot(encode(message), None, MAX) == message


# ── refusals ─────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("name", "", ErrorCode.BAD_FIELD),
        ("name", "x" * 65, ErrorCode.BAD_FIELD),
        ("obs_dim", 0, ErrorCode.BAD_FIELD),
        ("obs_dim", 1.5, ErrorCode.BAD_FIELD),
        ("act_dim", True, ErrorCode.BAD_FIELD),
        ("n_agents", 10**6, ErrorCode.BAD_FIELD),
        ("reward", "points", ErrorCode.BAD_FIELD),
    ],
)
def test_hello_field_checks(field, value, code):
    """Each hello field is type- and range-checked."""
    fields = msgpack.unpackb(encode(Hello("b", 4, 2)), raw=False)
    fields[field] = value
    assert_code(code, reencode(fields), None)


# ── action spaces: hello's branches, the mixed_mlp architecture ─────────────


def _hello_fields(**changes) -> dict:
    fields = msgpack.unpackb(encode(Hello("b", 4, 2)), raw=False)
    fields.update(changes)
    return fields


@pytest.mark.parametrize("message", [Hello("b", 4, 0, branches=(5,)), Hello("b", 4, 2, 3, RewardMode.TERMS, "c", (3, 1, 4))])
def test_hello_with_branches_round_trips(message):
    """A discrete or mixed bot's hello decodes to itself, its action space included."""
    decoded = decode_from_bot(encode(message), None, MAX)
    assert decoded == message and decoded.actions == ActionSpace(message.act_dim, message.branches)


def test_a_continuous_hello_is_what_it_was():
    """Without branches nothing new goes on the wire: old bots' hellos are unchanged, and read back as ()."""
    wire = msgpack.unpackb(encode(Hello("b", 4, 2)), raw=False)
    assert set(wire) == {"v", "t", "name", "obs_dim", "act_dim", "n_agents", "reward", "client"}
    assert decode_from_bot(encode(Hello("b", 4, 2)), None, MAX).branches == ()


@pytest.mark.parametrize(
    "changes",
    [
        {"act_dim": 0},  # no continuous dims and no branches: no actions at all
        {"act_dim": 0, "branches": []},
        {"branches": [0]},
        {"branches": [1025]},
        {"branches": [3, True]},
        {"branches": [2.0]},
        {"branches": 3},
        {"branches": [1024] * 5},  # 5120 discrete actions in all, over 4096
        {"act_dim": 257, "branches": [2]},
    ],
)
def test_hello_branches_checks(changes):
    """act_dim may be 0 only with branches; every branch size and the total are range-checked (bad_field)."""
    assert_code(ErrorCode.BAD_FIELD, reencode(_hello_fields(**changes)), None)


def test_hello_act_dim_zero_without_branches_says_why():
    with pytest.raises(ProtocolError) as info:
        Hello.from_wire(_hello_fields(act_dim=0))
    assert info.value.message == "act_dim must be >= 1 unless 'branches' lists discrete actions"
    with pytest.raises(ProtocolError) as info:
        Hello.from_wire(_hello_fields(branches=[1] * 65))  # past the codec's array limit too; checked here alone
    assert info.value.code is ErrorCode.BAD_FIELD


MIXED_ARCH = Architecture("mixed_mlp", (4, 8, 2 + 3 + 4), "tanh", -3.0, 0.5, continuous=2, branches=(3, 4))


@pytest.mark.parametrize(
    "arch",
    [MIXED_ARCH, Architecture("mixed_mlp", (4, 5), "relu", -20.0, 2.0, continuous=0, branches=(5,))],
)
def test_mixed_mlp_weights_round_trip(arch):
    """A weights message of a mixed_mlp actor (with or without continuous dims) decodes to itself."""
    tensors = {"l0.weight": np.zeros((arch.layers[1], 4), np.float32), "l0.bias": np.zeros(arch.layers[1], np.float32)}
    message = Weights.pack(1, 2, arch, tensors)
    assert decode_from_server(encode(message)) == message
    assert message.arch.to_wire() == {
        "kind": "mixed_mlp",
        "layers": list(arch.layers),
        "activation": arch.activation,
        "continuous": arch.continuous,
        "branches": list(arch.branches),
        "log_std_min": arch.log_std_min,
        "log_std_max": arch.log_std_max,
    }


def test_mixed_mlp_from_mapping_and_its_space():
    """An agent's exported description carries continuous and branches; the arch knows its action space."""
    exported = {"kind": "mixed_mlp", "layers": [4, 8, 9], "activation": "tanh", "log_std_min": -3.0, "log_std_max": 0.5}
    assert Architecture.from_mapping({**exported, "continuous": 2, "branches": [3, 4]}) == MIXED_ARCH
    assert MIXED_ARCH.actions == ActionSpace(2, (3, 4))
    assert Architecture("gaussian_mlp", (4, 3), "tanh", -3.0, 0.0).actions == ActionSpace(3)


def test_gaussian_and_tanh_arches_are_what_they_were():
    """The older kinds' arch maps gain no field."""
    gaussian = Architecture("gaussian_mlp", (4, 3), "tanh", -3.0, 0.0)
    assert set(gaussian.to_wire()) == {"kind", "layers", "activation", "log_std_min", "log_std_max"}
    tanh = Architecture("tanh_mlp", (4, 3), "tanh", act_limit=2.0)
    assert set(tanh.to_wire()) == {"kind", "layers", "activation", "act_limit"}


@pytest.mark.parametrize(
    "changes",
    [
        {"layers": [4, 8, 10]},  # 10 outputs, but 2 + 3 + 4 = 9
        {"continuous": 3},
        {"branches": [3, 5]},
        {"branches": [3, 0, 4]},
        {"branches": None},
        {"continuous": -1},
        {"continuous": True},
        {"continuous": 0, "branches": [], "layers": [4, 1]},
    ],
)
def test_mixed_mlp_arch_checks(changes):
    """from_wire checks the last layer's width against continuous + sum(branches), and the space itself (bad_field)."""
    wire = MIXED_ARCH.to_wire()
    wire.update(changes)
    if changes.get("branches", 0) is None:
        del wire["branches"]
    with pytest.raises(ProtocolError) as info:
        Architecture.from_wire(wire)
    assert info.value.code is ErrorCode.BAD_FIELD


def test_session_spec_knows_its_action_space():
    assert SessionSpec(4, 2, 1, RewardMode.SCALAR).actions == ActionSpace(2)
    assert SessionSpec(4, 0, 1, RewardMode.SCALAR, branches=(3,)).actions == ActionSpace(0, (3,))
