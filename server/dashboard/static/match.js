// Drawing one tank-arena frame on a canvas.
//
// drawFrame(ctx, header, frame) takes EXACTLY the format of arena/games/tank/snapshot.py:
//   header: {width, height, tank_radius, names: [..]}                       (once per match)
//   frame:  {round, tick, tanks: [[x, y, heading, gun_heading, radar_heading, energy, alive], ..],
//            bullets: [[x, y, heading, power, owner], ..], over, winner}
// Angles are degrees, 0 = east, 90 = north; y grows north, origin bottom-left. The canvas
// is y-down, so every y is flipped. The same function draws live frames (the dashboard's
// observer socket) and recorded ones (`arena replay`): keep it free of dashboard state.
"use strict";

const TANK_COLORS = ["#4fc3f7", "#ff8a65", "#aed581", "#ba68c8", "#ffd54f", "#4db6ac", "#f06292", "#90a4ae"];
const START_ENERGY = 100; // TankRules.start_energy: a full energy bar

function drawFrame(ctx, header, frame) {
  const canvas = ctx.canvas;
  const cw = canvas.width;
  const ch = canvas.height;
  const scale = Math.min(cw / header.width, ch / header.height);
  const ox = (cw - header.width * scale) / 2;
  const oy = (ch - header.height * scale) / 2;
  const X = (x) => ox + x * scale;
  const Y = (y) => oy + (header.height - y) * scale;
  const dir = (deg) => [Math.cos((deg * Math.PI) / 180), -Math.sin((deg * Math.PI) / 180)]; // canvas y-down
  const r = header.tank_radius * scale;

  ctx.save();
  ctx.fillStyle = "#11161c";
  ctx.fillRect(0, 0, cw, ch);
  ctx.fillStyle = "#1b2530";
  ctx.fillRect(ox, oy, header.width * scale, header.height * scale);
  ctx.strokeStyle = "#2c3a48";
  ctx.lineWidth = 1;
  for (let gx = 100; gx < header.width; gx += 100) {
    ctx.beginPath();
    ctx.moveTo(X(gx), Y(0));
    ctx.lineTo(X(gx), Y(header.height));
    ctx.stroke();
  }
  for (let gy = 100; gy < header.height; gy += 100) {
    ctx.beginPath();
    ctx.moveTo(X(0), Y(gy));
    ctx.lineTo(X(header.width), Y(gy));
    ctx.stroke();
  }

  frame.tanks.forEach((tank, i) => {
    const [x, y, heading, gun, radar, energy, alive] = tank;
    const color = TANK_COLORS[i % TANK_COLORS.length];
    const cx = X(x);
    const cy = Y(y);
    ctx.globalAlpha = alive ? 1 : 0.35;
    // radar: a faint long beam
    const [rx, ry] = dir(radar);
    ctx.strokeStyle = color;
    ctx.globalAlpha = alive ? 0.35 : 0.1;
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(cx, cy);
    ctx.lineTo(cx + rx * r * 5, cy + ry * r * 5);
    ctx.stroke();
    ctx.globalAlpha = alive ? 1 : 0.35;
    // body: a circle with a heading notch
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.arc(cx, cy, r, 0, 2 * Math.PI);
    ctx.fill();
    const [hx, hy] = dir(heading);
    ctx.strokeStyle = "#11161c";
    ctx.lineWidth = Math.max(2, r * 0.25);
    ctx.beginPath();
    ctx.moveTo(cx + hx * r * 0.3, cy + hy * r * 0.3);
    ctx.lineTo(cx + hx * r, cy + hy * r);
    ctx.stroke();
    // gun: a barrel past the body
    const [gx, gy] = dir(gun);
    ctx.strokeStyle = "#eceff1";
    ctx.lineWidth = Math.max(2, r * 0.3);
    ctx.beginPath();
    ctx.moveTo(cx, cy);
    ctx.lineTo(cx + gx * r * 1.7, cy + gy * r * 1.7);
    ctx.stroke();
    if (!alive) {
      ctx.strokeStyle = "#ef5350";
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(cx - r, cy - r);
      ctx.lineTo(cx + r, cy + r);
      ctx.moveTo(cx + r, cy - r);
      ctx.lineTo(cx - r, cy + r);
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
  });
  drawLabels(ctx, header, frame, X, Y, r);

  frame.bullets.forEach((bullet) => {
    const [x, y, , power, owner] = bullet;
    ctx.fillStyle = TANK_COLORS[owner % TANK_COLORS.length];
    ctx.strokeStyle = "#ffffff";
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.arc(X(x), Y(y), Math.max(2, (1.5 + power) * scale * 1.5), 0, 2 * Math.PI);
    ctx.fill();
    ctx.stroke();
  });

  ctx.fillStyle = "#eceff1";
  ctx.font = "13px sans-serif";
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  let status = `round ${frame.round} · tick ${frame.tick}`;
  if (frame.over) {
    const winner = frame.winner >= 0 ? (header.names && header.names[frame.winner]) || `tank ${frame.winner}` : "nobody";
    status += ` · over, winner: ${winner}`;
  }
  ctx.fillText(status, ox + 8, oy + 6);
  ctx.restore();
}

if (typeof module !== "undefined") {
  module.exports = { drawFrame };
}

// Energy bars and name labels, placed after every body is drawn: each label goes below its tank,
// or above its bar when that spot is taken by another label or bar (tanks close together), and is
// kept inside the canvas (a tank at the field's edge keeps a readable label).
function drawLabels(ctx, header, frame, X, Y, r) {
  const taken = [];
  const overlaps = (a) => taken.some((b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h);
  const width = ctx.canvas.width;
  const height = ctx.canvas.height;
  const fontPx = Math.max(10, Math.round(r * 0.7));
  ctx.font = `${fontPx}px sans-serif`;
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  const clampX = (x, w) => Math.max(2, Math.min(width - w - 2, x));
  const clampY = (y, h) => Math.max(2, Math.min(height - h - 2, y));
  frame.tanks.forEach((tank, i) => {
    const [x, y, , , , energy, alive] = tank;
    const cx = X(x);
    const cy = Y(y);
    ctx.globalAlpha = alive ? 1 : 0.35;
    const barW = r * 2.4;
    const barH = Math.max(3, r * 0.22);
    const bar = { x: clampX(cx - barW / 2, barW), y: clampY(cy - r - barH - 6, barH), w: barW, h: barH };
    const level = Math.max(0, Math.min(1, energy / START_ENERGY));
    ctx.fillStyle = "#37474f";
    ctx.fillRect(bar.x, bar.y, bar.w, bar.h);
    ctx.fillStyle = level > 0.5 ? "#66bb6a" : level > 0.2 ? "#ffca28" : "#ef5350";
    ctx.fillRect(bar.x, bar.y, bar.w * level, bar.h);
    taken.push(bar);
    const name = (header.names && header.names[i]) || `tank ${i}`;
    const text = `${name} ${energy.toFixed(0)}`;
    const w = ctx.measureText(text).width;
    const h = fontPx + 2;
    const below = { x: clampX(cx - w / 2, w), y: clampY(cy + r + 4, h), w, h };
    const above = { x: clampX(cx - w / 2, w), y: clampY(bar.y - h - 2, h), w, h };
    const spot = !overlaps(below) ? below : !overlaps(above) ? above : { ...below, y: clampY(below.y + h, h) };
    taken.push(spot);
    ctx.fillStyle = "#cfd8dc";
    ctx.fillText(text, spot.x, spot.y);
  });
  ctx.globalAlpha = 1;
}
