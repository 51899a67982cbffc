"""The end-of-run report of ``arena train``: learning curve, match table, throughput, as PNG and HTML.

``metrics.jsonl`` and ``summary.json`` hold every number; this module turns them into
what a person looks at first: ``learning_curve.png``, ``report.png`` (the same page as
one image, for chat and issue threads) and ``report.html`` — one self-contained file
(inline CSS, the curve as a base64 PNG, no external resources) that opens offline, from
a CI artifact or an e-mail attachment alike.

The match table comes from :func:`evaluate_against_scripted`: the trained policy plays
fresh rounds against each scripted opponent. The training win rate mixes opponents and
lags the policy (last 100 rounds, played by many versions); this is the policy the run
handed back (``arena.outputs.selection``: the best of its evaluated checkpoints) alone, per opponent.
"""

from __future__ import annotations

import base64
import html
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot_protocol import Policy

from ..games.tank.engines import EngineName
from ..games.tank.roster import SCRIPTED

__all__ = [
    "LEAGUE_COLUMNS",
    "MATCH_COLUMNS",
    "SCRIPTED_OPPONENTS",
    "evaluate_against_scripted",
    "league_rows",
    "match_rows",
    "plot_curve",
    "plot_league",
    "write_report",
]

SCRIPTED_OPPONENTS: tuple[str, ...] = tuple(SCRIPTED)
"""sitting, spinner, walker, tracker: every scripted bot, in order of difficulty."""

_CURVE_KEYS = {
    True: ("rollout/win_rate_last_100", "win rate, last 100 rounds"),
    False: ("rollout/ep_rew_mean", "mean episode return (last 100)"),
}
"""tank? → (row key, y label) of the learning curve."""


# ── evaluation ───────────────────────────────────────────────────────────────


def evaluate_against_scripted(
    policy: Policy | Path,
    rounds_per_opponent: int = 50,
    seed: int = 0,
    ticks_per_round: int = 2000,
    opponents: Sequence[str] = SCRIPTED_OPPONENTS,
    deterministic: bool = False,
    engine: EngineName = "numpy",
) -> dict[str, Any]:
    """Play ``rounds_per_opponent`` 1v1 rounds of the policy against each scripted opponent.

    The policy samples its actions as in training (``arena match``'s default; see
    ``PolicyController`` for why the mean action can be degenerate here). All rounds
    against one opponent run side by side (up to 50 matches), so the cost is about the
    longest round's ticks, not the number of rounds.

    Args:
        policy: a loaded policy, or a checkpoint / run directory / weights file (``load_policy``).
        rounds_per_opponent: rounds against each opponent; a win rate over n rounds has a
            standard error of up to 50/√n percentage points (7 at 50 rounds).
        seed: seeds the arena, the policy's sampling and the opponents.
        ticks_per_round: the round tick cap (``--ticks-per-round``); a round still open then is a draw.
        engine: the battle's and the scripted bots' tank engine (``--engine``; the same game either way).

    Returns:
        ``{"rounds_per_opponent", "ticks_per_round", "seed", "deterministic", "engine", "seconds",
        "policy": {"generation", "version"}, "opponents": [{"opponent", "rounds", "wins",
        "losses", "draws", "win_rate", "mean_score", "opponent_mean_score"}, ...]}``.

    Raises:
        FileNotFoundError, ValueError: ``policy`` names no loadable policy (``load_policy``),
            or its sizes do not fit the tank arena.
    """
    from ..bots.play import PolicyController, ScriptedController, play_match
    from ..bots.policies import load_policy
    from ..games.tank.rules import TankRules

    if rounds_per_opponent < 1:
        raise ValueError(f"rounds_per_opponent must be >= 1, got {rounds_per_opponent}")
    if isinstance(policy, Path):
        policy = load_policy(policy)
    rules = TankRules(max_ticks=ticks_per_round)
    n_matches = min(50, rounds_per_opponent)
    started = time.perf_counter()
    table = []
    for opponent in opponents:
        learner = PolicyController("learner", policy, seed=seed, stochastic=not deterministic)
        rival = ScriptedController(opponent, n=n_matches, seed=seed + 1, engine=engine)
        result = play_match([learner, rival], rounds_per_opponent, seed=seed, n_matches=n_matches, rules=rules, engine=engine)
        bots: list[dict[str, Any]] = result["bots"]  # type: ignore[assignment]
        mine, theirs = bots
        table.append(
            {
                "opponent": opponent,
                "rounds": rounds_per_opponent,
                "wins": mine["wins"],
                "losses": theirs["wins"],
                "draws": rounds_per_opponent - mine["wins"] - theirs["wins"],
                "win_rate": round(mine["wins"] / rounds_per_opponent, 3),
                "mean_score": mine["mean_score"],
                "opponent_mean_score": theirs["mean_score"],
            }
        )
    return {
        "rounds_per_opponent": rounds_per_opponent,
        "ticks_per_round": ticks_per_round,
        "seed": seed,
        "deterministic": deterministic,
        "engine": engine,
        "seconds": round(time.perf_counter() - started, 2),
        "policy": policy.policy_id._asdict(),  # {"generation", "version"}
        "opponents": table,
    }


