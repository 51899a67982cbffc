"""PPO: the agent, its config, and the minibatch step each device runs.

Read in this order:

- ``agent.py``: :class:`PPOAgent`, its update loop (rollout → GAE → epochs of minibatch steps →
  statistics) and persistence; ``config.py``: :class:`PPOConfig`.
- ``steps.py``: one step class per path, picked once when the agent is built: the reference
  (``EagerStep``), the CPU's written-out step, the multi-rank step, the CUDA graph's.
- ``loss.py`` and ``guards.py``: the loss and the guards, each once, in torch: the references.
- ``gradients.py``: where a step's gradients come from (autograd over ``loss.py``, or written out).
- ``fused.py``, ``loss_kernel.py``, ``guard_kernel.py``: the same maths written out for speed, each
  tested against its reference; ``kernels.py`` compiles the numba loops ahead of a run.
- ``stats.py``: the statistics every step reports, by name; ``batch.py``: the packed rollout.
"""

from __future__ import annotations

from .agent import PPOAgent
from .config import PPOConfig

__all__ = ["PPOAgent", "PPOConfig"]
