"""The league's matchmaking rule, exactly as docs/arena.md states it (arena/league/matchmaking.py)."""

from __future__ import annotations

import numpy as np
import pytest

from arena.league import SELF, League, LeagueConfig, snapshot_name
from arena.league.matchmaking import DRAWN

SCRIPTED = ("sitting", "spinner", "walker", "tracker")


def league(**config: float) -> League:
    """The four-bot ladder's league (``drawn`` only where a test asks): the rule's arithmetic on four members."""
    config.setdefault("drawn", False)
    return League.start(LeagueConfig(**config), SCRIPTED)  # type: ignore[arg-type]


def test_probabilities_follow_the_documented_rule():
    """p_i = (1 - self) * ((1 - floor) * f_i / sum f + floor / n), f_i = (1 - w_i) ** exponent; self gets its share."""
    lg = league(self_share=0.25, floor_share=0.2, exponent=2.0)
    for name, w in zip(SCRIPTED, (1.0, 0.5, 0.2, 0.0), strict=True):
        lg.member(name).win_rate = w
    f = np.array([(1 - w) ** 2 for w in (1.0, 0.5, 0.2, 0.0)])
    expected = 0.75 * (0.8 * f / f.sum() + 0.2 / 4)
    p = lg.probabilities()
    assert p[SELF] == pytest.approx(0.25)
    assert [p[n] for n in SCRIPTED] == pytest.approx(list(expected))
    assert sum(p.values()) == pytest.approx(1.0)
    # An opponent the learner always beats keeps its floor: it is not forgotten.
    assert p["sitting"] == pytest.approx(0.75 * 0.2 / 4)
    # The hardest is drawn most.
    assert max(p, key=p.__getitem__) == "tracker"


def test_snapshots_as_one_member_of_the_draw():
    """The group gets the rule's share at its mean win rate; inside it each snapshot's f_i splits it."""
    lg = league(self_share=0.2, floor_share=0.2, exponent=2.0, snapshots_as_one=True, max_snapshots=8)
    for name, w in zip(SCRIPTED, (0.9, 0.8, 0.6, 0.0), strict=True):
        lg.member(name).win_rate = w
    for version, w in ((200, 0.7), (400, 0.5), (600, 0.3)):
        lg.add_snapshot(version)
        lg.member(snapshot_name(version)).win_rate = w
    rates = [0.9, 0.8, 0.6, 0.0, 0.5]  # the scripted bots, then the snapshots' mean
    f = np.array([(1 - w) ** 2 for w in rates])
    slots = 0.8 * (0.8 * f / f.sum() + 0.2 / 5)
    inside = np.array([0.3**2, 0.5**2, 0.7**2])
    p = lg.probabilities()
    assert [p[n] for n in SCRIPTED] == pytest.approx(list(slots[:4]))
    assert [p[snapshot_name(v)] for v in (200, 400, 600)] == pytest.approx(list(slots[4] * inside / inside.sum()))
    assert sum(p.values()) == pytest.approx(1.0)
    # One by one (the default), the same three snapshots take more, tracker less.
    apart = League.start(LeagueConfig(self_share=0.2, floor_share=0.2, max_snapshots=8), SCRIPTED)
    for m in lg.members:
        if m.kind == "snapshot":
            apart.add_snapshot(m.version)
        apart.member(m.name).win_rate = m.win_rate
    q = apart.probabilities()
    together = sum(p[snapshot_name(v)] for v in (200, 400, 600))
    assert sum(q[snapshot_name(v)] for v in (200, 400, 600)) > 2 * together and q["tracker"] < p["tracker"]


def test_draws_match_the_probabilities():
    lg = league()
    lg.member("tracker").win_rate = 0.1
    lg.member("sitting").win_rate = 0.95
    drawn = lg.draw(np.random.default_rng(0), 20_000)
    p = lg.probabilities()
    for name, share in p.items():
        assert drawn.count(name) / len(drawn) == pytest.approx(share, abs=0.015)


def test_win_rates_move_with_outcomes_and_a_draw_is_no_win():
    lg = league(win_rate_memory=10)
    for _ in range(50):
        lg.record("spinner", 1.0)
        lg.record("walker", 0.5)
        lg.record("tracker", 0.0)
    assert lg.member("spinner").win_rate > 0.99
    assert lg.member("walker").win_rate < 0.01  # draw_value 0: drawing with an opponent is not beating it
    halves = league(draw_value=0.5)
    for _ in range(50):
        halves.record("walker", 0.5)
    assert halves.member("walker").win_rate == pytest.approx(0.5)
    assert lg.member("tracker").win_rate < 0.01
    assert lg.member("spinner").rounds == 50
    lg.record("self@v999", 1.0)  # an evicted member's late round: ignored
    with pytest.raises(ValueError):
        lg.record("spinner", 2.0)


