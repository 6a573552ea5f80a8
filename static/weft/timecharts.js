/* Weft's time-series charts (uPlot, vendored), shared by the device history
 * (devices/device_charts.js), the port counters (telemetry/port_charts.js), the pool's history
 * (pools/pool.js) and the job's fabric view (scheduler/job.js): times in the server's TIME_ZONE
 * (the chart root's data-tz) as ISO dates and a 24-hour clock, the byte-rate, percent and count
 * formatters, the axis style, a chart of data the page embeds (plot), and for fetched series
 * (mount) the range buttons (button[data-range] inside the root), the fetch-and-refresh loop and
 * draw-or-update of each chart.
 * Load after vendor/uplot/uPlot.iife.min.js and before the page's script; exposes window.weftCharts.
 * Hooks mount keeps on the root: data-state (loading|ok|error), data-points (time points shown). */
(function () {
  "use strict";
  const DASH = "–";
  const missing = (v) => v === null || v === undefined;

  /** Bytes per second in decimal units: 1234567 -> "1.2 MB/s", 999 -> "999 B/s"; null -> "–". */
  function fmtBytes(v) {
    if (missing(v)) return DASH;
    const u = ["B/s", "KB/s", "MB/s", "GB/s", "TB/s"];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < u.length - 1) { v /= 1000; i++; }
    return `${v.toFixed(i ? 1 : 0)} ${u[i]}`;
  }
  /** A fraction as a percentage: 0.1234 -> "12.3 %"; null -> "–". */
  const pct = (v) => (missing(v) ? DASH : `${(v * 100).toFixed(1)} %`);
  /** A count with the browser's digit grouping: 12345 -> "12,345" (en); null -> "–". */
  const num = (v) => (missing(v) ? DASH : Number(v).toLocaleString());

  const pad = (n) => String(n).padStart(2, "0");
  /** Clock helpers for one IANA time zone (tz, e.g. "Europe/Berlin"; the server's TIME_ZONE):
   *  zoned(epoch s) -> Date shifted by uPlot.tzDate so its local getters read tz's wall clock;
   *  isoDay(date) -> "2026-12-01"; isoClock(date, seconds) -> "22:15" or "22:15:07";
   *  fmtTime(epoch s) -> "2026-12-01 22:15:07" (the legend's time of the cursor; null -> "–");
   *  fmtTicks(u, splits, axisIdx, space, incr) -> the x axis' labels (uPlot axis.values): "22:15"
   *  (with ":07" seconds when ticks are under a minute apart, incr < 60 s), the date above the
   *  first tick and wherever the day changes ("2026-12-02\n00:15"). */
  function clock(tz) {
    const zoned = (epoch) => uPlot.tzDate(new Date(epoch * 1000), tz);
    const isoDay = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
    const isoClock = (d, seconds) => `${pad(d.getHours())}:${pad(d.getMinutes())}` + (seconds ? `:${pad(d.getSeconds())}` : "");
    function fmtTime(epoch) {
      if (missing(epoch)) return DASH;
      const d = zoned(epoch);
      return `${isoDay(d)} ${isoClock(d, true)}`;
    }
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
    return { zoned, isoDay, isoClock, fmtTime, fmtTicks };
  }

  const AXIS = { stroke: "#8b98a5", grid: { stroke: "#2d3843", width: 1 }, ticks: { stroke: "#2d3843" } };
  /** A y axis in Weft's colours; extra (uPlot axis options: size px, values, scale, side...) over it. */
  const yAxis = (extra) => Object.assign({}, AXIS, extra);
  /** The y axis of byte rates: labels as fmtBytes ("1.2 MB/s"), 90 px wide; extra (uPlot axis
   *  options: scale, side...) over it. */
  const bytesAxis = (extra) => yAxis(Object.assign({ size: 90, values: (u, vals) => vals.map(fmtBytes) }, extra));
  /** The y axis of fractions 0..1: labels as whole percentages ("40 %"), 55 px wide; extra (uPlot
   *  axis options: scale, side...) over it. */
  const pctAxis = (extra) => yAxis(Object.assign({ size: 55, values: (u, vals) => vals.map((v) => `${Math.round(v * 100)} %`) }, extra));
  /** A line series (uPlot series options): label, stroke colour, 1.5 px wide, the legend's value as
   *  fmt(value) (fmt: number|null -> text); extra (uPlot series options) over it. */
  const line = (label, stroke, fmt, extra) => Object.assign({ label, stroke, width: 1.5, value: (u, v) => fmt(v) }, extra);
  /** The spec (for view.draw) of the utilisation and congestion chart both pages show: two series
   *  of fractions 0..1 (data columns [t, utilisation, congestion]) on a fixed 0..100 % scale. */
  const loadSpec = () => ({
    scales: { y: { range: [0, 1] } },
    series: [line("utilisation", "#21918c", pct), line("congestion", "#f85149", pct)],
    axes: [pctAxis()],
  });

  /** The time axis and series of charts in tz (IANA zone): {fmtTime, fmtTicks} of clock(tz),
   *  xaxis (uPlot axis options: labels fmtTicks, 110 px apart at least, 55 px tall) and xseries
   *  (uPlot series options: the legend's time as fmtTime). */
  function timeX(tz) {
    const { fmtTime, fmtTicks } = clock(tz);
    return {
      fmtTime, fmtTicks,
      xaxis: Object.assign({}, AXIS, { space: 110, size: 55, values: fmtTicks }),
      xseries: { value: (u, v) => fmtTime(v) },
    };
  }
  /** A new uPlot in target showing data (uPlot columns [t epoch s, ...y]): x from timeX, size
   *  {width, height} px, sync a cursor sync key (none when absent), spec {series, axes, scales...}
   *  (uPlot options without the time series and axis; they are put first); live legend. */
  function chart(x, target, size, sync, spec, data) {
    const base = { width: size.width, height: size.height, legend: { live: true } };
    if (sync) base.cursor = { sync: { key: sync } };
    return new uPlot(Object.assign(base, spec, { series: [x.xseries, ...spec.series], axes: [x.xaxis, ...spec.axes] }), data, target);
  }
  /** Width in px of a chart in el: el's width less margin px, at least 320. */
  const widthIn = (el, margin) => Math.max(320, el.clientWidth - margin);

  /** Draws once, into el, a time chart of data the page already holds (uPlot columns
   *  [t epoch s, ...y]; no fetch, no refresh): spec as for view.draw ({series, axes, scales}
   *  without the time series and axis), times in el's data-tz (the server's TIME_ZONE; "UTC" when
   *  absent). opts: {height: px, margin: px of el's width left free (20 when absent), sync: uPlot
   *  cursor sync key (optional)}. The chart follows the window's width. Returns the uPlot; throws
   *  what uPlot throws (the page sets its own error state). Needs uPlot loaded. */
  function plot(el, spec, data, opts) {
    const margin = opts.margin === undefined ? 20 : opts.margin;
    const size = () => ({ width: widthIn(el, margin), height: opts.height });
    const u = chart(timeX(el.dataset.tz || "UTC"), el, size(), opts.sync, spec, data);
    window.addEventListener("resize", () => u.setSize(size()));
    return u;
  }

  /** Runs the charts of one root element (the section holding .pc-status, button[data-range] and
   *  the charts' targets). opts: {url: the data's URL (relative to the page), height: px per chart,
   *  sync: uPlot cursor sync key, refreshMs: reload period in ms, params(): extra query parameters
   *  ({name: value}; empty values are left out), render(doc, view): draws the document the URL
   *  answered ({t: [epoch s], resolution, ...}) with view.draw, noun: what a time point is called in
   *  the status line ("points"), what: what failed to load in the error line ("the series")}.
   *  Each load asks url?start=<range>&end=now (range from the active button, "-1h" at first).
   *  Returns the view {reload(), charts (name -> uPlot), draw(name, target, spec, data), fmtTime,
   *  fmtTicks}, or null when the root is absent or uPlot is not loaded. A failed fetch, an HTTP
   *  error or a render error sets data-state=error and says why in .pc-status; it throws nothing. */
  function mount(root, opts) {
    if (!root || typeof uPlot === "undefined") return null;
    const status = root.querySelector(".pc-status");
    const x = timeX(root.dataset.tz || "UTC");
    const size = () => ({ width: widthIn(root, 40), height: opts.height });
    const charts = {};
    let range = "-1h";

    /** Shows data (uPlot columns: [t, ...y]) in the chart called name: spec is {series, axes, scales}
     *  without the time series and axis (they are put first). Updates the chart in place when it
     *  has as many series, else (re)creates it in target, emptied. */
    function draw(name, target, spec, data) {
      if (charts[name] && charts[name].series.length === spec.series.length + 1) {
        charts[name].setData(data);
        return;
      }
      if (charts[name]) charts[name].destroy();
      target.replaceChildren();
      charts[name] = chart(x, target, size(), opts.sync, spec, data);
    }

    async function load() {
      const url = new URL(opts.url, location.href);
      url.searchParams.set("start", range);
      url.searchParams.set("end", "now");
      for (const [k, v] of Object.entries(opts.params ? opts.params() : {})) if (v) url.searchParams.set(k, v);
      try {
        const resp = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
        const doc = await resp.json();
        opts.render(doc, view);
        root.dataset.points = String(doc.t.length);
        root.dataset.state = "ok";
        status.textContent = doc.t.length ? `${doc.t.length} ${opts.noun} (${doc.resolution})` : "no samples in this range yet";
      } catch (err) {
        root.dataset.state = "error";
        status.textContent = `could not load ${opts.what} (${err.message})`;
      }
    }

    const view = { reload: load, get charts() { return charts; }, draw, fmtTime: x.fmtTime, fmtTicks: x.fmtTicks };
    const buttons = root.querySelectorAll("button[data-range]");
    for (const b of buttons) {
      b.addEventListener("click", () => {
        range = b.dataset.range;
        buttons.forEach((x) => x.classList.toggle("active", x === b));
        load();
      });
    }
    window.addEventListener("resize", () => {
      for (const c of Object.values(charts)) c.setSize(size());
    });
    load();
    setInterval(load, opts.refreshMs);
    return view;
  }

  window.weftCharts = { fmtBytes, pct, num, clock, yAxis, bytesAxis, pctAxis, line, loadSpec, plot, mount };
})();
