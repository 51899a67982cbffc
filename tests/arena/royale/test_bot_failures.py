"""Booted Tank Royale bots that fail: their logs (``arena match --royale-logs DIR``) and the errors that quote them.

Real bot processes, written into the test's directory: ``Crashy`` (official Python API) raises
in its ``run()`` at turn 5, which the API catches, prints and plays on from; ``Dies`` (official
API) prints a traceback and exits with code 3 at turn 8; ``Broken`` raises before it ever
connects; ``Stalls`` (a plain websocket client, no API) shakes hands and never sends
``bot-ready``. Each failure must name the bot and quote the end of its log (the exception's
text), and say where the full log is when the logs are kept.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

from arena.bots.play import ScriptedController
from arena.royale.booter import TRACEBACK, read_log
from arena.royale.match import RoyaleMatch, log_file_names, play_royale_match, royale_rules
from arena.royale.seats import RoyaleBotSpec, RoyaleMatchError
from arena.royale.server import RoyaleServerConfig

official_api = pytest.mark.skipif(
    importlib.util.find_spec("robocode_tank_royale") is None,
    reason="the official Tank Royale bot API (pip install -e '.[royale]')",
)

CRASHY = """
from robocode_tank_royale.bot_api import Bot


class Crashy(Bot):
    def run(self) -> None:
        while self.running:
            self.target_speed = 4
            self.go()
            if self.turn_number >= 5:
                raise RuntimeError(f"Crashy's bug at turn {self.turn_number}")


if __name__ == "__main__":
    Crashy().start()
"""

DIES = """
import os
import sys
import traceback

from robocode_tank_royale.bot_api import Bot


class Dies(Bot):
    def run(self) -> None:
        while self.running:
            self.turn_rate = 5
            self.go()
            if self.turn_number >= 8:
                try:
                    raise ValueError(f"Dies gives up at turn {self.turn_number}")
                except ValueError:
                    traceback.print_exc()
                    sys.stderr.flush()
                    os._exit(3)  # the process ends here (an exception in run() alone would not end it)


if __name__ == "__main__":
    Dies().start()
"""

BROKEN = """
print("Broken starting")
raise RuntimeError("no API here")
"""

STALLS = """
import asyncio
import json
import os

from websockets.asyncio.client import connect


async def main() -> None:
    async with connect(os.environ["SERVER_URL"], compression=None) as ws:
        hello = json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "BotHandshake", "sessionId": hello["sessionId"], "name": "Stalls",
                                  "version": "1", "authors": ["tests"], "secret": os.environ["SERVER_SECRET"]}))
        print("Stalls joined and will never be ready", flush=True)
        await asyncio.sleep(60)


asyncio.run(main())
"""


def bot_directory(root: Path, name: str, program: str) -> Path:
    """A Tank Royale bot directory ``root/name``: its JSON config and ``name.py``."""
    directory = root / name
    directory.mkdir()
    (directory / f"{name}.json").write_text(json.dumps({"name": name, "version": "1.0", "authors": ["tests"]}))
    (directory / f"{name}.py").write_text(textwrap.dedent(program))
    return directory


@official_api
@pytest.mark.expensive
def test_bots_that_raise_or_die_mid_game_are_errors_that_quote_their_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``arena match --json --royale-logs DIR``: the results, then each failed bot named on stderr with its traceback.

    Crashy's exception is caught by the API (it plays on, its process lives): only its log tells.
    Dies's process exits mid-game: its tank stays in the game, without intent, as a bot that left.
    """
    from arena.cli import main

    crashy, dies = bot_directory(tmp_path, "Crashy", CRASHY), bot_directory(tmp_path, "Dies", DIES)
    logs = tmp_path / "logs" / "new"  # created by the command
    argv = ["match", "--bot", f"royale:{crashy}", "--bot", f"royale:{dies}", "--rounds", "1", "--ticks-per-round", "100"]
    argv += ["--turn-timeout-ms", "1000", "--json", "--royale-logs", str(logs)]
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    result = json.loads(out)  # exactly one JSON object: the results are still printed
    assert result["rounds"] == 1 and [b["name"] for b in result["bots"]] == ["Crashy", "Dies"]
    failures = {f["bot"]: f for f in result["royale"]["failures"]}
    assert set(failures) == {"Crashy", "Dies"}

    raised = failures["Crashy"]
    assert raised["exit_code"] is None and raised["round"] is None and raised["tracebacks"] == 1
    assert raised["log"] == str(logs / "Crashy.log") and raised["log_excerpt"] == "traceback"
    assert raised["log_lines"][0] == TRACEBACK
    assert raised["log_lines"][-1] == "RuntimeError: Crashy's bug at turn 5"
    assert "Crashy raised an exception during the game and played on" in raised["error"]

    died = failures["Dies"]
    assert died["exit_code"] == 3 and died["log"] == str(logs / "Dies.log") and died["log_excerpt"] == "tail"
    assert died["log_lines"][-1] == "ValueError: Dies gives up at turn 8"
    assert "Dies exited with code 3" in died["error"]  # "mid-game, in round 1 at turn N" once its leaving was seen

    first, *rest = err.strip().splitlines()
    assert first.startswith("arena match: error: Tank Royale bot Crashy raised an exception")
    assert f"(full log: {logs / 'Crashy.log'}); its last traceback:" in first
    assert "    RuntimeError: Crashy's bug at turn 5" in rest
    assert any(line.startswith("Tank Royale bot Dies exited with code 3") for line in rest)
    assert "    ValueError: Dies gives up at turn 8" in rest

    for name, text in (("Crashy", "RuntimeError: Crashy's bug at turn 5"), ("Dies", "ValueError: Dies gives up at turn 8")):
        log = (logs / f"{name}.log").read_text()
        assert TRACEBACK in log and text in log
    assert sorted(p.name for p in logs.iterdir()) == ["Crashy.log", "Dies.log"]