def test_one_early_loss_does_not_read_as_never_wins():
    """The 0.5 start weighs as two rounds."""
    lg = league()
    lg.record("walker", 0.0)
    assert lg.member("walker").win_rate == pytest.approx(1 / 3)


def test_snapshots_join_every_k_updates_and_the_easiest_leaves():
    lg = league(snapshot_every=100, max_snapshots=2, self_share=0.1)
    assert not lg.wants_snapshot(99) and lg.wants_snapshot(100)
    first, evicted = lg.add_snapshot(100)
    assert first.name == snapshot_name(100) == "self@v100" and evicted is None
    assert not lg.wants_snapshot(199) and lg.wants_snapshot(200)
    second, _ = lg.add_snapshot(200)
    first.win_rate, second.win_rate = 0.9, 0.3  # the learner beats the older one easily
    third, evicted = lg.add_snapshot(300)
    assert evicted is first
    assert [m.name for m in lg.snapshots()] == ["self@v200", "self@v300"]
    # The newest never leaves, even when it is the easiest.
    third.win_rate, second.win_rate = 1.0, 0.0
    _, evicted = lg.add_snapshot(400)
    assert evicted is not None and evicted.name == "self@v300"
    assert [m.name for m in lg.snapshots()] == ["self@v200", "self@v400"]
    # Scripted members never leave; ``self`` stays last.
    assert [m.name for m in lg.members][:4] == list(SCRIPTED) and lg.members[-1].name == SELF


def test_no_snapshots_and_no_self_play_when_disabled():
    lg = league(max_snapshots=0, self_share=0.0)
    assert not lg.wants_snapshot(10**6)
    assert SELF not in lg.probabilities()


def test_self_play_alone_is_ml_agents_scheme_and_needs_snapshots():
    """``scripted=false``: no scripted bot; only ``self`` until the first snapshot, then uniform over the
    window (``exponent=0``) beside self's share, as ML-Agents' self-play trainer draws."""
    lg = league(scripted=False, self_share=0.5, max_snapshots=10, exponent=0.0, snapshot_every=3)
    assert [m.name for m in lg.members] == [SELF] and lg.probabilities() == {SELF: 1.0}
    assert lg.draw(np.random.default_rng(0), 3) == [SELF] * 3
    assert not lg.wants_snapshot(2) and lg.wants_snapshot(3)
    for version in (3, 6):
        lg.add_snapshot(version)
    lg.member(snapshot_name(3)).win_rate = 0.9  # uniform: the win rates do not matter
    assert lg.probabilities() == pytest.approx({snapshot_name(3): 0.25, snapshot_name(6): 0.25, SELF: 0.5})
    for kwargs in ({"self_share": 0.0}, {"max_snapshots": 0}):
        with pytest.raises(ValueError, match="self-play and snapshots"):
            league(scripted=False, **kwargs)
    assert LeagueConfig.from_options({"scripted": "false"}).scripted is False


def test_drawn_joins_by_default_and_follows_the_config_on_resume():
    """``drawn`` (the default): one more scripted member (its parts drawn per round by the bot), weighed as any other."""
    assert LeagueConfig().drawn is True
    assert [m.name for m in League.start(LeagueConfig(), SCRIPTED).members] == [*SCRIPTED, DRAWN]
    assert [m.name for m in league().members] == list(SCRIPTED)  # drawn=false: the four-bot league
    lg = league(drawn=True)
    assert [(m.name, m.kind, m.source) for m in lg.members][-1] == (DRAWN, "scripted", DRAWN)
    assert lg.probabilities()[DRAWN] == pytest.approx(1 / 5)  # five members at the same start win rate
    assert [m.name for m in league(drawn=True, scripted=False).members] == [DRAWN]
    assert LeagueConfig.from_options({"drawn": "false"}).drawn is False
    lg.record("tracker", 1.0)
    resumed = League.from_state(league().state_dict(), LeagueConfig(self_share=0.1))
    assert [m.name for m in resumed.members] == [*SCRIPTED, DRAWN, SELF]
    dropped = League.from_state(lg.state_dict(), LeagueConfig(drawn=False))
    assert [m.name for m in dropped.members] == list(SCRIPTED) and dropped.member("tracker").rounds == 1


