"""arena.outputs.tensorboard: rows become TensorBoard scalars under the reference namespaces, at the right steps.

The event files are read back record by record (length, masked CRC32C, payload, masked
CRC32C: the TFRecord framing TensorBoard checks) and parsed with the Event schema, so
the test checks what TensorBoard would read, not what the writer meant to write.
"""

from __future__ import annotations

import math
import struct
import sys
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from arena.outputs.tensorboard import INSTALL_HINT, STEP_KEY, ScalarLogger, ServerScalars, TensorBoardUnavailable, scalar_tag
from server.stats import LoopLag, ServerStats

event_pb2 = pytest.importorskip(
    "tensorboardX.proto.event_pb2", reason="tensorboardX is not installed (pip install -e '.[test]' or '.[tensorboard]')"
)

_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def _masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(logdir: Path) -> list[Any]:
    """Every Event in the directory's event files, CRCs checked."""
    events = []
    files = sorted(logdir.glob("events.out.tfevents.*"))
    assert files, f"no event file in {logdir}"
    for path in files:
        data = path.read_bytes()
        at = 0
        while at < len(data):
            header = data[at : at + 8]
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack("<I", data[at + 8 : at + 12])
            assert length_crc == _masked_crc32c(header), "length CRC"
            payload = data[at + 12 : at + 12 + length]
            (payload_crc,) = struct.unpack("<I", data[at + 12 + length : at + 16 + length])
            assert payload_crc == _masked_crc32c(payload), "payload CRC"
            event = event_pb2.Event()
            event.ParseFromString(payload)
            events.append(event)
            at += 16 + length
    return events


def scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag → [(step, value), ...] in file order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for event in read_events(logdir):
        for value in event.summary.value:
            if value.HasField("simple_value"):
                out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def test_scalar_tag_keeps_namespaces_and_renames_bare_keys() -> None:
    """Namespaced keys pass through; the two bare keys take SB3's names."""
    for key in ("train/policy_loss", "rollout/ep_rew_mean", "server/policy_lag_max", "time/update_seconds"):
        assert scalar_tag(key) == key
    assert scalar_tag("updates") == "train/n_updates"
    assert scalar_tag("wall_seconds") == "time/time_elapsed"


def test_rows_become_scalars_at_the_timestep_axis(tmp_path: Path) -> None:
    """Each row's numbers land under their tags at the row's total_timesteps; NaN and non-numbers are skipped."""
    rows = [
        {
            "wall_seconds": 1.5 * i,
            "train/policy_loss": -0.01 * i,
            "train/approx_kl": 0.002,
            "rollout/win_rate_last_100": math.nan if i == 1 else 0.1 * i,
            "server/policy_lag_avg": 1.0,
            "time/update_seconds": 0.25,
            "updates": float(i),
            STEP_KEY: 2048.0 * i,
            "note": "not a number",
            "flag": True,
        }
        for i in (1, 2, 3)
    ]
    tb = ScalarLogger(tmp_path / "tb")
    tb.add_config({"agent": "ppo", "hidden": [64, 64], "seed": 0})
    for row in rows:
        tb(row)
    tb.close()
    tb.close()  # idempotent
    tb(rows[0])  # ignored after close

    got = scalars(tmp_path / "tb")
    assert got["train/policy_loss"] == [
        (2048, pytest.approx(-0.01)),
        (4096, pytest.approx(-0.02)),
        (6144, pytest.approx(-0.03)),
    ]
    assert [s for s, _ in got["rollout/win_rate_last_100"]] == [4096, 6144]  # NaN skipped
    assert got["train/n_updates"] == [(2048, 1.0), (4096, 2.0), (6144, 3.0)]
    assert got["time/time_elapsed"][-1] == (6144, 4.5)
    assert {"server/policy_lag_avg", "time/update_seconds", STEP_KEY, "train/approx_kl"} <= set(got)
    assert not {"note", "flag"} & set(got)
    texts = [v for e in read_events(tmp_path / "tb") for v in e.summary.value if v.tag.startswith("hyperparameters")]
    assert texts, "the config is recorded once as text"


def test_steps_fall_back_to_the_update_count(tmp_path: Path) -> None:
    """A row without total_timesteps (e.g. from another server) is stepped by its update count."""
    tb = ScalarLogger(tmp_path)
    tb({"updates": 7.0, "train/value_loss": 0.5})
    tb.close()
    assert scalars(tmp_path)["train/value_loss"] == [(7, 0.5)]


def test_a_missing_package_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without tensorboardX and tensorboard the logger refuses with the install hint, creating nothing."""
    for module in ("tensorboardX", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules: `import` raises ImportError
    with pytest.raises(TensorBoardUnavailable) as raised:
        ScalarLogger(tmp_path / "tb")
    assert str(raised.value) == INSTALL_HINT and "\n" not in INSTALL_HINT
    assert isinstance(raised.value, ImportError)
    assert not (tmp_path / "tb").exists()


def test_a_write_error_turns_logging_off_without_raising(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A failing writer is logged once and dropped: the trainer's update hook never raises for TensorBoard."""
    tb = ScalarLogger(tmp_path)

    class Broken:
        def _get_file_writer(self) -> Broken:
            return self

        def add_summary(self, *args: Any, **kwargs: Any) -> None:
            raise OSError(28, "No space left on device")

        def close(self) -> None:
            pass

    tb._writer.close()
    tb._writer = Broken()
    tb({"updates": 1.0, "train/policy_loss": 0.1})
    tb({"updates": 2.0, "train/policy_loss": 0.1})
    assert tb.closed
    assert len([r for r in caplog.records if "TensorBoard logging stopped" in r.getMessage()]) == 1


def test_server_scalars_reads_the_server_figures() -> None:
    """ServerScalars names the queue, drops, rate, loop lag and bots under server/ and steps by trained transitions."""
    stats = ServerStats(
        steps_trained=4096,
        connected_bots=2,
        queue_arrivals=3,
        queue_steps=64,
        queue_bytes=9000,
        transitions_received=500,
        dropped=MappingProxyType({"stale": 7, "queue_full": 3}),
        received_per_s=250.0,
        loop_lag=LoopLag(p50=0.001, p99=0.004, max=0.02),
    )
    asked: list[int] = []

    def snapshot(bots: int = 0) -> ServerStats:
        asked.append(bots)
        return stats

    row = ServerScalars(SimpleNamespace(stats=snapshot))()
    assert asked == [0], "one snapshot per row, without the per-bot rows"
    assert row[STEP_KEY] == 4096
    assert row["server/connected_bots"] == 2
    assert (row["server/queue_depth"], row["server/queue_steps"], row["server/queue_bytes"]) == (3, 64, 9000)
    assert row["server/dropped_transitions"] == 10
    assert row["server/transitions_received"] == 500
    assert row["server/transitions_per_s"] == 250.0, "the snapshot's rate, over the server's window"
    assert row["server/loop_lag_p99_ms"] == pytest.approx(4.0)
    assert list(row) == [STEP_KEY] + [k for k in row if k.startswith("server/")]
    assert all(type(v) is float for v in row.values()), "metrics.jsonl has always held these as floats"
    unread = ServerScalars.figures(replace(stats, loop_lag=None))
    assert set(row) - set(unread) == {"server/loop_lag_p50_ms", "server/loop_lag_p99_ms", "server/loop_lag_max_ms"}
