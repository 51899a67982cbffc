"""``--engine`` reaches every battle a command plays: ``arena match`` (and ``--rate``), ``arena worker``, ``arena league``,
``arena train`` with the evaluations of its returned policy; and either engine evaluates a policy to the same figures.

Each command runs for real through its entry point in this process (``main(argv)``), with tiny settings, while
every tank battle and scripted bot built in the process is noted with its engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arena.cli import main
from arena.games.tank.engine import TankBattle
from arena.games.tank.scripted import ScriptedBot


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(``"battle"`` or ``"scripted"``, its engine) of every tank battle and scripted bot made while the test runs."""
    made: list[tuple[str, str]] = []
    battle_init, bot_init = TankBattle.__init__, ScriptedBot.__init__

    def battle(self: TankBattle, *args: Any, **kwargs: Any) -> None:
        battle_init(self, *args, **kwargs)
        made.append(("battle", self.engine))

    def bot(self: ScriptedBot, *args: Any, **kwargs: Any) -> None:
        bot_init(self, *args, **kwargs)
        made.append(("scripted", self.engine))

    monkeypatch.setattr(TankBattle, "__init__", battle)
    monkeypatch.setattr(ScriptedBot, "__init__", bot)
    return made


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("rate", [False, True], ids=["match", "rate"])
def test_match_plays_on_the_chosen_engine(engine: str, rate: bool, engines: list[tuple[str, str]], capsys) -> None:
    """`arena match --engine E` (and `--rate`): the battle and both scripted bots run on E."""
    argv = ["match", "--bot", "tracker", "--bot", "spinner", "--rounds", "2", "--ticks-per-round", "60", "--json"]
    assert main([*argv, "--engine", engine, *(["--rate"] if rate else [])]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)
    kinds = [kind for kind, _ in engines]
    assert kinds.count("battle") == 1 and kinds.count("scripted") >= 2
    assert {made for _, made in engines} == {engine}


def test_the_default_engine_is_the_compiled_one_for_every_command() -> None:
    """One default for every command that plays battles: `arena train`'s, numba (arena.defaults.ENGINE)."""
    from arena.cli import build_parser
    from arena.commands.options import ENGINE_NAMES
    from arena.defaults import ENGINE
    from arena.games.tank.engines import ENGINES

    assert ENGINE_NAMES == ENGINES  # the flag's choices, written out to keep numpy out of the CLI's start
    parser = build_parser()
    commands = [
        ["train"],
        ["match", "--bot", "sitting", "--bot", "sitting"],
        ["worker", "--url", "ws://h:1"],
        ["league", "run"],
    ]
    assert ENGINE == "numba" and {parser.parse_args(argv).engine for argv in commands} == {ENGINE}


def test_worker_plays_on_the_chosen_engine(engines: list[tuple[str, str]], capsys) -> None:
    """`arena worker --engine numpy` (the default is numba) against a real server: its battle and opponents run on
    numpy; the worker's signal handlers are gone when it returns."""
    import signal

    from arena.games.tank.actions import ACT_DIM
    from arena.games.tank.observation import OBS_DIM
    from arena.games.tank.rewards import TANK_REWARD
    from tests.conftest import running_server

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with running_server(OBS_DIM, ACT_DIM, reward=TANK_REWARD) as server:
        argv = ["worker", "--url", server.url, "--engine", "numpy", "--opponent", "tracker", "--matches", "2",
                "--rounds", "2", "--ticks-per-round", "50", "--seed", "1"]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "2 matches (numpy engine)" in out and "stopped:" in out.splitlines()[-1]
    assert engines == [("battle", "numpy"), ("scripted", "numpy")]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_train_plays_and_evaluates_on_the_chosen_engine(tmp_path: Path, engines: list[tuple[str, str]], capsys) -> None:
    """`arena train --engine numpy` (the default is numba): the learning bot's battle and opponent, the final evaluation
    and the returned policy's rounds on fresh seeds all run on numpy, as summary.json's evaluation records."""
    import torch

    threads = torch.get_num_threads()
    out = tmp_path / "run"
    argv = ["train", "--engine", "numpy", "--opponent", "sitting", "--workers", "0", "--bots", "1", "--matches", "2",
            "--rounds", "2", "--ticks-per-round", "60", "--eval-rounds", "2", "--opponent", "spinner",
            "--dashboard-port", "-1", "--torch-threads", "1", "--out", str(out)]  # fmt: skip
    try:
        assert main(argv) == 0, capsys.readouterr().err
    finally:
        torch.set_num_threads(threads)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["evaluation"]["engine"] == summary["selection_evaluation"]["engine"] == "numpy"
    battles = [made for kind, made in engines if kind == "battle"]
    # the learning bot's battle, then one per scripted bot for each of the two evaluations
    assert len(battles) == 1 + 2 * 4 and set(battles) == {"numpy"}
    assert {made for kind, made in engines if kind == "scripted"} == {"numpy"}


def test_either_engine_evaluates_a_policy_to_the_same_figures(tiny_run) -> None:
    """The evaluation that chooses the returned policy gives the same rounds, bit for bit, on numba and numpy."""
    from arena.outputs.report import evaluate_against_scripted

    opponents = ("sitting", "spinner", "walker", "tracker", "drawn")
    figures = [
        evaluate_against_scripted(tiny_run.checkpoint, 3, seed=3, ticks_per_round=300, opponents=opponents, engine=engine)
        for engine in ("numpy", "numba")
    ]
    for evaluation in figures:
        del evaluation["seconds"], evaluation["engine"]
    assert figures[0] == figures[1]
    assert sum(row["wins"] + row["losses"] for row in figures[0]["opponents"]) > 0  # rounds that ended, not all draws


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_league_plays_its_round_robin_on_the_chosen_engine(
    engine: str, tmp_path: Path, engines: list[tuple[str, str]], capsys
) -> None:
    """`arena league RUN --engine E`: the round-robin's battles and the league's scripted members run on E."""
    from arena.league import League, LeagueConfig, LeagueStore
    from tests.arena.league.test_store import tiny_policy

    store = LeagueStore(tmp_path / "league")
    league = League.start(LeagueConfig(snapshot_every=2, max_snapshots=2), ("sitting", "tracker"))
    member, _ = league.add_snapshot(4)
    store.save_snapshot(member, tiny_policy(4))
    store.save(league)
    (tmp_path / "returned.json").write_text(json.dumps({"checkpoint": f"league/snapshots/{member.source}"}))
    argv = ["league", str(tmp_path), "--rounds", "2", "--ticks-per-round", "50", "--json", "--engine", engine]
    assert main(argv) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert {"returned", "sitting", "tracker", member.name} <= set(report["round_robin"]["scores"])
    assert ("battle", engine) in engines and ("scripted", engine) in engines
    assert {made for _, made in engines} == {engine}
