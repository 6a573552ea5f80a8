/* Job page: the fabric view's charts (uPlot, vendored) from the data the page embeds
 * (#job-fabric-data: scheduler.services.fabric_view.job_fabric_view without the per-link series).
 * One chart per kind of link (#chart-hca: the job's hosts' HCA links, #chart-uplink: its units'
 * uplinks): traffic out and in summed over the links (bytes/s, left axis), and the highest link's
 * utilisation and congestion index (%, right axis).
 * Hooks: .fv-chart[data-state=ok|empty|error][data-points]; window.weftJobFabric.{data, charts}. */
(function () {
  "use strict";
  const holder = document.getElementById("job-fabric-data");
  if (!holder) return;
  let doc;
  try {
    doc = JSON.parse(holder.textContent);
  } catch (err) {
    document.querySelectorAll(".fv-chart").forEach((el) => { el.dataset.state = "error"; });
    return;
  }
  const charts = {};
  window.weftJobFabric = { data: doc, charts };
  if (typeof uPlot === "undefined") {
    document.querySelectorAll(".fv-chart").forEach((el) => { el.dataset.state = "error"; });
    return;
  }
  const pad = (n) => String(n).padStart(2, "0");
  const axis = { stroke: "#8b98a5", grid: { stroke: "#2d3843", width: 1 }, ticks: { stroke: "#2d3843" } };
  const bytes = (v) => {
    if (v == null) return "–";
    const units = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
  };
  const pct = (v) => (v == null ? "–" : `${v.toFixed(1)} %`);
  const times = (tz) => (epoch) => {
    const d = uPlot.tzDate(new Date(epoch * 1000), tz);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  };

  document.querySelectorAll(".fv-chart").forEach((root) => {
    const kind = root.dataset.kind;
    const total = (doc.totals || {})[kind];
    const s = total && total.series;
    if (!s || !s.t.length) {
      root.dataset.state = "empty";
      root.dataset.points = "0";
      root.textContent = "No counter history of these links in the job's window.";
      return;
    }
    const hundred = (xs) => xs.map((v) => (v == null ? null : v * 100));
    const fmt = times(root.dataset.tz || "UTC");
    const data = [s.t, s.xmit_bytes_per_s, s.rcv_bytes_per_s, hundred(s.utilisation), hundred(s.congestion)];
    const width = () => Math.max(320, root.clientWidth - 20);
    const chart = new uPlot({
      width: width(),
      height: 220,
      series: [
        { value: (u, v) => (v == null ? "–" : fmt(v)) },
        { label: kind === "hca" ? "out of the hosts" : "up to the spines", stroke: "#4aa3ff", width: 2, scale: "bytes", value: (u, v) => bytes(v) },
        { label: kind === "hca" ? "into the hosts" : "down from the spines", stroke: "#3fb950", width: 2, scale: "bytes", value: (u, v) => bytes(v) },
        { label: "utilisation (max)", stroke: "#f59e0b", width: 1.5, scale: "pct", value: (u, v) => pct(v) },
        { label: "congestion (max)", stroke: "#f85149", width: 1.5, scale: "pct", value: (u, v) => pct(v) },
      ],
      scales: { x: { time: false }, bytes: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] }, pct: { range: [0, 100] } },
      axes: [
        { ...axis, values: (u, splits) => splits.map(fmt) },
        { ...axis, scale: "bytes", values: (u, splits) => splits.map(bytes), size: 80 },
        { ...axis, scale: "pct", side: 1, values: (u, splits) => splits.map((v) => `${v} %`), grid: { show: false } },
      ],
    }, data, root);
    charts[kind] = chart;
    root.dataset.state = "ok";
    root.dataset.points = String(s.t.length);
    window.addEventListener("resize", () => chart.setSize({ width: width(), height: 220 }));
  });
})();
