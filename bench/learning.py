"""Learning benchmark: what the README's main job teaches, over several seeds, judged on the policy a user gets.

This is the project's learning evaluation, the one its defaults are chosen by. It runs the real
command line in subprocesses, exactly as a user does (``arena``'s console-script entry point with the
installed dependencies), from a clean ``git archive`` export of the commit measured (``HEAD`` unless
``--commit REV``; a tree with uncommitted changes is refused unless ``--allow-dirty``, which measures the
tree as it is and says so), for each case and seed:

1. ``arena train --minutes M --out DIR --seed S`` with nothing else for the ``default`` case (the
   README's main job: 5 minutes against the league; the run's own evaluation stays on, so the run
   hands back its best evaluated policy, recorded in ``DIR/returned.json``); ``tracker`` adds
   ``--opponent tracker`` (a fixed opponent beside the league: what the league buys); ``--extra``
   appends flags, for probes of other settings;
2. ``arena match --bot X --bot NAME --rounds 200 --seed S+1 --json`` against each scripted bot
   (sitting, spinner, walker, tracker), where X is the **returned policy** (the run directory, as
   ``arena match --bot DIR`` reads it: what a user gets), with sampled actions (as in training)
   and with the mean action (``--deterministic``), and the **last policy** (the newest
   ``DIR/checkpoints/ckpt-*.pt``), sampled: what returning the best evaluated policy buys;
3. ``arena match --bot DIR --bot royale:PATH --rounds 20 --seed S+1 --json`` against bots written
   with the official Tank Royale Python API that no run trains against (``tests/data/royale_bots``:
   Walls, SpinBot, Corners, Crazy, Fire, RamFire, TrackFire, VelocityBot), over Tank Royale's
   protocol and rules. Their figures guided the choice of the defaults, so they are *tuning*
   opponents, not held-out ones (the JSON's ``opponent_roles`` says what each opponent was used for:
   the four scripted bots are the training league and the returned policy's selection). Needs
   ``pip install -e '.[royale]'`` (skipped, saying so, without it); ``--royale-rounds 0`` skips it;
   with ``--validation``, the same against every bot of the validation panel (``bench/validation``: harder
   official-API bots for choices about range, never trained against nor selected on); with ``--heldout``, against
   every bot of the held-out panel (``bench/heldout``: bots no training, selection or tuning run may use, played
   only for the final report of a change);
4. for league runs, ``arena league DIR --rounds 100 --seed S --json``: a round-robin of the returned
   policy (named ``returned`` there) against every league member, rated by a Bradley-Terry fit (Elo): its
   rank, and whether it is rated above every scripted bot;
5. once, the *untrained* policy of seed 0 (a 1-round, 1-tick run's first checkpoint) against the
   scripted bots, same rounds: the baseline, measured in the same run on the same machine.

``--report-on BENCH_JSON --heldout`` (or ``--validation``) trains nothing: it plays the panel against the returned
policies of an earlier run of this benchmark, from that run's own export, and its untrained seed-0 policy as the
baseline. It is how a choice made on the validation panel gets its final report on the very policies it was
made with.

What the figures mean. A learning result is a distribution, not a number: the same command with
another seed can learn a different policy, and a user runs one seed. So every case runs 5 seeds
and the aggregate gives, per opponent, the **median** over seeds (what a user typically gets) and
the **worst** seed (what an unlucky user gets); both have targets. A seed whose run fails or
crashes counts 0% against every opponent (and a failed match 0% against that opponent): it is the
worst seed, never one left out, and it fails the targets. Every seed's own figures are in the JSON
too. The targets, for the 5-minute ``default`` case (win rates of the returned policy, sampled
actions, 200 rounds each):

* median over seeds >= 0.95 sitting, 0.80 spinner, 0.80 walker, 0.60 tracker;
* worst seed >= 0.90 sitting, 0.70 spinner, 0.60 walker, 0.40 tracker;
* median over seeds of the mean win rate over the Tank Royale bots >= 0.80;
* in every seed, the returned policy rated above every scripted bot in its league's round-robin;
* every seed finished.

They apply only to the evaluation itself: seeds 0-4, the README's command (no ``--extra``), the
default minutes and rounds. Anything else is a *probe* (``"kind": "probe"``): its targets are shown
with ``"applies": false`` and the top-level ``all_met`` is null.

``--proxy`` is the cheap triage variant for comparing settings before a full run: 90-second runs
(``--minutes 1.5``), 3 seeds, 100 rounds against each scripted bot, returned and last policy,
sampled actions only; no Tank Royale bots, no round-robin. Its JSON has the same shape (a probe).

Prints progress to stderr (every step, with the elapsed time, and an estimate of the total at the
start) and, as its last stdout line, exactly one JSON object: the settings, per case every seed's
figures (win rates, training figures from ``summary.json``: transitions trained, updates, gradient
steps, trained steps/s, which policy was returned and why, league collapses), the aggregate over
every seed (median and worst per opponent, failures counted as 0%), the targets and whether each is
met, the untrained baseline, and the provenance: ``source`` (commit, dirty, exported), ``versions``
(python, torch, numpy, numba, as the runs import them) and ``command_line``. A seed whose
``arena train`` fails keeps its error (the end of its stderr) and the others go on.

    python bench/learning.py                                  # default case, seeds 0-4 (~40 minutes)
    python bench/learning.py --proxy                          # triage: 3 seeds of 90 s (~8 minutes)
    python bench/learning.py --proxy --extra="--matches 64"   # the same for another setting
    python bench/learning.py --case default --case tracker --seeds 0 1 --out runs/bench
    python bench/learning.py --validation --out runs/probe > probe.json   # a choice for range, on the validation panel
    python bench/learning.py --report-on probe.json --heldout      # then the final report, on the same policies
    python bench/learning.py --case radar --case radar-gru         # the radar observation, memoryless vs GRU
    python bench/learning.py --case tracker --sb3 our-shape --sb3 16x128 --seeds 0   # beside SB3's PPO
    python bench/learning.py --case tracker --sb3 our-shape --sb3 16x128 --equal-samples --seeds 0 --royale-rounds 0
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: `python bench/learning.py`
    sys.path.insert(0, str(ROOT))
from bench import learning_matches  # noqa: E402
from bench.learning_matches import STARTED, ArenaError, arena, log, pct, win_rates  # noqa: E402
from bench.learning_sb3 import SB3_SHAPES, ours_at_sb3_samples, sb3_tracker  # noqa: E402
from bench.learning_verdicts import aggregate, judge  # noqa: E402
from bench.provenance import DirtyTree, Source, arena_command, command_line, prepare_source, versions  # noqa: E402

SCRIPTED = ("sitting", "spinner", "walker", "tracker")
POPULATION = ("drawn",)
"""The default league's fifth member: a scripted bot whose movement, targeting and fire power are drawn anew every
round (docs/arena.md). Played with fresh draws after the four; it has no target (a new figure, 2026-12-05)."""
ROYALE_BOTS = ("Walls", "SpinBot", "Corners", "Crazy", "Fire", "RamFire", "TrackFire", "VelocityBot")
"""Official-API bots of tests/data/royale_bots. No run trains against them, but their figures guided the choice of
the defaults: they are *tuning* opponents, not held-out ones."""
ROYALE_DATA = Path("tests") / "data" / "royale_bots"
"""Where the Tank Royale tuning bots lie in the measured source."""
VALIDATION_DATA = Path("bench") / "validation"
"""Where the validation panel lies in the measured source: official-API bots harder than the tuning bots, which
tuning runs may play to compare settings for range (bench/validation/README.md), played with ``--validation``; no
run trains against them or selects its returned policy on them."""
HELDOUT_DATA = Path("bench") / "heldout"
"""Where the held-out panel lies in the measured source: official-API bots no training, selection or tuning run
may use (bench/heldout/README.md), played here only with ``--heldout``, for the final report of a change."""
OPPONENT_ROLES = {
    "sitting": "training and selection",
    "spinner": "training and selection",
    "walker": "training and selection",
    "tracker": "training and selection",
    "drawn": "training and selection: the population, fresh draws of its parts every round (no target)",
    "royale": "tuning",
    "validation": "tuning: choices about range (never trained against, never in a run's selection)",
    "heldout": "none: the final report only",
}
"""What each opponent was used for. The four scripted bots are the default league (training) and the opponents
the run picks its returned policy by (selection); the Tank Royale bots of ``tests/data/royale_bots`` were never
trained against, but guided the choice of the defaults (tuning). Neither is a held-out figure: the bots of
``bench/heldout`` are (``--heldout``)."""
LEAGUE_ROUNDS = 100
"""Rounds per pair in ``arena league``'s round-robin. At 20, one seed's returned policy scored 40% against
``tracker`` there and 62-64.5% over 100-200 rounds: too few to order two close bots."""
TARGETS = {
    "median": {"sitting": 0.95, "spinner": 0.80, "walker": 0.80, "tracker": 0.60},
    "worst": {"sitting": 0.90, "spinner": 0.70, "walker": 0.60, "tracker": 0.40},
    "royale_mean_median": 0.80,
    "above_every_scripted_every_seed": True,
}
"""The 5-minute ``default`` case's targets (returned policy, sampled actions)."""
CASES: dict[str, dict[str, Any]] = {
    "default": {"minutes": 5.0, "flags": [], "targets": TARGETS},
    "tracker": {"minutes": 5.0, "flags": ["--opponent", "tracker"], "targets": None},
    "selfplay": {"minutes": 5.0, "flags": [f"--league-option={o}" for o in (
        "scripted=false", "self_share=0.5", "max_snapshots=10", "exponent=0", "snapshot_every=3")], "targets": None},
    # The tank from its radar alone (docs/arena.md, "The radar observation"), memoryless and recurrent side by side:
    # a 30-minute job, reported beside each other (their own targets are issue figures, read from the JSON).
    "radar": {"minutes": 30.0, "flags": ["--observation", "radar"], "targets": None},
    "radar-gru": {"minutes": 30.0, "flags": ["--observation", "radar", "--agent-option", "recurrent=gru"], "targets": None},
}  # fmt: skip
"""case → training minutes, extra ``arena train`` flags (none: the README's command) and targets.

``selfplay`` is what a user of ML-Agents' self-play trainer would run, with its defaults, on our learner: the
learner meets only itself (half the rounds, ``play_against_latest_model_ratio`` 0.5) and its last 10 snapshots
(``window``), drawn uniformly, one snapshot every 3 updates of 8,192 steps (``save_steps`` 20,000): the scripted
ladder never plays in training, only in the evaluation."""
FULL_SEEDS, PROXY_SEEDS = [0, 1, 2, 3, 4], [0, 1, 2]
PROXY_MINUTES = 1.5
EVAL_MINUTES = {"full": 3.0, "proxy": 0.8}
"""Rough minutes of evaluation per seed on a 2-core machine (5-minute runs: ~8 minutes a seed in all)."""
PANEL_MINUTES = 3.0
"""Rough minutes per seed of ``--heldout`` or ``--validation`` (7-12 bots x 20 rounds over Tank Royale's protocol)."""
PANELS = {"validation": (VALIDATION_DATA, "the validation panel"), "heldout": (HELDOUT_DATA, "the held-out panel")}
"""The optional panels of official-API bots: result key → (folder in the measured source, name in the log)."""


