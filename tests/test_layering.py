"""The house's layering, checked on the source: who may import whom.

``bot_protocol`` (the wire format and the bot client) stands alone; ``agents`` (the learners) know
no wire format, socket, server or game; ``server`` knows no game; ``arena`` reaches the server only
through ``bot_protocol``, except the CLI (``arena/cli.py``, ``arena/commands/``), which wires a run
together. Imports under ``if TYPE_CHECKING:`` count too: a type is a dependency, and a view that
needs one declares the Protocol it reads (``arena.outputs.run_log.StatsSource``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

FORBIDDEN = {
    "bot_protocol": {"torch", "server", "agents", "arena"},
    "agents": {"websockets", "server", "arena", "bot_protocol"},
    "server": {"arena"},
    "arena": {"server"},
}
WIRING = ("arena/cli.py", "arena/commands/")
"""Where ``arena`` may import the server: the command line that starts one."""


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``, wherever it stands (a function body, ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
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
        offenders += [f"{relative}:{line} {m}" for line, m in imports(path) if forbidden(m, FORBIDDEN[package])]
    assert offenders == []


def test_the_check_sees_imports_wherever_they_stand(tmp_path: Path) -> None:
    """Control: top-level, type-only and function-body imports are all reported; relative ones are not."""
    source = tmp_path / "module.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import server\n"
        "def f():\n    from server.stats import RateWindow\nfrom . import sibling\n"
    )
    assert sorted(imports(source)) == [(1, "typing"), (3, "server"), (5, "server.stats")]
    assert forbidden("server.stats", {"server"}) and not forbidden("serverless", {"server"})


NUMERIC_KERNELS = ("arena/games/tank/kernels.py", "arena/games/tank/scripted_kernels.py", "arena/games/tank/drawn_kernel.py")
"""The games' numba kernels: arrays in, arrays out, on the tick's hot path, where a record costs a call's typing."""


def test_no_function_of_the_server_or_the_arena_takes_more_than_8_parameters() -> None:
    """A long parameter list is a plan or a spec waiting to be named (arena/commands/*_plan.py, LearningBotSpec).

    The numeric kernels (``NUMERIC_KERNELS``) are exempt; the rest of the games is not.
    """
    found = []
    for package in ("server", "arena"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() in NUMERIC_KERNELS:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    a = node.args
                    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg not in ("self", "cls")]
                    if len(names) + (a.vararg is not None) > 8:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert found == []


def test_no_function_of_the_games_is_longer_than_80_lines() -> None:
    """A long function is phases waiting to be named (``TankBattle.step``: one method per phase, as its kernel).

    The numeric kernels (``NUMERIC_KERNELS``) are exempt: a kernel's loop is kept whole for the compiler.
    """
    found = []
    for path in sorted((ROOT / "arena" / "games").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() in NUMERIC_KERNELS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (node.end_lineno or 0) - node.lineno >= 80:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert found == []