@official_api
@pytest.mark.expensive
def test_without_kept_logs_the_failure_still_quotes_the_log(tmp_path: Path) -> None:
    """``play_royale_match`` without ``log_dir``: the failure has the traceback and no path; the healthy side none."""
    crashy = RoyaleBotSpec.parse(f"royale:{bot_directory(tmp_path, 'Crashy', CRASHY)}")
    result = play_royale_match(
        [crashy, ScriptedController("sitting", 1)],
        RoyaleMatch(1, rules=royale_rules(40), config=RoyaleServerConfig(turn_timeout=1.0)),
    )
    (failure,) = result["royale"]["failures"]
    assert failure["bot"] == "Crashy" and failure["log"] is None and "full log" not in failure["error"]
    assert failure["log_lines"][-1] == "RuntimeError: Crashy's bug at turn 5"
    assert result["royale"]["turns"] == 40  # it played on after raising: every turn answered
    assert result["royale"]["skipped_turns"] == {"Crashy": 0}


def test_a_bot_that_fails_before_joining_says_where_its_kept_log_is(tmp_path: Path) -> None:
    """A bot that exits before it connects: its exit code, the exception's text, and its kept log's path."""
    broken = RoyaleBotSpec.parse(f"royale:{bot_directory(tmp_path, 'Broken', BROKEN)}")
    logs = tmp_path / "logs"
    with pytest.raises(RoyaleMatchError, match="exited with code 1 before joining") as failed:
        play_royale_match([broken, ScriptedController("sitting", 1)], RoyaleMatch(1, log_dir=logs))
    message = str(failed.value)
    assert f"(full log: {logs / 'Broken.log'})" in message and "RuntimeError: no API here" in message
    assert failed.value.bots == ("Broken",)
    assert "Broken starting" in (logs / "Broken.log").read_text()


def test_a_bot_that_never_gets_ready_is_named_with_its_log(tmp_path: Path) -> None:
    """No ``bot-ready`` within the ready timeout: the error names the bot and quotes its log."""
    stalls = RoyaleBotSpec.parse(f"royale:{bot_directory(tmp_path, 'Stalls', STALLS)}")
    logs = tmp_path / "logs"
    config = RoyaleServerConfig(ready_timeout=1.0)
    with pytest.raises(RoyaleMatchError, match=r"no bot-ready within 1 s from: Stalls") as failed:
        play_royale_match([stalls, ScriptedController("sitting", 1)], RoyaleMatch(1, config=config, log_dir=logs))
    message = str(failed.value)
    assert f"--- Stalls log (full log: {logs / 'Stalls.log'}):" in message
    assert "Stalls joined and will never be ready" in message


def test_read_log_keeps_the_tail_and_the_last_traceback(tmp_path: Path) -> None:
    """Tracebacks are counted; the last one is kept up to its exception line, cut to its head and its end."""
    log = tmp_path / "bot.log"
    frames = "".join(f'  File "bot.py", line {i}, in f{i}\n    f{i + 1}()\n' for i in range(20))
    log.write_text(
        "Connected\n"
        f"{TRACEBACK}\n" + frames + "KeyError: 'first'\n"
        "\nDuring handling of the above exception, another exception occurred:\n\n"
        f'{TRACEBACK}\n  File "bot.py", line 99, in run\n    boom()\nRuntimeError: second\n'
        "still playing\n"
    )
    summary = read_log(log, lines=5)
    assert summary.tracebacks == 2
    assert summary.last_traceback == [
        TRACEBACK,
        '  File "bot.py", line 99, in run',
        "    boom()",
        "RuntimeError: second",
    ]
    assert summary.tail == [TRACEBACK, '  File "bot.py", line 99, in run', "    boom()",
                            "RuntimeError: second", "still playing"]  # fmt: skip
    long = read_log(log.with_name("long.log").resolve(), lines=5)
    assert long.tail == [] and long.tracebacks == 0  # no such log: empty
    log.write_text(f"{TRACEBACK}\n" + frames + "ValueError: deep\n")
    cut = read_log(log, lines=5).last_traceback
    assert cut[0] == TRACEBACK and cut[-1] == "ValueError: deep" and len(cut) == 5


def test_kept_log_names_follow_the_seats() -> None:
    """One file per seat, named after it: safe characters, unique, the game's number with several games."""
    assert log_file_names([(0, 0, "SpinBot"), (0, 1, "SpinBot#2")], 1) == ["SpinBot.log", "SpinBot-2.log"]
    assert log_file_names([(0, 0, "A"), (1, 0, "A")], 2) == ["A.game1.log", "A.game2.log"]
    assert log_file_names([(0, 0, "a b"), (0, 1, "a/b"), (0, 2, "..")], 1) == ["a-b.log", "a-b-2.log", "bot.log"]


def test_royale_logs_needs_booted_bots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--royale-logs`` without a booted Tank Royale bot, or onto a file, is a one-line error before any match."""
    from arena.cli import main

    assert main(["match", "--bot", "sitting", "--bot", "spinner", "--royale-logs", str(tmp_path)]) == 2
    assert "--royale-logs keeps the output of booted Tank Royale bots" in capsys.readouterr().err
    file = tmp_path / "file"
    file.write_text("")
    assert main(["match", "--bot", "royale:x", "--bot", "sitting", "--royale-logs", str(file / "logs")]) == 2
    assert capsys.readouterr().err.startswith(f"arena match: error: --royale-logs {file / 'logs'}: ")