def source_root() -> Path:
    """The root of the measured source (where its bots lie)."""
    assert learning_matches.SOURCE is not None
    return learning_matches.SOURCE.root


def royale_dir() -> Path:
    return source_root() / ROYALE_DATA


def panel_bots(key: str) -> list[str]:
    """A panel's bots in the measured source (``NAME/NAME.json`` folders of its folder in :data:`PANELS`)."""
    panel = source_root() / PANELS[key][0]
    return sorted(d.name for d in panel.iterdir() if (d / f"{d.name}.json").is_file()) if panel.is_dir() else []


def panel_rates(
    entry: dict[str, Any],
    key: str,
    bot: str,
    where: Path,
    names: list[str],
    rounds: int,
    seed: int,
    errors: list[str],
    who: str = "returned policy",
) -> None:
    """``entry[win_rate_KEY]`` against each official-API bot of ``where``, and ``KEY_mean`` / ``KEY_median`` over
    them (a failed match counts as a match lost); ``who`` names ``bot`` in the log."""
    label = who + (f" vs {PANELS[key][1]}" if key in PANELS else "")
    rates = win_rates(bot, label, {n: f"royale:{where / n}" for n in names}, rounds, seed, errors)
    entry[f"win_rate_{key}"] = rates
    counted = [v or 0.0 for v in rates.values()]
    entry[f"{key}_mean"] = statistics.fmean(counted) if counted else None
    entry[f"{key}_median"] = statistics.median(counted) if counted else None
    entry[f"{key}_bots_played"] = sum(v is not None for v in rates.values())


