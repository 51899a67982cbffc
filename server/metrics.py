"""Thread-safe counters and gauges, rendered in the Prometheus text format for ``GET /metrics``.

Both the event-loop thread and the trainer thread write here; one small lock guards
the tables (held only for a dict update), so readers always see whole numbers.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Mapping

__all__ = ["Metrics"]

Labels = tuple[tuple[str, str], ...]


class Metrics:
    """Named counters (monotonic) and gauges (set), each with optional labels."""

    def __init__(self, prefix: str = "arena", labels: Mapping[str, str] | None = None) -> None:
        """``labels``: put on every series :meth:`render` exports (a learner's ``rank``), never on the
        values read back here, so code that counts never needs to know them."""
        self.prefix = prefix
        self._constant: Labels = tuple(sorted((labels or {}).items()))
        self._lock = threading.Lock()  # guards _counters and _gauges, nothing else
        self._counters: defaultdict[str, defaultdict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self._gauges: defaultdict[str, dict[Labels, float]] = defaultdict(dict)
        self._help: dict[str, str] = {}

    def describe(self, name: str, text: str) -> None:
        self._help[name] = text

    def inc(self, metric: str, amount: float = 1.0, /, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._counters[metric][key] += amount

    def set(self, metric: str, value: float, /, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._gauges[metric][key] = value

    def counter(self, metric: str, /, **labels: str) -> float:
        """One counter's value (0 if never incremented)."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            return self._counters[metric].get(key, 0.0) if metric in self._counters else 0.0

    def counter_total(self, name: str) -> float:
        """A counter summed over all its label values."""
        with self._lock:
            return sum(self._counters[name].values()) if name in self._counters else 0.0

    def by_label(self, name: str, label: str) -> dict[str, float]:
        with self._lock:
            series = dict(self._counters.get(name, {}))
        return {dict(k).get(label, ""): v for k, v in series.items()}

    def gauge(self, metric: str, /, **labels: str) -> float | None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            return self._gauges.get(metric, {}).get(key)

    def snapshot(self) -> dict[str, float]:
        """Flat ``name{label=value}`` → value, for JSON logs and tests."""
        with self._lock:
            out = {_series(n, k): v for n, s in self._counters.items() for k, v in s.items()}
            out.update({_series(n, k): v for n, s in self._gauges.items() for k, v in s.items()})
        return out

    def render(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        lines: list[str] = []
        with self._lock:
            tables: list[tuple[str, Mapping[str, Mapping[Labels, float]]]] = [
                ("counter", self._counters),
                ("gauge", self._gauges),
            ]
            for kind, table in tables:
                for name in sorted(table):
                    full = f"{self.prefix}_{name}"
                    if name in self._help:
                        lines.append(f"# HELP {full} {self._help[name]}")
                    lines.append(f"# TYPE {full} {kind}")
                    for labels, value in sorted(table[name].items()):
                        lines.append(f"{_series(full, self._constant + labels)} {_number(value)}")
        return "\n".join(lines) + "\n"


def _series(name: str, labels: Labels) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return f"{name}{{{inner}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))
