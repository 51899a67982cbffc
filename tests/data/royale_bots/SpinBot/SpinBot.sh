#!/bin/sh
# Started by a Tank Royale booter (or `arena match --bot royale:tests/data/royale_bots/SpinBot`).
cd -- "$(dirname -- "$0")" && exec python3 SpinBot.py