def test_part_of_the_ladder_plays_with_ladder_and_a_resume_narrows_it():
    """``ladder=walker+tracker``: those two of the scripted ladder (in its order) and ``drawn``; unknown names are
    one line; on resume the option narrows the saved ladder, whose other records leave with their bots."""
    config = LeagueConfig.from_options({"ladder": "tracker+walker"})
    assert [m.name for m in League.start(config, SCRIPTED).members] == ["walker", "tracker", DRAWN]
    assert config.ladder_of(SCRIPTED) == ["walker", "tracker"] and LeagueConfig().ladder_of(SCRIPTED) == list(SCRIPTED)
    with pytest.raises(ValueError, match=r"ladder: sniper is not on the ladder \(choose from sitting\+spinner"):
        League.start(LeagueConfig(ladder="sniper"), SCRIPTED)
    full = League.start(LeagueConfig(), SCRIPTED)
    full.record("tracker", 1.0)
    narrowed = League.from_state(full.state_dict(), LeagueConfig(ladder="tracker"))
    assert [m.name for m in narrowed.members] == ["tracker", DRAWN] and narrowed.member("tracker").rounds == 1


def test_state_round_trip_and_a_new_config_on_resume():
    lg = league(snapshot_every=10, max_snapshots=3)
    for version in (10, 20, 30):
        lg.add_snapshot(version)
    lg.record("tracker", 1.0)
    again = League.from_state(lg.state_dict())
    assert again.state_dict() == lg.state_dict()
    smaller = League.from_state(lg.state_dict(), LeagueConfig(max_snapshots=1, self_share=0.0))
    assert len(smaller.snapshots()) == 1 and SELF not in [m.name for m in smaller.members]
    with pytest.raises(ValueError, match="not a league state"):
        League.from_state({"members": []})


@pytest.mark.parametrize(
    "options",
    [
        {"snapshot_every": "0"},
        {"max_snapshots": "-1"},
        {"max_snapshots": "65"},
        {"self_share": "1"},
        {"floor_share": "1.5"},
        {"exponent": "-1"},
        {"exponent": "nan"},
        {"win_rate_memory": "0"},
        {"draw_value": "2"},
        {"snapshot_every": "many"},
        {"snapshots_as_one": "maybe"},
        {"scripted": "maybe"},
        {"drawn": "2"},
        {"ladder": "tracker+tracker"},
        {"ladder": "tracker+"},
        {"ladder": "tracker", "scripted": "false"},
        {"no_such_option": "1"},
    ],
)
def test_bad_parameters_are_refused(options):
    with pytest.raises(ValueError, match="league"):
        LeagueConfig.from_options(options)


def test_options_are_typed():
    config = LeagueConfig.from_options({"snapshot_every": "50", "self_share": "0.3"})
    assert config.snapshot_every == 50 and isinstance(config.snapshot_every, int) and config.self_share == 0.3


def test_a_beaten_opponent_that_wins_again_gets_more_than_its_floor():
    """The league's side of a collapse: once the learner loses to an opponent it beat, that opponent's share
    rises above the floor share it had (the PFSP weight (1 - w) ** exponent grows as the win rate falls)."""
    lg = league(win_rate_memory=50)
    for _ in range(200):
        for name, outcome in zip(SCRIPTED, (1.0, 1.0, 0.5, 0.0), strict=True):
            lg.record(name, outcome)
    config = lg.config
    floor = (1 - config.self_share) * config.floor_share / len(lg.opponents())
    beaten = lg.probabilities()["sitting"]
    assert beaten == pytest.approx(floor, rel=0.05)
    for _ in range(60):
        lg.record("sitting", 0.0)
    assert lg.probabilities()["sitting"] > 1.5 * floor


def test_the_populations_families_are_options_and_follow_the_config_on_resume():
    """``drawn_movements`` / ``drawn_targetings`` / ``drawn_power_rules``: the member plays the narrowed population
    (its source), the run's evaluations name it the same way; on resume the member keeps its record."""
    config = LeagueConfig.from_options({"drawn_targetings": "linear+circular", "drawn_movements": " random "})
    assert config.drawn_source == "drawn:movements=random,targetings=linear+circular"
    assert LeagueConfig().drawn_source == DRAWN
    lg = League.start(config, SCRIPTED)
    assert lg.member(DRAWN).source == config.drawn_source and lg.member(DRAWN).kind == "scripted"
    lg.record(DRAWN, 1.0)
    widened = League.from_state(lg.state_dict(), LeagueConfig())
    assert widened.member(DRAWN).source == DRAWN and widened.member(DRAWN).rounds == 1
    assert League.from_state(lg.state_dict()).member(DRAWN).source == config.drawn_source  # the saved config


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"drawn_movements": "flying"}, "league drawn_\\* options: .*flying"),
        ({"drawn_targetings": "linear", "drawn": "false"}, "apply with drawn=true"),
        ({"drawn_power_rules": "fixed+fixed"}, "distinct"),
        ({"drawn_replay": "1"}, r"drawn_replay must be a number in \[0, 1\)"),
        ({"drawn_replay": "-0.1"}, r"drawn_replay must be a number in \[0, 1\)"),
        ({"drawn_replay": "0.5", "drawn": "false"}, "drawn_replay applies with drawn=true"),
    ],
)
def test_a_bad_population_option_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        LeagueConfig.from_options(options)
