"""What a running command tells its user (arena/commands/announce.py): TensorBoard on request, notes on stderr."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from arena.commands.announce import attach_tensorboard, stderr_lines
from arena.outputs.run_log import MetricsLog


def test_tensorboard_is_attached_to_the_log_with_the_command_line_as_its_config(tmp_path: Path) -> None:
    """``--tensorboard``: the log gains a writer in OUT/tensorboard; a Path in the command line is recorded as text."""
    pytest.importorskip("tensorboardX", reason="tensorboardX is not installed (pip install -e '.[test]')")
    log = MetricsLog(None, 0.0)
    attach_tensorboard(log, tmp_path, {"out": tmp_path, "seed": 3}, "arena train")
    assert log.tensorboard is not None and Path(log.tensorboard.logdir) == tmp_path / "tensorboard"
    log.tensorboard.close()


def test_a_missing_tensorboard_is_one_line_not_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    for module in ("tensorboardX", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules: `import` raises ImportError
    log = MetricsLog(None, 0.0)
    attach_tensorboard(log, tmp_path, {}, "arena serve")
    err = capsys.readouterr().err.splitlines()
    assert log.tensorboard is None and len(err) == 1 and err[0].startswith("arena serve: ")


def test_notes_go_to_stderr_one_line_each_after_the_command_name(capsys) -> None:
    say = stderr_lines("arena match")
    say("waiting for 1 Tank Royale bot(s)")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "arena match: waiting for 1 Tank Royale bot(s)\n"
