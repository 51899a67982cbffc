"""The trainer thread: drain the queue, filter stale data, update the agent, publish weights.

:meth:`Trainer.step` does one unit of work and can be called directly (tests do);
the thread is a thin loop around it. Callers that assemble segments themselves hand them over
with :meth:`Trainer.feed` and train with :meth:`Trainer.update`; :meth:`Trainer.republish`,
:meth:`Trainer.request_checkpoint` and the ``clock`` argument are the other seams.
The trainer owns the networks and never touches a socket: new weights reach the event
loop only through the ``publish`` callback, which the server wires to ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from agents import Agent, CheckpointStore, Segment, SegmentEnd, segment_return
from bot_protocol import PolicyId

from .assembler import SegmentBuilder
from .config import TrainerConfig
from .coordinator import Coordinator, RankCoordinator, stopped_by_another_rank
from .distributed import LearnerGroup
from .metrics import Metrics
from .recovery import Recovery
from .run_state import CODE_VERSION, RecentValues, capture_rng, config_hash, copy_state, restore_rng
from .transition_queue import TransitionQueue
from .weights import PublishedWeights, published_weights

__all__ = ["Trainer", "TrainerHooks", "copy_state"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerHooks:
    """Where the trainer's news goes; each is called on the trainer thread."""

    publish: Callable[[PublishedWeights], None] = lambda weights: None
    """Each new weights; must hand it to the event loop thread-safely."""
    on_drained: Callable[[], None] = lambda: None
    """After each drain (the server returns withheld credit)."""
    update_hook: Callable[[dict[str, float]], None] | None = None
    """Each update's metrics (the CLI logs them)."""
    on_fatal: Callable[[BaseException], None] = lambda exc: None
    """The trainer gave up (a crash beyond the restart quota): the server shuts down, its command exits non-zero."""


