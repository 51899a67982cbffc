"""PPO's hyperparameters: :class:`PPOConfig`, frozen and checked when made.

Why a module of its own: the config is what a run's plan, a checkpoint and a benchmark name and
compare, without the learner's torch code around it. Defaults are the original trainer's; the
tank arena's own are in ``arena/defaults.py``, each with its figures.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

__all__ = ["MAX_BRANCHES", "MAX_BRANCH_SIZE", "MAX_LOGITS", "PPOConfig"]

MAX_BRANCHES = 64
MAX_BRANCH_SIZE = 1024
MAX_LOGITS = 4096
"""The discrete part's bounds, the wire's action space's: branches, actions per branch, actions in all."""


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters. Defaults are the seed trainer's."""

    obs_dim: int
    act_dim: int
    """Continuous action dimensions (the Gaussian part); 0 only when ``branches`` lists discrete actions."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of both actor and critic (3 linear layers with the defaults)."""
    activation: str = "tanh"
    learning_rate: float = 3e-4
    final_lr_fraction: float = 1.0
    """The learning rate at the end of the run's budget, as a fraction of ``learning_rate``: it falls
    linearly with the progress the run reports (:meth:`PPOAgent.set_progress`). 1.0 (the seed's) keeps it
    constant; CleanRL and Stable-Baselines3's zoo anneal to 0. A run that reports no progress keeps the start rate."""
    adam_eps: float = 1e-8
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    """Entropy bonus; gated off for dimensions whose log-std sits at the ceiling (runaway std)."""
    mean_bound: float = 1.0
    """Where the actor's mean may go without cost: the bots clip actions to [-1, 1], so a mean past that plays the same
    action and only moves the other side of the bound out of exploration's reach (see ``mean_bound_coef``)."""
    mean_bound_coef: float = 0.0
    """Weight of the penalty ``sum over dims of max(|mean| - mean_bound, 0)^2`` (batch mean) in the loss; 0 (the seed's)
    adds nothing. Why: nothing pulls a mean that drifted past the clip back, and a tank's fire dimension at -1.8 with a
    std of 0.4 fires one tick in 6,000: the run stops finding out that firing pays (docs/agents.md)."""
    epochs: int = 4
    minibatch_size: int = 64
    max_grad_norm: float = 0.5
    clip_per_network: bool = False
    """Clip the actor's gradient and the critic's to ``max_grad_norm`` each, not their joint norm (the seed's).
    Why: in the tank's league runs the joint norm is 13-51 while the value loss runs at 30-110 (a hit is worth +22), so
    the joint clip scales the actor's step by whatever the critic's error was in that minibatch. The skip guard still
    reads the joint norm."""
    skip_grad_norm: float = 1e15
    """A minibatch whose gradient norm is NaN, Inf or above this is skipped entirely."""
    max_log_ratio: float = 20.0
    """log(pi/pi_old) is clamped to ±this before exp: float32 exp overflows at 88, and ±20 is
    deep in clipped territory, so loss and gradient equal the true ratio's."""
    log_std_init: float = -0.5
    log_std_min: float = -3.0
    log_std_max: float = 0.0
    rollout_steps: int = 2048
    """Steps gathered before each update."""
    proximal_anchor: bool = False
    """Clip the ratio against the policy each update starts from, not the bots' (decoupled PPO): see
    :meth:`PPOAgent._anchor_at_current_policy`. For data acted a version or two behind the learner."""
    advantage_norm: str = "rollout"
    """Where advantages are normalized: ``"rollout"`` (once per update, the seed's guards) or
    ``"minibatch"`` (again in each minibatch, as Stable-Baselines3 and CleanRL do; the rollout's
    non-finite guard still runs first, and a minibatch of near-constant advantages is centered only)."""
    obs_norm: bool = False
    """Feed both networks ``clip((obs - mean) / sqrt(var + 1e-8), -obs_norm_clip, obs_norm_clip)``, with the
    running mean and variance of every rollout's observations (:mod:`agents.normalization`); the bots get the
    statistics with the weights and normalize the same way. Off: the networks see the raw observations."""
    obs_norm_clip: float = 10.0
    """Where normalized observations are clipped (``VecNormalize``'s default): a rare extreme value stays bounded."""
    max_policy_lag: int | None = 32
    """Segments acted by a policy more than this many versions behind are dropped (on-policy)."""
    cuda_graph: bool = True
    """On a CUDA device, capture the minibatch step in a CUDA graph and replay it (ignored on the CPU).

    Same math and guards as the eager loop, with the skip decided on the device. A final
    partial minibatch (steps not a multiple of ``minibatch_size``) runs the same step eagerly."""
    fused: bool = True
    """Run the minibatch step with its maths written out (:mod:`agents.ppo.fused`): on the CPU with no
    autograd at all (the loss in one compiled loop, the gradients into one buffer, Adam's kernel
    called directly, the guards in a second compiled call), on CUDA as two hand-differentiated
    autograd nodes in the captured graph. The same maths to float32 rounding, and markedly more
    gradient steps a second on the CPU (docs/agents.md, "The update's cost on the CPU"). ``False``
    runs the plain modules through autograd and ``Adam.step``: the reference the fused step is
    tested against."""
    branches: tuple[int, ...] = ()
    """Sizes of the discrete action branches (multi-discrete; one branch is a plain discrete action), each a
    masked categorical beside the ``act_dim`` Gaussian dimensions; empty (the default): continuous actions only.
    With branches the actor is :class:`agents.networks.MixedActor`, a rollout's ``act`` column is the packed
    block ``[continuous | discrete indices | mask]`` (:attr:`action_width` wide). On the CPU a minibatch takes the
    written-out step (its loss kernel knows the masked categoricals); on CUDA the reference step
    (:func:`agents.ppo.steps.choose_step`)."""
    conv: tuple[int, ...] = ()
    """A convolutional torso in front of both networks, three numbers a layer: out channels, kernel height and
    width (``conv=32,4,4`` is one layer of 32 4x4 filters); stride 1, no padding, ``activation`` after each. Empty
    (the default): the MLPs read the observation itself. Why: on a board or a grid a pattern means the same
    wherever it lies, and a convolution learns it once (docs/agents.md, "Connect four"). Needs ``image``; every
    minibatch then takes the reference step (:func:`agents.ppo.steps.choose_step`)."""
    image: tuple[int, ...] = ()
    """``conv``'s input: (height, width, channels) of the image the observation starts with, channels last as a
    ``Box`` of that shape flattens (``arena gym`` fills it from the game's observation space)."""
    recurrent: str = ""
    """``"gru"`` or ``"lstm"``: a recurrent core of ``recurrent_size`` units between the observation (or the conv
    torso) and the actor's MLP, so a bot that sees part of the world can remember it (:mod:`agents.recurrent`).
    The bots keep each agent's state and send it with every row; the critic reads the observation and that
    state; minibatches are chunks of ``sequence_length`` consecutive rows, backpropagated through. Empty (the
    default): a memoryless actor."""
    recurrent_size: int = 64
    sequence_length: int = 16
    """Rows per chunk of backpropagation through time (a recurrent actor's minibatches are ``minibatch_size //
    sequence_length`` chunks; a segment's last chunk may be shorter and is padded, the padding weighing nothing)."""
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        # A tuple whatever the caller passed (a checkpoint's or JSON's list): the config stays hashable.
        for name in ("branches", "conv", "image"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        # Written as "not (valid)" so NaN, which fails every comparison, is refused too.
        problems = []
        for name in ("obs_dim", "epochs", "minibatch_size", "rollout_steps"):
            if not getattr(self, name) >= 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        problems += self._action_problems()
        problems += self._conv_problems()
        if self.recurrent not in ("", "gru", "lstm"):
            problems.append(f"recurrent must be gru, lstm or empty (memoryless), got {self.recurrent!r}")
        if not 1 <= self.recurrent_size <= 4096:
            problems.append(f"recurrent_size must be 1..4096, got {self.recurrent_size}")
        if not self.sequence_length >= 1:
            problems.append(f"sequence_length must be >= 1, got {self.sequence_length}")
        if not self.hidden or not all(h >= 1 for h in self.hidden):
            problems.append(f"hidden must list positive widths, got {self.hidden}")
        if self.advantage_norm not in ("rollout", "minibatch"):
            problems.append(f"advantage_norm must be 'rollout' or 'minibatch', got {self.advantage_norm!r}")
        if self.activation not in ("tanh", "relu"):
            problems.append(f"activation must be 'tanh' or 'relu', got {self.activation!r}")
        if not 0.0 < self.gamma <= 1.0:
            problems.append(f"gamma must be in (0, 1], got {self.gamma}")
        if not 0.0 <= self.gae_lambda <= 1.0:
            problems.append(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
        if not 0.0 < self.clip_epsilon < 1.0:
            problems.append(f"clip_epsilon must be in (0, 1), got {self.clip_epsilon}")
        if not 0.0 <= self.final_lr_fraction <= 1.0:
            problems.append(f"final_lr_fraction must be in [0, 1], got {self.final_lr_fraction}")
        clip = self.obs_norm_clip
        if not (isinstance(clip, int | float) and math.isfinite(clip) and clip > 0):
            problems.append(f"obs_norm_clip must be a finite number > 0, got {self.obs_norm_clip}")
        for name in ("learning_rate", "adam_eps", "max_grad_norm", "max_log_ratio", "skip_grad_norm"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0, got {getattr(self, name)}")
        if not self.mean_bound > 0:
            problems.append(f"mean_bound must be > 0, got {self.mean_bound}")
        for name in ("value_coef", "entropy_coef", "mean_bound_coef"):
            if not getattr(self, name) >= 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        if not all(math.isfinite(v) for v in (self.log_std_init, self.log_std_min, self.log_std_max)):
            problems.append("log_std_init, log_std_min and log_std_max must be finite")
        elif not self.log_std_min < self.log_std_max:
            problems.append(f"log_std_min ({self.log_std_min}) must be below log_std_max ({self.log_std_max})")
        if self.max_policy_lag is not None and not self.max_policy_lag >= 0:
            problems.append(f"max_policy_lag must be >= 0 or None, got {self.max_policy_lag}")
        if problems:
            raise ValueError("invalid PPOConfig: " + "; ".join(problems))
        if self.minibatch_size > self.rollout_steps:
            warnings.warn(
                f"minibatch_size {self.minibatch_size} > rollout_steps {self.rollout_steps}: one minibatch per epoch",
                stacklevel=2,
            )

    def _action_problems(self) -> list[str]:
        """What is wrong with the action space: ``act_dim`` continuous dims and the discrete ``branches``."""
        problems = []
        if not self.act_dim >= (0 if self.branches else 1):
            problems.append(f"act_dim must be >= 1 unless branches lists discrete actions, got {self.act_dim}")
        if not all(isinstance(size, int) and 1 <= size <= MAX_BRANCH_SIZE for size in self.branches):
            problems.append(f"branches must each be 1..{MAX_BRANCH_SIZE} actions, got {self.branches}")
        elif not sum(self.branches) <= MAX_LOGITS:
            problems.append(f"branches may hold {MAX_LOGITS} actions in all, got {sum(self.branches)}")
        if not len(self.branches) <= MAX_BRANCHES:
            problems.append(f"at most {MAX_BRANCHES} branches, got {len(self.branches)}")
        return problems

    def _conv_problems(self) -> list[str]:
        """What is wrong with the convolutional torso's shape (nothing without one)."""
        if not self.conv and not self.image:
            return []
        if not self.conv:
            return [f"image {self.image} is the conv torso's input: it needs conv (out,kh,kw per layer)"]
        if len(self.image) != 3 or not all(isinstance(v, int) and v >= 1 for v in self.image):
            return [f"conv needs image=height,width,channels of the observation's start, got {self.image}"]
        if not math.prod(self.image) <= self.obs_dim:
            return [f"image {self.image} holds {math.prod(self.image)} entries, more than obs_dim {self.obs_dim}"]
        if len(self.conv) % 3 or not all(isinstance(v, int) and v >= 1 for v in self.conv):
            return [f"conv lists three positive numbers a layer (out_channels, kernel_h, kernel_w), got {self.conv}"]
        height, width, _ = self.image
        for _, kh, kw in self.conv_shape[1] if self.conv_shape else ():
            height, width = height - kh + 1, width - kw + 1
            if height < 1 or width < 1:
                return [f"conv {self.conv}: a {kh}x{kw} kernel does not fit the {self.image} image at that layer"]
        return []

    @property
    def conv_shape(self) -> tuple[tuple[int, int, int], tuple[tuple[int, int, int], ...]] | None:
        """The torso as :class:`agents.networks.ConvTorso` takes it: (image, layers), or None without ``conv``."""
        if not self.conv:
            return None
        h, w, c = self.image
        layers = tuple((self.conv[i], self.conv[i + 1], self.conv[i + 2]) for i in range(0, len(self.conv), 3))
        return (h, w, c), layers

    @property
    def core(self) -> tuple[str, int] | None:
        """The recurrent core as the networks take it: (cell, size), or None for a memoryless actor."""
        return (self.recurrent, self.recurrent_size) if self.recurrent else None

    @property
    def state_size(self) -> int:
        """Entries of one agent's recurrent state (each row carries them after its observation); 0 without a core."""
        if not self.recurrent:
            return 0
        return self.recurrent_size * (2 if self.recurrent == "lstm" else 1)

    @property
    def action_width(self) -> int:
        """The width of a rollout's ``act`` column: the continuous dims, one index per branch, then every branch's mask.

        ``act_dim`` without branches, so a continuous run's rollout is laid out as it always was.
        """
        return self.act_dim + len(self.branches) + sum(self.branches)
