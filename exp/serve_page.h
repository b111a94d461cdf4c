// The page `dl-exp serve` sends: it fetches the JSON API (the same objects as
// `dl-exp --json`) every two seconds and draws the experiments, the selected one's trials,
// metric curves (inline SVG) and events. Each trial row carries data-trial and
// data-state so that a test can compare the page with `dl-exp show --json`.
#pragma once

namespace dl::exp {

inline constexpr const char* kServePage = R"html(<!doctype html>
<html><head><meta charset="utf-8"><title>dl-exp</title>
<style>
body { font: 14px sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 1.5em; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: left; }
th { background: #eef; } a { color: #1a5fb4; }
.completed { color: #26a269; } .failed { color: #c01c28; } .running { color: #1a5fb4; }
.pending, .paused { color: #a0a000; } .stopped { color: #777; }
</style></head>
<body>
<h1>slurm-dl experiments</h1>
<div id="experiments"></div>
<div id="experiment"></div>
<script>
const colors = ["#1a5fb4", "#c01c28", "#26a269", "#e66100", "#613583", "#865e3c"];
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
function selected(list) {
  const want = new URLSearchParams(location.search).get("exp");
  return want || (list.length ? list[0].id : null);
}
function chart(metrics, name) {
  const pts = metrics.filter(m => m.name === name);
  if (!pts.length) return "";
  const W = 700, H = 300, P = 40;
  const xs = pts.map(m => m.step), ys = pts.map(m => m.value);
  const x0 = Math.min(...xs), x1 = Math.max(...xs) || 1, y0 = Math.min(...ys), y1 = Math.max(...ys);
  const X = x => P + (W - 2 * P) * (x - x0) / ((x1 - x0) || 1);
  const Y = y => H - P - (H - 2 * P) * (y - y0) / ((y1 - y0) || 1);
  const trials = [...new Set(pts.map(m => m.trial))];
  let svg = `<svg width="${W}" height="${H}" style="border:1px solid #ccc">` +
    `<text x="${P}" y="20">${esc(name)}</text>` +
    `<text x="5" y="${P}">${y1.toPrecision(4)}</text><text x="5" y="${H - P}">${y0.toPrecision(4)}</text>`;
  trials.forEach((t, i) => {
    const line = pts.filter(m => m.trial === t).map(m => `${X(m.step)},${Y(m.value)}`).join(" ");
    const c = colors[i % colors.length];
    svg += `<polyline fill="none" stroke="${c}" stroke-width="2" points="${line}"/>` +
      `<text x="${W - P - 80}" y="${20 + 16 * i}" fill="${c}">${esc(t)}</text>`;
  });
  return svg + "</svg>";
}
async function refresh() {
  const list = (await (await fetch("/api/experiments")).json()).experiments;
  document.getElementById("experiments").innerHTML = "<table><tr><th>experiment</th><th>trials</th><th>states</th></tr>" +
    list.map(e => `<tr data-experiment="${esc(e.id)}"><td><a href="?exp=${encodeURIComponent(e.id)}">${esc(e.id)}</a></td>` +
      `<td>${e.trials}</td><td>${esc(Object.entries(e.states).map(([s, n]) => s + "=" + n).join(" "))}</td></tr>`).join("") + "</table>";
  const id = selected(list);
  if (!id) return;
  const show = await (await fetch("/api/show/" + encodeURIComponent(id))).json();
  const metrics = (await (await fetch("/api/metrics/" + encodeURIComponent(id))).json()).metrics;
  let html = `<h2>experiment ${esc(id)}</h2><table id="trials"><tr><th>trial</th><th>state</th><th>job</th><th>restarts</th><th>step</th><th>metrics</th><th>hparams</th></tr>`;
  for (const t of show.trials) {
    html += `<tr data-trial="${esc(t.id)}" data-state="${esc(t.state)}"><td>${esc(t.id)}</td><td class="${esc(t.state)}">${esc(t.state)}</td>` +
      `<td>${esc(t.job_id ?? "-")}</td><td>${t.restarts}</td><td>${t.step ?? "-"}</td>` +
      `<td>${esc(Object.entries(t.metrics).map(([k, v]) => k + "=" + v.toPrecision(6)).join(" "))}</td><td>${esc(JSON.stringify(t.hparams))}</td></tr>`;
  }
  html += "</table><h2>curves</h2>";
  for (const name of [...new Set(metrics.map(m => m.name))].sort()) html += chart(metrics, name) + " ";
  html += "<h2>events</h2><table><tr><th>time</th><th>trial</th><th>event</th><th>reason</th></tr>" +
    show.events.map(e => `<tr><td>${new Date(e.time * 1000).toLocaleString()}</td><td>${esc(e.trial)}</td><td>${esc(e.kind)}</td><td>${esc(e.reason)}</td></tr>`).join("") + "</table>";
  document.getElementById("experiment").innerHTML = html;
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
)html";

}  // namespace dl::exp
