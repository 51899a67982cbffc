"""bench/loop_senders.py: the frames the event-loop benchmark's senders send are valid ``tr`` messages.

The benchmark's ingest figures count what the real server accepts; a template that patched ``seq``
in the wrong place, or a cycle whose episodes did not end as documented, would measure something
else. So each pre-encoded frame is decoded by the server's own decoder and compared with its batch.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.loop_senders import FrameSpec, FrameTemplate
from bot_protocol import FLAG_TERMINAL, FLAG_TRUNCATED, RewardMode, SessionSpec, TransitionBatch
from bot_protocol.codec import decode_from_bot


@pytest.mark.parametrize("steps", [64, 256])
def test_every_templated_frame_decodes_to_its_batch_with_the_patched_seq(steps: int) -> None:
    spec = FrameSpec(steps)
    template = FrameTemplate(spec)
    session = SessionSpec(spec.obs_dim, spec.act_dim, spec.n_agents, RewardMode.SCALAR)
    batches = spec.batches()
    assert len(batches) == spec.cycle
    for seq in (0, 1, spec.cycle + 1, 2**40 + 3):
        frame = template.frame(seq)
        decoded = decode_from_bot(frame, session, 1 << 20)
        assert isinstance(decoded, TransitionBatch)
        expected = batches[seq % spec.cycle]
        assert decoded.seq == seq and decoded.n == steps
        for column in ("agent", "obs", "act", "logp", "flags", "rew", "next_obs"):
            np.testing.assert_array_equal(getattr(decoded, column), getattr(expected, column), err_msg=column)
    assert template.nbytes == round(np.mean([len(template.frame(i)) for i in range(spec.cycle)]))  # the cycle's mean


def test_episodes_end_staggered_even_agents_terminal_odd_truncated_with_their_next_obs() -> None:
    spec = FrameSpec(64, episode_ticks=96)
    ends: dict[int, list[int]] = {agent: [] for agent in range(spec.n_agents)}
    for frame, batch in enumerate(spec.batches()):
        for row in np.flatnonzero(batch.flags):
            agent = int(batch.agent[row])
            assert batch.flags[row] == (FLAG_TERMINAL if agent % 2 == 0 else FLAG_TRUNCATED)
            ends[agent].append(frame * spec.ticks + row // spec.n_agents)
        assert len(batch.next_obs) == int(np.count_nonzero(batch.flags == FLAG_TRUNCATED))
    for agent, ticks in ends.items():
        assert np.all(np.diff(ticks) == spec.episode_ticks), agent  # one end every episode, per agent
    assert len({ticks[0] for ticks in ends.values()}) == spec.n_agents  # staggered: no two agents end together


def test_a_frame_shape_that_cannot_be_tick_major_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple of n_agents"):
        FrameSpec(60).batches()
