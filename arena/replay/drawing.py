"""Draw one recorded frame as a Pillow image: the picture that GIFs and MP4s are made of.

The drawing mirrors the browser's ``drawFrame`` (field, tanks with gun, radar, energy bar and
name, bullets, a caption) so an animation shows what the viewer shows. It draws with palette
indices into a ``P`` image: GIF is paletted, and a fixed palette needs no per-frame colour
quantization (faster, and identical colours in every frame). Pillow is imported only when a
frame is drawn, so ``arena`` commands that never draw do not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .recording import Recording

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["PALETTE", "TANK_COLOR", "draw_frame"]

# A fixed palette (GIF is paletted): drawing with indices needs no per-frame quantization.
PALETTE: list[tuple[int, int, int]] = [
    (20, 24, 31),  # 0 background
    (52, 60, 72),  # 1 border
    (230, 230, 230),  # 2 text
    (90, 90, 90),  # 3 dead tank
    (60, 60, 60),  # 4 energy bar background
    (235, 80, 70),  # 5 low energy
    (120, 200, 120),  # 6 energy
    (95, 105, 120),  # 7 radar
    (90, 160, 255),  # 8.. one colour per tank
    (255, 150, 60),
    (120, 220, 120),
    (230, 110, 230),
    (255, 220, 80),
    (80, 220, 220),
    (240, 100, 100),
    (180, 180, 255),
]
TANK_COLOR = 8
"""Palette index of tank 0's colour; tank ``t`` is drawn in ``TANK_COLOR + t % 8``."""


def draw_frame(recording: Recording, i: int, width: int) -> Image.Image:
    """Frame ``i`` as a paletted Pillow image: field, tanks (body, gun, radar, energy, name), bullets, caption."""
    from PIL import Image, ImageDraw, ImageFont

    head = recording.header
    snap = recording.frame(i)
    field_w, field_h, radius = float(head["width"]), float(head["height"]), float(head["tank_radius"])
    scale = width / field_w
    height = round(field_h * scale)
    image = Image.new("P", (width, height), 0)
    image.putpalette([c for rgb in PALETTE for c in rgb])
    draw = ImageDraw.Draw(image)
    size = max(9, round(width / 45))
    font = ImageFont.load_default(size=size)
    draw.rectangle((0, 0, width - 1, height - 1), outline=1)

    def at(x: float, y: float) -> tuple[float, float]:
        """Field coordinates to pixels."""
        return x * scale, (field_h - y) * scale  # y grows north in the game, south in an image

    def ray(x: float, y: float, degrees: float, length: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """The pixel segment from ``(x, y)`` along ``degrees`` (0 = east, counter-clockwise) for ``length``."""
        a = np.radians(degrees)
        return at(x, y), at(x + length * float(np.cos(a)), y + length * float(np.sin(a)))

    r = radius * scale
    taken: list[tuple[float, float, float, float]] = []  # label and bar boxes already drawn: labels avoid them

    def free(box: tuple[float, float, float, float]) -> bool:
        """No label or bar drawn so far overlaps ``box``."""
        return not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken)

    for t, (x, y, heading, gun, radar, energy, alive) in enumerate(snap["tanks"]):
        color = TANK_COLOR + t % 8 if alive else 3
        cx, cy = at(x, y)
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline=color, width=max(1, round(r / 6)))
        draw.line(ray(x, y, heading, radius * 0.8), fill=color, width=max(1, round(r / 8)))  # body direction
        if alive:
            draw.line(ray(x, y, radar, radius * 2.2), fill=7, width=1)
            draw.line(ray(x, y, gun, radius * 1.6), fill=2, width=max(1, round(r / 5)))
            bar_w, top = 2 * r, cy - r - max(4.0, r / 2.5) - 2
            draw.rectangle((cx - r, top, cx + r, top + max(2.0, r / 5)), fill=4)
            draw.rectangle(
                (cx - r, top, cx - r + bar_w * min(energy, 100.0) / 100.0, top + max(2.0, r / 5)), fill=6 if energy > 25 else 5
            )
            taken.append((cx - r, top, cx + r, top + max(2.0, r / 5)))
        # Below the tank, else above its energy bar: the first spot inside the image that no other
        # label or bar takes (tanks close together), shifted sideways to stay inside at the edges.
        left, _, right, bottom = draw.textbbox((0, 0), recording.names[t], font=font, anchor="lt")
        text_w, text_h = right - left, bottom
        x0 = min(max(1.0, cx - text_w / 2), width - text_w - 1)
        spots = [cy + r + 2, cy - r - max(4.0, r / 2.5) - 4 - text_h, cy + r + 4 + text_h]
        inside = [y0 for y0 in spots if 1 <= y0 <= height - text_h - 1] or [min(max(1.0, spots[0]), height - text_h - 1)]
        boxes = [(x0, y0, x0 + text_w, y0 + text_h) for y0 in inside]
        box = next((b for b in boxes if free(b)), boxes[0])
        taken.append(box)
        draw.text((box[0], box[1]), recording.names[t], fill=color, font=font, anchor="lt")
    for b in snap["bullets"]:
        cx, cy = at(b[0], b[1])
        owner = int(b[4])
        draw.ellipse((cx - 2, cy - 2, cx + 2, cy + 2), fill=TANK_COLOR + owner % 8)
    caption = f"round {snap['round']} · tick {snap['tick']}"
    if snap["over"]:
        winner = snap["winner"]
        if winner >= 0:
            caption += f" · {recording.names[winner]} wins"
        else:  # several alive: the tick cap ended it; none alive: they died together
            caption += " · time up" if sum(t[6] for t in snap["tanks"]) > 1 else " · draw"
    draw.text((6, 4), caption, fill=2, font=font)
    return image
