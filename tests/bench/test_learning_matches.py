"""bench/learning_matches.py: ``arena`` run from the measured source; a failed match is recorded, not raised."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench import learning_matches
from bench.learning_matches import win_rates
from bench.provenance import Source
from tests.conftest import ROOT


@pytest.fixture
def working_tree() -> Iterator[None]:
    """The checkout itself as the measured source (the benchmark exports a commit instead)."""
    before = learning_matches.SOURCE
    learning_matches.use_source(Source(ROOT, {"commit": "working tree", "dirty": True, "exported": False}))
    yield
    learning_matches.SOURCE = before


def test_a_match_is_played_by_the_real_cli_and_a_failed_one_counts_as_none(working_tree, capsys) -> None:
    errors: list[str] = []
    rates = win_rates("sitting", "sitting", {"spinner": "spinner", "nobody": "no-such-bot"}, 1, 0, errors)
    assert rates["spinner"] is not None and 0.0 <= rates["spinner"] <= 1.0
    assert rates["nobody"] is None
    assert len(errors) == 1 and errors[0].startswith("sitting vs nobody: arena match exited 2:")  # ArenaError's words
    assert "vs nobody: failed" in capsys.readouterr().err  # the log says so, and the other match went on
