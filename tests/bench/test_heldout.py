"""The held-out panel (bench/heldout): its shape, checked without playing a match.

Ten or more official-API Tank Royale bots, each a bot directory like tests/data/royale_bots' (``Name/Name.json``
with the same fields, ``Name/Name.py`` importing only the official API and the standard library), a docstring
with a ``Families:`` line, the README's rule, and no code outside bench/learning.py that names the panel (so that
nothing trains, selects or tunes on it by accident).
"""

from __future__ import annotations

import re

import pytest

from tests.bench.bot_panels import TUNING, bots, check_config, check_program, families, stray_folders
from tests.conftest import ROOT

PANEL = ROOT / "bench" / "heldout"
FAMILIES = {"evasive", "linear", "circular"}
REFERENCE = re.compile(r"held_?out", re.IGNORECASE)
"""How code would name the panel: its folder (bench/heldout), a constant or option (HELDOUT_DATA, --heldout), a name."""
BOTS = bots(PANEL)


def test_the_panel_has_ten_or_more_bots_none_of_them_a_tuning_or_validation_bot() -> None:
    assert len(BOTS) >= 10
    assert not set(BOTS) & {d.name for d in TUNING.iterdir()}, "a tuning bot's name in the held-out panel"
    assert not set(BOTS) & set(bots(ROOT / "bench" / "validation")), "a validation bot's name in the held-out panel"
    assert not stray_folders(PANEL)


@pytest.mark.parametrize("name", BOTS)
def test_config_has_the_fields_of_the_tuning_bots(name: str) -> None:
    check_config(PANEL, name)


@pytest.mark.parametrize("name", BOTS)
def test_program_uses_only_the_official_api_and_the_standard_library(name: str) -> None:
    check_program(PANEL, name)


def test_the_families_asked_for_are_there() -> None:
    tags = {name: families(PANEL, name, FAMILIES) for name in BOTS}
    assert sum("evasive" in t for t in tags.values()) >= 2
    assert sum("linear" in t for t in tags.values()) >= 2
    assert sum("circular" in t for t in tags.values()) >= 2


def test_readme_states_the_rule_and_lists_every_bot() -> None:
    readme = (PANEL / "README.md").read_text()
    assert "No training, selection or tuning run" in readme
    assert "bench/learning.py --heldout" in readme
    for name in BOTS:
        assert f"| {name} |" in readme, f"{name} is not in the README's table"


def test_nothing_but_the_final_report_names_the_panel() -> None:
    """No code in arena/, agents/, server/, bot_protocol/ or bench/ (bench/learning.py and the panel aside) says heldout."""
    allowed = {ROOT / "bench" / "learning.py"}  # the verdicts, matches and SB3 parts name no panel
    found = []
    for top in ("arena", "agents", "server", "bot_protocol", "bench"):
        for path in (ROOT / top).rglob("*.py"):
            if path in allowed or PANEL in path.parents:
                continue
            if REFERENCE.search(path.read_text(errors="replace")):
                found.append(str(path.relative_to(ROOT)))
    assert not found, f"code that names the held-out panel: {found}"


def test_the_scan_would_see_a_reference() -> None:
    assert all(REFERENCE.search(s) for s in ("bench/heldout", "HELDOUT_DATA", "held_out_bots", "--heldout"))
