"""``arena export --royale``: a policy as a Tank Royale bot directory, and the round trip back into our arena.

The exported bot runs the official Python bot API in its own process and talks the Tank Royale
protocol; the round trip checks that what it sees and does equals what the policy sees and does
in the arena (its observation column by column, its actions), and the CLI tests run it the way a
user does.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agents import make_agent
from agents.checkpoint import CheckpointStore
from agents.ppo import PPOAgent
from arena.bots.play import ScriptedController
from arena.bots.policies import load_policy
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.engine import TankBattle
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.rules import TankRules
from arena.royale.export import export_royale_bot
from arena.royale.match import MatchListeners, RoyaleMatch, play_royale_match, royale_rules
from arena.royale.seats import RoyaleBotSpec
from arena.royale.server import RoyaleServerConfig
from bot_protocol import PolicyId
from tests.conftest import DATA, timeout

pytest.importorskip("robocode_tank_royale", reason="the official Tank Royale bot API (pip install -e '.[royale]')")
from arena.royale import policy_bot  # (imports the official API)

BOTS = DATA / "royale_bots"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real checkpoint of a fresh PPO agent (what a run writes), without training."""
    agent = make_agent("ppo", OBS_DIM, ACT_DIM, hidden=(32, 32), seed=3)
    store = CheckpointStore(tmp_path_factory.mktemp("run") / "checkpoints")
    return store.save({"agent": agent.state_dict(), "generation": 2, "version": 5}, PolicyId(2, 5))


def arena(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True, timeout=timeout(180))
    assert result.returncode == 0, result.stderr
    return result


