"""S2 of docs/reliability.md: a lint gate against unsafe deserialization, by AST (not grep).

Every ``.py`` under server/, bot_protocol/, agents/, arena/ and bench/ (tests are exempt:
they build malicious pickles on purpose) is parsed and checked for:

- ``weights_only=False`` passed to any call;
- a ``torch.load`` call (through any alias: ``import torch as T``, ``from torch import
  load as L``, ``torch.serialization.load``) without a literal ``weights_only=True``,
  including one that passes ``**kwargs`` the gate cannot see through;
- ``pickle.load`` / ``pickle.loads`` / ``pickle.Unpickler`` (also via ``_pickle``,
  ``cPickle`` and ``from pickle import ...``), and any use of ``cloudpickle`` or ``dill``;
- ``numpy.load(..., allow_pickle=True)``;
- a ``torch.load`` inside a ``try`` whose ``except`` handler calls ``torch.load`` again
  (the "fall back to an unsafe load" pattern the CVE write-ups warn about).

A comment or a string that mentions ``torch.load(x)`` is not a call and is not flagged.
The self-tests plant each bad pattern in a snippet and check it is caught, and check
that the safe spellings are not.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("server", "bot_protocol", "agents", "arena", "bench")

PICKLE_MODULES = {"pickle", "_pickle", "cPickle"}
PICKLE_LOADERS = {"load", "loads", "Unpickler"}
BANNED_MODULES = {"cloudpickle", "dill"}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.rule}] {self.detail}"


class _Checker(ast.NodeVisitor):
    """One file. Tracks the names that refer to torch, torch.load, pickle loaders and numpy."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Violation] = []
        self.torch_names = {"torch"}
        self.torch_load_names: set[str] = set()
        self.pickle_names: set[str] = set()
        self.pickle_loader_names: set[str] = set()
        self.numpy_names = {"np", "numpy"}
        self.numpy_load_names: set[str] = set()
        self.banned_names: set[str] = set()
        self.torch_load_calls = 0

    def flag(self, node: ast.AST, rule: str, detail: str) -> None:
        self.found.append(Violation(self.path, getattr(node, "lineno", 0), rule, detail))

    # ── imports: remember aliases ────────────────────────────────────────────

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".")[0]
            bound = alias.asname or top
            if top in BANNED_MODULES:
                self.banned_names.add(bound)
                self.flag(node, "banned-module", f"import {alias.name}")
            elif alias.name == "torch" or (top == "torch" and alias.asname is None):
                self.torch_names.add(bound)
            elif alias.name in PICKLE_MODULES:
                self.pickle_names.add(bound)
            elif alias.name == "numpy":
                self.numpy_names.add(bound)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        top = module.split(".")[0]
        for alias in node.names:
            bound = alias.asname or alias.name
            if top in BANNED_MODULES:
                self.banned_names.add(bound)
                self.flag(node, "banned-module", f"from {module} import {alias.name}")
            elif module in ("torch", "torch.serialization") and alias.name == "load":
                self.torch_load_names.add(bound)
            elif module in PICKLE_MODULES and alias.name in PICKLE_LOADERS:
                self.pickle_loader_names.add(bound)
                self.flag(node, "pickle", f"from {module} import {alias.name}")
            elif module == "numpy" and alias.name == "load":
                self.numpy_load_names.add(bound)
        self.generic_visit(node)

    # ── calls ────────────────────────────────────────────────────────────────

    def is_torch_load(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            return func.id in self.torch_load_names
        if isinstance(func, ast.Attribute) and func.attr == "load":
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id in self.torch_names:
                return True  # torch.load
            return (  # torch.serialization.load
                isinstance(owner, ast.Attribute)
                and owner.attr == "serialization"
                and isinstance(owner.value, ast.Name)
                and owner.value.id in self.torch_names
            )
        return False

    def visit_Call(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg == "weights_only" and _is_const(keyword.value, False):
                self.flag(node, "weights-only-false", "weights_only=False")
        if self.is_torch_load(node.func):
            self.torch_load_calls += 1
            if any(k.arg is None for k in node.keywords):
                self.flag(node, "torch-load", "torch.load(**kwargs): weights_only cannot be verified")
            elif not any(k.arg == "weights_only" and _is_const(k.value, True) for k in node.keywords):
                self.flag(node, "torch-load", "torch.load without a literal weights_only=True")
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner, attr = func.value.id, func.attr
            if owner in self.pickle_names and attr in PICKLE_LOADERS:
                self.flag(node, "pickle", f"{owner}.{attr}")
            if (owner in self.numpy_names and attr == "load") and _allows_pickle(node):
                self.flag(node, "numpy-pickle", "numpy.load(allow_pickle=True)")
        if isinstance(func, ast.Name):
            if func.id in self.pickle_loader_names:
                self.flag(node, "pickle", f"{func.id}(...) from pickle")
            if func.id in self.numpy_load_names and _allows_pickle(node):
                self.flag(node, "numpy-pickle", "numpy.load(allow_pickle=True)")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.banned_names:
            self.flag(node, "banned-module", f"{node.value.id}.{node.attr}")
        self.generic_visit(node)

    # ── try/except fallback ──────────────────────────────────────────────────

    def _loads_in(self, nodes: list[ast.stmt]) -> list[ast.Call]:
        return [n for stmt in nodes for n in ast.walk(stmt) if isinstance(n, ast.Call) and self.is_torch_load(n.func)]

    def visit_Try(self, node: ast.Try) -> None:
        if self._loads_in(node.body):
            for handler in node.handlers:
                for call in self._loads_in(handler.body):
                    self.flag(call, "load-fallback", "torch.load in an except handler of a try around torch.load")
        self.generic_visit(node)

    visit_TryStar = visit_Try


def _is_const(node: ast.expr, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _allows_pickle(call: ast.Call) -> bool:
    return any(k.arg == "allow_pickle" and not _is_const(k.value, False) for k in call.keywords)


def check_source(source: str, path: str = "<snippet>") -> list[Violation]:
    """Every S2 violation in one module's source."""
    checker = _Checker(path)
    checker.visit(ast.parse(source, filename=path))
    return checker.found


def scanned_files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


# ── the gate ─────────────────────────────────────────────────────────────────


def test_s2_no_unsafe_deserialization_in_the_code_base():
    """No weights_only=False, no torch.load without weights_only=True, no pickle/cloudpickle loads,
    no load fallback, in any module of server/, bot_protocol/, agents/, arena/ or bench/."""
    files = scanned_files()
    assert len(files) >= 30, f"only {len(files)} files found: is the layout different?"
    violations = [v for path in files for v in check_source(path.read_text(), str(path.relative_to(ROOT)))]
    assert not violations, "unsafe deserialization:\n" + "\n".join(map(str, violations))


def test_s2_the_gate_sees_the_real_checkpoint_loader():
    """Not vacuous: the checkpoint loader's torch.load call is found (and is the safe spelling)."""
    path = ROOT / "agents" / "checkpoint.py"
    checker = _Checker(str(path))
    checker.visit(ast.parse(path.read_text()))
    assert checker.torch_load_calls >= 1
    assert checker.found == []


# ── self-tests: planted violations are caught ────────────────────────────────

BAD = {
    "no weights_only": ("import torch\ntorch.load(f)\n", {"torch-load"}),
    "weights_only=False": ("import torch\ntorch.load(f, weights_only=False)\n", {"torch-load", "weights-only-false"}),
    "weights_only from a variable": ("import torch\ntorch.load(f, weights_only=safe)\n", {"torch-load"}),
    "weights_only=1": ("import torch\ntorch.load(f, weights_only=1)\n", {"torch-load"}),
    "**kwargs": ("import torch\ntorch.load(f, **options)\n", {"torch-load"}),
    "aliased module": ("import torch as T\nT.load(f)\n", {"torch-load"}),
    "from-import alias": ("from torch import load as restore\nrestore(f)\n", {"torch-load"}),
    "torch.serialization.load": ("import torch\ntorch.serialization.load(f)\n", {"torch-load"}),
    "inside a function": ("import torch\ndef f(p):\n    return torch.load(p)\n", {"torch-load"}),
    "weights_only=False anywhere": ("load_checkpoint(path, weights_only=False)\n", {"weights-only-false"}),
    "pickle.load": ("import pickle\npickle.load(f)\n", {"pickle"}),
    "pickle.loads": ("import pickle\npickle.loads(b)\n", {"pickle"}),
    "pickle alias": ("import pickle as pk\npk.loads(b)\n", {"pickle"}),
    "_pickle": ("import _pickle\n_pickle.Unpickler(f).load()\n", {"pickle"}),
    "from pickle import loads": ("from pickle import loads\nloads(b)\n", {"pickle"}),
    "cloudpickle import": ("import cloudpickle\n", {"banned-module"}),
    "cloudpickle use": ("import cloudpickle as cp\ncp.loads(b)\n", {"banned-module"}),
    "from cloudpickle": ("from cloudpickle import loads\n", {"banned-module"}),
    "dill": ("import dill\n", {"banned-module"}),
    "numpy allow_pickle": ("import numpy as np\nnp.load(f, allow_pickle=True)\n", {"numpy-pickle"}),
    "try/except fallback": (
        "import torch\ntry:\n    s = torch.load(p, weights_only=True)\n"
        "except Exception:\n    s = torch.load(p, weights_only=False)\n",
        {"load-fallback", "torch-load", "weights-only-false"},
    ),
    "fallback even when both are safe": (
        "import torch\ntry:\n    s = torch.load(p, weights_only=True)\nexcept RuntimeError:\n"
        "    s = torch.load(p, weights_only=True, map_location='cpu')\n",
        {"load-fallback"},
    ),
    "nested fallback": (
        "import torch\ndef f():\n    try:\n        if x:\n            return torch.load(p, weights_only=True)\n"
        "    except (OSError, ValueError) as e:\n        log(e)\n        return torch.load(p, weights_only=True)\n",
        {"load-fallback"},
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_s2_checker_flags_planted_violation(name):
    source, rules = BAD[name]
    found = check_source(source)
    assert {v.rule for v in found} == rules, found


GOOD = {
    "safe torch.load": "import torch\ntorch.load(f, weights_only=True, map_location='cpu')\n",
    "aliased safe": "import torch as T\nT.load(f, map_location='cpu', weights_only=True)\n",
    "pickle.dumps only": "import pickle\ndata = pickle.dumps(x)\n",
    "mentions in text": (
        '"""Never call torch.load(f) or pickle.loads(b); weights_only=False is banned."""\n'
        "# torch.load(f, weights_only=False)\nmessage = 'pickle.load(f)'\n"
    ),
    "other load methods": "import json\njson.load(f)\nmodel.load_state_dict(state)\nnp.load(f)\n",
    "numpy without pickle": "import numpy as np\nnp.load(f, allow_pickle=False)\n",
    "try without fallback": (
        "import torch\ntry:\n    s = torch.load(p, weights_only=True)\nexcept Exception as e:\n    raise Invalid(p) from e\n"
    ),
}


@pytest.mark.parametrize("name", list(GOOD))
def test_s2_checker_accepts_safe_code(name):
    assert check_source(GOOD[name]) == []
