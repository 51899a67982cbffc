"""bench/learning.py: the provenance its JSON starts with, and the panels it plays each aggregated."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from bench.learning import OPPONENT_ROLES, PANELS, SCRIPTED, aggregate_case, header
from tests.conftest import ROOT


def test_the_json_says_what_ran_where_from_and_with_what(tmp_path) -> None:
    """The header of the bench's JSON: commit, dirty flag, versions, command line, opponents' roles; a probe says so."""
    from bench.provenance import Source

    source = Source(tmp_path, {"commit": "a" * 40, "dirty": True, "exported": False, "diff_sha256": "b" * 64})
    found = {"python": "3.11.7", "torch": "2.13.0", "numpy": "2.4.6", "numba": "0.68.1"}
    evaluation, probe = header([], source, found), header(["--extra=--matches 64"], source, found)
    assert evaluation["source"]["commit"] == "a" * 40 and evaluation["source"]["dirty"] is True
    assert {"python", "torch", "numpy", "numba"} <= set(evaluation["versions"]) and evaluation["command_line"]
    assert evaluation["kind"] == "evaluation" and probe["kind"] == "probe" and probe["probe_flags"] == ["--extra=--matches 64"]
    assert evaluation["opponent_roles"] == OPPONENT_ROLES and OPPONENT_ROLES["sitting"] == "training and selection"


def test_a_case_aggregates_the_tuning_bots_and_every_panel_it_played() -> None:
    """What ``--validation`` and ``--heldout`` write per seed reaches the case's aggregate, each panel on its own."""
    entry: dict[str, Any] = {"seed": 0, "win_rate": dict.fromkeys(SCRIPTED, 1.0)}
    for key in ("royale", *PANELS):
        entry |= {f"win_rate_{key}": {"A": 0.5}, f"{key}_mean": 0.5, f"{key}_median": 0.5}
    agg = aggregate_case([entry, {"seed": 1, "error": "boom"}], {"win_rate": SCRIPTED})
    for key in ("royale", *PANELS):
        assert agg[f"win_rate_{key}"]["A"] == {"median": 0.25, "worst": 0.0, "n": 2, "failed": 1}
        assert agg[f"{key}_mean"]["median"] == 0.25


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ("not json", "is not this benchmark's JSON output"),
        ({"source": {"commit": "a" * 40, "exported": False}, "cases": {}}, "measured a working tree"),
        ({"source": {"commit": "a" * 40, "exported": True, "export_dir": "/nonexistent/x"}, "cases": {}}, "export is gone"),
    ],
)
def test_a_report_on_an_earlier_run_refuses_what_it_cannot_replay(tmp_path, record, says) -> None:
    """``--report-on`` plays only from the earlier run's own export: anything else is one line and exit 1."""
    earlier = tmp_path / "earlier.json"
    earlier.write_text("progress\n" + (record if isinstance(record, str) else json.dumps(record)) + "\n")
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "learning.py"), "--report-on", str(earlier), "--heldout"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and says in result.stderr and "Traceback" not in result.stderr


def test_a_report_needs_a_panel_to_play() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "learning.py"), "--report-on", "x.json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--report-on needs --heldout or --validation" in result.stderr
