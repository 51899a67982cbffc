"""Learner ranks on ``torch.distributed``: the process group, and the decisions ranks must share.

``arena serve --distributed`` is started by ``torchrun``: N processes, each with its own bot
port, queue and trainer thread, one learner between them. Rollouts stay on their rank; every
minibatch's gradients are averaged over the ranks (:class:`agents.distributed.GradientAverager`),
so all ranks hold the same weights and publish the same ``(generation, version)``.

Lock-step needs every rank to run the same collectives in the same order, so *whether* one
happens (an update, a checkpoint, a stop) is agreed first, in one small all-reduce per trainer
step (:meth:`LearnerGroup.agree`). Rank 0 alone writes files and sends its start state to the
others. A rank that dies or hangs makes the others stop with :class:`RankLost`, torchrun's cue
to restart the whole group from rank 0's newest checkpoint (docs/deploy.md); no rank restarts
alone, or it would train another policy than the rest.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from agents.distributed import CollectiveFailed

__all__ = ["Agreement", "DistributedConfig", "LearnerGroup", "RankLost"]

logger = logging.getLogger(__name__)

BOT_VIEW_INTERVAL = 2.0
"""Seconds between two posts of a rank's bot table to rank 0 (the dashboard's rate window)."""

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
"""What torchrun sets for each process it starts (``env://`` rendezvous)."""


@dataclass(frozen=True)
class Agreement:
    """The ranks' shared decision for one trainer step."""

    update: bool
    """Every rank holds a full rollout: all run the update (its gradient steps all-reduce together)."""
    checkpoint: bool
    """Rank 0's clock says a checkpoint is due: rank 0 writes it, every rank takes its rollback state."""
    stop: bool
    """A rank is stopping: every trainer leaves its loop after this step (so none waits for a collective
    that will never come)."""


class RankLost(RuntimeError):
    """A collective with the other ranks failed: one of them died, hung past the timeout, or left."""


@dataclass(frozen=True)
class DistributedConfig:
    """This process's place among the learner ranks, as torchrun describes it."""

    rank: int
    world_size: int
    local_rank: int
    timeout: float = 60.0
    """Seconds a collective may wait for the slowest rank before this rank gives up (``RankLost``)."""
    backend: str = "gloo"
    """``gloo`` on the CPU; ``nccl`` when the learner runs on CUDA (``arena serve --device cuda``: each
    rank on ``cuda:LOCAL_RANK``). The NCCL path is written for, not yet run on, a GPU host."""
    restart: int = 0
    """How many times torchrun has restarted the group (``TORCHELASTIC_RESTART_COUNT``)."""
    master_addr: str = "127.0.0.1"
    """Where the rendezvous store listens (``MASTER_ADDR``: torchrun's agent on the first host, or rank 0)."""
    master_port: int = 29500
    agent_store: bool = False
    """torchrun's agent hosts the store (``TORCHELASTIC_USE_AGENT_STORE``); else rank 0 does."""

    def __post_init__(self) -> None:
        if not (0 <= self.rank < self.world_size and 0 <= self.local_rank <= self.rank):
            raise ValueError(
                f"rank {self.rank}, local rank {self.local_rank} and world size {self.world_size} do not fit together"
            )
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.backend not in ("gloo", "nccl"):
            raise ValueError(f"backend must be gloo or nccl, got {self.backend!r}")

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, timeout: float = 60.0, backend: str = "gloo"
    ) -> DistributedConfig:
        """Read torchrun's variables; ValueError naming what is missing when not started by torchrun."""
        env = os.environ if environ is None else environ
        missing = [name for name in TORCHRUN_VARIABLES if name not in env]
        if missing:
            raise ValueError(
                f"--distributed runs under torchrun, which sets {', '.join(missing)} "
                "(e.g. torchrun --nproc-per-node 2 -m arena.cli serve --distributed; see docs/deploy.md)"
            )
        return cls(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            local_rank=int(env["LOCAL_RANK"]),
            timeout=timeout,
            backend=backend,
            restart=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
            master_addr=env["MASTER_ADDR"],
            master_port=int(env["MASTER_PORT"]),
            agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
        )


