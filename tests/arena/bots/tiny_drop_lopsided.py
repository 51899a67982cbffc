"""tiny_drop with one rule that is not left-right symmetric (nobody opens in the first column): ``--mirror``'s check."""

from tests.arena.bots.tiny_drop import lopsided as env

__all__ = ["env"]
