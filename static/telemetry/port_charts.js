/* Port time-series charts (uPlot, vendored): rates, utilisation/congestion, PortXmitWait/errors.
 * Data: GET <series-url>?start=-1h&end=now -> {t:[epoch s], xmit_bytes_per_s:[...], ...}.
 * Refreshes every 10 s while the range ends now. Hook: #port-charts[data-points] = points shown. */
(function () {
  "use strict";
  const root = document.getElementById("port-charts");
  if (!root || typeof uPlot === "undefined") return;
  const status = root.querySelector(".pc-status");
  let range = "-1h", charts = {}, timer = null;

  function fmtBytes(v) {
    if (v === null || v === undefined) return "–";
    const u = ["B/s", "KB/s", "MB/s", "GB/s", "TB/s"];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < u.length - 1) { v /= 1000; i++; }
    return `${v.toFixed(i ? 1 : 0)} ${u[i]}`;
  }
  const pct = (v) => (v === null || v === undefined ? "–" : `${(v * 100).toFixed(1)} %`);
  const num = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString());
  // Times as on the other pages: ISO dates, 24-hour clock, in the server's TIME_ZONE (data-tz).
  const tz = root.dataset.tz || "UTC";
  const pad = (n) => String(n).padStart(2, "0");
  const zoned = (epoch) => uPlot.tzDate(new Date(epoch * 1000), tz);
  const isoDay = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const isoClock = (d, seconds) => `${pad(d.getHours())}:${pad(d.getMinutes())}` + (seconds ? `:${pad(d.getSeconds())}` : "");
  /** "2026-12-01 22:15:07": the legend's time of the cursor. */
  function fmtTime(epoch) {
    if (epoch === null || epoch === undefined) return "–";
    const d = zoned(epoch);
    return `${isoDay(d)} ${isoClock(d, true)}`;
  }
  /** Axis ticks: "22:15" (":07" seconds when ticks are under a minute apart), the date above
   * the first tick and wherever the day changes. */
  function fmtTicks(u, splits, axisIdx, space, incr) {
    let day = null;
    return splits.map((epoch) => {
      const d = zoned(epoch);
      const label = isoClock(d, incr < 60);
      const today = isoDay(d);
      if (today === day) return label;
      day = today;
      return `${today}\n${label}`;
    });
  }
  const axis = { stroke: "#8b98a5", grid: { stroke: "#2d3843", width: 1 }, ticks: { stroke: "#2d3843" } };
  const xaxis = Object.assign({}, axis, { space: 110, size: 55, values: fmtTicks });
  const xseries = { value: (u, v) => fmtTime(v) };

  function specs(width) {
    const base = { width, height: 180, cursor: { sync: { key: "port" } }, legend: { live: true } };
    return {
      rates: Object.assign({}, base, {
        series: [xseries, { label: "xmit", stroke: "#4aa3ff", width: 1.5, value: (u, v) => fmtBytes(v) },
          { label: "rcv", stroke: "#3fb950", width: 1.5, value: (u, v) => fmtBytes(v) }],
        axes: [xaxis, Object.assign({}, axis, { size: 90, values: (u, vals) => vals.map(fmtBytes) })],
      }),
      load: Object.assign({}, base, {
        scales: { y: { range: [0, 1] } },
        series: [xseries, { label: "utilisation", stroke: "#21918c", width: 1.5, value: (u, v) => pct(v) },
          { label: "congestion", stroke: "#f85149", width: 1.5, value: (u, v) => pct(v) }],
        axes: [xaxis, Object.assign({}, axis, { size: 55, values: (u, vals) => vals.map((v) => `${Math.round(v * 100)} %`) })],
      }),
      wait: Object.assign({}, base, {
        scales: { errs: { auto: true } },
        series: [xseries, { label: "PortXmitWait ticks/s", stroke: "#d29922", width: 1.5, value: (u, v) => num(v) },
          { label: "errors", stroke: "#ff3b30", width: 1, scale: "errs", paths: uPlot.paths.bars({ size: [0.6, 8] }), fill: "#ff3b3055", value: (u, v) => num(v) }],
        axes: [xaxis, Object.assign({}, axis, { size: 90 }), Object.assign({}, axis, { scale: "errs", side: 1, grid: { show: false } })],
      }),
    };
  }

  function columns(doc) {
    return {
      rates: [doc.t, doc.xmit_bytes_per_s, doc.rcv_bytes_per_s],
      load: [doc.t, doc.utilisation, doc.congestion],
      wait: [doc.t, doc.xmit_wait_per_s, doc.errors],
    };
  }

  async function load() {
    const url = new URL(root.dataset.seriesUrl, location.href);
    url.searchParams.set("start", range);
    url.searchParams.set("end", "now");
    try {
      const resp = await fetch(url, { credentials: "same-origin" });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      const doc = await resp.json();
      const data = columns(doc);
      const width = Math.max(320, root.clientWidth - 40);
      const sp = specs(width);
      for (const name of Object.keys(data)) {
        const target = root.querySelector(`[data-chart="${name}"]`);
        if (!charts[name]) charts[name] = new uPlot(sp[name], data[name], target);
        else charts[name].setData(data[name]);
      }
      root.dataset.points = String(doc.t.length);
      root.dataset.state = "ok";
      status.textContent = doc.t.length ? `${doc.t.length} points (${doc.resolution})` : "no samples in this range yet";
    } catch (err) {
      root.dataset.state = "error";
      status.textContent = `could not load the series (${err.message})`;
    }
  }

  for (const b of root.querySelectorAll("button[data-range]")) {
    b.addEventListener("click", () => {
      range = b.dataset.range;
      root.querySelectorAll("button[data-range]").forEach((x) => x.classList.toggle("active", x === b));
      load();
    });
  }
  window.addEventListener("resize", () => {
    const width = Math.max(320, root.clientWidth - 40);
    for (const c of Object.values(charts)) c.setSize({ width, height: 180 });
  });
  load();
  timer = setInterval(load, 10000);
  window.weftPortCharts = { reload: load, get charts() { return charts; }, fmtTime, fmtTicks };
})();
