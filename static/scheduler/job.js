/* Job page: the fabric view's charts from the data the page embeds (#job-fabric-data:
 * scheduler.services.fabric_view.job_fabric_view without the per-link series), drawn with the
 * shared weft/timecharts.js (window.weftCharts: times in the server's time zone, the date above the
 * first tick and where the day changes, byte-rate and percent formatters).
 * One chart per kind of link (#chart-hca: the job's hosts' HCA links, #chart-uplink: its units'
 * uplinks): traffic out and in summed over the links (bytes/s, left axis), and the highest link's
 * utilisation and congestion index (fractions 0..1 shown as %, right axis).
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
  if (typeof uPlot === "undefined" || !window.weftCharts) {
    document.querySelectorAll(".fv-chart").forEach((el) => { el.dataset.state = "error"; });
    return;
  }
  const { fmtBytes, pct, line, bytesAxis, pctAxis } = weftCharts;

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
    const chart = weftCharts.plot(root, {
      series: [
        line(kind === "hca" ? "out of the hosts" : "up to the spines", "#4aa3ff", fmtBytes, { width: 2, scale: "bytes" }),
        line(kind === "hca" ? "into the hosts" : "down from the spines", "#3fb950", fmtBytes, { width: 2, scale: "bytes" }),
        line("utilisation (max)", "#f59e0b", pct, { scale: "pct" }),
        line("congestion (max)", "#f85149", pct, { scale: "pct" }),
      ],
      scales: { bytes: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] }, pct: { range: [0, 1] } },
      axes: [bytesAxis({ scale: "bytes" }), pctAxis({ scale: "pct", side: 1, grid: { show: false } })],
    }, [s.t, s.xmit_bytes_per_s, s.rcv_bytes_per_s, s.utilisation, s.congestion], { height: 220 });
    charts[kind] = chart;
    root.dataset.state = "ok";
    root.dataset.points = String(s.t.length);
  });
})();