def royale_bots() -> list[str]:
    """The official-API bot directories present in the measured source (the others are said on stderr)."""
    present = [name for name in ROYALE_BOTS if (royale_dir() / name / f"{name}.json").is_file()]
    missing = [name for name in ROYALE_BOTS if name not in present]
    if missing:
        log(f"Tank Royale bots missing, skipped: {', '.join(missing)} (no {royale_dir()}/<Name>/<Name>.json)")
    return present


def round_robin(run: Path, seed: int) -> dict[str, Any]:
    """``arena league RUN --json``: the returned policy's rank among the members, and whether it is rated above
    every scripted bot (the policy is named ``returned`` there)."""
    report = json.loads(
        arena("league", str(run), "--rounds", str(LEAGUE_ROUNDS), "--seed", str(seed), "--json").strip().splitlines()[-1]
    )
    ratings = report["round_robin"]["ratings"]
    ranking = [row["name"] for row in ratings]
    elo = {row["name"]: row["elo"] for row in ratings}
    policy = "returned"
    scripted = [name for name in ranking if name in SCRIPTED]  # none when the league had no scripted bots
    above = all(elo[policy] > elo[name] for name in scripted) if scripted else None
    return {
        "ranking": ranking,
        "rank": ranking.index(policy) + 1,
        "members": len(ranking),
        "above_every_scripted": above,
    }


