"""The house's layering, checked on the source: who may import whom.

``bot_protocol`` (the wire format and the bot client) stands alone; ``agents`` (the learners) know
no wire format, socket, server or game; ``server`` knows no game; ``arena`` reaches the server only
through ``bot_protocol``, except the CLI (``arena/cli.py``, ``arena/commands/``), which wires a run
together. Imports under ``if TYPE_CHECKING:`` count too: a type is a dependency, and a view that
needs one declares the Protocol it reads (``arena.outputs.run_log.StatsSource``).

And the house's size rule over the product (``PRODUCT``): no function over 80 lines or 8 parameters
but in the numeric kernels (``NUMERIC_KERNELS``), no file over 700 lines but the tank's kernels.
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


PRODUCT = ("agents", "arena", "bot_protocol", "server")
"""The product's packages: what the size rules below hold for (tests, bench and scripts are not product)."""

NUMERIC_KERNELS = (
    "agents/ppo/guard_kernel.py",
    "agents/ppo/loss_kernel.py",
    "arena/games/tank/drawn_kernel.py",
    "arena/games/tank/kernels.py",
    "arena/games/tank/scripted_kernels.py",
)
"""The numba kernels (the games' tick and scripted bots, PPO's loss and guards): arrays in, arrays out, on a
hot path, where a record costs a call's typing and a loop is kept whole for the compiler."""

LONG_FILES = ("arena/games/tank/kernels.py",)
"""Product files allowed past 700 lines: the tank's compiled tick, the numpy engine's phases in one module
that numba inlines into one loop per match."""


def product_sources() -> list[tuple[str, Path]]:
    """(path from the repository root, path) of every Python file of the product's packages."""
    return [
        (path.relative_to(ROOT).as_posix(), path) for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))
    ]


def functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function and method defined in ``path``, nested ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Named parameters, ``*args`` and ``**kwargs`` counted, ``self`` and ``cls`` not."""
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg not in ("self", "cls")]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def line_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the ``def`` to the last line of the body (decorators not counted)."""
    return (node.end_lineno or node.lineno) - node.lineno + 1


def test_no_product_function_but_the_numeric_kernels_takes_more_than_8_parameters() -> None:
    """A long parameter list is a plan or a record waiting to be named (arena/commands/*_plan.py, LearningBotSpec, Step).

    The numeric kernels (``NUMERIC_KERNELS``) are exempt; the rest of the product is not.
    """
    found = [
        f"{relative}:{node.lineno} {node.name}"
        for relative, path in product_sources()
        if relative not in NUMERIC_KERNELS
        for node in functions(path)
        if parameter_count(node) > 8
    ]
    assert found == []


def test_no_product_function_but_the_numeric_kernels_is_longer_than_80_lines() -> None:
    """A long function is phases waiting to be named (``TankBattle.step``: one method per phase, as its kernel).

    The numeric kernels (``NUMERIC_KERNELS``) are exempt: a kernel's loop is kept whole for the compiler.
    """
    found = [
        f"{relative}:{node.lineno} {node.name} ({line_count(node)} lines)"
        for relative, path in product_sources()
        if relative not in NUMERIC_KERNELS
        for node in functions(path)
        if line_count(node) > 80
    ]
    assert found == []


def test_no_product_file_but_the_tank_kernels_is_longer_than_700_lines() -> None:
    """A long module is several jobs waiting to be named (``arena/games/tank``: one module per phase of a tick).

    ``arena/games/tank/kernels.py`` (``LONG_FILES``) is exempt.
    """
    found = [
        f"{relative} ({lines} lines)"
        for relative, path in product_sources()
        if relative not in LONG_FILES and (lines := len(path.read_text(encoding="utf-8").splitlines())) > 700
    ]
    assert found == []


def test_the_size_checks_count_what_the_rule_says(tmp_path: Path) -> None:
    """Control: ``self``/``cls`` are not parameters, ``*args``/``**kwargs`` are; a function's lines run from its
    ``def`` to its last line; every kernel and long file exempted exists."""
    source = tmp_path / "module.py"
    source.write_text(
        "class C:\n"
        "    def m(self, a, b, /, c, *d, e, **f):\n"
        "        return 1\n"
        "    @classmethod\n"
        "    def k(cls):\n"
        "        pass\n"
    )
    counted = {node.name: (parameter_count(node), line_count(node)) for node in functions(source)}
    assert counted == {"m": (6, 2), "k": (0, 2)}
    assert all((ROOT / path).is_file() for path in (*NUMERIC_KERNELS, *LONG_FILES))
