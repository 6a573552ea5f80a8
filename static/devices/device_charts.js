/* Device history charts: the chosen interface's rates (in/out bytes/s) and utilisation/congestion,
 * and one chart per sensor kind (temperatures, fans, power...), drawn with the shared
 * weft/timecharts.js (window.weftCharts: server-time-zone clock, formatters, range buttons,
 * refresh loop). Data: GET <history-url>?start=-1h&end=now&interface=<ifIndex> (devices.services.history).
 * Refreshes every 30 s. Hooks: #device-charts[data-state|data-points|data-sensor-charts]. */
(function () {
  "use strict";
  const root = document.getElementById("device-charts");
  if (!root || !window.weftCharts) return;
  const { yAxis, bytesAxis, line, fmtBytes } = weftCharts;
  const select = document.getElementById("dc-interface");
  const sensorBox = root.querySelector("[data-sensor-charts]");
  const PALETTE = ["#4aa3ff", "#3fb950", "#d29922", "#f85149", "#a371f7", "#3fc1c9", "#f778ba", "#ffa657", "#8b98a5", "#79c0ff"];

  function drawSensors(doc, view) {
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
      const fmt = (v) => (v === null || v === undefined ? "–" : `${Number(v).toLocaleString()} ${unit}`);
      view.draw("sensor:" + kind, box.lastChild, {
        series: list.map((s, i) => line(s.name, PALETTE[i % PALETTE.length], fmt)),
        axes: [yAxis({ size: 60 })],
      }, [doc.t, ...list.map((s) => s.values)]);
    }
    sensorBox.dataset.sensorCharts = String(kinds.size);
    root.dataset.sensorCharts = String(kinds.size);
  }

  function render(doc, view) {
    const i = doc.interface;
    const none = doc.t.map(() => null);
    view.draw("rates", root.querySelector('[data-chart="rates"]'), {
      series: [line("in", "#3fb950", fmtBytes), line("out", "#4aa3ff", fmtBytes)],
      axes: [bytesAxis()],
    }, [doc.t, i ? i.in_bytes_per_s : none, i ? i.out_bytes_per_s : none]);
    view.draw("load", root.querySelector('[data-chart="load"]'), weftCharts.loadSpec(),
      [doc.t, i ? i.utilisation : none, i ? i.congestion : none]);
    drawSensors(doc, view);
  }

  const view = weftCharts.mount(root, {
    url: root.dataset.historyUrl, height: 170, sync: "device", refreshMs: 30000,
    params: () => ({ interface: select ? select.value : "" }),
    render, noun: "samples", what: "the history",
  });
  if (view && select) select.addEventListener("change", view.reload);
  if (view) window.weftDeviceCharts = view;
})();