def run_seed(
    case: str,
    seed: int,
    minutes: float,
    extra: list[str],
    root: Path,
    settings: dict[str, Any],
    royale: list[str],
    panels: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """One ``arena train`` and the evaluation of what it hands back."""
    run = root / f"{case}-seed{seed}"
    flags = ["train", "--minutes", f"{minutes:g}", "--out", str(run), "--seed", str(seed), *CASES[case]["flags"], *extra]
    entry: dict[str, Any] = {
        "case": case,
        "seed": seed,
        "minutes": minutes,
        "run_dir": str(run),
        "command": "arena " + shlex.join(flags),
        "league_expected": settings["league"] and "--opponent" not in [*CASES[case]["flags"], *extra],
    }
    log(f"{case}, seed {seed}: {entry['command']}")
    started = time.monotonic()
    try:
        arena(*flags, timeout=minutes * 60 + 900)
    except ArenaError as exc:
        entry["error"] = str(exc)[-500:]
        log(f"  FAILED after {time.monotonic() - started:.0f} s: {entry['error']}")
        return entry
    entry["train_seconds"] = round(time.monotonic() - started, 1)
    try:
        summary = json.loads((run / "summary.json").read_text())
        last = sorted((run / "checkpoints").glob("ckpt-*.pt"))[-1]
    except (OSError, ValueError, IndexError) as exc:
        entry["error"] = f"arena train finished without summary.json or a checkpoint: {exc}"[-500:]
        log(f"  FAILED: {entry['error']}")
        return entry
    throughput = summary.get("throughput") or {}
    returned = summary.get("returned_policy")
    entry |= {
        "opponents": summary.get("opponents"),
        "transitions_trained": summary.get("transitions_trained"),
        "updates": summary.get("updates"),
        "gradient_steps": summary.get("gradient_steps"),
        "trained_steps_per_s": throughput.get("trained_steps_per_s"),
        "returned_policy": returned,
        "league_collapses": (summary.get("league") or {}).get("collapses"),
        "last_checkpoint": str(last.relative_to(run)),
    }
    which = (
        f"v{returned.get('version')} ({returned.get('returned')}: {returned.get('reason')})" if returned else "none recorded"
    )
    log(
        f"  trained {entry['transitions_trained'] or 0:,} steps, {entry['updates']} updates, "
        f"{entry['trained_steps_per_s'] or 0:,.0f} steps/s in {entry['train_seconds']:.0f} s; returned policy {which}"
    )
    errors: list[str] = []
    rounds, match_seed = settings["rounds"], seed + 1
    entry["win_rate"] = win_rates(str(run), "returned policy", SCRIPTED, rounds, match_seed, errors)
    if not settings["proxy"]:
        entry["win_rate_deterministic"] = win_rates(
            str(run), "returned policy", SCRIPTED, rounds, match_seed, errors, deterministic=True
        )
    entry["win_rate_last"] = win_rates(str(last), f"last policy {last.name}", SCRIPTED, rounds, match_seed, errors)
    if not settings["proxy"]:  # the population the default league trains against, fresh rounds (reported, no target)
        entry["win_rate_population"] = win_rates(str(run), "returned policy", POPULATION, rounds, match_seed, errors)
    if royale:
        panel_rates(entry, "royale", str(run), royale_dir(), royale, settings["royale_rounds"], match_seed, errors)
    for key, bots in (panels or {}).items():
        where = source_root() / PANELS[key][0]
        panel_rates(entry, key, str(run), where, bots, settings[f"{key}_rounds"], match_seed, errors)
    if settings["league"] and "league" in summary:
        log(f"  round-robin of the returned policy against its league ({LEAGUE_ROUNDS} rounds per pair)")
        try:
            entry["round_robin"] = robin = round_robin(run, seed)
            log(
                f"    returned policy #{robin['rank']} of {robin['members']}, above every scripted bot: "
                f"{robin['above_every_scripted']}; {robin['ranking']}"
            )
        except (ArenaError, ValueError, KeyError) as exc:
            errors.append(f"arena league: {exc}")
            log(f"    failed: {str(exc)[-200:]}")
    if errors:
        entry["errors"] = errors
    entry["seconds"] = round(time.monotonic() - started, 1)
    return entry


def aggregate_case(entries: list[dict[str, Any]], expected: dict[str, Sequence[str]]) -> dict[str, Any]:
    """A case's verdict over its seeds, with the tuning bots and every panel of :data:`PANELS` aggregated."""
    return aggregate(entries, expected, panels=("royale", *PANELS))


def header(probe_flags: Sequence[str], source: Source, found_versions: dict[str, Any]) -> dict[str, Any]:
    """The JSON's provenance: what kind of run it was, the code measured (commit, dirty, exported), the versions
    the runs imported, the command line, and what each opponent was used for."""
    return {
        "bench": "learning",
        "kind": "probe" if probe_flags else "evaluation",
        "probe_flags": list(probe_flags),
        "source": source.record,
        "versions": found_versions,
        "command_line": command_line(),
        "opponent_roles": OPPONENT_ROLES,
    }


def seed_minutes(case: str, minutes: float | None, proxy: bool, panels: int = 0) -> float:
    """Rough wall-clock minutes of one seed: training, its start and end, the evaluation (``panels``: how many of
    :data:`PANELS` are played)."""
    training = minutes if minutes is not None else CASES[case]["minutes"]
    return training + 0.5 + EVAL_MINUTES["proxy" if proxy else "full"] + PANEL_MINUTES * panels


def report_on(bench_json: Path, rounds: dict[str, int]) -> None:
    """``--report-on``: the panels in ``rounds`` (key → rounds per bot) against each seed's returned policy of an
    earlier run of this benchmark, and the untrained policy of its seed 0 as the baseline; one JSON line.

    Why: the final report of a choice made on the validation panel is best made on the very policies the choice
    was made with, not on a new training run, whose seeds would differ by chance. A seed that failed there counts
    0% here too. The matches run from the earlier run's export, so the code that plays is the code that trained.
    """
    try:
        earlier = json.loads(bench_json.read_text().strip().splitlines()[-1])
        record = earlier["source"]
        export = Path(record.get("export_dir") or "")
        cases = earlier["cases"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise SystemExit(f"bench/learning.py: {bench_json} is not this benchmark's JSON output: {exc}") from None
    if not record.get("exported"):
        raise SystemExit(f"bench/learning.py: {bench_json} measured a working tree, not an export: its code is not kept")
    if not export.is_dir():
        raise SystemExit(f"bench/learning.py: the earlier run's source export is gone ({export}): nothing to play from")
    source = Source(export, record)
    learning_matches.use_source(source)
    found_versions = versions(source)
    panels = {key: panel_bots(key) for key in rounds}
    for key, bots in panels.items():
        if not bots or importlib.util.find_spec("robocode_tank_royale") is None:
            raise SystemExit(f"bench/learning.py: --{key} needs the bots of {PANELS[key][0]} and the royale extra")
    log(f"the panels {', '.join(panels)} against the returned policies of {bench_json} (commit {record['commit'][:12]})")
    expected = {f"win_rate_{key}": bots for key, bots in panels.items()}
    results: dict[str, Any] = {}
    for case, found in cases.items():
        entries = []
        for earlier_entry in found["seeds"]:
            seed = earlier_entry["seed"]
            entry: dict[str, Any] = {"case": case, "seed": seed, "run_dir": earlier_entry.get("run_dir")}
            if "error" in earlier_entry or not earlier_entry.get("run_dir"):
                entry["error"] = f"the seed failed in the earlier run: {earlier_entry.get('error', 'no run directory')}"
                entries.append(entry)
                continue
            errors: list[str] = []
            for key, bots in panels.items():
                panel_rates(entry, key, entry["run_dir"], source.root / PANELS[key][0], bots, rounds[key], seed + 1, errors)
            if errors:
                entry["errors"] = errors
            entries.append(entry)
        results[case] = {"seeds": entries, "aggregate": aggregate_case(entries, expected)}
        for key in panels:
            mean = results[case]["aggregate"][f"{key}_mean"]
            log(f"{case}: {PANELS[key][1]}, mean per seed: median {pct(mean['median'])}, worst {pct(mean['worst'])}")
    baseline: dict[str, Any] = {"seed": 0}
    untrained = Path(earlier.get("root") or bench_json.parent) / "untrained-seed0" / "checkpoints"
    first = sorted(untrained.glob("ckpt-*.pt"))[:1]
    if first:
        errors = []
        for key, bots in panels.items():
            where = source.root / PANELS[key][0]
            panel_rates(baseline, key, str(first[0]), where, bots, rounds[key], 1, errors, who="untrained policy")
        if errors:
            baseline["errors"] = errors
    else:
        baseline["error"] = f"no untrained checkpoint in {untrained}"
    print(
        json.dumps(
            {
                **header(["--report-on"], source, found_versions),
                "report_on": {"path": str(bench_json), "kind": earlier.get("kind"), "probe_flags": earlier.get("probe_flags")},
                "settings": {
                    **{f"{key}_bots": bots for key, bots in panels.items()},
                    **{f"{key}_rounds": n for key, n in rounds.items()},
                },
                "cases": results,
                "untrained": baseline,
                "seconds": round(time.monotonic() - STARTED, 1),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[-1:]),
    )
    parser.add_argument(
        "--case",
        action="append",
        choices=sorted(CASES),
        help="case to run, repeatable: default (the README's 5-minute job) or tracker "
        "(5 minutes against a fixed tracker) (default: default)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: 0 1 2 3 4; --proxy: 0 1 2)")
    parser.add_argument(
        "--minutes", type=float, default=None, help="training minutes of every case instead of its own (5; --proxy: 1.5)"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="match rounds against each scripted bot (default 200; --proxy: 100)"
    )
    parser.add_argument(
        "--royale-rounds",
        type=int,
        default=20,
        help="rounds against each official-API Tank Royale bot (default 20; 0 skips them)",
    )
    parser.add_argument(
        "--heldout",
        action="store_true",
        help="also play the held-out panel (bench/heldout: bots no training, selection or tuning run may use), "
        "--heldout-rounds rounds each: for the final report of a change, after every choice is made",
    )
    parser.add_argument("--heldout-rounds", type=int, default=20, help="rounds against each held-out bot (default 20)")
    parser.add_argument(
        "--validation",
        action="store_true",
        help="also play the validation panel (bench/validation: harder official-API bots that tuning runs may use to "
        "compare settings for range; never trained against), --validation-rounds rounds each",
    )
    parser.add_argument("--validation-rounds", type=int, default=20, help="rounds against each validation bot (default 20)")
    parser.add_argument("--extra", default="", help='flags appended to arena train, as one string: --extra="--matches 64"')
    parser.add_argument(
        "--proxy",
        action="store_true",
        help="cheap triage: 90 s runs, 3 seeds, 100 rounds, no Tank Royale bots, no round-robin, "
        "no mean-action pass (targets shown, not applied)",
    )
    parser.add_argument(
        "--sb3",
        action="append",
        choices=sorted(SB3_SHAPES),
        help="also train Stable-Baselines3's PPO against tracker for the same minutes at this batch shape, per seed "
        "(repeatable; compare with --case tracker; needs the bench extra)",
    )
    parser.add_argument(
        "--equal-samples",
        action="store_true",
        help="with --sb3: also train ours against tracker at each SB3 shape, stopped at the samples SB3 used",
    )
    parser.add_argument("--out", type=Path, default=None, help="where the runs go and stay (default: a temporary directory)")
    parser.add_argument(
        "--commit",
        default=None,
        help="measure this commit, exported from git into a fresh directory (default: HEAD, refused on a dirty tree)",
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="measure the working tree as it is, uncommitted edits included (the JSON says so, with a hash of the diff)",
    )
    parser.add_argument(
        "--report-on",
        type=Path,
        default=None,
        metavar="BENCH_JSON",
        help="train nothing: play the panels asked (--heldout, --validation) against the returned policies of an "
        "earlier run of this benchmark (its JSON output), from that run's own source export",
    )
    args = parser.parse_args()
    if args.report_on is not None:
        asked = [key for key in PANELS if getattr(args, key)]
        if not asked:
            parser.error("--report-on needs --heldout or --validation (the panels to play)")
        report_on(args.report_on, {key: getattr(args, f"{key}_rounds") for key in asked})
        return
    if (args.rounds is not None and args.rounds < 1) or (args.minutes is not None and args.minutes <= 0):
        parser.error("--rounds must be >= 1 and --minutes > 0")
    if args.equal_samples and not args.sb3:
        parser.error("--equal-samples needs --sb3 SHAPE (the SB3 runs whose samples it matches)")
    if args.royale_rounds < 0 or args.heldout_rounds < 1 or args.validation_rounds < 1:
        parser.error("--royale-rounds must be >= 0, --heldout-rounds and --validation-rounds >= 1")
    cases = list(dict.fromkeys(args.case or ["default"]))
    seeds = list(dict.fromkeys(args.seeds or (PROXY_SEEDS if args.proxy else FULL_SEEDS)))
    root = args.out or Path(tempfile.mkdtemp(prefix="arena-learning-"))
    names = [f"{c}-seed{s}" for c in cases for s in seeds] + ["untrained-seed0", "source"]
    taken = [root / name for name in names if (root / name).exists()]
    if taken:
        raise SystemExit(f"{taken[0]} exists (arena train would mix its checkpoints in): remove it or pick another --out")
    root.mkdir(parents=True, exist_ok=True)
    try:
        source = prepare_source(ROOT, args.commit, args.allow_dirty, into=root / "source")
        found_versions = versions(source)
    except (DirtyTree, RuntimeError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"bench/learning.py: {exc}") from None
    learning_matches.use_source(source)
    where = "the working tree, uncommitted edits included" if source.record["dirty"] else "a clean export"
    log(f"measuring commit {source.record['commit'][:12]} from {where} ({source.root}); {found_versions}")
    extra = shlex.split(args.extra)
    rounds = args.rounds or (100 if args.proxy else 200)
    minutes = args.minutes if args.minutes is not None else (PROXY_MINUTES if args.proxy else None)
    royale_rounds = 0 if args.proxy else args.royale_rounds
    if args.proxy:
        log("proxy: no Tank Royale bots, no round-robin, no mean-action pass")
    elif royale_rounds and importlib.util.find_spec("robocode_tank_royale") is None:
        log("no official Tank Royale bot API (pip install -e '.[royale]'): the Tank Royale bots are skipped")
        royale_rounds = 0
    royale = royale_bots() if royale_rounds else []
    panels: dict[str, list[str]] = {}
    for key, asked in (("validation", args.validation), ("heldout", args.heldout)):
        if not asked:
            continue
        panels[key] = panel_bots(key)
        if not panels[key] or importlib.util.find_spec("robocode_tank_royale") is None:
            raise SystemExit(f"bench/learning.py: --{key} needs the bots of {PANELS[key][0]} and the royale extra")
    heldout = panels.get("heldout", [])
    settings = {"proxy": args.proxy, "rounds": rounds, "royale_rounds": royale_rounds, "league": not args.proxy,
                "heldout_rounds": args.heldout_rounds, "validation_rounds": args.validation_rounds}  # fmt: skip
    total = sum(seed_minutes(c, minutes, args.proxy, len(panels)) for c in cases) * len(seeds) + 1.0  # + the baseline
    log(f"cases {', '.join(cases)}, seeds {' '.join(map(str, seeds))}, runs in {root}; about {total:.0f} minutes in all")
    expected: dict[str, Sequence[str]] = {
        "win_rate": SCRIPTED,
        "win_rate_last": SCRIPTED,
        "win_rate_royale": royale,
        **{f"win_rate_{key}": bots for key, bots in panels.items()},
    }
    if not args.proxy:
        expected["win_rate_deterministic"] = SCRIPTED
        expected["win_rate_population"] = POPULATION
    probe_flags = []
    if extra:
        probe_flags.append(f"--extra={shlex.join(extra)}")
    if args.proxy:
        probe_flags.append("--proxy")
    if args.minutes is not None:
        probe_flags.append(f"--minutes {args.minutes:g}")
    if seeds != FULL_SEEDS:
        probe_flags.append(f"--seeds {' '.join(map(str, seeds))}")
    if rounds != 200 or (royale_rounds != 20 and not args.proxy):
        probe_flags.append("other rounds")

    results: dict[str, Any] = {}
    for case in cases:
        case_minutes = minutes if minutes is not None else CASES[case]["minutes"]
        entries = []
        for i, seed in enumerate(seeds):
            entries.append(run_seed(case, seed, case_minutes, extra, root, settings, royale, panels))
            later = cases[cases.index(case) + 1 :]
            left = seed_minutes(case, minutes, args.proxy, len(panels)) * (len(seeds) - i - 1) + 1.0
            left += sum(seed_minutes(c, minutes, args.proxy, len(panels)) for c in later) * len(seeds)
            log(f"{case}, seed {seed} done; about {left:.0f} min left")
        agg = aggregate_case(entries, expected)
        result: dict[str, Any] = {"minutes": case_minutes, "extra": extra, "seeds": entries, "aggregate": agg}
        if CASES[case]["targets"]:
            standard = not probe_flags
            why = (
                "the 5-minute default case: the README's command, seeds 0-4, full evaluation"
                if standard
                else f"a probe ({'; '.join(probe_flags)}): the targets are the default evaluation's, shown for comparison only"
            )
            result["targets"] = judge(agg, CASES[case]["targets"], standard, why)
        results[case] = result
        rates = agg.get("win_rate", {})
        if agg["seeds_failed"]:
            log(f"{case}: seeds {agg['seeds_failed']} FAILED, counted as 0% against every opponent")
        log(
            f"{case}: {agg['seeds_finished']} of {agg['seeds']} seeds finished; returned policy, median / worst: "
            + ", ".join(f"{k} {pct(v['median'])} / {pct(v['worst'])}" for k, v in rates.items())
        )
        for panel, what in (("royale", "Tank Royale tuning bots"), *((k, v[1]) for k, v in PANELS.items())):
            if f"{panel}_mean" in agg:
                mean = agg[f"{panel}_mean"]
                log(f"  {what}, mean per seed: median {pct(mean['median'])}, worst {pct(mean['worst'])}")
        if "targets" in result:
            log(f"  targets ({result['targets']['why']}): all met: {result['targets']['all_met']}")

    sb3 = sb3_tracker(args.sb3, minutes or 5.0, seeds, rounds) if args.sb3 else None
    equal = ours_at_sb3_samples(sb3, root, rounds) if sb3 is not None and args.equal_samples else None

    # Baseline in the same run: the untrained policy of seed 0 (a fresh run with no update).
    baseline: dict[str, Any] = {"seed": 0}
    untrained = root / "untrained-seed0"
    log("untrained baseline, seed 0")
    try:
        arena(
            "train",
            "--opponent",
            "sitting",
            "--rounds",
            "1",
            "--ticks-per-round",
            "1",
            "--matches",
            "1",
            "--out",
            str(untrained),
            "--seed",
            "0",
            "--no-report",
            timeout=600,
        )
        first = sorted((untrained / "checkpoints").glob("ckpt-*.pt"))[0]
        errors: list[str] = []
        baseline["win_rate"] = win_rates(str(first), "untrained policy", SCRIPTED, rounds, 1, errors)
        if errors:
            baseline["errors"] = errors
    except (ArenaError, IndexError) as exc:
        baseline["error"] = str(exc)[-500:]
        log(f"  FAILED: {baseline['error']}")

    applicable = [r["targets"]["all_met"] for r in results.values() if "targets" in r and r["targets"]["applies"]]
    all_met = None if not applicable else (False if False in applicable else (None if None in applicable else True))
    log(f"done in {(time.monotonic() - STARTED) / 60:.1f} minutes; runs in {root}")
    print(
        json.dumps(
            {
                **header(probe_flags, source, found_versions),
                "settings": {
                    "proxy": args.proxy,
                    "cases": cases,
                    "seeds": seeds,
                    "minutes": minutes,
                    "rounds": rounds,
                    "royale_rounds": royale_rounds,
                    "royale_bots": royale,
                    "heldout_bots": heldout,
                    "heldout_rounds": args.heldout_rounds if heldout else 0,
                    "validation_bots": panels.get("validation", []),
                    "validation_rounds": args.validation_rounds if "validation" in panels else 0,
                    "league_rounds": LEAGUE_ROUNDS,
                    "extra": extra,
                    "arena": shlex.join(arena_command(source)),
                },
                "cases": results,
                **({"sb3_tracker": sb3} if sb3 is not None else {}),
                **({"ours_at_sb3_samples": equal} if equal is not None else {}),
                "untrained": baseline,
                "all_met": all_met,
                "root": str(root),
                "seconds": round(time.monotonic() - STARTED, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
