"""The validation panel (bench/validation): its shape, checked without playing a match.

Seven or more official-API Tank Royale bots, harder than the tuning bots of tests/data/royale_bots, that tuning runs
may play to compare settings for range (``bench/learning.py --validation``) and no run trains against or selects its
policy on: each a bot directory like the tuning bots', none of them a tuning or held-out bot, the README's rule,
and no product code that names the panel (so that no run's league or selection plays it by accident).
"""

from __future__ import annotations

import re

import pytest

from tests.bench.bot_panels import TUNING, bots, check_config, check_program, families, stray_folders
from tests.conftest import ROOT

PANEL = ROOT / "bench" / "validation"
FAMILIES = {"evasive", "linear", "circular", "guess factor", "virtual guns", "mirror", "random points", "ramming"}
REFERENCE = re.compile(r"bench[/\\]validation|VALIDATION_DATA")
BOTS = bots(PANEL)


def test_the_panel_has_seven_or_more_bots_none_of_them_a_tuning_or_held_out_bot() -> None:
    assert len(BOTS) >= 7
    assert not set(BOTS) & {d.name for d in TUNING.iterdir()}
    assert not set(BOTS) & set(bots(ROOT / "bench" / "heldout"))
    assert not stray_folders(PANEL)


@pytest.mark.parametrize("name", BOTS)
def test_config_has_the_fields_of_the_tuning_bots(name: str) -> None:
    check_config(PANEL, name)


@pytest.mark.parametrize("name", BOTS)
def test_program_uses_only_the_official_api_and_the_standard_library(name: str) -> None:
    check_program(PANEL, name)


def test_it_holds_the_aims_and_movements_the_tuning_bots_lack() -> None:
    tags = {name: families(PANEL, name, FAMILIES) for name in BOTS}
    for family in ("linear", "circular", "evasive"):
        assert sum(family in t for t in tags.values()) >= (1 if family == "evasive" else 2), family


def test_readme_states_the_rule_and_lists_every_bot() -> None:
    readme = (PANEL / "README.md").read_text()
    assert "No run may train against these bots" in readme
    assert "bench/learning.py --validation" in readme
    for name in BOTS:
        assert f"| {name} |" in readme, f"{name} is not in the README's table"


def test_no_product_code_names_the_panel() -> None:
    """arena/, agents/, server/ and bot_protocol/ never name bench/validation: no league or selection can play it."""
    found = [
        str(path.relative_to(ROOT))
        for top in ("arena", "agents", "server", "bot_protocol")
        for path in (ROOT / top).rglob("*.py")
        if REFERENCE.search(path.read_text(errors="replace"))
    ]
    assert not found, f"product code that names the validation panel: {found}"
