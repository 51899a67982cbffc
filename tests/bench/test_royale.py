"""bench/royale.py --bot-ceiling: official-API bots against the instant responder (docs/royale.md "Speed")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, timeout

pytest.importorskip("robocode_tank_royale", reason="the official Tank Royale bot API (pip install -e '.[royale]')")
from robocode_tank_royale.bot_api.internal.json_util import from_json

from bench.royale import _tick_template

ROOT = ROOT


@pytest.mark.parametrize("my_id", [1, 2])
def test_pre_encoded_tick_is_what_the_official_api_reads(my_id: int) -> None:
    """The responder's tick, its turn number patched in, is a tick-event-for-bot the official API builds."""
    prefix, suffix = _tick_template(my_id)
    tick = from_json(json.loads(prefix + "1234" + suffix))
    assert type(tick).__name__ == "TickEventForBot"
    assert tick.turn_number == 1234 and tick.round_number == 1
    assert tick.events == [] and tick.bullet_states == [] and tick.bot_state.energy == 100


def test_bot_ceiling_runs_one_bot_and_a_lockstep_pair() -> None:
    """--ceiling-only boots SpinBot alone, then twice in lockstep, and reports both in its JSON line."""
    command = [sys.executable, str(ROOT / "bench" / "royale.py"), "--ceiling-only"]
    run = subprocess.run(
        [*command, "--ceiling-turns", "200", "--ceiling-warmup", "20"],
        capture_output=True,
        text=True,
        timeout=timeout(120),
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["bench"] == "royale-bot-ceiling"
    ceiling = summary["bot_ceiling"]
    for key, n in (("single", 1), ("lockstep_pair", 2)):
        figures = ceiling[key]
        assert figures["bots"] == ["SpinBot"] * n and figures["turns"] == 200
        assert figures["turns_per_s"] > 0 and figures["responder_cpu_ms_per_turn"] >= 0
        assert len(figures["bot_cpu_ms_per_turn"]) == n and all(ms > 0 for ms in figures["bot_cpu_ms_per_turn"])
