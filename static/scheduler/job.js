/* Job page: the fabric view, fetched on demand (#fabric-view[data-api]: GET
 * /api/scheduler/jobs/{id}/fabric/?series=totals, scheduler.services.fabric_view.job_fabric_view
 * without the per-link series), so the page itself stays small and quick whatever the job's age.
 * It draws, from that one answer:
 *  - the charts, with the shared weft/timecharts.js (window.weftCharts: times in the server's time
 *    zone, the date above the first tick and where the day changes, byte-rate and percent
 *    formatters): one per kind of link (#chart-hca: the job's hosts' HCA links, #chart-uplink: its
 *    units' uplinks), traffic out and in summed over the links (bytes/s, left axis) and the highest
 *    link's utilisation and congestion index (fractions 0..1 shown as %, right axis), under each
 *    what a point is (.fv-step: "1-h steps (per-hour rollups: mean rates)", "raw sweeps, ~5 s
 *    apart"; the view bounds the steps whatever the job's age, doc.resolution);
 *  - the link table (#fv-links): every HCA link, the job's HCAs without a link now (with their
 *    alarm), then the uplinks of the leaves its HCAs are cabled to, worst first as the view lists
 *    them, at most #fabric-view[data-max-uplinks]; under it (#fv-uplinks-more) how many more, with
 *    each leaf's ports view (most congested first), and the uplinks of the units' other leaves;
 *  - the alarms of its hosts, HCAs and links in its window (#fv-alarms), times as ISO dates and a
 *    24-hour clock in the server's time zone (as the rest of the site).
 * And the links on its paths (#job-paths[data-api]: GET /api/scheduler/jobs/{id}/links/,
 * scheduler.services.joblinks.links_of: the egress ports its traffic crosses, the most loaded first,
 * with telemetry's latest utilisation and congestion in % as the heatmap shows them).
 * Hooks: #fabric-view[data-state=loading|ok|error], #job-paths[data-state=loading|ok|error],
 * .fv-chart[data-state=ok|empty|error][data-points][data-resolution=raw|minute|hour][data-step=s];
 * window.weftJobFabric.{data, paths, charts}. */