class LearnerGroup:
    """The process group of the learner ranks, and the few collectives the trainer runs outside
    the gradient steps."""

    def __init__(self, config: DistributedConfig) -> None:
        self.config = config
        self.rank = config.rank
        self.world_size = config.world_size
        self.device = torch.device("cuda", config.local_rank) if config.backend == "nccl" else torch.device("cpu")
        """Where the agreement's tensor lives: NCCL reduces only CUDA tensors (this rank's GPU)."""
        if config.backend == "nccl":
            torch.cuda.set_device(self.device)
        if not dist.is_initialized():
            dist.init_process_group(
                config.backend,
                store=_attempt_store(config),
                rank=config.rank,
                world_size=config.world_size,
                timeout=datetime.timedelta(seconds=config.timeout),
            )
        self._view_store: Any = None

    @property
    def is_leader(self) -> bool:
        """Rank 0: the one that writes checkpoints, logs and the report."""
        return self.rank == 0

    def agree(self, ready: bool, leader_due: bool, stopping: bool) -> Agreement:
        """What every rank does next, from each rank's view: one all-reduce of three integers."""
        votes = torch.tensor([int(ready), int(leader_due and self.is_leader), int(stopping)], dtype=torch.int64,
                             device=self.device)  # fmt: skip
        self._collective(lambda: dist.all_reduce(votes, op=dist.ReduceOp.SUM), "agreeing on the next update")
        ready_ranks, due, stopping_ranks = (int(v) for v in votes)
        return Agreement(update=ready_ranks == self.world_size, checkpoint=due > 0, stop=stopping_ranks > 0)

    def share(self, state: dict[str, Any] | None) -> dict[str, Any]:
        """Rank 0's ``state`` on every rank (others pass None): the start of a run, fresh or resumed."""
        box = [state if self.is_leader else None]
        self._collective(
            lambda: dist.broadcast_object_list(box, src=0, device=self.device), "receiving rank 0's starting state"
        )
        shared = box[0]
        assert isinstance(shared, dict)
        return shared

    def _collective(self, run: Any, doing: str) -> None:
        try:
            run()
        except RuntimeError as exc:  # gloo and NCCL errors (dist.DistError) are RuntimeErrors
            raise self._lost(exc, doing) from exc

    def explain(self, exc: BaseException) -> BaseException:
        """``exc`` as the one line a rank exits with: a :class:`RankLost` when it is a failed collective
        (a gradient all-reduce inside an update, say), else ``exc`` itself (a bug of this rank)."""
        if isinstance(exc, RankLost) or not isinstance(exc, CollectiveFailed | dist.DistError):
            return exc
        lost = self._lost(exc, "averaging gradients")
        lost.__cause__ = exc
        return lost

    def _lost(self, exc: BaseException, doing: str) -> RankLost:
        return RankLost(
            f"rank {self.rank} of {self.world_size}: a collective failed while {doing} "
            f"(another rank died, or hung past {self.config.timeout:g} s): {_gist(exc)}"
        )

    # ── every rank's bots in rank 0's views ─────────────────────────────────

    def post_bots(self, rows: list[dict[str, Any]]) -> None:
        """This rank's bot rows (:meth:`server.stats.BotStats.to_view`) for rank 0 to show (blocks: a thread)."""
        self._views().set(f"bots/{self.rank}", json.dumps(rows))

    def posted_bots(self) -> list[dict[str, Any]]:
        """The bot rows the other ranks posted last (blocks: a thread); a rank that has not posted yet has none."""
        store, rows = self._views(), []
        for rank in range(self.world_size):
            key = f"bots/{rank}"
            if rank != self.rank and store.check([key]):
                rows += json.loads(store.get(key))
        return rows

    def _views(self) -> Any:
        """A client of its own on the rendezvous store, beside the process group's: the dashboard's
        traffic never waits behind, or runs inside, a collective."""
        if self._view_store is None:
            self._view_store = _attempt_store(self.config, client=True, suffix="views")
        return self._view_store

    def close(self) -> None:
        """Leave the group (a clean stop; a failed rank just exits)."""
        if dist.is_initialized():
            dist.destroy_process_group()


def _gist(exc: BaseException) -> str:
    """A backend's error in a few words: ``Read error [127.0.0.1]:29919: Connection reset by peer``
    from gloo's ``[.../pair.cc:537] Read error ...: Connection reset by peer. This is typically ...``."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", text)
    return text.split(". This is typically")[0].rstrip(".")


def _attempt_store(config: DistributedConfig, client: bool = False, suffix: str = "") -> Any:
    """The rendezvous store, under a prefix of its own for each restart of the group.

    Why the prefix: torchrun's static rendezvous keeps one store across restarts, so a restarted
    group could read the dead attempt's addresses and fail to connect (gloo's ``connectFullMesh``
    is refused and the restart is lost). Each attempt's keys live apart.
    """
    store = dist.TCPStore(  # type: ignore[attr-defined]  # public, though torch's stubs do not re-export it
        config.master_addr,
        config.master_port,
        config.world_size,
        is_master=not client and not config.agent_store and config.rank == 0,
        timeout=datetime.timedelta(seconds=config.timeout),
    )
    return dist.PrefixStore(f"arena/attempt_{config.restart}/{suffix}", store)  # type: ignore[attr-defined]


async def share_bots(
    group: LearnerGroup,
    own_bots: Callable[[], list[dict[str, Any]]],
    deliver: Callable[[list[dict[str, Any]]], None],
    every: float = BOT_VIEW_INTERVAL,
) -> None:
    """Forever, every ``every`` seconds: ranks > 0 post ``own_bots()``; rank 0 hands the others' rows to
    ``deliver``. Runs on the event loop (``own_bots`` reads sessions there); the store calls run in a
    thread. A store that is gone (the group is failing) is logged once; its rank's own line says why.
    """
    warned = False
    while True:
        await asyncio.sleep(every)
        try:
            if group.is_leader:
                deliver(await asyncio.to_thread(group.posted_bots))
            else:
                rows = own_bots()
                await asyncio.to_thread(group.post_bots, rows)
        except (RuntimeError, OSError) as exc:
            if not warned:
                logger.warning("the ranks' bot tables could not be shared: %s", _gist(exc))
                warned = True
