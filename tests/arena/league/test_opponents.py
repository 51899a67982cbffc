"""The league as tank 1 of a learning bot's matches: snapshots, saving and resuming (arena/league/opponents.py)."""

from __future__ import annotations

import numpy as np

from agents import make_agent
from arena.bots.play import PolicyController, ScriptedController
from arena.bots.policies import load_policy
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.rules import TankRules
from arena.league import SELF, LeagueConfig, LeagueSpec
from arena.league.seats import MixedSeat
from bot_protocol import Policy, Weights


def learner_policy(version: int, seed: int = 0) -> Policy:
    import torch

    torch.manual_seed(seed)
    arch, tensors = make_agent("ppo", OBS_DIM, ACT_DIM).export_actor()
    return Policy.from_weights(Weights.pack(0, version, arch, tensors))


def play(opponents, ticks: int, seed: int = 0, policy: Policy | None = None) -> TankBattle:
    """Drive tank 0 with ``policy`` (or zeros) and tank 1 by the league, as play_learning_bot does."""
    n = opponents.n_matches
    battle = TankBattle(n, 2, TankRules(max_ticks=60), seed=seed)
    actions = np.zeros((n, 2, ACT_DIM), np.float32)
    rng = np.random.default_rng(seed)
    for _ in range(ticks):
        obs = battle.observe()
        if policy is not None:
            opponents.learner(policy)
            actions[:, 0] = policy.act(obs[:, 0], rng)[0]
        opponents.act(obs, actions)
        info = battle.step(actions)
        if info.round_over.any():
            battle.reset(info.round_over)
            opponents.rounds_ended(info)
    return battle


def test_snapshots_join_as_versions_pass_and_play_their_matches(tmp_path):
    spec = LeagueSpec(LeagueConfig(snapshot_every=2, max_snapshots=2), directory=tmp_path / "league")
    opponents = spec.build(n_matches=24, seed=1)
    for version in range(1, 8):
        play(opponents, ticks=70, seed=version, policy=learner_policy(version))
    league = opponents.league
    assert [m.name for m in league.snapshots()] and len(league.snapshots()) <= 2
    assert league.last_snapshot_version == 6
    assert sum(m.rounds for m in league.members) >= 24 * 6  # every round was recorded against its opponent
    # Evicted snapshots' files are gone; the kept ones are on disk.
    files = sorted(p.name for p in (tmp_path / "league" / "snapshots").glob("*.weights"))
    assert files == sorted(f"{m.name}.weights" for m in league.snapshots())


def test_a_snapshot_acts_exactly_like_arena_match_with_its_file(tmp_path):
    """The saved snapshot is the learner's policy bit for bit; seated in a league it acts as PolicyController does."""
    spec = LeagueSpec(LeagueConfig(snapshot_every=5, max_snapshots=2), directory=tmp_path / "league")
    opponents = spec.build(n_matches=8, seed=0)
    policy = learner_policy(5, seed=7)
    opponents.learner(policy)
    (member,) = opponents.league.snapshots()
    loaded = load_policy(tmp_path / "league" / "snapshots" / member.source)  # what `arena match --bot FILE` loads
    obs = TankBattle(8, 2, TankRules(), seed=2).observe()
    np.testing.assert_array_equal(loaded.mean(obs[:, 1]), policy.mean(obs[:, 1]))
    assert (loaded.generation, loaded.version) == (0, 5)
    # Seated for rows 1, 4 and 6 of eight matches: the same actions as arena match's controller with the same seed.
    names = ["sitting"] * 8
    for m in (1, 4, 6):
        names[m] = member.name

    def make(name: str):
        return PolicyController(name, loaded, seed=11) if name == member.name else ScriptedController(name, 8, 0)

    seat = MixedSeat(1, names, make)
    out = np.zeros((8, 2, ACT_DIM), np.float32)
    seat.act(obs, out)
    direct = PolicyController("x", loaded, seed=11).act(obs[[1, 4, 6], 1])
    np.testing.assert_array_equal(out[[1, 4, 6], 1], direct)
    assert not out[[0, 2, 3, 5, 7], 1].any()  # sitting


def test_resume_restores_the_league(tmp_path):
    directory = tmp_path / "league"
    spec = LeagueSpec(LeagueConfig(snapshot_every=3, max_snapshots=4), directory=directory)
    opponents = spec.build(n_matches=16, seed=0)
    for version in (3, 6):
        play(opponents, ticks=130, seed=version, policy=learner_policy(version, seed=version))
    opponents.close()
    before = opponents.league.state_dict()
    resumed = LeagueSpec(LeagueConfig(snapshot_every=3, max_snapshots=4), directory=directory, resume=True).build(16, seed=1)
    assert resumed.league.state_dict() == before
    assert resumed.league.last_snapshot_version == 6 and len(resumed.league.snapshots()) == 2
    # The resumed snapshots are the same policies.
    obs = TankBattle(4, 2, TankRules(), seed=0).observe()[:, 1]
    np.testing.assert_array_equal(resumed._policies["self@v6"].mean(obs), learner_policy(6, seed=6).mean(obs))
    # A fresh league (no resume) ignores the saved one.
    assert spec.build(16, seed=0).league.snapshots() == []


