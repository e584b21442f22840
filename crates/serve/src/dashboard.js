"use strict";
// The charts span the last ten minutes up to the newest poll (the server's clock, not the browser's).
const WINDOW_MS = 600000, KEEP = 3000;
const hist = {};
let newest = null;
const el = (tag, attrs = {}, text) => {
  const e = document.createElementNS(["svg", "polyline", "line", "circle", "text"].includes(tag) ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};
const fmt = (v, d = 0) => v === null || v === undefined ? "—" : Number(v).toFixed(d);
const gib = b => b === null || b === undefined ? null : b / 2 ** 30;

// Keeps one poll (a history frame or a snapshot: the same names); false when it is not newer.
function record(snap) {
  const t = snap.timestamp_us / 1000;
  if (newest !== null && t === newest) return false;
  // The server's clock went back, and so did its history.
  if (newest !== null && t < newest) for (const k of Object.keys(hist)) delete hist[k];
  newest = t;
  for (const g of snap.gpus) {
    const h = hist[g.index] ||= { t: [], util: [], sm: [], mem: [], power: [], temp: [] };
    const v = { t, util: g.util_gpu_pct, sm: g.sm_active_pct, mem: gib(g.memory_used_bytes), power: g.power_w, temp: g.temperature_c };
    for (const k of Object.keys(h)) h[k].push(v[k] ?? null);
    while (h.t.length > KEEP || h.t[0] < t - WINDOW_MS) for (const k of Object.keys(h)) h[k].shift();
  }
  return true;
}

// A timeline of the last ten minutes with its value axis in `unit`; a missing reading or a
// pause of several polls breaks the line.
function chart(key, title, times, series, max, unit) {
  const W = 420, H = 130, X0 = 46, X1 = W - 24, Y0 = 8, Y1 = H - 18;
  const fig = el("figure", { "data-chart": key }), svg = el("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  const top = max || Math.max(1, ...series.flatMap(s => s.values.filter(v => v !== null)));
  const x = t => X0 + (t - (newest - WINDOW_MS)) / WINDOW_MS * (X1 - X0);
  const y = v => Y1 - Math.min(v, top) / top * (Y1 - Y0);
  const label = v => unit === "%" ? `${fmt(v)}%` : `${fmt(v, top < 10 && v !== 0 ? 1 : 0)} ${unit}`;
  for (const f of [0, 0.5, 1]) {
    const yy = y(top * f).toFixed(1);
    svg.append(el("line", { class: "tick y", "data-value": top * f, x1: X0, x2: X1, y1: yy, y2: yy, stroke: f ? "#eee" : "#bbb" }));
    svg.append(el("text", { class: "tick y", x: X0 - 4, y: Number(yy) + 4, "text-anchor": "end", "font-size": 10, fill: "#555" }, label(top * f)));
  }
  for (const m of [10, 8, 6, 4, 2, 0]) {
    const xx = x(newest - m * 60000).toFixed(1);
    svg.append(el("line", { class: "tick x", x1: xx, x2: xx, y1: Y0, y2: Y1, stroke: m ? "#f2f2f2" : "#bbb" }));
    const anchor = m === 10 ? "start" : m === 0 ? "end" : "middle";
    svg.append(el("text", { class: "tick x", x: m === 10 ? X0 : m === 0 ? X1 + 20 : xx, y: H - 4, "text-anchor": anchor, "font-size": 10, fill: "#555" }, m ? `-${m} min` : "now"));
  }
  const steps = times.slice(1).map((t, i) => t - times[i]).sort((a, b) => a - b);
  const gap = Math.max(3 * (steps[steps.length >> 1] || 0), 3000);
  for (const s of series) {
    let pts = [];
    // A lone reading between gaps is a dot; a line needs two.
    const flush = () => {
      if (pts.length === 1) { const [cx, cy] = pts[0].split(","); svg.append(el("circle", { cx, cy, r: 2, fill: s.color, "data-name": s.name })); }
      if (pts.length > 1) svg.append(el("polyline", { points: pts.join(" "), fill: "none", stroke: s.color, "stroke-width": 1.3, "data-name": s.name }));
      pts = [];
    };
    s.values.forEach((v, i) => {
      if (v === null || (i > 0 && times[i] - times[i - 1] > gap)) flush();
      if (v !== null) pts.push(`${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`);
    });
    flush();
  }
  const last = series.map(s => `${s.name} ${fmt(s.values[s.values.length - 1], s.digits || 0)}`).join(" · ");
  fig.append(svg, el("figcaption", {}, `${title}: ${last}`));
  return fig;
}

function draw(snap) {
  document.getElementById("status").textContent = new Date(snap.timestamp_us / 1000).toLocaleTimeString();
  document.getElementById("status").className = "muted";
  const steps = snap.steps;
  document.getElementById("steps").textContent = steps
    ? `job ${steps.pid}: ${fmt(steps.steps_per_s, 2)} steps/s` + (steps.data_wait_share === null ? "" : `, data wait ${fmt(100 * steps.data_wait_share)}%`)
    : "";
  const fl = document.getElementById("findings");
  fl.replaceChildren(...snap.findings.map(f => {
    const d = el("div", { class: `finding ${f.severity}` });
    d.append(el("b", {}, `${f.id}: `), document.createTextNode(f.title));
    const ev = Object.entries(f.evidence).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
    d.append(el("div", { class: "muted" }, ev));
    const ul = el("ul"); for (const a of f.advice) ul.append(el("li", {}, a)); d.append(ul);
    return d;
  }));
  const gpus = document.getElementById("gpus");
  gpus.replaceChildren(...snap.gpus.map(g => {
    const h = hist[g.index];
    const card = el("div", { class: "gpu", "data-gpu": g.index });
    const cuda = g.cuda_index === null ? "" : ` (cuda:${g.cuda_index})`;
    const reasons = (g.clocks_event_reasons || []).filter(r => r !== "gpu_idle").join(", ");
    card.append(el("h2", {}, `GPU ${g.index}${cuda} · ${g.name || "unknown"} · ${g.status}` + (reasons ? ` · clocks held: ${reasons}` : "")));
    if (g.status === "lost") {
      card.append(el("div", { class: "finding critical" }, "fell off the bus: nothing it does can be read; it needs a reset or a reboot"));
      return card;
    }
    const charts = el("div", { class: "charts" });
    const util = [{ name: "GPU-Util", color: "#1f77b4", values: h.util }];
    if (h.sm.some(v => v !== null)) util.push({ name: "SM active", color: "#d62728", values: h.sm });
    charts.append(chart("util", "Utilization %", h.t, util, 100, "%"));
    const trend = g.memory_trend_gib_per_min === null ? "" : `, ${fmt(g.memory_trend_gib_per_min, 2)} GiB/min`;
    const oom = snap.findings.find(f => f.evidence.gpu === g.index && f.evidence.time_to_oom_s !== undefined);
    charts.append(chart("memory", `Memory GiB of ${fmt(gib(g.memory_total_bytes))}${trend}` + (oom ? `, OOM in ~${fmt(oom.evidence.time_to_oom_s)} s` : ""),
      h.t, [{ name: "used", color: "#2ca02c", values: h.mem, digits: 1 }], gib(g.memory_total_bytes), "GiB"));
    charts.append(chart("power", `Power W (limit ${fmt(g.power_limit_w)})`, h.t, [{ name: "draw", color: "#9467bd", values: h.power }], g.power_limit_w, "W"));
    charts.append(chart("temperature", "Temperature °C", h.t, [{ name: "GPU", color: "#ff7f0e", values: h.temp }], null, "°C"));
    card.append(charts);
    if (g.processes.length) {
      const t = el("table"), head = el("tr");
      for (const c of ["PID", "user", "name", "class", "GPU memory GiB", "SM %", "main thread"]) head.append(el("th", {}, c));
      t.append(head);
      for (const p of g.processes) {
        const r = el("tr");
        const m = p.main_thread;
        const main = m ? (m.site ? `${m.state} at ${m.site}` : m.state) : "—";
        for (const c of [p.pid, p.user ?? "—", p.name ?? "—", p.class ?? "—", fmt(gib(p.used_memory_bytes), 2), fmt(p.sm_util_pct), main]) r.append(el("td", {}, String(c)));
        t.append(r);
      }
      card.append(t);
    }
    return card;
  }));
  const host = snap.host;
  document.getElementById("host").textContent =
    `host: CPU ${fmt(host.cpu_busy_pct)}%, iowait ${fmt(host.cpu_iowait_pct)}%, memory ${fmt(gib(host.memory_used_bytes), 1)} of ${fmt(gib(host.memory_total_bytes), 1)} GiB`;
}

// The last ten minutes and the latest poll come with the page, so it draws them at once; the
// stream carries the rest.
const history = JSON.parse(document.getElementById("history").textContent);
for (const f of history ? history.frames : []) record(f);
const initial = JSON.parse(document.getElementById("initial").textContent);
if (initial) { record(initial); draw(initial); }
const source = new EventSource("/api/v1/stream");
source.onmessage = m => {
  const s = JSON.parse(m.data);
  // The stream opens with the latest poll, which the page may already have drawn.
  if (record(s)) draw(s);
};
source.onerror = () => { const s = document.getElementById("status"); s.textContent = "disconnected, retrying…"; s.className = "stale"; };
