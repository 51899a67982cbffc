"""The games: the tank arena (the default) and the reach test game."""