(function () {
  "use strict";
  const card = document.getElementById("fabric-view");
  if (!card || !card.dataset.api) return;
  const charts = {};
  window.weftJobFabric = { data: null, paths: null, charts };
  const tz = card.dataset.tz || "UTC";
  const DASH = "–";

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function link(href, text, data) {
    const a = el("a", text);
    a.href = href;
    Object.assign(a.dataset, data || {});
    return a;
  }
  const portUrl = (id) => card.dataset.portUrl.replace(/\/0\/$/, "/" + id + "/");
  const setText = (id, text) => { const e = document.getElementById(id); if (e) e.textContent = text; };
  const fail = (why) => {
    card.dataset.state = "error";
    document.querySelectorAll(".fv-chart").forEach((c) => { c.dataset.state = "error"; c.textContent = why; });
    document.querySelectorAll("#fv-links tbody, #fv-alarms tbody").forEach((tb) => {
      tb.textContent = "";
      const tr = tb.appendChild(el("tr"));
      const td = tr.appendChild(el("td", why, "muted error"));
      td.colSpan = 8;
    });
  };

  // what one point of the charts is (doc.resolution, scheduler.services.fabric_view "Time steps"):
  // "1-h steps (per-hour rollups: mean rates)", "raw sweeps, ~5 s apart", …
  function stepText(r, t) {
    if (!r || !r.read) return "";
    const dur = (s) => (s % 3600 === 0 ? s / 3600 + "-h" : s % 60 === 0 ? s / 60 + "-min" : s + "-s");
    const source = { raw: "raw sweeps", minute: "per-minute rollups", hour: "per-hour rollups" }[r.read] || r.read;
    if (r.step_s && r.downsampled) return dur(r.step_s) + " steps (bins of " + source + ": mean rates, highest utilisation and congestion)";
    if (r.step_s) return dur(r.step_s) + " steps (" + source + ": mean rates)";
    const gaps = [];
    for (let i = 1; i < t.length; i++) gaps.push(t[i] - t[i - 1]);
    gaps.sort((a, b) => a - b);
    const gap = gaps.length ? gaps[gaps.length >> 1] : 0;
    return "raw sweeps" + (gap ? ", ~" + Math.round(gap) + " s apart" : "");
  }

  function drawCharts(doc) {
    if (typeof uPlot === "undefined" || !window.weftCharts) {
      document.querySelectorAll(".fv-chart").forEach((c) => { c.dataset.state = "error"; });
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
      root.textContent = "";
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
      const r = doc.resolution || {};
      root.append(el("div", stepText(r, s.t), "muted fv-step"));
      root.dataset.resolution = r.read || "";
      root.dataset.step = r.step_s ? String(r.step_s) : "";
      root.dataset.state = "ok";
      root.dataset.points = String(s.t.length);
    });
  }

  function pct(v) { return v === null || v === undefined ? DASH : (v * 100).toFixed(1) + " %"; }
  function rate(v) { return window.weftCharts ? weftCharts.fmtBytes(v) : String(v); }

  function linkRow(e) {
    const tr = el("tr");
    tr.dataset.kind = e.kind;
    tr.dataset.port = String(e.near.id);
    const name = tr.appendChild(el("td"));
    name.append(link(portUrl(e.near.id), e.near.name));
    if (e.far) name.append(" ↔ ", link(portUrl(e.far.id), e.far.name));
    tr.append(el("td", e.kind + " " + (e.host || "") + (e.rail !== null && e.rail !== undefined ? " · rail " + e.rail : "")));
    tr.append(el("td", (e.rate_gbps === null || e.rate_gbps === undefined ? "?" : e.rate_gbps) + " Gb/s"));
    const s = e.summary;
    tr.append(el("td", s.xmit_bytes_per_s_mean !== null ? rate(s.xmit_bytes_per_s_mean) + " · " + rate(s.rcv_bytes_per_s_mean) : DASH));
    tr.append(el("td", s.utilisation_mean !== null ? pct(s.utilisation_mean) + " / " + pct(s.utilisation_max) : DASH));
    tr.append(el("td", s.congestion_mean !== null ? pct(s.congestion_mean) + " / " + pct(s.congestion_max) : DASH));
    tr.append(el("td", s.errors), el("td", s.samples));
    return tr;
  }

  function downRow(d) {
    const tr = el("tr", null, "error");
    tr.dataset.kind = "hca";
    tr.dataset.down = "1";
    tr.dataset.hca = d.guid;
    const name = tr.appendChild(el("td", d.hca + " "));
    name.append(el("b", "down", "sev-critical"));
    if (d.gone) name.append(" ", el("span", "(gone from the fabric)", "muted"));
    tr.append(el("td", "hca " + d.host + " · rail " + d.rail));
    const what = tr.appendChild(el("td"));
    what.colSpan = 6;
    if (d.alarm) {
      what.append(link(d.alarm.url, d.alarm.severity + " · " + d.alarm.code, { alarm: String(d.alarm.id) }),
        " ", el("span", d.alarm.object + " " + d.alarm.message, "muted"));
    } else what.append(el("span", "no link and no open alarm", "muted"));
    return tr;
  }

  function drawLinks(doc) {
    const max = Number(card.dataset.maxUplinks || 12);
    const hca = doc.links.filter((e) => e.kind === "hca");
    const mine = doc.links.filter((e) => e.kind === "uplink" && e.job_leaf);  // worst first already
    const other = doc.links.filter((e) => e.kind === "uplink" && !e.job_leaf).length;
    setText("fv-hca-count", String(doc.totals.hca.summary.links));
    setText("fv-uplink-count", String(doc.totals.uplink.summary.links));
    const tbody = document.querySelector("#fv-links tbody");
    tbody.textContent = "";
    hca.forEach((e) => tbody.append(linkRow(e)));
    (doc.hcas_down || []).forEach((d) => tbody.append(downRow(d)));
    mine.slice(0, max).forEach((e) => tbody.append(linkRow(e)));
    if (!tbody.children.length) {
      const td = tbody.appendChild(el("tr")).appendChild(el("td", "No link: the job has no hosts on a stored fabric.", "muted"));
      td.colSpan = 8;
    }
    const more = document.getElementById("fv-uplinks-more");
    const extra = Math.max(0, mine.length - max);
    more.textContent = "";
    if (extra) {
      more.append("Uplinks listed: the " + Math.min(max, mine.length) + " worst of the job's leaves' (congestion, utilisation, errors), and ");
      const n = more.appendChild(el("span", extra + " more"));
      n.dataset.more = String(extra);
      const maxLeaves = Number(card.dataset.maxLeaves || 8);
      const leaves = doc.fabric ? doc.leaves.slice(0, maxLeaves) : [];
      leaves.forEach((leaf, i) => {
        more.append(i === 0 ? " (ports view per leaf, most congested first: " : ", ");
        const q = new URLSearchParams({ fabric: doc.fabric.id, node: leaf.node_guid, sort: "-congestion" });
        more.append(link(card.dataset.portsUrl + "?" + q, leaf.name, { leaf: leaf.node_guid }));
        if (i === leaves.length - 1) {
          const left = doc.leaves.length - leaves.length;
          more.append((left ? " and " + left + " more leaves" : "") + ")");
        }
      });
      more.append(".");
    }
    if (other) more.append((extra ? " " : "") + other + " uplink" + (other === 1 ? "" : "s") + " of the unit's other leaves (not the job's) only in the chart and the JSON.");
    more.hidden = !(extra || other);
  }

  function drawAlarms(doc) {
    const fmt = window.weftCharts && typeof uPlot !== "undefined" ? weftCharts.clock(tz).fmtTime : null;
    const when = (iso) => {
      const t = Date.parse(iso);
      return fmt && !Number.isNaN(t) ? fmt(t / 1000) : iso;
    };
    setText("fv-alarm-count", String(doc.alarms.length));
    const tbody = document.querySelector("#fv-alarms tbody");
    tbody.textContent = "";
    doc.alarms.forEach((a) => {
      const tr = tbody.appendChild(el("tr"));
      tr.dataset.alarm = String(a.id);
      const first = el("time", when(a.first_seen));
      first.dateTime = a.first_seen;
      tr.appendChild(el("td")).append(first);
      tr.append(el("td", a.severity, "sev-" + a.severity));
      tr.appendChild(el("td")).append(link(a.url, a.code), " ", el("span", a.message, "muted"));
      tr.append(el("td", a.object));
      const st = tr.appendChild(el("td", a.state));
      if (a.cleared_at) {
        const c = el("time", when(a.cleared_at), "muted");
        c.dateTime = a.cleared_at;
        st.append(" ", c);
      }
    });
    if (!doc.alarms.length) {
      const td = tbody.appendChild(el("tr")).appendChild(el("td", "No alarm touched them.", "muted"));
      td.colSpan = 5;
    }
  }

  function drawNotes(doc) {
    const box = document.getElementById("fv-notes");
    if (!box) return;
    const shown = new Set([...document.querySelectorAll(".fv-note")].map((p) => p.textContent));
    (doc.notes || []).filter((n) => !shown.has(n)).forEach((n) => box.append(el("p", n, "muted fv-note")));
  }

  function drawPaths(box, doc) {
    const url = (id) => box.dataset.portUrl.replace(/\/0\/$/, "/" + id + "/");
    const rows = doc.links || [];
    setText("job-path-count", String(rows.length));
    const tbody = box.querySelector("tbody");
    tbody.textContent = "";
    rows.forEach((l) => {
      const tr = tbody.appendChild(el("tr", null, l.dead_end ? "error" : ""));
      tr.dataset.portKey = l.port_key;
      tr.appendChild(el("td")).append(l.port ? link(url(l.port), l.name) : l.name);
      tr.append(el("td", l.link || "(no link: down)", "mono"), el("td", (l.rails || []).join(", ")));
      const paths = tr.appendChild(el("td", l.paths));
      if (l.dead_end) paths.append(" ", el("span", "stop here", "error"));
      tr.append(el("td", pct(l.utilisation)), el("td", pct(l.congestion)));
    });
    if (!rows.length) {
      const td = tbody.appendChild(el("tr")).appendChild(el("td", "No routed path: the job holds no hosts, or its fabric has no routes read yet.", "muted"));
      td.colSpan = 6;
    }
  }

  const paths = document.getElementById("job-paths");
  if (paths && paths.dataset.api) {
    fetch(paths.dataset.api, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status + " reading the job's links"); return r.json(); })
      .then((doc) => { window.weftJobFabric.paths = doc; drawPaths(paths, doc); paths.dataset.state = "ok"; })
      .catch((err) => {
        console.error(err);
        paths.dataset.state = "error";
        const tbody = paths.querySelector("tbody");
        tbody.textContent = "";
        tbody.appendChild(el("tr")).appendChild(el("td", "Could not read the job's links: " + err.message, "muted error")).colSpan = 6;
      });
  }

  fetch(card.dataset.api, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status + " reading the fabric view"); return r.json(); })
    .then((doc) => {
      window.weftJobFabric.data = doc;
      drawNotes(doc);
      drawCharts(doc);
      drawLinks(doc);
      drawAlarms(doc);
      card.dataset.state = "ok";
    })
    .catch((err) => { console.error(err); fail("Could not read the fabric view: " + err.message); });
})();
