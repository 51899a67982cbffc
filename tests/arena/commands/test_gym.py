"""``arena gym``: one command trains a gymnasium game through its own server (arena/commands/gym.py, gym_local.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")

from arena.cli import main
from arena.defaults import GYM_STEPS_PER_ENV, TURN_ENTROPY_COEF, TURN_GAE_LAMBDA, TURN_OPENING


def test_without_url_it_trains_evaluates_and_writes_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "run"
    code = main(["gym", "CartPole-v1", "--steps", "3000", "--eval-episodes", "2", "--seed", "1", "--out", str(out), "--json"])
    assert code == 0
    stdout, stderr = capsys.readouterr()
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["env"] == "CartPole-v1" and summary["steps"] >= 3000 and summary["eval_episodes"] == 2
    assert summary["seconds"] > 0 and summary["eval_mean_return"] > 0 and summary["eval_std_return"] >= 0
    assert summary["policy_version"] >= 1 and summary["seed"] == 1
    assert "branches=[2]" in stderr and "steps=3,000" in stderr  # progress goes to stderr with --json
    assert any((out / "checkpoints").iterdir())


def test_a_module_path_trains_a_turn_based_game_by_self_play(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("pettingzoo")
    argv = ["gym", "tests.arena.bots.tiny_nim", "--steps", "2000", "--n-envs", "4", "--eval-episodes", "20"]
    assert main([*argv, "--workers", "2", "--out", str(tmp_path), "--json"]) == 0  # two bot processes, two games each
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["env"] == "tests.arena.bots.tiny_nim" and summary["steps"] >= 2000 and summary["games"] > 0
    assert summary["workers"] == 2 and summary["n_envs"] == 4
    assert summary["illegal_moves"] == 0 and summary["opponent"] == "self" and summary["opening"] == TURN_OPENING
    assert summary["mirror"] is False and summary["mirror_why"] == "not a board with one move per column or square"
    assert summary["agent_options"]["entropy_coef"] == TURN_ENTROPY_COEF  # the turn-based preset, not the gym one
    assert summary["agent_options"]["gae_lambda"] == TURN_GAE_LAMBDA
    for seat in ("first", "second"):
        record = summary["vs_random"][seat]
        assert set(record) == {"win", "draw", "loss", "illegal_moves"} and record["win"] + record["loss"] == 1.0


def test_mirror_trains_a_board_game_on_its_moves_and_their_mirror_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """By default (``auto``) a board whose rules hold left-right is mirrored; a lopsided one, or ``off``, is not."""
    pytest.importorskip("pettingzoo")
    argv = ["gym", "tests.arena.bots.tiny_drop", "--steps", "1500", "--n-envs", "4", "--eval-episodes", "4"]
    assert main([*argv, "--out", str(tmp_path / "auto"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["mirror"] is True and summary["illegal_moves"] == 0 and summary["policy_version"] >= 1
    assert summary["mirror_why"] == "the rules held left-right in 20 random games"
    assert 1500 <= summary["steps"] < 3000  # --steps counts the moves made, not the rows sent (twice as many)
    assert summary["agent_options"]["rollout_steps"] == 4 * 2 * 2 * GYM_STEPS_PER_ENV  # every seat and its mirror
    for game, flags, why in (
        ("tests.arena.bots.tiny_drop", ["--mirror", "off"], "--mirror off"),
        ("tests.arena.bots.tiny_drop_lopsided", [], "the rules are not left-right symmetric: game 0, turn 0"),
    ):
        argv = ["gym", game, "--steps", "300", "--n-envs", "2", "--eval-episodes", "0", *flags]
        assert main([*argv, "--out", str(tmp_path / why[:5]), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["mirror"] is False and summary["mirror_why"].startswith(why)
        assert summary["agent_options"]["rollout_steps"] == 2 * 2 * GYM_STEPS_PER_ENV


def test_a_conv_torso_trains_through_the_server_and_its_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """CartPole's four numbers read as a 1x4 image: the torso's weights go to the bot process and back in the summary."""
    argv = ["gym", "CartPole-v1", "--steps", "2000", "--eval-episodes", "1", "--out", str(tmp_path), "--json"]
    assert main([*argv, "--agent-option", "conv=4,1,2", "--agent-option", "image=1,4,1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["agent_options"]["conv"] == [4, 1, 2] and summary["agent_options"]["image"] == [1, 4, 1]
    assert summary["policy_version"] >= 1 and summary["eval_mean_return"] > 0


def test_a_recurrent_policy_trains_through_the_server_and_evaluates_with_its_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """The bot process keeps each sub-environment's GRU state and sends it with every row; the summary says so."""
    argv = ["gym", "CartPole-v1", "--steps", "2000", "--eval-episodes", "1", "--out", str(tmp_path), "--json"]
    assert main([*argv, "--agent-option", "recurrent=gru", "--agent-option", "recurrent_size=8"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["agent_options"]["recurrent"] == "gru" and summary["policy_version"] >= 1
    assert summary["eval_mean_return"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gym", "CartPole-v1", "--url", "ws://127.0.0.1:9", "--json"], "--json applies when arena gym runs its own server"),
        (["gym", "CartPole-v1", "--agent", "td3", "--steps", "10"], "DDPG and TD3 learn continuous actions only"),
        (["gym", "CartPole-v1", "--agent-option", "branches=3"], "--agent-option 'branches=3': expected NAME=VALUE"),
        (["gym", "NoSuchGame-v0", "--steps", "10"], "cannot make 'NoSuchGame-v0'"),
        (["gym", "CartPole-v1", "--opponent", "random"], "--opponent applies to turn-based games"),
        (["gym", "tests.arena.bots.tiny_nim", "--url", "ws://127.0.0.1:9"], "leave out --url"),
        (["gym", "tests.arena.bots.tiny_nim", "--opponent", "nobody"], "--opponent 'nobody': expected self, random, past"),
        (["gym", "CartPole-v1", "--opening", "4"], "--opening applies to turn-based games"),
        (["gym", "CartPole-v1", "--n-envs", "2", "--workers", "3"], "--workers must be 1 to --n-envs (2) bot processes"),
        (["gym", "CartPole-v1", "--url", "ws://127.0.0.1:9", "--workers", "2"], "--workers applies when arena gym runs"),
        (["gym", "tests.arena.bots.tiny_nim", "--opening", "-1"], "--opening must be >= 0 random moves, got -1"),
        (["gym", "CartPole-v1", "--mirror", "off"], "--mirror applies to turn-based games"),
        (["gym", "CartPole-v1", "--url", "ws://127.0.0.1:9", "--mirror", "on"], "--mirror applies when arena gym runs"),
        (["gym", "tests.arena.bots.tiny_nim", "--mirror", "on", "--steps", "10"], "--mirror needs a board"),
        (
            ["gym", "tests.arena.bots.tiny_drop_lopsided", "--mirror", "on", "--steps", "10"],
            "--mirror on: the rules are not left-right symmetric (game 0, turn 0: the mirrored position's legal moves",
        ),
        (["gym", "CartPole-v1", "--agent-option", "conv=4,1,2", "--steps", "10"], "conv needs an image"),
        (["gym", "CartPole-v1", "--agent-option", "recurrent=rnn", "--steps", "10"], "recurrent must be gru, lstm or empty"),
        (
            ["gym", "tests.arena.bots.tiny_nim", "--agent-option", "recurrent=gru", "--steps", "10"],
            "turn-based games train memoryless policies for now",
        ),
        (
            ["gym", "CartPole-v1", "--agent-option", "conv=4,1,2", "--agent-option", "image=2,4,1", "--steps", "10"],
            "image (2, 4, 1) holds 8 entries, more than obs_dim 4",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path):
    assert main([*argv, *(["--out", str(tmp_path)] if "--url" not in argv else [])]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines
