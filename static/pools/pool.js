/* Pool page: the history chart of what the pool held, drawn as steps from the series the page
 * embeds (#pool-history-data: {t: [epoch s], gpus, borrowed_gpus, slices, quota, guaranteed},
 * pools.history.usage_history) with the shared weft/timecharts.js (window.weftCharts: times in the
 * server's time zone, the date above the first tick and where the day changes). The value at t[i]
 * holds until t[i + 1].
 * Hooks: #pool-history[data-state=ok|empty|error][data-points][data-last-gpus][data-max-gpus]. */
(function () {
  "use strict";
  const root = document.getElementById("pool-history");
  if (!root) return;
  const status = document.getElementById("history-status");
  let doc;
  try {
    doc = JSON.parse(document.getElementById(root.dataset.series).textContent);
  } catch (err) {
    root.dataset.state = "error";
    if (status) status.textContent = "no history data (" + err.message + ")";
    return;
  }
  if (typeof uPlot === "undefined" || !window.weftCharts) { root.dataset.state = "error"; return; }
  const { line, num, yAxis } = weftCharts;

  const n = doc.t.length;
  const flat = (v) => doc.t.map(() => v);
  const steps = uPlot.paths.stepped({ align: 1 });
  const series = [
    line("GPUs held", "#4aa3ff", num, { fill: "#4aa3ff33", width: 2, paths: steps }),
    line("borrowed", "#f59e0b", num, { paths: steps }),
    line("MIG slices", "#b084f5", num, { paths: steps }),
  ];
  const columns = [doc.t, doc.gpus, doc.borrowed_gpus, doc.slices];
  if (doc.quota !== null && doc.quota !== undefined) {
    series.push(line("quota", "#f85149", num, { width: 1, dash: [6, 4] }));
    columns.push(flat(doc.quota));
  }
  if (doc.guaranteed) {
    series.push(line("guaranteed", "#3fb950", num, { width: 1, dash: [2, 4] }));
    columns.push(flat(doc.guaranteed));
  }
  const top = Math.max(1, ...doc.gpus, ...doc.slices, doc.quota || 0);
  const chart = weftCharts.plot(root, {
    series,
    scales: { y: { range: [0, Math.ceil(top * 1.1)] } },
    axes: [yAxis({ size: 50, values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? String(v) : "")) })],
  }, columns, { height: 220 });

  const changes = Math.max(0, n - 2);
  root.dataset.points = String(n);
  root.dataset.lastGpus = String(n ? doc.gpus[n - 1] : 0);
  root.dataset.maxGpus = String(Math.max(0, ...doc.gpus));
  root.dataset.state = doc.gpus.some((v) => v > 0) || doc.slices.some((v) => v > 0) ? "ok" : "empty";
  if (status) {
    status.textContent = root.dataset.state === "ok"
      ? `${changes} change${changes === 1 ? "" : "s"} in the last ${doc.range}; now ${root.dataset.lastGpus} GPUs`
      : `nothing held in the last ${doc.range}`;
  }
  window.weftPoolHistory = { chart, doc };
})();
