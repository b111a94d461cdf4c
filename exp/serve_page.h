// The page `dl-exp serve` sends: it fetches the JSON API (the same objects as
// `dl-exp --json`) every two seconds and draws the experiments, the selected one's trials,
// metric curves (inline SVG) and events. Each trial row carries data-trial and
// data-state so that a test can compare the page with `dl-exp show --json`. A search's
// rungs (/api/rungs) are dashed lines at each rung's step on the curve of the metric
// they rank by, each a <g data-rung data-promoted data-stopped> for the tests.
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
.pending, .waiting, .paused, .held { color: #a0a000; } .stopped { color: #777; }
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
function chart(metrics, name, rungs) {
  const pts = metrics.filter(m => m.name === name);
  if (!pts.length) return "";
  const W = 700, H = 300, P = 40;
  const marks = rungs.metric === name ? rungs.rungs : [];
  const xs = pts.map(m => m.step).concat(marks.map(r => r.budget - 1)), ys = pts.map(m => m.value);
  const x0 = Math.min(...xs), x1 = Math.max(...xs) || 1, y0 = Math.min(...ys), y1 = Math.max(...ys);
  const X = x => P + (W - 2 * P) * (x - x0) / ((x1 - x0) || 1);
  const Y = y => H - P - (H - 2 * P) * (y - y0) / ((y1 - y0) || 1);
  const trials = [...new Set(pts.map(m => m.trial))];
  let svg = `<svg width="${W}" height="${H}" style="border:1px solid #ccc">` +
    `<text x="${P}" y="20">${esc(name)}</text>` +
    `<text x="5" y="${P}">${y1.toPrecision(4)}</text><text x="5" y="${H - P}">${y0.toPrecision(4)}</text>`;
  marks.forEach((r, k) => {
    const x = X(r.budget - 1), ids = l => l.map(p => p.trial).join(" ");
    const text = `rung ${r.rung}: ${r.budget} steps` + (r.promoted.length ? `, ${r.promoted.length} promoted` : "") +
      (r.stopped.length ? `, ${r.stopped.length} stopped` : "") + (r.completed.length ? `, ${r.completed.length} completed` : "");
    svg += `<g data-rung="${r.rung}" data-promoted="${esc(ids(r.promoted))}" data-stopped="${esc(ids(r.stopped))}">` +
      `<line x1="${x}" y1="${P}" x2="${x}" y2="${H - P}" stroke="#777" stroke-dasharray="4 3"/>` +
      `<text x="${k === marks.length - 1 && k > 0 ? x - 3 : x + 3}" y="${H - P - 4 - 14 * (k % 4)}" font-size="11" fill="#555"` +
      `${k === marks.length - 1 && k > 0 ? ' text-anchor="end"' : ""}>${esc(text)}</text>`;
    for (const p of r.promoted.concat(r.stopped)) {
      if (p.value === null) continue;
      const up = r.promoted.includes(p);
      svg += `<text x="${x - 4}" y="${Y(p.value) + 4}" font-size="12" fill="${up ? "#26a269" : "#c01c28"}">` +
        `${up ? "\u25b2" : "\u00d7"}<title>${esc(p.trial)} ${up ? "promoted" : "stopped"}</title></text>`;
    }
    svg += "</g>";
  });
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
  const rungs = await (await fetch("/api/rungs/" + encodeURIComponent(id))).json();
  let html = `<h2>experiment ${esc(id)}</h2><table id="trials"><tr><th>trial</th><th>state</th><th>job</th><th>restarts</th><th>step</th><th>metrics</th><th>hparams</th></tr>`;
  for (const t of show.trials) {
    html += `<tr data-trial="${esc(t.id)}" data-state="${esc(t.state)}"><td>${esc(t.id)}</td><td class="${esc(t.state)}">${esc(t.state)}</td>` +
      `<td>${esc(t.job_id ?? "-")}</td><td>${t.restarts}</td><td>${t.step ?? "-"}</td>` +
      `<td>${esc(Object.entries(t.metrics).map(([k, v]) => k + "=" + v.toPrecision(6)).join(" "))}</td><td>${esc(JSON.stringify(t.hparams))}</td></tr>`;
  }
  html += "</table><h2>curves</h2>";
  for (const name of [...new Set(metrics.map(m => m.name))].sort()) html += chart(metrics, name, rungs) + " ";
  html += "<h2>events</h2><table><tr><th>time</th><th>trial</th><th>event</th><th>reason</th></tr>" +
    show.events.map(e => `<tr><td>${new Date(e.time * 1000).toLocaleString()}</td><td>${esc(e.trial)}</td><td>${esc(e.kind)}</td><td>${esc(e.reason)}</td></tr>`).join("") + "</table>";
  document.getElementById("experiment").innerHTML = html;
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
)html";

}  // namespace dl::exp
