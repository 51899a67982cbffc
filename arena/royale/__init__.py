"""Robocode Tank Royale bots in our arena, and our policies out as Tank Royale bots.

* ``schema``: the bot side of Tank Royale's JSON protocol, sans I/O (parse, validate, delta intents).
* ``game``: our ``TankBattle`` as a Tank Royale game (state and events → tick events; intents → actions).
* ``server``: the websocket endpoint (connections, handshake); ``connection``: its lockstep websocket.
* ``seats``: a game's bots seat by seat (boot, join, intents in, messages out, stop), for matches and training.
* ``match``: the lockstep turn loop and ``arena match`` with Tank Royale bots (``play_royale_match``).
* ``booter``: start and stop a bot from its directory, as Tank Royale's booter does.
* ``train``: Tank Royale bots as opponents of a learning bot (``arena train --opponent royale:PATH``).
* ``export``: a checkpoint as a ready-to-run Tank Royale bot directory (``arena export --royale``).

See docs/royale.md. Needs ``pip install -e '.[royale]'`` only to run the official bot API
(the bots themselves, and the exported bot); the server side is numpy and websockets.
"""
