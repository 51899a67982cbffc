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
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from agents import Agent, CheckpointStore, Segment, SegmentEnd, segment_return
from agents.distributed import GradientAverager
from bot_protocol import PolicyId

from .assembler import SegmentBuilder
from .config import TrainerConfig
from .distributed import LearnerGroup, RankLost
from .metrics import Metrics
from .rewards import RewardFunction
from .run_state import CODE_VERSION, RecentValues, capture_rng, config_hash, copy_state, restore_rng
from .transition_queue import TransitionQueue
from .weights import WeightsSnapshot, make_snapshot

__all__ = ["Trainer", "copy_state"]

logger = logging.getLogger(__name__)


class Trainer:
    """Runs ``agent`` on segments from ``queue`` and publishes each new policy version.

    Args:
        publish: called on the trainer thread with each new snapshot; must hand it to the loop thread-safely.
        on_drained: called after each drain (the server returns withheld credit).
        update_hook: called with each update's metrics (the CLI logs them); runs on the trainer thread.
        on_fatal: called on the trainer thread when it gives up (a crash beyond the restart
            quota); the server then shuts down and its command exits non-zero.
        reward: the run's reward function for terms-mode sessions (the game's; see
            :mod:`server.rewards`). None: scalar-reward sessions only.
        clock: seconds, for the checkpoint schedule and the restart quota (tests pass one they
            advance by hand; the heartbeat the server's watchdog reads stays on ``time.monotonic``).
        group: the learner ranks this trainer is one of (``arena serve --distributed``; see
            :mod:`server.distributed`): gradients are averaged over them, updates and checkpoints
            agreed with them, and rank 0's starting state shared; no restart within the rank.

    Supervision (ML-Agents' pattern): an exception inside :meth:`step` restarts the trainer
    from the newest valid checkpoint (or the last good state in memory) with a new
    generation, at most once per ``restart_interval`` and ``max_restarts`` times in all;
    ingress keeps running meanwhile. Numerical guard: an update whose every gradient step
    was skipped as non-finite publishes nothing; ``rollback_after_skips`` of those in a row
    roll the agent back to its last good state.
    """

    def __init__(
        self,
        agent: Agent,
        queue: TransitionQueue,
        metrics: Metrics,
        config: TrainerConfig,
        publish: Callable[[WeightsSnapshot], None] = lambda s: None,
        on_drained: Callable[[], None] = lambda: None,
        update_hook: Callable[[dict[str, float]], None] | None = None,
        segment_steps: int = 256,
        on_fatal: Callable[[BaseException], None] = lambda exc: None,
        reward: RewardFunction | None = None,
        clock: Callable[[], float] = time.monotonic,
        group: LearnerGroup | None = None,
    ) -> None:
        self.agent = agent
        self._clock = clock
        self.group = group
        self.gradient_sync: GradientAverager | None = None
        if group is not None:
            distribute = getattr(agent, "distribute", None)
            if distribute is None:
                raise ValueError(f"distributed learners train PPO (synchronous updates of one size); not {agent.name}")
            self.gradient_sync = GradientAverager()
            distribute(self.gradient_sync)
        self.builder = SegmentBuilder(segment_steps, reward)
        self.queue = queue
        self.metrics = metrics
        self.config = config
        self._publish = publish
        self._on_drained = on_drained
        self._update_hook = update_hook
        self._on_fatal = on_fatal
        self.restarts = 0
        self._last_restart = -math.inf
        self._skipped_in_a_row = 0
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
        self._last_checkpoint = self._clock()
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
        if group is not None:
            self._start_like_rank_0(group)
        self.snapshot = self._make_snapshot()
        self._last_good = self._good_state()
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
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

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
        while self.group is not None or not self._stop.is_set():
            if self._group_stopping:
                if not self._stop.is_set():  # another rank stopped: this one cannot train alone
                    self.error = RankLost("another learner rank stopped, so this one stops too")
                    self._on_fatal(self.error)
                return
            try:
                if not self.step():
                    self.queue.wait(self.config.idle_wait)
                elif not self._updated and self.config.drain_interval and not len(self.queue):
                    self._stop.wait(self.config.drain_interval)  # drained it dry: let arrivals pile up
            except Exception as exc:
                if self._restart(exc):
                    continue
                if self.group is not None:
                    # No final checkpoint: the crash may have come between two of an update's gradient
                    # steps, and the group restarts from rank 0's last periodic one.
                    self.error = self.group.explain(exc)
                    logger.error("%s", self.error, exc_info=None if isinstance(self.error, RankLost) else exc)
                else:
                    self.error = exc
                    logger.exception("trainer crashed beyond its restart quota; stopping the server")
                    if self.store is not None and self._state_is_finite():
                        self.save_checkpoint()  # ML-Agents: a final checkpoint whenever the state is still valid
                self._on_fatal(self.error)
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

    # ── supervision and rollback ─────────────────────────────────────────────

    def _restart(self, exc: Exception) -> bool:
        """Recover from a crash inside :meth:`step` if the quota allows; False to give up."""
        now = self._clock()
        cfg = self.config
        if self.group is not None:
            return False  # one rank rolling back alone would train another policy: torchrun restarts the group
        if self.restarts >= cfg.max_restarts or now - self._last_restart < cfg.restart_interval:
            return False
        self.restarts += 1
        self._last_restart = now
        self.metrics.inc("trainer_restarts")
        logger.error("trainer crashed (restart %d of %d): %r", self.restarts, cfg.max_restarts, exc, exc_info=exc)
        with self.handover_lock:
            # Steps the failed update had taken out of the agent are gone: count them, so the
            # accounting stays exact. What the agent still holds is kept.
            lost = self.held_steps - self.agent.pending_steps
            if lost > 0:
                self.metrics.inc("transitions_dropped", lost, reason="trainer_restart")
            self.held_steps = self.agent.pending_steps
        found = self.store.load_latest() if self.store is not None else None
        if found is not None:
            state, path = found
            logger.info("restarting from %s", path.name)
            self._roll_back("restart", (state["agent"], int(state["version"])))
        else:
            self._roll_back("restart")
        self._publish_new_generation()
        return True

    def _roll_back(self, why: str, target: tuple[dict[str, Any], int] | None = None) -> None:
        """Restore ``target`` (default: the last good state kept in memory) under a new generation.

        The agent keeps the data it holds (a replay buffer survives); only the learner's
        networks, optimizers and counters go back.
        """
        state, version = target if target is not None else self._last_good
        self.agent.rollback(copy_state(state))
        highest = self.store.highest_generation() if self.store is not None else self.generation
        self.generation = max(self.generation, highest) + 1
        self.version = version
        self.metrics.inc("rollbacks", reason=why)
        logger.warning("rolled back to version %d (%s); now generation %d", version, why, self.generation)

    def _publish_new_generation(self) -> None:
        self.snapshot = self._make_snapshot()
        self.metrics.set("policy_version", self.version)
        if self.store is not None:
            self.save_checkpoint()  # durable before bots see it, as after a resume
        self._publish(self.snapshot)

    def _good_state(self) -> tuple[dict[str, Any], int]:
        """The agent's state (without any data buffer) and its version: the rollback target."""
        state = {k: v for k, v in self.agent.state_dict().items() if k != "replay"}
        return copy_state(state), self.version

    def _state_is_finite(self) -> bool:
        def finite(value: Any) -> bool:
            if isinstance(value, torch.Tensor):
                return not value.is_floating_point() or bool(torch.isfinite(value).all())
            if isinstance(value, dict):
                return all(finite(v) for v in value.values())
            return True

        return finite({k: v for k, v in self.agent.state_dict().items() if k != "replay"})

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
                self._on_drained()
        ready = self._ready_for_update()
        agreed_due = None
        if self.group is not None:  # the ranks' one collective a step: update, checkpoint and stop together
            agreed = self.group.agree(ready, self._checkpoint_due(), self._stop.is_set())
            ready, agreed_due, self._group_stopping = agreed.update, agreed.checkpoint, agreed.stop
        did_update = ready and self._run_update()
        self._updated = did_update
        if did_update and self._first_update_at is None:
            self._first_update_at = self._clock()
        if self._checkpoint_due() if agreed_due is None else agreed_due:
            self._checkpoint_requested = False
            if self.store is not None:
                self.save_checkpoint()
            else:
                self._last_checkpoint = self._clock()
            if self._state_is_finite():
                self.remember_good_state()
        self.metrics.set("trainer_pending_steps", self.held_steps)
        return bool(arrivals) or did_update

    def _checkpoint_due(self) -> bool:
        """Every ``checkpoint_interval`` s; the first one already ``first_checkpoint_after`` s after the first update;
        at once after :meth:`request_checkpoint`."""
        now = self._clock()
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
        assert self.group is None, "a rank updates only when every rank does: call step()"
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
        sync_before = self.gradient_sync.seconds if self.gradient_sync is not None else 0.0
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
        if self.gradient_sync is not None:
            # What averaging the gradients over the ranks cost this update (a rank waiting on a slower one included).
            stats["distributed/allreduce_seconds"] = self.gradient_sync.seconds - sync_before
        applied = stats.get("train/applied_steps", 1.0)
        if applied == 0 and stats.get("train/skipped_steps", 0.0) > 0:
            # Every step was non-finite: the weights did not move; publish nothing. Repeated,
            # it means the agent's state itself went bad: roll back to the last good one.
            self._skipped_in_a_row += 1
            self.metrics.inc("nan_skips")
            logger.warning("update skipped: every gradient step was non-finite (%d in a row)", self._skipped_in_a_row)
            if self._skipped_in_a_row >= self.config.rollback_after_skips:
                self._skipped_in_a_row = 0
                self._roll_back("nonfinite")
                self._publish_new_generation()
        elif self.updates % self.config.publish_every == 0:
            self._skipped_in_a_row = 0
            self.version += 1
            self.metrics.set("policy_version", self.version)
            self.republish()
        stats["server/policy_version"] = float(self.version)
        stats["updates"] = float(self.updates)
        self.last_metrics = stats
        if self._update_hook is not None:
            self._update_hook(stats)
        return True

    def _start_like_rank_0(self, group: LearnerGroup) -> None:
        """Every rank starts from rank 0's state (fresh or just resumed): weights, optimizer, policy id.

        The data buffers stay each rank's own (a PPO agent holds none at start).
        """
        mine = None
        if group.is_leader:
            agent_state = {k: v for k, v in self.agent.state_dict().items() if k != "replay"}
            mine = {"agent": agent_state, "generation": self.generation, "version": self.version,
                    "updates": self.updates, "steps_trained": self.steps_trained}  # fmt: skip
        shared = group.share(mine)
        if not group.is_leader:
            self.agent.load_state_dict(shared["agent"])
            self.generation, self.version = int(shared["generation"]), int(shared["version"])
            self.updates, self.steps_trained = int(shared["updates"]), int(shared["steps_trained"])
        logger.info("rank %d of %d starts at generation %d, version %d", group.rank, group.world_size,
                    self.generation, self.version)  # fmt: skip

    def republish(self) -> None:
        """Snapshot the networks under the current ``(generation, version)`` and publish them to every bot."""
        self.snapshot = self._make_snapshot()
        self._publish(self.snapshot)

    def remember_good_state(self) -> None:
        """Take the current state as the target of the next rollback (a checkpoint does this too)."""
        self._last_good = self._good_state()

    def _make_snapshot(self) -> WeightsSnapshot:
        arch, tensors = self.agent.export_actor()
        return make_snapshot(self.policy_id, arch, tensors, self.agent.explore_settings())

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
        self._last_checkpoint = self._clock()
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
