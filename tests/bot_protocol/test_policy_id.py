"""``PolicyId`` (bot_protocol/policy_id.py): ordered generation first, a plain tuple to older code, ``"gen.ver"`` as text."""

from __future__ import annotations

from bot_protocol import PolicyId


def test_a_newer_generation_sorts_above_every_version_of_the_old_one():
    assert PolicyId(1, 0) > PolicyId(0, 10**9)
    assert PolicyId(0, 2) > PolicyId(0, 1) and PolicyId(3, 4) >= PolicyId(3, 4)
    assert sorted([PolicyId(1, 0), PolicyId(0, 7), PolicyId(0, 3), PolicyId(2, 1)]) == [
        PolicyId(0, 3),
        PolicyId(0, 7),
        PolicyId(1, 0),
        PolicyId(2, 1),
    ]
    assert max(PolicyId(0, 99), PolicyId(1, 1)) == PolicyId(1, 1)


def test_it_equals_unpacks_and_orders_like_the_tuples_code_builds_by_hand():
    policy = PolicyId(2, 17)
    assert policy == (2, 17) and hash(policy) == hash((2, 17)) and {(2, 17): "x"}[policy] == "x"
    assert policy < (3, 0) and policy > (2, 16)
    generation, version = policy
    assert (generation, version) == (policy.generation, policy.version) == (2, 17)


def test_str_is_generation_dot_version_and_repr_names_the_fields():
    assert str(PolicyId(2, 17)) == "2.17" and f"{PolicyId(0, 0)}" == "0.0"
    shown = repr(PolicyId(2, 17))
    assert "PolicyId" in shown and "generation=2" in shown and "version=17" in shown
