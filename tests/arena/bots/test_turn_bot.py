"""Turn-based games (PettingZoo AEC) through a real server: rows held until a seat's reward is known, masks kept."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from agents import make_agent
from arena.bots.turn_bot import (
    PAST,
    PAST_EVERY,
    PAST_POOL,
    RANDOM,
    SELF,
    Seats,
    TurnGameBot,
    TurnPlay,
    is_module_path,
    load_turn_game,
    play_against,
    random_move,
)
from bot_protocol import Policy, Weights
from server import ServerConfig, ServerThread, TrainingServer
from tests.arena.bots import tiny_drop, tiny_nim


def server(seed: int = 0) -> tuple[TrainingServer, object]:
    """A server of a small PPO learner for tiny_nim, and its agent."""
    agent = make_agent("ppo", 5, 0, branches=(2,), rollout_steps=256, minibatch_size=64, epochs=4, learning_rate=3e-3,
                       entropy_coef=0.0, seed=seed)  # fmt: skip
    return TrainingServer(agent, ServerConfig(port=0)), agent


def test_module_paths_are_told_from_gymnasium_ids_and_loaded():
    assert is_module_path("pettingzoo.classic.connect_four_v3") and is_module_path("tests.arena.bots.tiny_nim")
    assert not is_module_path("CartPole-v1") and not is_module_path("ALE/Pong-v5")
    assert load_turn_game("tests.arena.bots.tiny_nim") is tiny_nim.env
    with pytest.raises(ValueError, match=r"cannot import 'no\.such\.game'"):
        load_turn_game("no.such.game")
    with pytest.raises(ValueError, match="has no env"):
        load_turn_game("tests.arena.bots.test_turn_bot")


def test_seats_read_the_observation_and_its_action_mask():
    env = tiny_nim.env()
    env.reset(seed=0)
    seats = Seats.of(env)
    assert seats.names == ("player_0", "player_1") and seats.observations.obs_dim == 5
    obs, legal = seats.read({"observation": 1, "action_mask": np.array([1, 0], np.int8)}, {})
    np.testing.assert_array_equal(obs, [0, 1, 0, 0, 0])
    np.testing.assert_array_equal(legal, [True, False])


@pytest.mark.parametrize("opponent", [SELF, RANDOM, PAST])
def test_self_play_and_a_fixed_opponent_train_through_a_real_server_with_no_illegal_move(opponent):
    with ServerThread(server()[0]) as running:
        bot = TurnGameBot(running.url, tiny_nim.env, n_games=4, seed=1, play=TurnPlay(opponent))
        with bot:
            assert bot.run(1_500) >= 1_500
        assert bot.illegal_moves == 0 and all(game.illegal == 0 for game in bot.games)
        assert bot.games_played > 300
        version = running.call(lambda: running.server.trainer.version)
    assert version >= 1  # the trainer updated on the rows


def test_random_openings_are_drawn_per_game_played_for_either_seat_and_never_recorded():
    """tiny_nim from 4 stones: up to 3 random moves can end a game before the learner moves; nothing breaks."""
    with pytest.raises(ValueError, match="opening must be >= 0"):
        TurnPlay(opening=-1)
    games = {}
    for opening in (0, 3):
        with ServerThread(server()[0]) as running:
            bot = TurnGameBot(running.url, tiny_nim.env, n_games=4, seed=1, play=TurnPlay(opening=opening))
            drawn = set()
            with bot:
                for _ in range(30):
                    drawn.update(bot._opening_left)
                    bot.run(50)
        assert bot.illegal_moves == 0 and bot.steps >= 1_500
        games[opening] = bot.games_played
        assert drawn <= set(range(opening + 1)) and (len(drawn) > 1) == (opening > 0)  # moves left, seen between ticks
    assert games[3] > games[0] * 1.2  # moves of the opening are not rows, so the same rows span more games


def test_past_keeps_every_tenth_version_and_draws_self_play_or_a_past_self_per_game():
    with ServerThread(server()[0]) as running:
        bot = TurnGameBot(running.url, tiny_nim.env, n_games=4, seed=3, play=TurnPlay(PAST))
        drawn: list[object] = []
        with bot:
            for _ in range(200):  # rollouts of 256 rows: a new version every few hundred moves
                if len(bot.past) >= 3:
                    break
                bot.run(500)
                drawn.extend(bot.past_opponent)
        versions = [p.version for p in bot.past]
        assert len(versions) <= PAST_POOL and all(b - a >= PAST_EVERY for a, b in itertools.pairwise(versions))
        assert None in drawn and any(isinstance(p, Policy) for p in drawn)  # self-play and past selves both
        assert bot.illegal_moves == 0


def test_the_trained_policy_wins_as_the_first_player_and_plays_only_legal_moves():
    """From 4 stones the first player always wins with the right moves: self-play finds them."""
    srv, agent = server(seed=2)
    with ServerThread(srv) as running, TurnGameBot(running.url, tiny_nim.env, n_games=8, seed=2) as bot:
        bot.run(12_000)
    arch, tensors = agent.export_actor()  # type: ignore[attr-defined]
    policy = Policy.from_weights(Weights.pack(0, 1, arch, tensors))
    first = play_against(policy, tiny_nim.env, random_move, seat=0, games=100, seed=3)
    assert first.win >= 0.95 and first.illegal_moves == 0
    random_first = play_against(policy, tiny_nim.env, random_move, seat=1, games=100, seed=3)
    assert random_first.win + random_first.loss == 1.0 and random_first.illegal_moves == 0


def _drop_server(rollout_steps: int = 256) -> TrainingServer:
    """A server of a small PPO learner for tiny_drop (3 x 4 board, 2 planes; a move per column)."""
    agent = make_agent("ppo", 24, 0, branches=(4,), rollout_steps=rollout_steps, minibatch_size=64, epochs=2, seed=0)
    return TrainingServer(agent, ServerConfig(port=0))


def _accepted(running) -> int:
    return running.call(lambda: sum(s.steps_accepted for s in running.server.sessions.values()))


def test_games_cut_by_a_time_limit_send_their_rows_with_the_position_they_were_cut_in():
    """tiny_drop cuts a game at its ninth move: those rows are truncated, and each carries its next observation."""
    with ServerThread(_drop_server()) as running:
        bot = TurnGameBot(running.url, tiny_drop.env, n_games=4, seed=5)
        cut: list[int] = []
        record = bot.bot.record

        def counted(*args, **step):  # the real record, counting the truncated rows it is given
            cut.append(int(np.sum(step["truncated"])))
            record(*args, **step)

        bot.bot.record = counted  # type: ignore[method-assign]
        with bot:
            bot.run(1_000)
            deadline = time.monotonic() + 10
            while _accepted(running) < bot.steps and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _accepted(running) == bot.steps  # every row accepted, the cut ones too
    assert sum(cut) > 10 and bot.games_played > 50 and bot.illegal_moves == 0


def test_mirror_sends_every_row_twice_the_second_time_mirrored_with_the_probability_it_was_drawn_with():
    with pytest.raises(ValueError, match="--mirror needs a board"):
        TurnGameBot("ws://127.0.0.1:9", tiny_nim.env, play=TurnPlay(mirror=True))  # a pile of stones has no left and right
    with ServerThread(_drop_server()) as running:
        bot = TurnGameBot(running.url, tiny_drop.env, n_games=4, seed=7, play=TurnPlay(mirror=True))
        sent: list[dict] = []
        record = bot.bot.record

        def kept(obs, actions, logp, **step):  # the real record, keeping what it is given
            sent.append({"obs": obs, "logp": logp, **step})
            record(obs, actions, logp, **step)

        bot.bot.record = kept  # type: ignore[method-assign]
        with bot:
            assert bot.bot.config.n_agents == 2 * 4 * 2  # every seat of every game, and its mirror
            bot.run(600)
            deadline = time.monotonic() + 10
            while _accepted(running) < 2 * bot.steps and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _accepted(running) == 2 * bot.steps  # steps counts the moves; twice as many rows arrive
        assert bot.illegal_moves == 0
    mirror = bot.mirror
    assert mirror is not None
    for batch in sent:
        n = len(batch["agents"]) // 2
        original, mirrored = slice(0, n), slice(n, None)
        np.testing.assert_array_equal(batch["agents"][mirrored], batch["agents"][original] + 4 * 2)
        np.testing.assert_array_equal(batch["obs"][mirrored], mirror.observations(batch["obs"][original]))
        np.testing.assert_array_equal(batch["mask"][mirrored], mirror.masks(batch["mask"][original]))
        np.testing.assert_array_equal(batch["dact"][mirrored], mirror.moves(batch["dact"][original]))
        np.testing.assert_array_equal(batch["next_obs"][mirrored], mirror.observations(batch["next_obs"][original]))
        for name in ("logp", "reward", "terminal", "truncated"):  # drawn as likely as its original, and as rewarded
            np.testing.assert_array_equal(batch[name][mirrored], batch[name][original])
