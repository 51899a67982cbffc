"""Shape checks shared by the panels of official-API bots (bench/heldout, bench/validation), made without a match.

Each bot is a directory like tests/data/royale_bots' (``Name/Name.json`` with the same fields, ``Name/Name.py``
importing only the official API and the standard library, a ``Bot`` subclass named after it, started when run as a
script) whose docstring says its ``Movement:``, ``Targeting:``, ``Fire power:`` and ``Families:``.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from tests.conftest import DATA

TUNING = DATA / "royale_bots"


def bots(panel: Path) -> list[str]:
    """The panel's bots: its ``NAME/NAME.json`` folders."""
    return sorted(d.name for d in panel.iterdir() if d.is_dir() and (d / f"{d.name}.json").is_file())


def stray_folders(panel: Path) -> set[str]:
    """Folders of the panel that are not bots (caches aside)."""
    return {d.name for d in panel.iterdir() if d.is_dir() and d.name != "__pycache__"} - set(bots(panel))


def families(panel: Path, name: str, allowed: set[str]) -> set[str]:
    doc = ast.get_docstring(ast.parse((panel / name / f"{name}.py").read_text()), clean=True) or ""
    lines = [line for line in doc.splitlines() if line.startswith("Families:")]
    assert len(lines) == 1, f"{name}: one 'Families:' line in the docstring"
    tags = {tag.strip() for tag in lines[0].removeprefix("Families:").split(",") if tag.strip() and tag.strip() != "—"}
    assert tags <= allowed, f"{name}: unknown families {tags - allowed}"
    return tags


def check_config(panel: Path, name: str) -> None:
    config = json.loads((panel / name / f"{name}.json").read_text())
    shapes = [set(json.loads(p.read_text())) for p in TUNING.glob("*/*.json")]
    assert set(config) in shapes, f"{name}.json's fields {sorted(config)} are no tuning bot's"
    assert {"name", "version", "authors", "description"} <= set(config)
    assert config["name"] == name and isinstance(config["version"], str) and config["description"]
    assert isinstance(config["authors"], list) and all(isinstance(a, str) for a in config["authors"])


def check_program(panel: Path, name: str) -> None:
    path = panel / name / f"{name}.py"
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
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    assert classes and any(isinstance(b, ast.Name) and b.id == "Bot" for b in classes[0].bases)
    assert f"{name}().start()" in source
    doc = ast.get_docstring(tree) or ""
    assert all(f"\n{key}:" in doc for key in ("Movement", "Targeting", "Fire power")), f"{name}: docstring fields"
