/* Device history charts (uPlot, vendored): the chosen interface's rates (in/out bytes/s) and
 * utilisation/congestion, and one chart per sensor kind (temperatures, fans, power...).
 * Data: GET <history-url>?start=-1h&end=now&interface=<ifIndex> (devices.services.history).
 * Refreshes every 30 s. Hooks: #device-charts[data-state|data-points|data-sensor-charts]. */
(function () {
  "use strict";
  const root = document.getElementById("device-charts");
  if (!root || typeof uPlot === "undefined") return;
  const status = root.querySelector(".pc-status");
  const select = document.getElementById("dc-interface");
  const sensorBox = root.querySelector("[data-sensor-charts]");
  let range = "-1h";
  let charts = {};

  function fmtBytes(v) {
    if (v === null || v === undefined) return "–";
    const u = ["B/s", "KB/s", "MB/s", "GB/s", "TB/s"];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < u.length - 1) { v /= 1000; i++; }
    return `${v.toFixed(i ? 1 : 0)} ${u[i]}`;
  }
  const pct = (v) => (v === null || v === undefined ? "–" : `${(v * 100).toFixed(1)} %`);
  const tz = root.dataset.tz || "UTC";
  const pad = (n) => String(n).padStart(2, "0");
  const zoned = (epoch) => uPlot.tzDate(new Date(epoch * 1000), tz);
  function fmtTime(epoch) {
    if (epoch === null || epoch === undefined) return "–";
    const d = zoned(epoch);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  const axis = { stroke: "#8b98a5", grid: { stroke: "#2d3843", width: 1 }, ticks: { stroke: "#2d3843" } };
  const xaxis = Object.assign({}, axis, {
    space: 110, size: 40, values: (u, splits) => splits.map((e) => { const d = zoned(e); return `${pad(d.getHours())}:${pad(d.getMinutes())}`; }),
  });
  const xseries = { value: (u, v) => fmtTime(v) };
  const PALETTE = ["#4aa3ff", "#3fb950", "#d29922", "#f85149", "#a371f7", "#3fc1c9", "#f778ba", "#ffa657", "#8b98a5", "#79c0ff"];
  const width = () => Math.max(320, root.clientWidth - 40);
  const base = () => ({ width: width(), height: 170, cursor: { sync: { key: "device" } }, legend: { live: true } });

  function draw(name, spec, data, target) {
    if (charts[name] && charts[name].series.length === spec.series.length) charts[name].setData(data);
    else {
      if (charts[name]) charts[name].destroy();
      target.replaceChildren();
      charts[name] = new uPlot(spec, data, target);
    }
  }

  function drawSensors(doc) {
    const kinds = new Map();
    for (const s of doc.sensors) {
      if (!kinds.has(s.kind)) kinds.set(s.kind, []);
      kinds.get(s.kind).push(s);
    }
    for (const [kind, list] of kinds) {
      let box = sensorBox.querySelector(`[data-kind="${CSS.escape(kind)}"]`);
      if (!box) {
        box = document.createElement("div");
        box.className = "pc-chart";
        box.dataset.kind = kind;
        const h = document.createElement("h3");
        h.textContent = `${kind} (${list[0].unit || "value"})`;
        const target = document.createElement("div");
        box.append(h, target);
        sensorBox.append(box);
      }
      const unit = list[0].unit || "";
      const spec = Object.assign(base(), {
        series: [xseries, ...list.map((s, i) => ({ label: s.name, stroke: PALETTE[i % PALETTE.length], width: 1.5,
          value: (u, v) => (v === null || v === undefined ? "–" : `${Number(v).toLocaleString()} ${unit}`) }))],
        axes: [xaxis, Object.assign({}, axis, { size: 60 })],
      });
      draw("sensor:" + kind, spec, [doc.t, ...list.map((s) => s.values)], box.lastChild);
    }
    sensorBox.dataset.sensorCharts = String(kinds.size);
    root.dataset.sensorCharts = String(kinds.size);
  }

  async function load() {
    const url = new URL(root.dataset.historyUrl, location.href);
    url.searchParams.set("start", range);
    url.searchParams.set("end", "now");
    if (select && select.value) url.searchParams.set("interface", select.value);
    try {
      const resp = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      const doc = await resp.json();
      const i = doc.interface || { in_bytes_per_s: [], out_bytes_per_s: [], utilisation: [], congestion: [] };
      const none = doc.t.map(() => null);
      draw("rates", Object.assign(base(), {
        series: [xseries, { label: "in", stroke: "#3fb950", width: 1.5, value: (u, v) => fmtBytes(v) },
          { label: "out", stroke: "#4aa3ff", width: 1.5, value: (u, v) => fmtBytes(v) }],
        axes: [xaxis, Object.assign({}, axis, { size: 90, values: (u, vals) => vals.map(fmtBytes) })],
      }), [doc.t, doc.interface ? i.in_bytes_per_s : none, doc.interface ? i.out_bytes_per_s : none], root.querySelector('[data-chart="rates"]'));
      draw("load", Object.assign(base(), {
        scales: { y: { range: [0, 1] } },
        series: [xseries, { label: "utilisation", stroke: "#21918c", width: 1.5, value: (u, v) => pct(v) },
          { label: "congestion", stroke: "#f85149", width: 1.5, value: (u, v) => pct(v) }],
        axes: [xaxis, Object.assign({}, axis, { size: 55, values: (u, vals) => vals.map((v) => `${Math.round(v * 100)} %`) })],
      }), [doc.t, doc.interface ? i.utilisation : none, doc.interface ? i.congestion : none], root.querySelector('[data-chart="load"]'));
      drawSensors(doc);
      root.dataset.points = String(doc.t.length);
      root.dataset.state = "ok";
      status.textContent = doc.t.length ? `${doc.t.length} samples (${doc.resolution})` : "no samples in this range yet";
    } catch (err) {
      root.dataset.state = "error";
      status.textContent = `could not load the history (${err.message})`;
    }
  }

  for (const b of root.querySelectorAll("button[data-range]")) {
    b.addEventListener("click", () => {
      range = b.dataset.range;
      root.querySelectorAll("button[data-range]").forEach((x) => x.classList.toggle("active", x === b));
      load();
    });
  }
  if (select) select.addEventListener("change", load);
  window.addEventListener("resize", () => { for (const c of Object.values(charts)) c.setSize({ width: width(), height: 170 }); });
  load();
  setInterval(load, 30000);
  window.weftDeviceCharts = { reload: load, get charts() { return charts; } };
})();
