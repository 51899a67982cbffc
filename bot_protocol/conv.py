"""A convolutional torso in front of any actor's MLP: its wire description and its numpy forward pass.

Why: a board, a grid world or a small screen is an image, and a pattern on it (four in a row,
a wall ahead) means the same wherever it lies. An MLP over the flattened image must learn each
pattern at every place separately; a convolution learns it once and slides it. The torso is
optional and comes before the MLP of every kind of actor, so the rest of the contract (outputs,
masks, log-probs) is unchanged.

Layout (docs/protocol.md §4.1): the first ``H*W*C`` observation entries are an image stored
row-major as ``(H, W, C)``, channels last (how games and gymnasium's ``Box`` flatten one). Each
layer ``c{i}`` is a stride-1 convolution without padding: ``c{i}.weight`` (out, in, kh, kw) and
``c{i}.bias`` (out,), followed by the actor's activation. The last layer's output, flattened in
``(channel, row, column)`` order, then the observation's remaining entries, are the MLP's input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from .errors import ErrorCode, ProtocolError

__all__ = ["MAX_CONV_LAYERS", "MAX_IMAGE", "ConvSpec"]

MAX_CONV_LAYERS = 8
MAX_CHANNELS = 4096
MAX_IMAGE = 4096
"""The most observation entries an image may take: ``hello``'s ``obs_dim`` bound."""


@dataclass(frozen=True)
class ConvSpec:
    """The torso's shape: the image it reads and each layer's ``(out_channels, kernel_h, kernel_w)``."""

    image: tuple[int, int, int]
    """(H, W, C) of the image at the start of the observation, channels last."""
    layers: tuple[tuple[int, int, int], ...]

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(problem)

    def problem(self) -> str | None:
        """What is wrong with this shape, or None."""
        if len(self.image) != 3 or not all(type(v) is int and v >= 1 for v in self.image):
            return f"a conv image is (height, width, channels), each >= 1, got {list(self.image)}"
        if self.image_size > MAX_IMAGE:
            return f"a conv image holds at most {MAX_IMAGE} entries, got {'x'.join(map(str, self.image))}"
        if not 1 <= len(self.layers) <= MAX_CONV_LAYERS:
            return f"a conv torso has 1..{MAX_CONV_LAYERS} layers, got {len(self.layers)}"
        height, width, _ = self.image
        for i, layer in enumerate(self.layers):
            if len(layer) != 3 or not all(type(v) is int and v >= 1 for v in layer) or layer[0] > MAX_CHANNELS:
                return f"conv layer {i} is (out_channels 1..{MAX_CHANNELS}, kernel_h, kernel_w), got {list(layer)}"
            height, width = height - layer[1] + 1, width - layer[2] + 1
            if height < 1 or width < 1:
                return f"conv layer {i}'s {layer[1]}x{layer[2]} kernel does not fit the {self.image[0]}x{self.image[1]} image"
        return None

    @property
    def image_size(self) -> int:
        """How many observation entries the image takes: H * W * C."""
        height, width, channels = self.image
        return height * width * channels

    @property
    def out_shape(self) -> tuple[int, int, int]:
        """The last layer's output as (channels, height, width)."""
        height, width, _ = self.image
        for _, kh, kw in self.layers:
            height, width = height - kh + 1, width - kw + 1
        return self.layers[-1][0], height, width

    @property
    def features(self) -> int:
        """How many MLP inputs the torso gives: the last layer's output, flattened."""
        channels, height, width = self.out_shape
        return channels * height * width

    def in_channels(self, i: int) -> int:
        """Channels into layer ``i``."""
        return self.image[2] if i == 0 else self.layers[i - 1][0]

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the torso needs, with its shape."""
        shapes: dict[str, tuple[int, ...]] = {}
        for i, (out, kh, kw) in enumerate(self.layers):
            shapes[f"c{i}.weight"] = (out, self.in_channels(i), kh, kw)
            shapes[f"c{i}.bias"] = (out,)
        return shapes

    def to_wire(self) -> dict[str, Any]:
        return {"image": list(self.image), "layers": [list(layer) for layer in self.layers]}

    @classmethod
    def from_wire(cls, m: Any) -> ConvSpec:
        """The ``conv`` field of an architecture, checked (``bad_field`` otherwise)."""
        if not isinstance(m, Mapping) or not isinstance(m.get("image"), list | tuple):
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'conv' must be a map with 'image' and 'layers'")
        layers = m.get("layers")
        if not isinstance(layers, list | tuple) or not all(isinstance(layer, list | tuple) for layer in layers):
            raise ProtocolError(ErrorCode.BAD_FIELD, "field 'conv.layers' must be an array of [out, kh, kw] arrays")
        try:
            return cls(tuple(m["image"]), tuple(tuple(layer) for layer in layers))  # type: ignore[arg-type]
        except ValueError as exc:
            raise ProtocolError(ErrorCode.BAD_FIELD, f"field 'conv': {exc}") from None

    def forward(
        self,
        obs: NDArray[np.float32],
        tensors: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]],
        activation: Callable[[NDArray[np.float32]], NDArray[np.float32]],
    ) -> NDArray[np.float32]:
        """The MLP's input for a batch (n, obs_dim): every layer as one matrix product over the image's windows.

        ``tensors`` holds each layer's ``(weight (out, in, kh, kw), bias (out,))``; ``activation`` may work in place.
        """
        n = len(obs)
        height, width, channels = self.image
        x = obs[:, : self.image_size].reshape(n, height, width, channels)
        for weight, bias in tensors:
            out, _, kh, kw = weight.shape
            windows = sliding_window_view(x, (kh, kw), axis=(1, 2))  # (n, H', W', in, kh, kw): weight's own order
            rows, cols = windows.shape[1:3]
            y = windows.reshape(n * rows * cols, -1) @ weight.reshape(out, -1).T
            y += bias
            x = activation(y).reshape(n, rows, cols, out)
        flat = x.transpose(0, 3, 1, 2).reshape(n, -1)  # (channel, row, column) order, as torch flattens
        if obs.shape[1] == self.image_size:
            return np.ascontiguousarray(flat)
        return np.concatenate([flat, obs[:, self.image_size :]], axis=1)
