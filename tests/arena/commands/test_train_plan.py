"""``arena train``'s plan (arena/commands/train_plan.py): every flag checked once, the bots' specs made from it."""

from __future__ import annotations

import pytest

from arena.cli import build_parser
from arena.commands.train_plan import TrainPlan
from arena.defaults import TANK_MATCHES

ROYALE_BOT = "tests/data/royale_bots/Walls"


def plan(*argv: str) -> TrainPlan:
    return TrainPlan.from_flags(build_parser().parse_args(["train", *argv]))


def test_the_defaults_decided_once_and_the_flags_left_as_parsed(tmp_path):
    flags = build_parser().parse_args(["train", "--out", str(tmp_path / "run")])
    before = dict(vars(flags))
    made = TrainPlan.from_flags(flags)
    assert vars(flags) == before  # nothing is written onto the parsed flags
    assert made.tank and made.league is not None and made.opponents == ("league",)
    assert made.matches == TANK_MATCHES and made.minutes == 5.0 and made.n_bots == 1
    assert made.server.agent_options["rollout_steps"] == TANK_MATCHES * 64  # sized by matches x bots
    with pytest.raises(AttributeError):
        made.matches = 3  # type: ignore[misc]


def test_the_bots_specs_come_from_the_plan(tmp_path):
    made = plan("--opponent", "walker", "--opponent", "tracker", "--bots", "2", "--matches", "8", "--seed", "4",
                "--ticks-per-round", "300", "--out", str(tmp_path))  # fmt: skip
    spec = made.bot_spec("ws://127.0.0.1:1")
    assert (spec.opponents, spec.n_matches, spec.max_ticks, spec.league) == (("walker", "tracker"), 8, 300, None)
    assert [spec.nth(i).seed for i in range(2)] == [4000, 4001] and spec.engine == "numba"  # arena train's default
    assert plan("--engine", "numpy", "--out", str(tmp_path)).bot_spec("ws://x").engine == "numpy"
    assert made.server.agent_options["rollout_steps"] == 2 * 8 * 64


def test_drawn_is_a_fixed_opponent_or_a_league_member(tmp_path):
    assert plan("--opponent", "drawn", "--out", str(tmp_path)).bot_spec("ws://x").opponents == ("drawn",)
    made = plan("--out", str(tmp_path))  # the default league
    assert made.league is not None and made.league.config.drawn and "drawn" in made.describe()
    # Trained against the population, the run also picks and reports its policy on fresh draws of it.
    assert made.eval_opponents == ("sitting", "spinner", "walker", "tracker", "drawn")
    narrowed = plan("--league-option", "drawn_targetings=none+head_on", "--out", str(tmp_path))
    assert narrowed.eval_opponents[-1] == "drawn:targetings=none+head_on" and "drawn:targetings" in narrowed.describe()
    assert plan("--opponent", "drawn:movements=still", "--out", str(tmp_path)).bot_spec("ws://x").opponents == (
        "drawn:movements=still",
    )
    four = plan("--league-option", "drawn=false", "--out", str(tmp_path))
    assert four.eval_opponents == ("sitting", "spinner", "walker", "tracker") and "drawn" not in four.describe()


def test_the_radar_observation_sizes_the_learner_and_its_bots(tmp_path):
    radar = plan("--observation", "radar", "--agent-option", "recurrent=gru", "--out", str(tmp_path))
    assert radar.server.obs_dim == 28 and radar.observation == "radar"
    assert radar.bot_spec("ws://x").observation == "radar" and radar.server.agent_options["recurrent"] == "gru"
    full = plan("--out", str(tmp_path))
    assert full.server.obs_dim == 25 and full.bot_spec("ws://x").observation == "full"


def test_the_leagues_tank_royale_share_is_a_bot_of_its_own(tmp_path):
    made = plan("--opponent", "league", "--opponent", f"royale:{ROYALE_BOT}", "--royale-matches", "3", "--out", str(tmp_path))
    assert made.opponents == ("league",) and made.royale_share == (f"royale:{ROYALE_BOT}",)
    share = made.royale_share_spec("ws://127.0.0.1:1")
    assert (share.n_matches, share.royale_matches, share.name, share.seed) == (3, 3, "royale", made.seed + 1)
    assert "its Tank Royale share (royale:Walls: 3 match(es) each" in made.describe()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--game", "reach", "--opponent", "sitting"], "apply to --game tank only"),
        (["--eval-rounds", "-1"], "--eval-rounds must be >= 0"),
        (["--opponent", f"royale:{ROYALE_BOT}", "--workers", "1"], "play with --bots"),
        (["--opponent", "sitting", "--royale-matches", "2"], "apply to Tank Royale bots in the league"),
        (["--opponent", "royale:/nonexistent/Bot"], "--opponent royale:/nonexistent/Bot"),
        (["--opponent", "sitting", "--league-option", "self_share=0.5"], "--league-option applies to the league"),
        (["--workers", "1", "--bots", "1"], "do not go together"),
        (["--opponent", "league", "--opponent", "drawn"], "the league plays the population already"),
        (["--game", "reach", "--observation", "radar"], "apply to --game tank only"),
        (["--observation", "radar", "--league-option", "max_snapshots=2"], "--observation radar: the league's snapshots"),
        (
            ["--agent-option", "recurrent=gru", "--opponent", "league", "--opponent", f"royale:{ROYALE_BOT}"],
            "--agent-option recurrent: the league's Tank Royale share",
        ),
        (["--opponent", "drawn:movements=flying"], "'drawn:movements=flying': DrawnRanges.movements"),
        (["--league-option", "drawn_movements=flying"], "league drawn_\\* options"),
    ],
)
def test_a_combination_the_run_cannot_use_is_one_line_before_anything_starts(argv, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        plan(*argv, "--out", str(tmp_path))
