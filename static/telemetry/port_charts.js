/* Port time-series charts: rates, utilisation/congestion, PortXmitWait/errors, drawn with the
 * shared weft/timecharts.js (window.weftCharts: server-time-zone clock, formatters, range buttons,
 * refresh loop). Data: GET <series-url>?start=-1h&end=now -> {t:[epoch s], xmit_bytes_per_s:[...], ...}.
 * Refreshes every 10 s while the range ends now. Hook: #port-charts[data-points] = points shown. */
(function () {
  "use strict";
  const root = document.getElementById("port-charts");
  if (!root || !window.weftCharts) return;
  const { num, yAxis, bytesAxis, line, fmtBytes } = weftCharts;
  const target = (name) => root.querySelector(`[data-chart="${name}"]`);

  function render(doc, view) {
    view.draw("rates", target("rates"), {
      series: [line("xmit", "#4aa3ff", fmtBytes), line("rcv", "#3fb950", fmtBytes)],
      axes: [bytesAxis()],
    }, [doc.t, doc.xmit_bytes_per_s, doc.rcv_bytes_per_s]);
    view.draw("load", target("load"), weftCharts.loadSpec(), [doc.t, doc.utilisation, doc.congestion]);
    view.draw("wait", target("wait"), {
      scales: { errs: { auto: true } },
      series: [line("PortXmitWait ticks/s", "#d29922", num),
        line("errors", "#ff3b30", num, { width: 1, scale: "errs", paths: uPlot.paths.bars({ size: [0.6, 8] }), fill: "#ff3b3055" })],
      axes: [yAxis({ size: 90 }), yAxis({ scale: "errs", side: 1, grid: { show: false } })],
    }, [doc.t, doc.xmit_wait_per_s, doc.errors]);
  }

  const view = weftCharts.mount(root, {
    url: root.dataset.seriesUrl, height: 180, sync: "port", refreshMs: 10000,
    render, noun: "points", what: "the series",
  });
  if (view) window.weftPortCharts = view;
})();
