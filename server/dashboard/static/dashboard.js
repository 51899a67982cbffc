// The dashboard page: one read-only observer websocket (arena.observe.v1, JSON text frames),
// hand-drawn canvas line charts, the bot table and the live match (drawFrame from match.js).
// No framework and no CDN: the page must work offline, served by the training server itself.
"use strict";

const PROTOCOL = "arena.observe.v1";
const DEFAULT_MAX_POINTS = 1200;

// Chart specs: which stream ("samples": the server's timer, "updates": one row per trainer
// update) and which keys. An update chart shows whichever of its keys the agent reports
// (PPO: policy_loss/value_loss; DDPG/TD3: actor_loss/critic_loss).
const CHARTS = [
  { id: "mean-return", title: "Mean return (last 100 episodes)", source: "updates",
    series: [{ key: "rollout/ep_rew_mean", label: "mean return", color: "#4fc3f7" }] },
  { id: "win-rate", title: "Win rate (last 100 rounds)", source: "updates", percent: true,
    series: [{ key: "rollout/win_rate_last_100", label: "win rate", color: "#aed581" }] },
  { id: "league-win-rate", title: "League: win rate against each opponent (recent rounds)", source: "updates", percent: true,
    series: [{ key: "league/win_rate/sitting", label: "sitting", color: "#aed581" },
             { key: "league/win_rate/spinner", label: "spinner", color: "#4fc3f7" },
             { key: "league/win_rate/walker", label: "walker", color: "#ffd54f" },
             { key: "league/win_rate/tracker", label: "tracker", color: "#ef5350" },
             { key: "league/win_rate/snapshots", label: "snapshots", color: "#90a4ae" }] },
  { id: "league-rating", title: "League: ratings (mu - 3 sigma)", source: "updates",
    series: [{ key: "league/rating/learner", label: "learner", color: "#f06292" },
             { key: "league/rating/sitting", label: "sitting", color: "#aed581" },
             { key: "league/rating/spinner", label: "spinner", color: "#4fc3f7" },
             { key: "league/rating/walker", label: "walker", color: "#ffd54f" },
             { key: "league/rating/tracker", label: "tracker", color: "#ef5350" }] },
  { id: "policy-loss", title: "Policy / actor loss", source: "updates",
    series: [{ key: "train/policy_loss", label: "policy", color: "#ff8a65" },
             { key: "train/actor_loss", label: "actor", color: "#ba68c8" }] },
  { id: "value-loss", title: "Value / critic loss", source: "updates",
    series: [{ key: "train/value_loss", label: "value", color: "#ffd54f" },
             { key: "train/critic_loss", label: "critic", color: "#4db6ac" }] },
  { id: "policy-version", title: "Policy version", source: "samples", step: true,
    series: [{ key: "policy_version", label: "version", color: "#90caf9" }] },
  { id: "transitions", title: "Transitions / s", source: "samples",
    series: [{ key: "transitions_per_s", label: "received", color: "#4fc3f7" },
             { key: "trained_per_s", label: "trained", color: "#f06292" }] },
  { id: "policy-lag", title: "Policy lag (versions, last update)", source: "samples",
    series: [{ key: "policy_lag_avg", label: "avg", color: "#aed581" },
             { key: "policy_lag_max", label: "max", color: "#ff8a65" }] },
  { id: "loop-lag", title: "Event-loop lag (ms)", source: "samples",
    series: [{ key: "loop_lag_p50_ms", label: "p50", color: "#90a4ae" },
             { key: "loop_lag_p99_ms", label: "p99", color: "#ef5350" }] },
];

function formatNumber(v, percent) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (percent) return `${(v * 100).toFixed(0)}%`;
  const a = Math.abs(v);
  if (Number.isInteger(v) && a < 1e7) return String(v);
  if (a >= 1e5) return v.toExponential(1);
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2);
  if (a === 0) return "0";
  return v.toPrecision(2);
}

// An axis label with just the decimals its tick step needs (0.05 -> 2, 20 -> 0).
function formatTick(v, step, percent) {
  if (percent) return formatNumber(v, true);
  if (Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3)) return v.toExponential(1);
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  return v.toFixed(decimals);
}

// A round tick step (1, 2 or 5 x 10^k) giving about `count` intervals over `span`.
function niceStep(span, count) {
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const n = raw / magnitude;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * magnitude;
}

function formatVersion(generation, version) {
  return generation ? `v${version} · gen ${generation}` : `v${version}`;
}

