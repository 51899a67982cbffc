"""No test asserts another library's wording.

A dependency's release may reword its messages at any time (orjson 3.13 did, and a fresh install
failed a test that a machine with an older orjson passed). Tests check what is ours: our error codes,
our fields, our sentences around a library's text, never the library's text itself. This check scans
every string a test writes (docstrings and comments aside) for phrases that only a library, the
interpreter or the OS produces. A new phrase belongs here when a test is found asserting it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

THIRD_PARTY = {
    "orjson / json": r"unexpected character|expected a JSON value|Expecting (value|property name)|Extra data: line"
    r"|Unterminated string|line \d+ column \d+ \(char \d+\)",
    "argparse": r"unrecognized arguments:|expected one argument|the following arguments are required"
    r"|invalid (int|float) value:|not allowed with argument|argument --[a-z-]+:",
    "the interpreter": r"invalid literal for int\(\)|could not convert string to float|unexpected keyword argument"
    r"|object has no attribute|missing \d+ required positional|not supported between instances of"
    r"|'NoneType' object|codec can't (de|en)code|invalid (start|continuation) byte",
    "the OS": r"\[Errno \d+\]|No such file or directory|Connection refused|Address already in use|Permission denied",
    "websockets": r"received 10\d\d \(|sent 10\d\d \(|no close frame received|message too big"
    r"|server rejected WebSocket connection|did not receive a valid HTTP",
    "msgpack": r"received extra data|Unpack failed",
    "numpy": r"could not broadcast|operands could not be broadcast|cannot reshape array",
    "torch": r"size mismatch for|Error\(s\) in loading state_dict|Weights only load failed|mat1 and mat2",
    "safetensors": r"Error while deserializing header",
    "zipfile": r"File is not a zip file|Bad CRC-32",
    "jsonschema / yaml": r"is a required property|is not of type|Additional properties are not allowed"
    r"|mapping values are not allowed",
    "onnxruntime": r"\[ONNXRuntimeError\]",
    "ssl": r"certificate verify failed|CERTIFICATE_VERIFY_FAILED",
    "ffmpeg / libFuzzer / imageio": r"Video: h264|Stream #\d|^Done $|Done \d+ runs|resizing from",
    "html.escape": r"&#x27;",
}
PATTERN = re.compile("|".join(f"(?:{p})" for p in THIRD_PARTY.values()))
SELF = Path(__file__).resolve()


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (they explain; they assert nothing)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def third_party_phrases(source: str, name: str = "<test>") -> list[tuple[int, str]]:
    """(line, string) of every string constant in ``source`` that quotes a library's wording."""
    tree = ast.parse(source, name)
    skip = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        is_string = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        if is_string and PATTERN.search(node.value):
            hits.append((node.lineno, node.value))
    return hits


def test_no_test_quotes_a_library_message() -> None:
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.resolve() == SELF or "data" in path.relative_to(ROOT / "tests").parts:
            continue
        for line, text in third_party_phrases(path.read_text(encoding="utf-8"), str(path)):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not offenders, "tests assert another library's wording (assert our own code or sentence instead):\n" + "\n".join(
        offenders
    )


@pytest.mark.parametrize(
    "planted",
    [
        'assert "unexpected character: line 1 column 36" in message',
        'pytest.raises(SystemExit, match="unrecognized arguments: --x")',
        'assert f"received 1009 (message too big) {reason}" in str(exc)',
        'assert "[Errno 2] No such file or directory" in err',
    ],
)
def test_the_check_flags_a_planted_library_message(planted: str) -> None:
    assert third_party_phrases(planted)


def test_the_check_passes_our_own_sentences_and_docstrings() -> None:
    ours = '''
def test_x():
    """Once asserted 'unexpected character: line 1' from orjson; now our own words."""
    assert "not valid JSON at line 1 column 36 (" in message and code == "undecodable"
    assert "--credit-window" in line and "must be >= 1, got 0" in line
'''
    assert third_party_phrases(ours) == []
