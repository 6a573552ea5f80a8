// Live dashboard: on any alarm or summary message, re-read /dashboard/summary.json (debounced):
// count cards, fabrics, top ports and the latest open alarms (new ones appear, cleared ones go).
(function () {
  "use strict";
  const root = document.getElementById("dashboard");
  if (!root) return;
  const fabric = root.dataset.fabric;
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const num = (v, d) => (v === null || v === undefined ? "" : Number(v).toFixed(d));
  // a 0..1 ratio as the heatmap shows it (events_tags.percent): "38.4 %"
  const pct = (v) => (v === null || v === undefined ? "–" : `${(Number(v) * 100).toFixed(1)} %`);
  let timer = null;

  function rows(tbody, items, render, emptyText, cols) {
    tbody.innerHTML = items.length ? items.map(render).join("") : `<tr><td colspan="${cols}" class="muted">${emptyText}</td></tr>`;
  }

  async function refresh() {
    timer = null;
    const resp = await fetch("/dashboard/summary.json" + (fabric ? "?fabric=" + fabric : ""), { credentials: "same-origin" });
    if (!resp.ok) return;
    const s = await resp.json();
    for (const [sev, n] of Object.entries(s.alarms)) {
      const el = document.querySelector(`#alarm-counts [data-sev="${sev}"]`); if (el) el.textContent = n;
    }
    rows(document.querySelector("#fabric-summary tbody"), s.fabrics, (f) =>
      `<tr data-fabric="${f.id}"><td><a href="${esc(f.url)}">${esc(f.name)}</a></td><td>${f.switches}</td><td>${f.cas}</td><td>${f.links}</td>` +
      `<td>${f.master_sm_guid ? `${esc(f.master_sm || "")} <span class="mono muted">${esc(f.master_sm_guid)}</span> lid ${f.master_sm_lid}` : f.live ? '<span class="sev-critical">none known</span>' : '<span class="muted" title="imported from a file: no live data">imported snapshot</span>'}</td>` +
      `<td>${esc(f.last_discovery_display || "never")}</td></tr>`, "No fabric yet.", 6);
    rows(document.querySelector("#top-congested tbody"), s.top_congested, (p) =>
      `<tr><td>${esc(p.fabric_name)}</td><td><a href="${esc(p.url)}">${esc(p.port)}</a></td><td>${pct(p.congestion)}</td><td>${pct(p.utilisation)}</td><td>${num(p.xmit_wait_per_s, 0)}</td></tr>`,
      "no congestion measured", 5);
    rows(document.querySelector("#top-errors tbody"), s.top_errors, (p) =>
      `<tr><td>${esc(p.fabric_name)}</td><td><a href="${esc(p.url)}">${esc(p.port)}</a></td><td>${p.errors_last_sweep}</td><td>${p.errors_total}</td></tr>`,
      "no port errors", 4);
    const fmt = (iso) => (iso ? iso.replace("T", " ").slice(0, 19) : "");
    const cap = (s) => s.charAt(0).toUpperCase() + s.slice(1);
    rows(document.querySelector("#recent-alarms tbody"), s.recent_alarms || [], (a) =>
      `<tr data-alarm="${a.id}"><td class="sev-${esc(a.severity)}">${esc(cap(a.severity))}</td>` +
      `<td><a href="${esc(a.url)}">${esc(a.name)}</a></td><td>${esc(a.object)}</td><td>${esc(a.fabric_name)}</td>` +
      `<td>${esc(a.state_text)}</td><td>${esc(fmt(a.last_seen))}</td><td>${a.count}</td></tr>`,
      "No open alarms.", 7);
  }

  WeftLive.connect(fabric ? `/ws/alarms/${fabric}/` : "/ws/alarms/", () => {
    if (!timer) timer = setTimeout(refresh, 300);
  });
})();
