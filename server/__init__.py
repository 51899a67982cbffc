"""The training server: asyncio websocket front end, transition queue, trainer thread.

Typical embedding::

    from agents import make_agent
    from server import ServerConfig, ServerThread, TrainingServer

    server = TrainingServer(make_agent("ppo", obs_dim=4, act_dim=2), ServerConfig(port=0))
    with ServerThread(server) as running:
        print(running.url)   # connect bots here

That server takes scalar-reward bots only; for terms-mode bots pass the game's reward
function, e.g. ``TrainingServer(..., reward=arena.games.tank.rewards.TANK_REWARD)`` (:mod:`server.rewards`).
"""

from .app import ListenError, TrainingServer
from .config import ServerConfig, TrainerConfig
from .dashboard import Dashboard, DashboardConfig
from .metrics import Metrics
from .rewards import RewardFunction
from .thread import ServerThread
from .trainer import Trainer
from .transition_queue import TransitionQueue
from .weights import PublishedWeights, published_weights

__all__ = [
    "Dashboard",
    "DashboardConfig",
    "ListenError",
    "Metrics",
    "PublishedWeights",
    "RewardFunction",
    "ServerConfig",
    "ServerThread",
    "Trainer",
    "TrainerConfig",
    "TrainingServer",
    "TransitionQueue",
    "published_weights",
]
