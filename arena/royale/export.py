"""``arena export CHECKPOINT --royale -o DIR``: a trained policy as a ready-to-run Tank Royale bot directory.

The directory follows Tank Royale's booter conventions (every file named after the directory,
see ``arena.royale.booter``): ``NAME.json`` (the bot's config), ``NAME.sh``/``NAME.cmd`` (start
scripts), ``NAME.py`` (``arena/royale/policy_bot.py``), ``policy.weights`` (the actor, exactly the
``weights`` message bots receive online), ``policy.json`` (the rules the policy assumes and its
origin), a copy of ``bot_protocol/``, ``requirements.txt`` and a ``README.md``. Nothing else of
Arena Trainer is needed, so the directory can be copied into a Tank Royale bot root as is
(docs/royale.md, "Our policies as Tank Royale bots").
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import stat
from pathlib import Path

import bot_protocol
from bot_protocol import Weights, encode

from ..bots.policies import load_weights
from ..games.tank.actions import ACT_DIM
from ..games.tank.observation import OBS_DIM
from ..games.tank.radar import RADAR_OBS_DIM
from ..games.tank.rules import TankRules

__all__ = ["export_royale_bot"]

_VENDORED = (
    "__init__.py",
    "actions.py",
    "batching.py",
    "categorical.py",
    "conv.py",
    "codec.py",
    "errors.py",
    "fields.py",
    "messages.py",
    "policy.py",
    "policy_id.py",
    "recurrent.py",
    "tensors.py",
    "transitions.py",
)
"""The bot_protocol modules the exported bot imports (not the websocket client)."""


def export_royale_bot(source: Path, out: Path, rules: TankRules | None = None, authors: tuple[str, ...] = ()) -> Weights:
    """Write the Tank Royale bot directory ``out`` for the policy in ``source``; returns the weights written.

    ``out``'s name is the bot's name and base filename, so it must be a plain identifier
    (letters, digits, underscores). An existing ``out`` is replaced only if it looks like an
    earlier export (it holds ``policy.weights``).

    Raises:
        FileNotFoundError: no such checkpoint or weights file.
        ValueError: a bad bot name, a policy that does not fit the arena (a ``mixed_mlp``'s discrete actions
            among them), or ``out`` is something else.
    """
    name = out.name
    if not name.isidentifier() or len(name) > 30:
        raise ValueError(
            f"-o {out}: the directory's name is the bot's name and file name: up to 30 letters, digits and _ (Tank Royale)"
        )
    weights = load_weights(source)
    layers = weights.arch.layers
    if weights.arch.kind == "mixed_mlp":
        raise ValueError(
            f"a mixed_mlp policy ({weights.arch.actions.describe()}) picks discrete actions, and a Tank Royale "
            f"tank acts in {ACT_DIM} continuous dims: export a continuous-action policy"
        )
    if weights.arch.obs_dim not in (OBS_DIM, RADAR_OBS_DIM) or layers[-1] != ACT_DIM:
        raise ValueError(
            f"the policy maps {weights.arch.obs_dim} → {layers[-1]}, not the tank arena's {OBS_DIM} → {ACT_DIM} "
            f"(or {RADAR_OBS_DIM} → {ACT_DIM} on the radar observation)"
        )
    if out.exists():
        if not (out / "policy.weights").is_file():
            raise ValueError(f"-o {out}: exists and is not an exported bot; choose a new directory")
        shutil.rmtree(out)
    tmp = out.with_name(f".{name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # Not "generation.version": "0.994" reads as a pre-1.0 release number.
    version = f"v{weights.version}-gen{weights.generation}"
    config = {
        "name": name,
        "version": version,
        "authors": list(authors) or ["Arena Trainer"],
        "description": f"A {weights.arch.kind} policy trained in Arena Trainer's tank arena "
        f"(generation {weights.generation}, version {weights.version}).",
        "gameTypes": ["1v1", "classic"],
        "platform": "Python 3",
        "programmingLang": "Python",
    }
    (tmp / f"{name}.json").write_text(json.dumps(config, indent=2) + "\n")
    script = tmp / f"{name}.sh"
    script.write_text(f'#!/bin/sh\n# Tank Royale booter start script.\ncd -- "$(dirname -- "$0")" && exec python3 {name}.py\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (tmp / f"{name}.cmd").write_text(f'@echo off\r\ncd /d "%~dp0"\r\npython {name}.py\r\n')
    shutil.copyfile(Path(__file__).with_name("policy_bot.py"), tmp / f"{name}.py")
    (tmp / "policy.weights").write_bytes(encode(weights))
    meta = {
        "source": str(source),
        "generation": weights.generation,
        "version": weights.version,
        "arch": weights.arch.kind,
        "layers": list(layers),
        "rules": {k: v for k, v in dataclasses.asdict(rules or TankRules()).items() if not isinstance(v, bool)},
    }
    (tmp / "policy.json").write_text(json.dumps(meta, indent=2) + "\n")
    package = tmp / "bot_protocol"
    package.mkdir()
    src = Path(bot_protocol.__file__).parent
    for module in _VENDORED:
        shutil.copyfile(src / module, package / module)
    (tmp / "requirements.txt").write_text("numpy>=1.26\nmsgpack>=1.0\nrobocode-tank-royale>=1.4\n")
    (tmp / "README.md").write_text(_README.format(name=name, version=version, kind=weights.arch.kind))
    tmp.replace(out)
    return weights


_README = """# {name}

A {kind} policy (version {version}) trained in Arena Trainer's tank arena, as a Robocode Tank Royale bot
written with the official Python bot API.

    pip install -r requirements.txt
    SERVER_URL=ws://localhost:7654 ./{name}.sh      # or let Tank Royale's booter start it (bot root = this folder's parent)

In Arena Trainer: `arena match --bot royale:path/to/{name} --bot tracker`.

Each turn the bot rebuilds the arena's observation from its own state and its last scan of the enemy, runs the
policy (`ARENA_POLICY_MEAN=1`: its mean action instead of a sample) and sends speed, turn rates and firepower as
its intent; its radar keeps locked on the enemy. See {name}.py.
"""
