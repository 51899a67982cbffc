"""What a tank does: the action columns every controller hands the engine, a learned policy or a scripted bot.

The action layout is a contract with every trained policy, the ONNX export and the Tank Royale bot, as the
observation's is (``observation.py``), so it stands apart from the engine that reads it and from the bots
that write it (docs/arena.md has the table).
"""

from __future__ import annotations

__all__ = ["ACT_DIM"]

ACT_DIM: int = 5
"""Action columns: target velocity, body turn, gun turn, fire power, radar turn (all in [-1, 1])."""
