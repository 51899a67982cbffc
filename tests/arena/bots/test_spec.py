"""A learning bot's spec (arena/bots/spec.py): checked at construction, picklable, the n-th bot derived."""

from __future__ import annotations

import pickle

import pytest

from arena.bots.spec import LearningBotSpec
from arena.league import LeagueSpec


def test_the_nth_bot_gets_its_own_seed_name_and_league_slot_and_nothing_else_changes():
    spec = LearningBotSpec("ws://127.0.0.1:1", ("sitting", "tracker"), n_matches=8, seed=3, name="tank")
    third = spec.nth(2)
    assert (third.seed, third.name, third.index) == (3002, "tank2", 2)
    assert (third.url, third.opponents, third.n_matches, third.rules.max_ticks) == (spec.url, spec.opponents, 8, 2000)


def test_a_worker_process_receives_it_whole():
    spec = LearningBotSpec("ws://127.0.0.1:1", ("sitting",), league=LeagueSpec(), royale_matches=None, turns_per_s=None)
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_the_tank_royale_share_sizes_its_battle_per_bot_left():
    share = LearningBotSpec("ws://x", ("royale:a", "royale:b"), n_matches=4, royale_matches=2, turns_per_s=50.0)
    assert share.matches_for(["royale:a", "royale:b"]) == 4 and share.matches_for(["royale:b"]) == 2
    assert LearningBotSpec("ws://x", ("sitting",), n_matches=16).matches_for(["sitting"]) == 16


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"opponents": ()}, "needs opponents or a league"),
        ({"n_matches": 0}, "n_matches must be >= 1"),
        ({"max_ticks": 0}, "max_ticks must be >= 1"),
        ({"royale_matches": 0}, "royale_matches must be >= 1"),
        ({"turns_per_s": float("nan")}, "turns_per_s must be > 0"),
    ],
)
def test_a_spec_that_cannot_play_is_refused_at_construction(fields, message):
    with pytest.raises(ValueError, match=message):
        LearningBotSpec("ws://x", **fields)