# ── figures ──────────────────────────────────────────────────────────────────


def _curve_points(rows: Sequence[Mapping[str, Any]], tank: bool) -> list[tuple[float, float]]:
    key = _CURVE_KEYS[tank][0]
    points = []
    for row in rows:
        value = row.get(key)
        if isinstance(value, int | float) and math.isfinite(value) and "wall_seconds" in row:  # NaN: no rounds yet
            points.append((float(row["wall_seconds"]) / 60, float(value)))
    return points


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display), or None if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _draw_curve(ax: Any, points: list[tuple[float, float]], tank: bool) -> None:
    ax.plot([p[0] for p in points], [p[1] for p in points])
    ax.set_xlabel("minutes")
    ax.set_ylabel(_CURVE_KEYS[tank][1])
    ax.set_title("learning curve")
    if tank:
        ax.set_ylim(-0.02, 1.02)  # a win rate: the same scale in every run's report
    ax.grid(alpha=0.3)


def _save(fig: Any, path: Path) -> None:
    # No "Software: Matplotlib … https://…" text chunk: the files are byte-stable and URL-free.
    fig.savefig(path, dpi=100, metadata={"Software": None})


def plot_curve(rows: Sequence[Mapping[str, Any]], path: Path, tank: bool) -> Path | None:
    """Write the learning curve (tank: win rate of the last 100 rounds; else mean return) against minutes.

    Returns the path, or None when there is nothing to draw (no row has the value yet) or
    matplotlib is missing.
    """
    points = _curve_points(rows, tank)
    plt = _pyplot()
    if not points or plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    _draw_curve(ax, points, tank)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def _win_rate_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """``league/win_rate/NAME`` columns of the metrics rows as (minutes, win rate) per opponent."""
    series: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        for key, value in row.items():
            if key.startswith("league/win_rate/") and isinstance(value, int | float) and "wall_seconds" in row:
                series.setdefault(key.removeprefix("league/win_rate/"), []).append((float(row["wall_seconds"]) / 60, value))
    return series


