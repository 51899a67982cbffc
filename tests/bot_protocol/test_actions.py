"""Sans-I/O tests of bot_protocol.actions: the action space, its packed block, and its value checks' error codes."""

from __future__ import annotations

import numpy as np
import pytest

from bot_protocol import ActionSpace, ErrorCode, ProtocolError

MIXED = ActionSpace(2, (3, 1, 4))


@pytest.mark.parametrize(
    ("continuous", "branches", "words"),
    [
        (0, (), "act_dim must be >= 1 unless 'branches' lists discrete actions"),
        (-1, (), "act_dim (continuous dims) must be an integer in [0, 256]"),
        (257, (), "act_dim (continuous dims) must be an integer in [0, 256]"),
        (True, (), "act_dim (continuous dims) must be an integer in [0, 256]"),
        (1, (0,), "'branches' must list integers in [1, 1024]"),
        (1, (1025,), "'branches' must list integers in [1, 1024]"),
        (1, (2.0,), "'branches' must list integers in [1, 1024]"),
        (0, (1,) * 65, "'branches' lists 65 branches, at most 64"),
        (0, (1024,) * 5, "'branches' hold 5120 discrete actions, at most 4096"),
    ],
)
def test_a_space_no_run_can_have_is_refused_in_words(continuous, branches, words):
    """Every limit of the space is checked where it is built, with a sentence that names it."""
    with pytest.raises(ValueError) as info:
        ActionSpace(continuous, branches)
    assert str(info.value) == words


@pytest.mark.parametrize(
    ("space", "derived"),
    [
        (ActionSpace(3), (0, 0, False, 3, ())),
        (ActionSpace(0, (5,)), (1, 5, True, 6, (0,))),
        (ActionSpace(0, (3, 2, 4)), (3, 9, True, 12, (0, 3, 5))),
        (MIXED, (3, 8, True, 13, (0, 3, 4))),
        (ActionSpace(0, (1,)), (1, 1, True, 2, (0,))),  # a branch of one action is allowed: always action 0
    ],
)
def test_derived_sizes(space, derived):
    """n_branches, n_logits, is_discrete, packed_width and the branches' offsets follow from the two sizes."""
    assert (space.n_branches, space.n_logits, space.is_discrete, space.packed_width, space.offsets) == derived


def test_branches_given_as_a_list_become_a_tuple_and_spaces_compare_by_value():
    assert ActionSpace(2, [3, 1, 4]) == MIXED and hash(ActionSpace(2, [3, 1, 4])) == hash(MIXED)
    assert MIXED.describe() == "act_dim=2, branches=[3, 1, 4]"


def test_pack_lays_out_continuous_then_indices_then_mask_and_unpack_inverts_it():
    """[act | dact as float32 | mask as 0/1]: the block the server carries, split back exactly."""
    act = np.array([[0.5, -1.5], [2.0, 3.0]], np.float32)
    dact = np.array([[2, 0, 3], [1, 0, 0]], np.uint32)
    mask = np.array([[1, 0, 1, 1, 0, 0, 1, 1], [1, 1, 1, 1, 1, 0, 0, 0]], np.uint8)
    block = MIXED.pack(act, dact, mask)
    assert block.dtype == np.float32 and block.shape == (2, 13)
    assert block[0].tolist() == [0.5, -1.5, 2, 0, 3, 1, 0, 1, 1, 0, 0, 1, 1]
    cont, index, legal = MIXED.unpack(block)
    assert cont.tobytes() == act.tobytes()
    assert index.dtype == np.int64 and index.tolist() == dact.tolist()
    assert legal.dtype == np.bool_ and legal.tolist() == mask.astype(bool).tolist()


def test_pack_without_mask_is_all_legal_and_without_branches_is_act_itself():
    discrete = ActionSpace(0, (4, 2))
    block = discrete.pack(None, [[3, 1]])
    assert block.tolist() == [[3, 1, 1, 1, 1, 1, 1, 1]]
    act = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    assert ActionSpace(3).pack(act, None).tobytes() == act.tobytes()


def test_pack_refuses_misshaped_columns():
    with pytest.raises(ValueError, match="dact must have shape"):
        MIXED.pack(np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="act must have shape"):
        MIXED.pack(np.zeros((3, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="a packed block has 13 columns"):
        MIXED.unpack(np.zeros((2, 12), np.float32))


def _code(check) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        check()
    return info.value.code


def test_value_checks_raise_the_wire_codes():
    """bad_action past a branch's size; bad_mask for a value not 0/1 or an empty branch; illegal_action: a forbidden pick."""
    mask = np.ones((2, 8), np.uint8)
    good = np.array([[2, 0, 3], [0, 0, 0]], np.uint32)
    MIXED.check(good, mask)
    MIXED.check(good, None)
    assert _code(lambda: MIXED.check(np.array([[3, 0, 0], [0, 0, 0]], np.uint32), mask)) is ErrorCode.BAD_ACTION
    assert _code(lambda: MIXED.check(np.array([[0, 1, 0], [0, 0, 0]], np.uint32), None)) is ErrorCode.BAD_ACTION
    assert _code(lambda: MIXED.check(np.array([[0, 0, -1], [0, 0, 0]], np.int64), None)) is ErrorCode.BAD_ACTION
    two = mask.copy()
    two[1, 5] = 2
    assert _code(lambda: MIXED.check(good, two)) is ErrorCode.BAD_MASK
    empty = mask.copy()
    empty[1, 3] = 0  # branch 1 has one action: forbidding it leaves the branch nothing
    assert _code(lambda: MIXED.check(good, empty)) is ErrorCode.BAD_MASK
    forbidden = mask.copy()
    forbidden[0, 4 + 3] = 0
    assert _code(lambda: MIXED.check(good, forbidden)) is ErrorCode.ILLEGAL_ACTION


def test_check_order_is_bad_action_then_bad_mask_then_illegal_action():
    """A row wrong in several ways gets the first code of the wire's order."""
    mask = np.zeros((1, 8), np.uint8)  # every branch empty, and every pick forbidden
    assert _code(lambda: MIXED.check(np.array([[5, 0, 0]], np.uint32), mask)) is ErrorCode.BAD_ACTION
    assert _code(lambda: MIXED.check(np.array([[0, 0, 0]], np.uint32), mask)) is ErrorCode.BAD_MASK


def test_mask_of_takes_bools_or_zeros_and_ones():
    """A bot's mask becomes the wire's uint8; anything else is the server's bad_mask, a misshape a ValueError."""
    legal = np.ones((1, 8), bool)
    assert MIXED.mask_of(legal, 1).dtype == np.uint8
    assert MIXED.mask_of(legal.astype(np.float64), 1).tolist() == [[1] * 8]
    for value in (0.5, -1.0, np.nan, 2.0):
        odd = legal.astype(np.float64)
        odd[0, 1] = value
        assert _code(lambda odd=odd: MIXED.mask_of(odd, 1)) is ErrorCode.BAD_MASK
    with pytest.raises(ValueError, match="mask must have shape"):
        MIXED.mask_of(legal, 2)


def test_split_cuts_logits_per_branch():
    logits = np.arange(16, dtype=np.float32).reshape(2, 8)
    parts = MIXED.split(logits)
    assert [p.shape for p in parts] == [(2, 3), (2, 1), (2, 4)]
    assert parts[2][1].tolist() == [12, 13, 14, 15]
    assert ActionSpace(2).split(np.zeros((2, 0), np.float32)) == []
