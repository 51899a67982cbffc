"""The held-out panel (bench/heldout): its shape, checked without playing a match.

Ten or more official-API Tank Royale bots, each a bot directory like tests/data/royale_bots' (``Name/Name.json``
with the same fields, ``Name/Name.py`` importing only the official API and the standard library), a docstring
with a ``Families:`` line, the README's rule, and no code outside bench/learning.py that names the panel (so that
nothing trains, selects or tunes on it by accident).
"""

from __future__ import annotations

import ast
import json
import re
import sys

import pytest

from tests.conftest import DATA, ROOT

PANEL = ROOT / "bench" / "heldout"
TUNING = DATA / "royale_bots"
FAMILIES = {"evasive", "linear", "circular"}
REFERENCE = re.compile(r"held_?out", re.IGNORECASE)
"""How code would name the panel: its folder (bench/heldout), a constant or option (HELDOUT_DATA, --heldout), a name."""
BOTS = sorted(d.name for d in PANEL.iterdir() if d.is_dir() and (d / f"{d.name}.json").is_file())


def families(name: str) -> set[str]:
    doc = ast.get_docstring(ast.parse((PANEL / name / f"{name}.py").read_text()), clean=True) or ""
    lines = [line for line in doc.splitlines() if line.startswith("Families:")]
    assert len(lines) == 1, f"{name}: one 'Families:' line in the docstring"
    tags = {tag.strip() for tag in lines[0].removeprefix("Families:").split(",") if tag.strip()}
    assert tags <= FAMILIES, f"{name}: unknown families {tags - FAMILIES}"
    return tags


def test_the_panel_has_ten_or_more_bots_none_of_them_a_tuning_bot() -> None:
    assert len(BOTS) >= 10
    assert not set(BOTS) & {d.name for d in TUNING.iterdir()}, "a tuning bot's name in the held-out panel"
    assert {d.name for d in PANEL.iterdir() if d.is_dir() and d.name != "__pycache__"} == set(BOTS)


@pytest.mark.parametrize("name", BOTS)
def test_config_has_the_fields_of_the_tuning_bots(name: str) -> None:
    config = json.loads((PANEL / name / f"{name}.json").read_text())
    shapes = [set(json.loads(p.read_text())) for p in TUNING.glob("*/*.json")]
    assert set(config) in shapes, f"{name}.json's fields {sorted(config)} are no tuning bot's"
    assert {"name", "version", "authors", "description"} <= set(config)
    assert config["name"] == name and isinstance(config["version"], str) and config["description"]
    assert isinstance(config["authors"], list) and all(isinstance(a, str) for a in config["authors"])


@pytest.mark.parametrize("name", BOTS)
def test_program_uses_only_the_official_api_and_the_standard_library(name: str) -> None:
    path = PANEL / name / f"{name}.py"
    source = path.read_text()
    compile(source, str(path), "exec")
    tree = ast.parse(source)
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, f"{name}: a relative import"
            roots.add(node.module.split(".")[0])
    assert "robocode_tank_royale" in roots
    assert roots - {"robocode_tank_royale"} <= set(sys.stdlib_module_names), f"{name} imports {sorted(roots)}"
    # A Bot subclass named after the bot, started when run as a script.
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    assert classes and any(isinstance(b, ast.Name) and b.id == "Bot" for b in classes[0].bases)
    assert f"{name}().start()" in source
    doc = ast.get_docstring(tree) or ""
    assert all(f"\n{key}:" in doc for key in ("Movement", "Targeting", "Fire power")), f"{name}: docstring fields"


def test_the_families_asked_for_are_there() -> None:
    tags = {name: families(name) for name in BOTS}
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
    allowed = {ROOT / "bench" / "learning.py"}
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
