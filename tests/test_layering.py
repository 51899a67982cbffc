"""The house's layering, checked on the source: who may import whom.

``bot_protocol`` (the wire format and the bot client) stands alone; ``agents`` (the learners) know
no socket, server or game; ``server`` knows no game; ``arena`` reaches the server only through
``bot_protocol``, except the CLI (``arena/cli.py``, ``arena/commands/``), which wires a run
together. Imports under ``if TYPE_CHECKING:`` are types only and are allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

FORBIDDEN = {
    "bot_protocol": {"torch", "server", "agents", "arena"},
    "agents": {"websockets", "server", "arena", "bot_protocol.client"},
    "server": {"arena"},
    "arena": {"server"},
}
WIRING = ("arena/cli.py", "arena/commands/")
"""Where ``arena`` may import the server: the command line that starts one."""


def runtime_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``path`` that runs (not under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def forbidden(module: str, banned: set[str]) -> bool:
    return any(module == b or module.startswith(b + ".") for b in banned)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_each_package_imports_only_what_lies_below_it(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if package == "arena" and relative.startswith(WIRING):
            continue
        offenders += [f"{relative}:{line} {m}" for line, m in runtime_imports(path) if forbidden(m, FORBIDDEN[package])]
    assert offenders == []


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """Control: the walker reports a runtime import and passes over a type-only one."""
    source = tmp_path / "module.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import server\nimport server.stats\n")
    assert runtime_imports(source) == [(1, "typing"), (4, "server.stats")]