def test_self_play_plays_the_live_policy():
    opponents = LeagueSpec(LeagueConfig(self_share=0.9, max_snapshots=0)).build(n_matches=64, seed=0)
    assert SELF in opponents.names
    policy = learner_policy(1)
    opponents.learner(policy)
    obs = TankBattle(64, 2, TankRules(), seed=0).observe()
    out = np.zeros((64, 2, ACT_DIM), np.float32)
    opponents.act(obs, out)
    rows = [m for m, name in enumerate(opponents.names) if name == SELF]
    np.testing.assert_allclose(out[rows, 1].mean(axis=0), policy.mean(obs[rows, 1]).mean(axis=0), atol=0.5)


def test_self_play_goes_on_through_the_end_of_its_rounds():
    """Rounds that end reset their seats; the live self has no state to reset (it once raised there and killed
    the worker of every run with ``self_share``)."""
    battle = TankBattle(8, 2, TankRules(max_ticks=20), seed=0)
    opponents = LeagueSpec(LeagueConfig(self_share=0.9, max_snapshots=0)).build(n_matches=8, seed=0)
    opponents.learner(learner_policy(1))
    actions = np.zeros((8, 2, ACT_DIM), np.float32)
    ended = 0
    for _ in range(45):  # two rounds and more in every match
        opponents.act(battle.observe(), actions)
        info = battle.step(actions)
        if info.round_over.any():
            opponents.rounds_ended(info)
            ended += int(info.round_over.sum())
            battle.reset(info.round_over)
    assert ended >= 16 and SELF in opponents.names


def test_resume_keeps_the_saved_files_and_adds_new_ones(tmp_path):
    from bot_protocol import encode

    first, second = tmp_path / "first.weights", tmp_path / "second.weights"
    first.write_bytes(encode(learner_policy(3, seed=3).to_weights()))
    second.write_bytes(encode(learner_policy(4, seed=4).to_weights()))
    directory = tmp_path / "league"
    config = LeagueConfig(self_share=0.1)  # ``self`` stays last
    LeagueSpec(config, files=(("first", str(first)),), directory=directory).build(8, seed=0).close()
    resumed = LeagueSpec(config, files=(("second", str(second)),), directory=directory, resume=True).build(8, seed=0)
    files = [m.name for m in resumed.league.members if m.kind == "file"]
    assert files == ["first", "second"] and resumed.league.members[-1].name == SELF
    obs = TankBattle(4, 2, TankRules(), seed=0).observe()[:, 1]
    np.testing.assert_array_equal(resumed._policies["first"].mean(obs), learner_policy(3, seed=3).mean(obs))
    assert {"first", "second"} <= set(resumed.league.probabilities())


def test_drawn_is_seated_as_a_scripted_member_when_the_league_asks():
    """``drawn=true``: the league seats the ``drawn`` bot (compiled) on its matches, and records their rounds."""
    spec = LeagueSpec(LeagueConfig(drawn=True, scripted=False))
    assert "drawn" in spec.describe()
    opponents = spec.build(n_matches=6, seed=0, engine="numba")
    assert opponents.names == ["drawn"] * 6
    assert isinstance(opponents.seat.controllers["drawn"], ScriptedController)
    play(opponents, ticks=70)
    assert opponents.league.member("drawn").rounds >= 6


def test_drawn_replays_the_draws_the_learner_did_not_beat_when_the_league_asks():
    """``drawn_replay``: the league's ``drawn`` keeps the draws a learner standing still never beats and replays them;
    off (the default), it keeps none."""
    replaying = LeagueSpec(LeagueConfig(drawn=True, scripted=False, drawn_replay=0.5))
    assert "50% replaying the unbeaten" in replaying.describe()
    opponents = replaying.build(n_matches=6, seed=0)
    play(opponents, ticks=130)
    bot = opponents.seat.controllers["drawn"].bot
    assert bot.replay_share == 0.5 and bot.unbeaten >= 6
    fresh = LeagueSpec(LeagueConfig(drawn=True, scripted=False)).build(n_matches=6, seed=0)
    play(fresh, ticks=130)
    assert fresh.seat.controllers["drawn"].bot.unbeaten == 0