def plot_league(rows: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    """The learner's recent win rate against each league member over time (``league_win_rates.png``).

    All snapshots together are one grey dashed line (there are many, each for a while), the
    scripted bots, policy files and ``self`` in colour. None when the run had no league or
    matplotlib is missing.
    """
    series = _win_rate_series(rows)
    plt = _pyplot()
    if not series or plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in sorted(series.items()):
        snapshot = name == "snapshots"
        ax.plot([p[0] for p in points], [p[1] for p in points], label=None if snapshot else name,
                color="0.6" if snapshot else None, linestyle="--" if snapshot else "-")  # fmt: skip
    ax.set_xlabel("minutes")
    ax.set_ylabel("learner's win rate (recent rounds)")
    ax.set_title("win rate against each league member (grey: all snapshots)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def league_rows(league: Mapping[str, Any]) -> list[list[str]]:
    """The ratings table: member, kind, mu ± sigma, ordinal, rounds, the learner's win rate against it."""
    kinds = {m["name"]: m["kind"] for m in league.get("members", [])}
    opponents = league.get("opponents", {})
    body = []
    for row in league.get("ratings", []):
        name = row["name"]
        record = opponents.get(name, {})
        win = record.get("win_rate")
        kind = "learner" if name == "learner" else kinds.get(name, "left the league")
        body.append([name, kind, f"{row['mu']:.1f} ± {row['sigma']:.1f}", f"{row['ordinal']:.1f}", str(row["rounds"]),
                     "–" if win is None else f"{win:.0%}"])  # fmt: skip
    return body


LEAGUE_COLUMNS = ["member", "kind", "rating (mu ± sigma)", "mu - 3 sigma", "rounds", "learner's win rate"]


# ── the page ─────────────────────────────────────────────────────────────────


def _wilson(wins: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a win rate: honest at 0/n and n/n, where the normal one collapses."""
    if n == 0:
        return (0.0, 1.0)
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _number(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def _setting(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) and math.isfinite(value) else _number(value)


def _column(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r.get(key), int | float) and math.isfinite(r[key])]


def _settings_rows(summary: Mapping[str, Any], settings: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Run settings and outcome, label → text, in display order."""
    out = [("agent", str(summary.get("agent", "–"))), ("game", str(summary.get("game", "–")))]
    if summary.get("opponents"):
        out.append(("opponents (training)", ", ".join(summary["opponents"])))
    for key, value in (settings or {}).items():
        if key not in ("agent", "game", "opponents"):
            text = ", ".join(map(str, value)) if isinstance(value, list | tuple) else _setting(value)
            out.append((key.replace("_", " "), text))
    layout = summary.get("layout")
    if layout:
        out.append(("learning bots in", f"{layout['bots_in']} ({layout['reason']})"))
    out.append(("policy", f"generation {summary.get('generation', '–')}, version {summary.get('policy_version', '–')}"))
    if "rounds" in summary:
        out.append(("rounds played", _number(summary["rounds"])))
        for key in ("win_rate_first_100", "win_rate_last_100"):
            value = summary.get(key)
            out.append((key.replace("_", " "), "–" if value is None else f"{value:.0%}"))
    for key in ("episodes", "mean_return_first_100", "mean_return_last_100"):
        if key in summary:
            out.append((key.replace("_", " "), _number(summary[key], 3)))
    return out


def _throughput_rows(
    rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], match_table: Mapping[str, Any] | None
) -> list[tuple[str, str]]:
    """Throughput and health figures, label → text: from summary.json, then the metrics rows.

    The server figures (loop lag, drops) are in the rows only when ``arena.outputs.tensorboard.ServerScalars``
    fed them; a figure nobody recorded shows as "–".
    """
    wall = float(summary.get("wall_seconds") or 0.0)

    def rate(count: Any) -> str:
        return f"{count / wall:,.0f} /s" if wall > 0 and isinstance(count, int | float) else "–"

    out = [
        ("wall time", f"{wall:,.1f} s"),
        ("updates (trainer calls)", _number(summary.get("updates"))),
        ("gradient steps", _number(summary.get("gradient_steps"))),
        ("transitions received", f"{_number(summary.get('transitions'))} ({rate(summary.get('transitions'))})"),
        ("transitions trained", f"{_number(summary.get('transitions_trained'))} ({rate(summary.get('transitions_trained'))})"),
    ]
    if "ticks" in summary:
        out.append(("arena ticks", f"{_number(summary['ticks'])} ({rate(summary['ticks'])})"))
    reached = summary.get("win_rate_100_after")
    if "win_rate_100_after" in summary:
        text = "not within the run" if reached is None else f"{reached['seconds']:,.1f} s, {_number(reached['steps'])} steps"
        out.append(("last 100 rounds all won after", text))
    spent = summary.get("throughput") or {}
    if spent.get("update_time_share") is not None:
        out.append(("time inside updates", f"{spent['update_time_share']:.0%}"))
    for key, label in (("trainer_cpu_us_per_step", "learner CPU per step"), ("bot_cpu_us_per_step", "bot CPU per step")):
        if spent.get(key) is not None:
            out.append((label, f"{spent[key]:.1f} µs"))
    update_seconds = _column(rows, "time/update_seconds")
    if update_seconds:
        out.append(("update time, mean", f"{sum(update_seconds) / len(update_seconds) * 1000:,.0f} ms"))
    lag_avg, lag_max = _column(rows, "server/policy_lag_avg"), _column(rows, "server/policy_lag_max")
    if lag_avg:
        figure = f"{sum(lag_avg) / len(lag_avg):.1f} / {max(lag_max or lag_avg):.0f} versions"
        if summary.get("agent") in ("ddpg", "td3"):  # a replay buffer trains on old data by design
            out.append(("age of the data trained, mean / max (off-policy: any age is usable)", figure))
        else:
            out.append(("policy lag, mean / max", figure))
    else:
        out.append(("policy lag", "–"))
    loop_p99 = _column(rows, "server/loop_lag_p99_ms")
    out.append(("event-loop lag p99, worst", f"{max(loop_p99):,.1f} ms" if loop_p99 else "–"))
    dropped = _column(rows, "server/dropped_transitions")
    if dropped:
        out.append(("transitions dropped", _number(dropped[-1])))
    if match_table is not None:
        out.append(("evaluation time", f"{match_table['seconds']:,.1f} s"))
    return out


def match_rows(match_table: Mapping[str, Any]) -> list[list[str]]:
    """The match table as text cells: opponent, wins, draws, losses, win rate (95% CI), mean score, theirs."""
    out = []
    for row in match_table["opponents"]:
        low, high = _wilson(row["wins"], row["rounds"])
        out.append(
            [
                row["opponent"],
                f"{row['wins']} / {row['rounds']}",
                str(row["draws"]),
                str(row["losses"]),
                f"{row['win_rate']:.0%} ({low:.0%}–{high:.0%})",
                f"{row['mean_score']:.1f}",
                f"{row['opponent_mean_score']:.1f}",
            ]
        )
    return out


MATCH_COLUMNS = ["opponent", "wins", "draws", "losses", "win rate (95% CI)", "mean score", "opponent's score"]

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a; margin: 0; background: #f6f7f9; }
main { max-width: 980px; margin: 0 auto; padding: 24px 28px; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 22px 0 8px; border-bottom: 1px solid #dde1e6; }
.sub { color: #5b6570; margin: 0 0 12px; } .grid { display: grid; grid-template-columns: 1fr 1fr; gap: 0 28px; }
table { border-collapse: collapse; width: 100%; }
td, th { padding: 3px 8px; border-bottom: 1px solid #eceff2; text-align: right; }
td:first-child, th:first-child { text-align: left; } th { font-weight: 600; background: #f1f3f5; }
.kv td:first-child { color: #5b6570; } img { max-width: 100%; } .note { color: #5b6570; font-size: 12px; }
"""


def _table(header: list[str] | None, body: list[list[str]], css_class: str = "") -> str:
    attr = f' class="{css_class}"' if css_class else ""
    head = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>" if header else ""
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
    return f"<table{attr}>{head}{rows}</table>"


def _title(summary: Mapping[str, Any]) -> str:
    versus = f" vs {', '.join(summary['opponents'])}" if summary.get("opponents") else f" on {summary.get('game', '?')}"
    return f"arena train: {summary.get('agent', '?')}{versus}"


ROUNDS_OF = {
    "fresh": "Fresh rounds, not those it was selected on. The scripted bots are also its training opponents: an "
    "in-sample figure.",
    "selection": "The rounds it was selected on: optimistic, since it was chosen for winning them (no fresh rounds "
    "could be played). The scripted bots are also its training opponents.",
}
"""What a match table's rounds are (its ``rounds_of``), in the report's words."""


def _match_caption(match_table: Mapping[str, Any]) -> str:
    how = "mean action" if match_table.get("deterministic") else "sampled actions, as in training"
    policy = match_table.get("policy", {})
    rounds_of = ROUNDS_OF.get(match_table.get("rounds_of", ""), "")
    return (
        f"The returned policy (generation {policy.get('generation', '?')}, version {policy.get('version', '?')}, {how}) "
        "against "
        f"each scripted bot: {match_table['rounds_per_opponent']} rounds each, {match_table['ticks_per_round']} ticks at "
        f"most (a round still open then is a draw), seed {match_table['seed']}." + (f" {rounds_of}" if rounds_of else "")
    )


def _html(
    summary: Mapping[str, Any],
    settings: list[tuple[str, str]],
    throughput: list[tuple[str, str]],
    match_table: Mapping[str, Any] | None,
    curve_png: bytes | None,
    league_png: bytes | None = None,
) -> str:
    if curve_png is not None:
        curve = f'<img alt="learning curve" src="data:image/png;base64,{base64.b64encode(curve_png).decode("ascii")}">'
    else:
        curve = '<p class="note">No learning curve: no update reported a value yet (or matplotlib is missing).</p>'
    if match_table is not None:
        matches = (
            _table(MATCH_COLUMNS, match_rows(match_table)) + f'<p class="note">{html.escape(_match_caption(match_table))}</p>'
        )
        returned = summary.get("returned_policy") or {}
        if returned.get("reason"):
            why = f"Returned: {returned['checkpoint']} ({returned['reason']}; OUT/returned.json)."
            matches += f'<p class="note">{html.escape(why)}</p>'
    else:
        matches = '<p class="note">Not evaluated (not the tank game, no checkpoint, or evaluation turned off).</p>'
    league = ""
    if summary.get("league"):
        chart = ""
        if league_png is not None:
            encoded = base64.b64encode(league_png).decode("ascii")
            chart = f'<img alt="win rate per league member" src="data:image/png;base64,{encoded}">'
        league = (
            "<h2>League</h2>"
            + _table(LEAGUE_COLUMNS, league_rows(summary["league"]))
            + '<p class="note">openskill ratings from every training round against the learner, ranked by mu - 3 sigma; '
            "snapshots and scripted bots only met the learner of their time (arena league RUN_DIR plays them all "
            "against each other).</p>" + chart
        )
    title = html.escape(_title(summary))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body><main>
<h1>{title}</h1>
<p class="sub">written {html.escape(time.strftime("%Y-%m-%d %H:%M %Z"))} · every number is in summary.json, metrics.jsonl</p>
<div class="grid">
<section><h2>Run</h2>{_table(None, [list(r) for r in settings], "kv")}</section>
<section><h2>Throughput</h2>{_table(None, [list(r) for r in throughput], "kv")}</section>
</div>
<h2>Learning curve</h2>{curve}
<h2>Against each scripted opponent</h2>{matches}
{league}
</main></body></html>
"""


def _summary_png(
    path: Path,
    summary: Mapping[str, Any],
    points: list[tuple[float, float]],
    tank: bool,
    throughput: list[tuple[str, str]],
    match_table: Mapping[str, Any] | None,
) -> Path | None:
    """The page as one image: the curve on top, the match table and the throughput below."""
    plt = _pyplot()
    if plt is None:
        return None
    fig = plt.figure(figsize=(10, 8.5))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.1, 1], width_ratios=[1.6, 1])
    fig.suptitle(_title(summary), fontsize=13)
    ax = fig.add_subplot(grid[0, :])
    if points:
        _draw_curve(ax, points, tank)
    else:
        ax.axis("off")
        ax.text(0.5, 0.5, "no learning curve yet", ha="center", va="center", color="grey")
    for cell, (title, header, body) in zip(
        (grid[1, 0], grid[1, 1]),
        (
            ("against each scripted opponent", ["opponent", "wins", "win rate", "score"], _png_match_rows(match_table)),
            ("throughput", None, [list(r) for r in throughput]),
        ),
        strict=True,
    ):
        ax = fig.add_subplot(cell)
        ax.axis("off")
        ax.set_title(title, fontsize=11)
        if body:
            table = ax.table(cellText=body, colLabels=header, loc="upper center", cellLoc="left")
            table.auto_set_font_size(False)
            table.set_fontsize(8.5)
            table.scale(1, 1.35)
        else:
            ax.text(0.5, 0.8, "not evaluated", ha="center", va="center", color="grey")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def _png_match_rows(match_table: Mapping[str, Any] | None) -> list[list[str]]:
    if match_table is None:
        return []
    return [[r[0], r[1], r[4], r[5]] for r in match_rows(match_table)]


def write_report(
    out: Path,
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    match_table: Mapping[str, Any] | None,
    *,
    settings: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write ``learning_curve.png``, ``report.html`` and ``report.png`` to ``out``.

    Args:
        out: the run directory (created if missing).
        rows: the metrics rows (``metrics.jsonl``'s lines, in order).
        summary: ``summary.json``'s dict (``agent``, ``game``, ``wall_seconds``, ``updates``, …).
        match_table: :func:`evaluate_against_scripted`'s result, or None (shown as "not evaluated").
        settings: extra run settings to list (e.g. matches, bots, seed, ticks per round).

    Returns:
        The files written, in that order; the curve is left out when no row has a value yet
        (the pages say so), and both PNGs when matplotlib is missing.
    """
    out.mkdir(parents=True, exist_ok=True)
    tank = summary.get("game", "tank") == "tank"
    written: list[Path] = []
    curve = plot_curve(rows, out / "learning_curve.png", tank)
    if curve is not None:
        written.append(curve)
    setting_rows = _settings_rows(summary, settings)
    throughput = _throughput_rows(rows, summary, match_table)
    league = plot_league(rows, out / "league_win_rates.png") if summary.get("league") else None
    if league is not None:
        written.append(league)
    page = out / "report.html"
    page.write_text(
        _html(
            summary,
            setting_rows,
            throughput,
            match_table,
            curve.read_bytes() if curve else None,
            league.read_bytes() if league else None,
        )
    )
    written.append(page)
    image = _summary_png(out / "report.png", summary, _curve_points(rows, tank), tank, throughput, match_table)
    if image is not None:
        written.append(image)
    return written