class Trainer:
    """Runs ``agent`` on segments from ``queue`` and publishes each new policy version.

    Args:
        hooks: where published weights, drains, metrics and a fatal error go (:class:`TrainerHooks`).
        segments: assembles the queue's arrivals into segments (its segment length, and the run's reward
            function for terms-mode sessions: the game's, see :mod:`server.rewards`); default: 256-step
            segments of scalar-reward sessions.
        clock: seconds, for the checkpoint schedule and the restart quota (tests pass one they
            advance by hand; the heartbeat the server's watchdog reads stays on ``time.monotonic``).
        group: the learner ranks this trainer is one of (``arena serve --distributed``): its
            :class:`~server.coordinator.RankCoordinator` averages gradients, agrees on updates and
            checkpoints, and shares rank 0's starting state; alone, a :class:`~server.coordinator.Coordinator`
            that decides nothing.

    Crashes and non-finite updates are :class:`~server.recovery.Recovery`'s (restart from a checkpoint,
    roll back to the last good state).
    """

    def __init__(
        self,
        agent: Agent,
        queue: TransitionQueue,
        metrics: Metrics,
        config: TrainerConfig,
        hooks: TrainerHooks | None = None,
        segments: SegmentBuilder | None = None,
        clock: Callable[[], float] = time.monotonic,
        group: LearnerGroup | None = None,
    ) -> None:
        self.agent = agent
        self.clock = clock
        self.coordinator = Coordinator() if group is None else RankCoordinator(group)
        self.coordinator.attach(agent)
        self.builder = segments or SegmentBuilder(256, None)
        self.queue = queue
        self.metrics = metrics
        self.config = config
        self.hooks = hooks or TrainerHooks()
        self.recovery = Recovery(self)
        self.generation = 0
        self.version = 0
        self.updates = 0
        self.steps_trained = 0
        self.update_seconds_total = 0.0
        """Wall time spent inside ``agent.update`` (the trainer's busy share of a run)."""
        self.gradient_steps_total = 0
        """Minibatch steps taken or skipped, over all updates (``update_seconds_total`` / this: time per minibatch)."""
        self.store = CheckpointStore(config.checkpoint_dir, config.keep_checkpoints) if config.checkpoint_dir else None
        self.heartbeat = time.monotonic()
        self.last_metrics: dict[str, float] = {}
        self.episode_returns = RecentValues(100)
        self._running_returns: dict[tuple[str, int], float] = {}
        self._lag_stats: tuple[int, int, int, int] | None = None
        """(count, sum, min, max) of the policy lag of segments kept since the last update: running
        figures, not a list, so a trainer that waits long for a rollout holds nothing per segment."""
        self._last_checkpoint = self.clock()
        self._first_update_at: float | None = None
        """When this run's first update ended: the first checkpoint is due ``first_checkpoint_after`` later."""
        self._checkpoint_requested = False
        self._group_stopping = False
        """The ranks agreed to stop (one of them is stopping): the loop ends after the step that learned it."""
        self._updated = False
        """Whether the last :meth:`step` ran an update (else a drain only: the run loop pauses)."""
        self.handover_lock = threading.Lock()
        """Guards the hand-over of steps (queue → agent → update → trained counter) so
        :meth:`accounting` never sees a step in two places or in none. Never held during an update."""
        self.held_steps = 0
        """Steps handed to the agent and not yet reported trained (includes a running update's)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.resumed_from: Path | None = None
        """The checkpoint ``--resume`` loaded (None: fresh, or no valid checkpoint was found)."""
        if config.resume:
            self.restore()
        self.coordinator.start(self)
        self.published = self._published_weights()
        self.recovery.remember_good_state()
        if self.store is not None and config.resume:
            # Make the new generation durable before any weights of it are published, so a
            # crash now can never lead a later resume to hand out this generation again.
            self.save_checkpoint()

    # ── lifecycle ────────────────────────────────────────────────────────────

    def start(self) -> None:
        """Run :meth:`step` in a daemon thread until :meth:`stop`."""
        assert self._thread is None, "trainer already started"
        self._thread = threading.Thread(target=self._run, name="trainer", daemon=True)
        self._thread.start()

    @property
    def policy_id(self) -> PolicyId:
        """The policy the trainer holds now: what it last published, or publishes next."""
        return PolicyId(self.generation, self.version)

    @property
    def restarts_allowed(self) -> bool:
        """Whether a crash may restart this trainer (alone yes; a learner rank no: the group restarts)."""
        return self.coordinator.restarts_allowed

    @property
    def restarts(self) -> int:
        """Restarts after crashes so far."""
        return self.recovery.restarts

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def reading(self, taken_at: float) -> dict[str, Any]:
        """The trainer's fields of a :class:`~server.stats.ServerStats` read at ``taken_at`` (any thread: plain reads)."""
        return {
            "trainer_policy": self.policy_id,
            "updates": self.updates,
            "gradient_steps": self.gradient_steps_total,
            "update_seconds_total": self.update_seconds_total,
            "steps_trained": self.steps_trained,
            "trainer_alive": self.alive,
            "trainer_failed": self.error is not None,
            "trainer_heartbeat_age": max(0.0, taken_at - self.heartbeat),  # it may beat after taken_at
            "last_update": MappingProxyType(self.last_metrics),
        }

    def cpu_seconds(self) -> float:
        """CPU time the trainer thread has used so far (0 before it starts).

        It shares the GIL with the event loop, so benchmarks report it beside the loop's own
        CPU time: together they are what one frame costs the server process.
        """
        thread = self._thread
        if thread is None or thread.ident is None or not thread.is_alive():
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))

    def _run(self) -> None:
        threads = self.config.torch_threads or max(1, len(os.sched_getaffinity(0)) - 1)  # the CPUs we may use
        torch.set_num_threads(threads)  # leave a core to the event loop (GIL stalls show up as loop lag)
        while self.coordinator.keeps_looping(self._stop.is_set()):
            if self._group_stopping:
                if not self._stop.is_set():  # another rank stopped: this one cannot train alone
                    self.error = stopped_by_another_rank()
                    self.hooks.on_fatal(self.error)
                return
            try:
                if not self.step():
                    self.queue.wait(self.config.idle_wait)
                elif not self._updated and self.config.drain_interval and not len(self.queue):
                    self._stop.wait(self.config.drain_interval)  # drained it dry: let arrivals pile up
            except Exception as exc:
                if self.recovery.restart(exc):
                    continue
                self.error = self.coordinator.explain(exc)
                logger.error("trainer crashed beyond its restart quota; stopping the server: %s", self.error,
                             exc_info=exc if self.error is exc else None)  # fmt: skip
                if self.coordinator.final_checkpoint_on_crash and self.store is not None and self.recovery.state_is_finite():
                    self.save_checkpoint()  # ML-Agents: a final checkpoint whenever the state is still valid
                self.hooks.on_fatal(self.error)
                return

    def stop(self, timeout: float = 30.0, checkpoint: bool = True) -> None:
        """Stop and join the thread, then write a final checkpoint (if configured)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.error("trainer did not stop within %.0f s", timeout)
                return
        if checkpoint and self.store is not None and self.error is None:
            self.save_checkpoint()

    # ── what recovery needs of the trainer ───────────────────────────────────

    def drop_lost_steps(self) -> None:
        """After a crash: steps the failed update had taken out of the agent are gone; count them,
        so the accounting stays exact. What the agent still holds is kept."""
        with self.handover_lock:
            lost = self.held_steps - self.agent.pending_steps
            if lost > 0:
                self.metrics.inc("transitions_dropped", lost, reason="trainer_restart")
            self.held_steps = self.agent.pending_steps

    def publish_new_generation(self) -> None:
        """Publish the (restored) policy under its new generation, durable first when checkpoints are kept."""
        self.published = self._published_weights()
        self.metrics.set("policy_version", self.version)
        if self.store is not None:
            self.save_checkpoint()  # durable before bots see it, as after a resume
        self.hooks.publish(self.published)

    # ── one unit of work ─────────────────────────────────────────────────────

    def step(self) -> bool:
        """Drain (unless an update is due), filter, maybe update and publish. True if it did anything.

        The queue is drained only while the agent wants data, so a busy trainer lets the
        queue fill, which withholds credit and slows the bots: the agent never buffers more
        than one update plus one drain.
        """
        self.heartbeat = time.monotonic()
        arrivals = []
        if not self.agent.ready():
            with self.handover_lock:
                arrivals = self.queue.drain(self.agent.drain_steps)
                if arrivals:
                    self._hand_over(self.builder.add(arrivals))
                    for left in (a.bot for a in arrivals if a.batch is None):
                        self._forget_bot(left)
            if arrivals:
                self.hooks.on_drained()
        agreed = self.coordinator.agree(self._ready_for_update(), self._checkpoint_due(), self._stop.is_set())
        self._group_stopping = agreed.stop
        did_update = agreed.update and self._run_update()
        self._updated = did_update
        if did_update and self._first_update_at is None:
            self._first_update_at = self.clock()
        if self.coordinator.checkpoint(agreed, self._checkpoint_due):
            self._checkpoint_requested = False
            if self.store is not None:
                self.save_checkpoint()
            else:
                self._last_checkpoint = self.clock()
            if self.recovery.state_is_finite():
                self.remember_good_state()
        self.metrics.set("trainer_pending_steps", self.held_steps)
        return bool(arrivals) or did_update

    def _checkpoint_due(self) -> bool:
        """Every ``checkpoint_interval`` s; the first one already ``first_checkpoint_after`` s after the first update;
        at once after :meth:`request_checkpoint`."""
        now = self.clock()
        if self._checkpoint_requested or now - self._last_checkpoint >= self.config.checkpoint_interval:
            return True
        first = self._first_update_at
        return (
            first is not None
            and self._last_checkpoint <= first  # none written since the first update
            and now - first >= self.config.first_checkpoint_after
        )

    def feed(self, segments: list[Segment]) -> int:
        """Hand assembled segments to the agent exactly as a drain does (filtered, returns tracked,
        counted as held); the next :meth:`step` or :meth:`update` trains on them. Returns the steps kept.

        The seam for callers that assemble segments themselves, tests among them: the queue and the
        segment builder are bypassed, nothing else is.
        """
        with self.handover_lock:
            return self._hand_over(segments)

    def _hand_over(self, segments: list[Segment]) -> int:
        """Filter ``segments`` and give the kept ones to the agent; the caller holds ``handover_lock``."""
        kept = self._filter(segments)
        self.agent.observe(kept)
        steps = sum(s.steps for s in kept)
        self.held_steps += steps
        return steps

    def request_checkpoint(self) -> None:
        """Make the next :meth:`step` write a checkpoint (and refresh the rollback state), whatever the clock says."""
        self._checkpoint_requested = True

    def open_episodes(self, bot: str) -> list[int]:
        """The agents of ``bot`` whose episode's running return the trainer still holds (empty once it left)."""
        return sorted(agent for b, agent in self._running_returns if b == bot)

    def _filter(self, segments: list[Segment]) -> list[Segment]:
        kept: list[Segment] = []
        max_lag = self.agent.max_policy_lag
        generation, version = self.generation, self.version
        lags: list[int] = []
        episodes = 0
        for segment in segments:
            if max_lag is not None and segment.generation != generation:
                # On-policy only: acted by weights of an earlier run (before a resume), their
                # log-probs mean nothing now. A replay buffer takes any policy's experience.
                self.metrics.inc("transitions_dropped", segment.steps, reason="old_generation")
                continue
            lag = version - segment.version
            if max_lag is not None and lag > max_lag:
                self.metrics.inc("transitions_dropped", segment.steps, reason="stale")
                continue
            lags.append(lag)
            episodes += self._track_returns(segment)
            kept.append(segment)
        # Counted once per drain, not per segment: a drain of many bots closes hundreds of
        # segments on the thread that shares the GIL with the event loop.
        if lags:
            count, total, low, high = self._lag_stats or (0, 0, lags[0], lags[0])
            self._lag_stats = (count + len(lags), total + sum(lags), min(low, *lags), max(high, *lags))
        if episodes:
            self.metrics.inc("episodes", episodes)
        return kept

    def _forget_bot(self, bot: str) -> None:
        """A bot left: its unfinished episodes' running returns will never complete (ids are not reused)."""
        for key in [k for k in self._running_returns if k[0] == bot]:
            del self._running_returns[key]

    def _track_returns(self, segment: Segment) -> bool:
        """Add the segment to its episode's running return; True if it ended the episode."""
        key = (segment.bot, segment.agent)
        total = self._running_returns.get(key, 0.0) + segment_return(segment)
        if segment.end is SegmentEnd.CUT:
            self._running_returns[key] = total
            return False
        self._running_returns.pop(key, None)
        self.episode_returns.add(total)
        return True

    def accounting(self) -> dict[str, int]:
        """Steps on the trainer's side of the hand-over, read consistently."""
        with self.handover_lock:
            return {
                "trained": int(self.metrics.counter("transitions_trained")),
                "queued": self.queue.steps,
                "open": self.builder.open_steps,
                "pending_in_agent": self.held_steps,
                **{f"dropped_{k}": int(v) for k, v in self.metrics.by_label("transitions_dropped", "reason").items()},
            }

    def update(self) -> bool:
        """One update and its publish, if the agent holds enough data; False if it does not (or no longer
        does once stale data was discarded). :meth:`step` calls it after each drain; a learner group's
        ranks update only from :meth:`step`, where they agree on it first."""
        assert self.coordinator.updates_alone, "a rank updates only when every rank does: call step()"
        return self._ready_for_update() and self._run_update()

    def _ready_for_update(self) -> bool:
        """Whether the agent holds a full update's data once stale segments are discarded."""
        if not self.agent.ready():
            return False
        max_lag = self.agent.max_policy_lag
        if max_lag is not None:
            # Checked at drain time too; this catches segments that aged in the agent since.
            with self.handover_lock:
                stale = self.agent.discard_stale(self.version - max_lag)
                if stale:
                    self.held_steps -= stale
                    self.metrics.inc("transitions_dropped", stale, reason="stale")
        return self.agent.ready()

    def _run_update(self) -> bool:
        """The update itself, its bookkeeping and its publish (the agent is ready)."""
        sync_before = self.coordinator.sync_seconds()
        start = time.perf_counter()
        stats = self.agent.update()
        elapsed = time.perf_counter() - start
        trained = int(stats.get("train/steps_trained", 0))
        with self.handover_lock:
            self.held_steps -= trained
            self.metrics.inc("transitions_trained", trained)
        self.updates += 1
        self.steps_trained += trained
        self.update_seconds_total += elapsed
        self.gradient_steps_total += int(stats.get("train/applied_steps", 0) + stats.get("train/skipped_steps", 0))
        self.metrics.inc("updates")
        self.metrics.set("update_seconds", elapsed)
        for key, value in stats.items():
            self.metrics.set("train", value, name=key.removeprefix("train/"))
        if self._lag_stats is not None:
            count, total, low, high = self._lag_stats
            for stat, value in (("min", low), ("avg", total / count), ("max", high)):
                self.metrics.set("policy_lag", float(value), stat=stat)
                stats[f"server/policy_lag_{stat}"] = float(value)
            self._lag_stats = None
        if len(self.episode_returns):
            stats["rollout/ep_rew_mean"] = self.episode_returns.mean()
            self.metrics.set("ep_rew_mean", stats["rollout/ep_rew_mean"])
        stats["time/update_seconds"] = elapsed
        self.coordinator.add_update_stats(stats, sync_before)
        applied = stats.get("train/applied_steps", 1.0)
        if applied == 0 and stats.get("train/skipped_steps", 0.0) > 0:
            # Every step was non-finite: the weights did not move; publish nothing. Repeated,
            # it means the agent's state itself went bad: roll back to the last good one.
            self.recovery.update_skipped()
        elif self.updates % self.config.publish_every == 0:
            self.recovery.update_applied()
            self.version += 1
            self.metrics.set("policy_version", self.version)
            self.republish()
        stats["server/policy_version"] = float(self.version)
        stats["updates"] = float(self.updates)
        self.last_metrics = stats
        if self.hooks.update_hook is not None:
            self.hooks.update_hook(stats)
        return True

    def republish(self) -> None:
        """Snapshot the networks under the current ``(generation, version)`` and publish them to every bot."""
        self.published = self._published_weights()
        self.hooks.publish(self.published)

    def remember_good_state(self) -> None:
        """Take the current state as the target of the next rollback (a checkpoint does this too)."""
        self.recovery.remember_good_state()

    def _published_weights(self) -> PublishedWeights:
        arch, tensors = self.agent.export_actor()
        return published_weights(self.policy_id, arch, tensors, self.agent.explore_settings())

    # ── checkpoints ──────────────────────────────────────────────────────────

    def state_dict(self) -> dict[str, Any]:
        """Everything a bit-exact resume needs, plus what identifies the run (docs/reliability.md, C9)."""
        agent_state = self.agent.state_dict()
        return {
            "agent": agent_state,
            "generation": self.generation,
            "version": self.version,
            "updates": self.updates,
            "steps_trained": self.steps_trained,
            "rng": capture_rng(),
            "episode_returns": self.episode_returns.tolist(),
            "config_hash": config_hash(agent_state.get("config")),
            "code_version": CODE_VERSION,
            "torch_version": str(torch.__version__),  # a plain str: TorchVersion is no safe global
        }

    def save_checkpoint(self) -> None:
        """Write a checkpoint; a disk error is logged and counted, and training goes on."""
        assert self.store is not None
        self._last_checkpoint = self.clock()
        try:
            path = self.store.save(self.state_dict(), self.policy_id)
        except OSError as exc:
            self.metrics.inc("checkpoint_failures")
            logger.error("checkpoint failed (previous checkpoints intact): %s", exc)
            return
        self.metrics.inc("checkpoints")
        logger.info("checkpoint written: %s", path)

    def restore(self) -> bool:
        """Load the newest valid checkpoint; the generation is bumped so old-run data is recognised."""
        assert self.store is not None
        found = self.store.load_latest()
        if found is None:
            # Every file torn, or none: start fresh, but never under a generation whose
            # weights may already have reached bots (a dead run's files still name it).
            self.generation = self.store.highest_generation() + 1
            logger.info("no valid checkpoint to resume from in %s; starting fresh as generation %d",
                        self.store.directory, self.generation)  # fmt: skip
            return False
        state, path = found
        self.resumed_from = path
        self.agent.load_state_dict(state["agent"])
        # Above every generation on disk, even ones in files that failed to verify: their
        # weights may have reached bots.
        self.generation = max(int(state["generation"]), self.store.highest_generation()) + 1
        self.version = int(state["version"])
        self.updates = int(state.get("updates", 0))
        self.steps_trained = int(state.get("steps_trained", 0))
        restore_rng(state.get("rng", {}))
        for value in state.get("episode_returns", []):
            self.episode_returns.add(float(value))
        logger.info("resumed from %s: generation %d, version %d", path.name, self.generation, self.version)
        return True
