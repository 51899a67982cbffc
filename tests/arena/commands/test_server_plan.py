"""The server's plan (arena/commands/server_plan.py): flags read once and checked, the server built from the plan."""

from __future__ import annotations

import pytest

from arena.cli import build_parser
from arena.commands.server_plan import ServerPlan, TankShape, make_server
from arena.defaults import TANK_SEGMENT_STEPS
from arena.games.tank.actions import ACT_DIM
from arena.games.tank.observation import OBS_DIM
from arena.games.tank.rewards import TANK_REWARD

SIZES = (OBS_DIM, ACT_DIM)
SERVE_TANK = TankShape(128)


def plan(*argv: str, tank: TankShape | None = SERVE_TANK, command: str = "serve") -> ServerPlan:
    return ServerPlan.from_flags(build_parser().parse_args([command, *argv]), SIZES, TANK_REWARD, tank)


@pytest.mark.parametrize("command", ["train", "serve"])
def test_credit_window_flag_reaches_the_server_config(command):
    """--credit-window sets ServerConfig.credit_window (what welcome.limits tells bots); unset keeps the default."""
    from server import ServerConfig

    assert plan("--credit-window", "32", command=command).server.credit_window == 32
    assert plan(command=command).server.credit_window == ServerConfig().credit_window


def test_the_tank_shape_sizes_ppo_and_its_segments_and_flags_win():
    shaped = plan(tank=TankShape(256, league=True))
    assert shaped.agent_options["rollout_steps"] == 256 * 64 and shaped.agent_options["entropy_coef"] == 0.001
    assert shaped.server.segment_steps == TANK_SEGMENT_STEPS
    assert plan("--segment-steps", "64").server.segment_steps == 64
    assert plan("--agent-option", "epochs=3").agent_options["epochs"] == 3
    other = plan(tank=None)
    assert "rollout_steps" not in other.agent_options and other.server.segment_steps != TANK_SEGMENT_STEPS


def test_reading_the_flags_never_writes_them():
    flags = build_parser().parse_args(["serve", "--port", "0", "--checkpoint-interval", "7"])
    before = dict(vars(flags))
    made = ServerPlan.from_flags(flags, SIZES, TANK_REWARD, TankShape(16))
    assert vars(flags) == before
    assert made.trainer.checkpoint_interval == 7 and made.trainer.checkpoint_dir == flags.out / "checkpoints"


@pytest.mark.parametrize(
    ("argv", "error", "message"),
    [
        (["--device", "meta"], ValueError, "--device meta: only cpu and cuda are supported"),
        (["--save-replay"], ValueError, "--save-replay applies to ddpg and td3 only"),
        (["--dashboard-port", "70000"], ValueError, "--dashboard-port must be"),
        (["--agent-option", "nope=1"], ValueError, "--agent-option 'nope=1'"),
        (["--resume", "--out", "/nonexistent/arena-run"], FileNotFoundError, "--resume: no checkpoints"),
    ],
)
def test_a_flag_the_server_cannot_use_is_refused_before_anything_starts(argv, error, message):
    with pytest.raises(error, match=message):
        plan(*argv)


def test_the_server_is_built_from_the_plan_alone(tmp_path):
    made = plan("--port", "0", "--out", str(tmp_path), "--dashboard-port", "-1", "--agent-option", "hidden=16,16")
    server = make_server(made, lambda row: None)
    assert server.trainer.agent.config.hidden == (16, 16) and server.dashboard is None
