"""Local matches (arena/bots/play.py): a policy controller's observation and recurrent state, and play_match
handing each player the observation it plays from."""

from __future__ import annotations

import numpy as np
import pytest

from agents import make_agent
from arena.bots.play import PolicyController, ScriptedController, play_match
from arena.games.tank import ACT_DIM
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.radar import RADAR_OBS_DIM
from arena.games.tank.rules import TankRules
from bot_protocol import Architecture, Policy, Weights


def policy(obs_dim: int, recurrent: str | None = None, seed: int = 0) -> Policy:
    options: dict[str, object] = {"hidden": (16,), "seed": seed}
    if recurrent:
        options |= {"recurrent": recurrent, "recurrent_size": 8}
    agent = make_agent("ppo", obs_dim, ACT_DIM, **options)
    arch, tensors = agent.export_actor()
    return Policy.from_weights(Weights.pack(0, 1, Architecture.from_mapping(arch), tensors))


def test_a_recurrent_controller_carries_each_matchs_state_and_a_round_start_clears_it() -> None:
    rnn = policy(OBS_DIM, "gru")
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(6, OBS_DIM)).astype(np.float32)
    controller = PolicyController("rnn", rnn, stochastic=False)
    assert controller.observation == "full"
    first = controller.act(obs)
    state = rnn.initial_state(6)
    (expected, _), state = rnn.step(obs, state, rng, deterministic=True)
    np.testing.assert_allclose(first, expected, atol=1e-6)
    # Rows 1 and 4 act alone (a league seat): only their states move on; the others keep theirs.
    kept = controller._states.copy()
    controller.act(obs[[1, 4]], rows=np.array([1, 4]))
    (_, _), moved = rnn.step(obs[[1, 4]], kept[[1, 4]], rng, deterministic=True)
    np.testing.assert_allclose(controller._states[[1, 4]], moved, atol=1e-6)
    np.testing.assert_array_equal(controller._states[[0, 2, 3, 5]], kept[[0, 2, 3, 5]])
    # A row past the ones seen grows the table from zeros.
    controller.act(obs[:1], rows=np.array([9]))
    assert controller._states.shape == (10, rnn.state_size) and not controller._states[6:9].any()
    mask = np.zeros(10, bool)
    mask[[0, 9]] = True
    controller.reset(mask)
    assert not controller._states[[0, 9]].any() and controller._states[1].any()


def test_a_radar_policy_plays_a_match_from_its_radar_observation() -> None:
    radar = policy(RADAR_OBS_DIM, "gru", seed=1)
    seen: list[tuple[int, ...]] = []

    class Watching(PolicyController):
        def act(self, obs, rows=None):  # type: ignore[no-untyped-def]
            seen.append(obs.shape)
            return super().act(obs, rows)

    player = Watching("radar", radar)
    assert player.observation == "radar"
    result = play_match([player, ScriptedController("spinner", 4)], rounds=4, n_matches=4, rules=TankRules(max_ticks=120))
    assert result["rounds"] == 4 and set(seen) == {(4, RADAR_OBS_DIM)}
    with pytest.raises(ValueError, match="do not fit the tank arena"):
        PolicyController("bad", policy(OBS_DIM + 1))
    with pytest.raises(ValueError, match="1v1"):  # the radar is a 1v1 observation
        play_match([Watching("a", radar), ScriptedController("sitting", 2), ScriptedController("sitting", 2)], rounds=2)
