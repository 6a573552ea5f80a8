/* Pool page: the history chart (uPlot, vendored) of what the pool held, drawn as steps from the
 * series the page embeds (#pool-history-data: {t: [epoch s], gpus, borrowed_gpus, slices, quota,
 * guaranteed}, pools.history.usage_history). The value at t[i] holds until t[i + 1].
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
  if (typeof uPlot === "undefined") { root.dataset.state = "error"; return; }

  const tz = root.dataset.tz || "UTC";
  const pad = (n) => String(n).padStart(2, "0");
  const zoned = (epoch) => uPlot.tzDate(new Date(epoch * 1000), tz);
  const day = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const clock = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const fmtTime = (epoch) => (epoch == null ? "–" : `${day(zoned(epoch))} ${clock(zoned(epoch))}`);
  function ticks(u, splits) {
    let last = null;
    return splits.map((epoch) => {
      const d = zoned(epoch);
      if (day(d) === last) return clock(d);
      last = day(d);
      return `${last}\n${clock(d)}`;
    });
  }
  const n = doc.t.length;
  const flat = (v) => doc.t.map(() => v);
  const steps = uPlot.paths.stepped({ align: 1 });
  const axis = { stroke: "#8b98a5", grid: { stroke: "#2d3843", width: 1 }, ticks: { stroke: "#2d3843" } };
  const series = [
    { value: (u, v) => fmtTime(v) },
    { label: "GPUs held", stroke: "#4aa3ff", fill: "#4aa3ff33", width: 2, paths: steps },
    { label: "borrowed", stroke: "#f59e0b", width: 1.5, paths: steps },
    { label: "MIG slices", stroke: "#b084f5", width: 1.5, paths: steps },
  ];
  const columns = [doc.t, doc.gpus, doc.borrowed_gpus, doc.slices];
  if (doc.quota !== null && doc.quota !== undefined) {
    series.push({ label: "quota", stroke: "#f85149", width: 1, dash: [6, 4] });
    columns.push(flat(doc.quota));
  }
  if (doc.guaranteed) {
    series.push({ label: "guaranteed", stroke: "#3fb950", width: 1, dash: [2, 4] });
    columns.push(flat(doc.guaranteed));
  }
  const top = Math.max(1, ...doc.gpus, ...doc.slices, doc.quota || 0);
  const width = () => Math.max(320, root.clientWidth - 20);
  const chart = new uPlot({
    width: width(),
    height: 220,
    series,
    scales: { y: { range: [0, Math.ceil(top * 1.1)] } },
    axes: [Object.assign({}, axis, { space: 110, size: 55, values: ticks }),
      Object.assign({}, axis, { size: 50, values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? String(v) : "")) })],
    legend: { live: true },
  }, columns, root);
  window.addEventListener("resize", () => chart.setSize({ width: width(), height: 220 }));

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
