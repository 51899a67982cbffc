"""The live dashboard: a web page beside the bot port that shows a run as it trains.

One job a module:

- :mod:`~server.dashboard.observer`: :class:`Dashboard`, the observer server (its websocket feed,
  its lifecycle beside the bot port);
- :mod:`~server.dashboard.config`: :class:`DashboardConfig` and :class:`DashboardHost` (what the
  dashboard needs of the training server);
- :mod:`~server.dashboard.feed`: the read model it streams (sample history, update rows, bot table,
  the newest match frame);
- :mod:`~server.dashboard.http_gate`: the page and its assets, ``/healthz`` and the token gate;
- ``static/``: the page itself (HTML, CSS, the chart and match-view scripts; ``arena replay`` reuses
  ``match.js``).
"""

from .config import DashboardConfig, DashboardHost
from .feed import SUBPROTOCOL
from .http_gate import OBSERVE_PATH, static_asset
from .observer import Dashboard

__all__ = ["OBSERVE_PATH", "SUBPROTOCOL", "Dashboard", "DashboardConfig", "DashboardHost", "static_asset"]
