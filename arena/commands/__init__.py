"""The ``arena`` commands, one module each, wired together by ``arena.cli``.

- ``train``: server, trainer thread and headless arena in one process (``arena.commands.train``)
- ``match``: headless matches between checkpoints and scripted bots (``arena.commands.match``)
- ``replay``: watch, render or verify a recorded match (``arena.commands.replay``)
- ``serve``: the server and trainer alone, for your own bots (``arena.commands.serve``)
- ``gym``: a gymnasium environment as a bot of a running server (``arena.commands.gym``)
- ``export``: a checkpoint's policy as weights, a Tank Royale bot or ONNX (``arena.commands.export``)
- ``worker``: a learning bot process for a remote ``arena serve`` (``arena.commands.worker``)
- ``league`` is parsed in ``arena.cli`` and runs in ``arena.league.commands``

``train``, ``match`` and ``worker`` read their flags once, into a frozen plan (``*_plan.py``) that their
run (``*_run.py``) plays. ``arena.commands.options`` holds the argparse pieces they share, ``arena.commands.announce`` what a
running command tells its user (its dashboard, what it resumed, notes on stderr).
"""