def test_export_writes_a_tank_royale_bot_directory(checkpoint: Path, tmp_path: Path) -> None:
    """Config, start scripts, bot, weights and the bot_protocol copy, all named after the directory."""
    from robocode_tank_royale.bot_api.bot_info import BotInfo

    out = tmp_path / "ArenaPolicy"
    weights = export_royale_bot(checkpoint, out)
    names = {p.name for p in out.iterdir()}
    assert {
        "ArenaPolicy.json",
        "ArenaPolicy.sh",
        "ArenaPolicy.cmd",
        "ArenaPolicy.py",
        "policy.weights",
        "policy.json",
    } <= names
    assert {"bot_protocol", "requirements.txt", "README.md"} <= names
    assert "client.py" not in {p.name for p in (out / "bot_protocol").iterdir()}  # no websocket client needed
    info = BotInfo.from_file(str(out / "ArenaPolicy.json"))  # the official API accepts the config
    assert (info.name, info.version) == ("ArenaPolicy", "v5-gen2") and (weights.generation, weights.version) == (2, 5)
    assert (out / "ArenaPolicy.sh").stat().st_mode & stat.S_IXUSR
    assert json.loads((out / "policy.json").read_text())["rules"]["max_speed"] == 8.0
    policy = load_policy(out / "policy.weights")
    assert policy.obs_dim == OBS_DIM and policy.version == 5
    export_royale_bot(checkpoint, out)  # an earlier export is replaced
    with pytest.raises(ValueError, match="letters, digits"):
        export_royale_bot(checkpoint, tmp_path / "my-bot")
    (tmp_path / "Taken").mkdir()
    (tmp_path / "Taken" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an exported bot"):
        export_royale_bot(checkpoint, tmp_path / "Taken")
    with pytest.raises(FileNotFoundError):
        export_royale_bot(tmp_path / "missing.pt", tmp_path / "Other")


def test_bot_observation_equals_the_engines() -> None:
    """The exported bot's observation (own state + the enemy's scan) equals TankBattle.observe, column by column."""
    rules = TankRules()
    rule_map = {k: float(v) for k, v in vars(rules).items() if not isinstance(v, bool)}
    battle = TankBattle(64, 2, rules, seed=4)
    rng = np.random.default_rng(0)
    for _ in range(40):
        info = battle.step(rng.uniform(-1, 1, (64, 2, ACT_DIM)))
        battle.reset(info.round_over)
    battle.alive[:8, 1] = False  # some without an enemy
    expected = battle.observe()
    for m in range(64):
        me = {
            "x": battle.x[m, 0],
            "y": battle.y[m, 0],
            "direction": battle.heading[m, 0],
            "speed": battle.velocity[m, 0],
            "energy": battle.energy[m, 0],
            "gun_direction": battle.gun_heading[m, 0],
            "gun_heat": battle.gun_heat[m, 0],
        }
        enemy = None
        if battle.alive[m, 1]:
            enemy = {
                "x": battle.x[m, 1],
                "y": battle.y[m, 1],
                "direction": battle.heading[m, 1],
                "speed": battle.velocity[m, 1],
                "energy": battle.energy[m, 1],
            }
        got = policy_bot.observe(me, enemy, int(battle.alive[m, 1]), 800, 600, rule_map)
        np.testing.assert_allclose(got, expected[m, 0], atol=2e-6, err_msg=f"match {m}")


class _Watch:
    """A MatchObserver keeping the arena's observation after every tick and the actions each tick applied."""

    def __init__(self) -> None:
        self.obs: dict[tuple[int, int], np.ndarray] = {}
        self.actions: dict[tuple[int, int], np.ndarray] = {}

    def round_started(self, battle: TankBattle, matches: Any) -> None:
        pass

    def ticked(self, battle: TankBattle, actions: Any) -> None:
        key = (int(battle.round[0]), int(battle.tick[0]))
        self.obs[key] = battle.observe()[0, 0].copy()
        self.actions[key] = np.array(actions[0, 0], np.float64)


def round_trip(checkpoint: Path, name: str, watch: _Watch, turns: int, tmp_path: Path) -> list[dict[str, Any]]:
    """Export ``checkpoint`` as the bot ``name``, play one round of ``turns`` against spinner over the Tank Royale
    protocol with ``watch`` on the battle (the mean action, every turn logged); the bot's log rows."""
    out = tmp_path / name
    export_royale_bot(checkpoint, out)
    log = tmp_path / "bot.jsonl"
    result = play_royale_match(
        [RoyaleBotSpec.parse(f"royale:{out}"), ScriptedController("spinner", 1)],
        RoyaleMatch(
            1,
            rules=royale_rules(turns),
            config=RoyaleServerConfig(turn_timeout=1.0),
            bot_env={"ARENA_BOT_LOG": str(log), "ARENA_POLICY_MEAN": "1"},
            log_dir=tmp_path,
        ),
        MatchListeners(observer=watch),
    )
    assert result["rounds"] == 1 and result["royale"]["skipped_turns"] == {name: 0}
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.expensive
def test_exported_bot_plays_in_our_arena_like_the_policy(checkpoint: Path, tmp_path: Path) -> None:
    """Over the Tank Royale protocol, the exported bot sees the arena's observation and sends the policy's action."""
    watch = _Watch()
    rows = round_trip(checkpoint, "RoundTrip", watch, 300, tmp_path)
    fresh = [r for r in rows if r["fresh"]]
    assert len(fresh) > 0.8 * len(rows)  # the radar lock keeps the enemy scanned nearly every turn
    policy = load_policy(checkpoint)
    for r in fresh:
        key = (r["round"], r["turn"])
        np.testing.assert_allclose(r["obs"], watch.obs[key], atol=1e-5, err_msg=f"observation at {key}")
        mean = np.clip(policy.mean(watch.obs[key][None].astype(np.float32))[0], -1, 1)
        np.testing.assert_allclose(r["action"], mean, atol=1e-4, err_msg=f"policy action at {key}")
        applied = watch.actions.get((key[0], key[1] + 1))
        if applied is not None:  # the intent it sent drives the next step: speed, body and gun turn
            np.testing.assert_allclose(applied[:3], np.asarray(r["action"])[:3], atol=1e-5, err_msg=f"intent after {key}")


class _RadarWatch(_Watch):
    """The arena's radar observation of tank 0 after every tick, from a RadarMemory that follows the battle."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: Any = None

    def round_started(self, battle: TankBattle, matches: Any) -> None:
        from arena.games.tank.radar import RadarMemory

        if self.memory is None:
            self.memory = RadarMemory(battle)
        self.memory.reset(matches)
        self.memory.before_step()

    def ticked(self, battle: TankBattle, actions: Any) -> None:
        self.memory.after_step()
        key = (int(battle.round[0]), int(battle.tick[0]))
        self.obs[key] = self.memory.observe()[0, 0].copy()
        self.actions[key] = np.array(actions[0, 0], np.float64)
        self.memory.before_step()


@pytest.mark.expensive
def test_an_exported_radar_policy_turns_its_own_radar_and_sees_what_the_arena_shows_it(tmp_path: Path) -> None:
    """A recurrent policy of the radar observation: over Tank Royale's protocol the bot's observation equals the
    arena's radar observation every turn (fresh scan or not), its actions are the policy's with its state carried
    from turn to turn, and the radar turns as the policy says (no lock)."""
    from arena.games.tank.radar import RADAR_OBS_DIM

    agent = make_agent("ppo", RADAR_OBS_DIM, ACT_DIM, hidden=(32,), recurrent="gru", recurrent_size=8, seed=5)
    assert isinstance(agent, PPOAgent)
    last = [m for m in agent.actor.modules() if isinstance(m, torch.nn.Linear) and m.out_features == ACT_DIM][-1]
    with torch.no_grad():
        last.bias[4] = 3.0  # its mean spins the radar (45°/turn): it scans its enemy every few turns, and loses it
    store = CheckpointStore(tmp_path / "run" / "checkpoints")
    checkpoint = store.save({"agent": agent.state_dict(), "generation": 1, "version": 3}, PolicyId(1, 3))
    watch = _RadarWatch()
    rows = round_trip(checkpoint, "RadarTrip", watch, 200, tmp_path)
    assert len(rows) > 100 and any(r["fresh"] for r in rows) and not all(r["fresh"] for r in rows)
    policy = load_policy(checkpoint)
    state = policy.initial_state(1)
    rng = np.random.default_rng(0)
    compared = 0
    for r in rows:  # every turn steps the bot's state, from zeros at the round's start
        key = (r["round"], r["turn"])
        if key in watch.obs:
            np.testing.assert_allclose(r["obs"], watch.obs[key], atol=1e-5, err_msg=f"observation at {key}")
            compared += 1
        (acted, _), state = policy.step(np.asarray(r["obs"], np.float32)[None], state, rng, deterministic=True)
        np.testing.assert_allclose(r["action"], np.clip(acted[0], -1, 1), atol=1e-4, err_msg=f"action at {key}")
        applied = watch.actions.get((key[0], key[1] + 1))
        if applied is not None:  # the intent drives the next step, its radar turn included
            np.testing.assert_allclose(applied[[0, 1, 2, 4]], np.asarray(r["action"])[[0, 1, 2, 4]], atol=1e-5)
    assert compared > 0.9 * len(rows)


@pytest.mark.expensive
def test_cli_export_royale_then_match(checkpoint: Path, tmp_path: Path) -> None:
    """`arena export --royale -o DIR`, then `arena match --bot royale:DIR` boots it and plays."""
    out = tmp_path / "CliPolicy"
    assert "Tank Royale bot" in arena("export", str(checkpoint), "--royale", "-o", str(out)).stdout
    result = arena(
        "match", "--bot", f"royale:{out}", "--bot", "sitting", "--rounds", "1", "--ticks-per-round", "150", "--json"
    )
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert [b["name"] for b in summary["bots"]] == ["CliPolicy", "sitting"] and summary["rounds"] == 1
    assert summary["royale"]["turns"] == 150


def test_cli_refuses_what_is_not_a_bot(tmp_path: Path) -> None:
    """A royale:PATH without a bot is one line on stderr and exit 2."""
    result = subprocess.run(
        [sys.executable, "-m", "arena.cli", "match", "--bot", f"royale:{tmp_path}", "--bot", "sitting", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=timeout(60),
    )
    assert result.returncode == 2 and "JSON config" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.expensive
def test_cli_train_against_a_tank_royale_bot(tmp_path: Path) -> None:
    """`arena train --opponent royale:PATH` trains against a booted official-API bot (one per match)."""
    out = tmp_path / "run"
    arena(
        "train",
        "--opponent",
        f"royale:{BOTS / 'SpinBot'}",
        "--opponent",
        "sitting",
        "--matches",
        "2",
        "--rounds",
        "4",
        "--ticks-per-round",
        "120",
        "--no-report",
        "--out",
        str(out),
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] >= 4 and summary["opponents"][0].startswith("royale:")