function formatAge(seconds) {
  if (seconds < 60) return `${seconds.toFixed(0)} s`;
  if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

// A small line chart: x = dashboard seconds, one polyline per series, autoscaled y.
class LineChart {
  constructor(parent, spec, maxPoints) {
    this.spec = spec;
    this.maxPoints = maxPoints;
    this.xs = [];
    this.ys = spec.series.map(() => []);
    const card = document.createElement("div");
    card.className = "card chart";
    const h2 = document.createElement("h2");
    h2.textContent = spec.title;
    this.legend = document.createElement("small");
    h2.append(" ", this.legend);
    this.canvas = document.createElement("canvas");
    this.canvas.id = `chart-${spec.id}`;
    this.canvas.dataset.points = "0";
    card.append(h2, this.canvas);
    parent.append(card);
  }

  get points() {
    return this.xs.length;
  }

  reset() {
    this.xs = [];
    this.ys = this.spec.series.map(() => []);
    this.canvas.dataset.points = "0";
  }

  // Adds one row if it carries any of the chart's keys; returns whether it did.
  push(row) {
    const values = this.spec.series.map((s) => (typeof row[s.key] === "number" ? row[s.key] : null));
    if (values.every((v) => v === null)) return false;
    this.xs.push(row.t);
    values.forEach((v, i) => this.ys[i].push(v));
    if (this.xs.length > this.maxPoints) {
      this.xs.shift();
      this.ys.forEach((ys) => ys.shift());
    }
    this.canvas.dataset.points = String(this.xs.length);
    return true;
  }

  draw() {
    const canvas = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(canvas.clientWidth * dpr));
    const h = Math.max(1, Math.round(canvas.clientHeight * dpr));
    if (canvas.width !== w || canvas.height !== h) {
      canvas.width = w;
      canvas.height = h;
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const cw = w / dpr;
    const ch = h / dpr;
    ctx.clearRect(0, 0, cw, ch);
    const pad = { l: 46, r: 8, t: 6, b: 18 };
    const pw = cw - pad.l - pad.r;
    const ph = ch - pad.t - pad.b;
    let lo = Infinity;
    let hi = -Infinity;
    for (const ys of this.ys) for (const y of ys) if (y !== null) { lo = Math.min(lo, y); hi = Math.max(hi, y); }
    const shown = this.spec.series
      .map((s, i) => {
        const ys = this.ys[i];
        const last = ys.length ? ys[ys.length - 1] : null;
        return last === null ? null : `${s.label} ${formatNumber(last, this.spec.percent)}`;
      })
      .filter((t) => t !== null);
    this.legend.textContent = shown.length ? `· ${shown.join(" · ")}` : "";
    ctx.font = "11px sans-serif";
    ctx.fillStyle = "#8a99a8";
    if (!this.xs.length || !Number.isFinite(lo)) {
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText("waiting for data…", cw / 2, ch / 2);
      return;
    }
    if (this.spec.percent) { lo = Math.min(lo, 0); hi = Math.max(hi, 1); }
    if (hi - lo < 1e-9) hi = lo + Math.max(1, Math.abs(lo) * 0.1); // a flat line: show a unit around it
    const step = niceStep(hi - lo, 3);
    lo = Math.floor(lo / step) * step; // non-negative data keeps a non-negative axis
    hi = Math.ceil(hi / step) * step;
    const x0 = this.xs[0];
    const x1 = Math.max(this.xs[this.xs.length - 1], x0 + 1e-6);
    const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * pw;
    const Y = (y) => pad.t + (1 - (y - lo) / (hi - lo)) * ph;
    ctx.strokeStyle = "#263241";
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let k = 0; lo + k * step <= hi + step * 1e-6; k++) {
      const v = lo + k * step;
      const y = Math.round(Y(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(pad.l, y);
      ctx.lineTo(cw - pad.r, y);
      ctx.stroke();
      ctx.fillText(formatTick(v, step, this.spec.percent), pad.l - 4, y);
    }
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(formatAge(x0), pad.l, ch - pad.b + 4);
    ctx.textAlign = "right";
    ctx.fillText(formatAge(x1), cw - pad.r, ch - pad.b + 4);
    this.spec.series.forEach((s, i) => {
      const ys = this.ys[i];
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 1.6;
      ctx.beginPath();
      let pen = false;
      let prevY = null;
      for (let j = 0; j < ys.length; j++) {
        if (ys[j] === null) { pen = false; continue; }
        const x = X(this.xs[j]);
        const y = Y(ys[j]);
        if (!pen) ctx.moveTo(x, y);
        else if (this.spec.step && prevY !== null) { ctx.lineTo(x, prevY); ctx.lineTo(x, y); }
        else ctx.lineTo(x, y);
        pen = true;
        prevY = y;
      }
      ctx.stroke();
      if (ys.length === 1 && ys[0] !== null) {
        ctx.fillStyle = s.color;
        ctx.fillRect(X(this.xs[0]) - 2, Y(ys[0]) - 2, 4, 4);
      }
    });
  }
}

// State the browser test reads (and a curious user in the console).
const state = {
  connected: false,
  hello: null,
  samples: 0,
  updates: 0,
  statsMessages: 0,
  framesReceived: 0,
  framesDrawn: 0,
  bots: [],
  header: null,
  frame: null,
  charts: {},
};
window.arenaDashboard = state;

const charts = [];
let dirty = false;
let frameDirty = false;

function setText(id, text) {
  const el = document.getElementById(id);
  if (el) el.textContent = text;
}

function setup() {
  const parent = document.getElementById("charts");
  for (const spec of CHARTS) {
    const chart = new LineChart(parent, spec, DEFAULT_MAX_POINTS);
    charts.push(chart);
    state.charts[spec.id] = chart;
  }
  window.addEventListener("resize", () => { dirty = true; frameDirty = true; schedule(); });
  connect(0);
}

function schedule() {
  requestAnimationFrame(render);
}

function render() {
  if (dirty) {
    dirty = false;
    for (const chart of charts) chart.draw();
  }
  if (frameDirty && state.header && state.frame) {
    frameDirty = false;
    const canvas = document.getElementById("match");
    drawFrame(canvas.getContext("2d"), state.header, state.frame);
    state.framesDrawn += 1;
    setText("frame-count", String(state.framesDrawn));
  }
}

function observerUrl() {
  const token = new URLSearchParams(location.search).get("token");
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/observe${token ? `?token=${encodeURIComponent(token)}` : ""}`;
}

function connect(attempt) {
  const ws = new WebSocket(observerUrl(), [PROTOCOL]);
  ws.onopen = () => {
    attempt = 0;
    state.connected = true;
    const conn = document.getElementById("conn");
    conn.textContent = "live";
    conn.className = "badge on";
  };
  ws.onmessage = (event) => {
    let message;
    try {
      message = JSON.parse(event.data);
    } catch (err) {
      return;
    }
    if (message.type === "hello") onHello(message);
    else if (message.type === "stats") onStats(message);
    else if (message.type === "frame") onFrame(message);
  };
  ws.onclose = () => {
    state.connected = false;
    const conn = document.getElementById("conn");
    conn.textContent = "disconnected · retrying";
    conn.className = "badge off";
    const delay = Math.min(10000, 500 * 2 ** attempt);
    setTimeout(() => connect(attempt + 1), delay);
  };
}

function onHello(message) {
  // A (re)connection replays the whole history: start the charts over.
  state.hello = message;
  state.samples = 0;
  state.updates = 0;
  for (const chart of charts) chart.reset();
  setText("agent", message.agent);
  dirty = true;
  schedule();
}

function onStats(message) {
  state.statsMessages += 1;
  for (const row of message.samples) {
    state.samples += 1;
    for (const chart of charts) if (chart.spec.source === "samples") chart.push(row);
  }
  for (const row of message.updates) {
    state.updates += 1;
    for (const chart of charts) if (chart.spec.source === "updates") chart.push(row);
  }
  const last = message.samples.length ? message.samples[message.samples.length - 1] : null;
  if (last) {
    setText("version", formatVersion(last.generation, last.policy_version));
    setText("tps", formatNumber(last.transitions_per_s));
  }
  const health = message.health || {};
  setText("trainer", health.status || "–");
  state.bots = message.bots;
  setText("nbots", String(message.bots.length));
  renderBots(message.bots);
  dirty = true;
  schedule();
}

function renderBots(bots) {
  const tbody = document.querySelector("#bots tbody");
  const rows = bots.map((bot) => {
    const tr = document.createElement("tr");
    tr.dataset.bot = bot.id;
    const cells = [
      [bot.rank === null || bot.rank === undefined ? bot.id : `${bot.id} (rank ${bot.rank})`, ""],
      [String(bot.agents), ""],
      [formatVersion(bot.generation, bot.version), bot.version_is === "delivered" ? "delivered" : ""],
      [formatNumber(bot.transitions_per_s), ""],
      [String(bot.steps), ""],
      [formatAge(bot.connected_s), ""],
      [`${formatAge(bot.last_seen_s)} ago`, bot.last_seen_s > 10 ? "stale" : ""],
    ];
    for (const [text, cls] of cells) {
      const td = document.createElement("td");
      td.textContent = text;
      if (cls) td.className = cls;
      if (cls === "delivered") td.title = "newest version sent to the bot (it acts with it from its next step)";
      tr.append(td);
    }
    tr.title = `${bot.name} · ${bot.client || "unknown client"} · ${bot.reward} rewards`;
    return tr;
  });
  tbody.replaceChildren(...rows);
}

function onFrame(message) {
  if (message.header) {
    state.header = message.header;
    setText("match-info", `· ${message.header.names.join(" vs ")}`);
  }
  if (!state.header) return; // a frame before any header cannot be drawn
  state.frame = message.frame;
  state.framesReceived += 1;
  frameDirty = true;
  schedule();
}

setup();
