/* Weft live congestion heatmap: switches (rows, grouped by tier) x ports (columns) on a canvas.
 *
 * Data: the snapshot API (rows, columns, cells) on load, then `heatmap.delta` messages from the
 * websocket ws/heatmap/<fabric>/ (cells whose rounded values changed since the previous sweep).
 * A cell is [port_id, node_id, port_num, utilisation|null, congestion|null, error_flag, stale, down]
 * Ethernet switches polled over SNMP (devices.heatmap) are rows of tier "ethernet" with negative
 * node/port ids, an interface-name map (row.ports) and the device page as their link (row.url).
 * (down: a port that carried a link and is Down now; drawn dark with a cross, its last rates ignored).
 * Only changed cells are repainted, so a Selene-sized matrix (666 x 40-80) stays cheap.
 *
 * Test hook: window.weftHeatmap.cellState(portId) -> {utilisation, congestion, error, stale, down,
 * colour, sweep}; window.weftHeatmap.findPort(nodeDescriptionOrGuid, portNum) -> portId.
 * The root element carries data-state (loading|live|stale|offline), data-sweep, data-deltas.
 */
(function () {
  "use strict";

  const root = document.getElementById("heatmap");
  if (!root) return;

  const TIER_HEADER = 18, TOP = 22, LABEL_W = 200, MIN_CELL = 7, MAX_CELL = 22, MAX_HEIGHT = 9000;
  const STALE_FACTOR = 3;
  const COLOURS = {
    background: "#0f1419", absent: "#141a20", nodata: "#2b343e", stale: "#4a3f5c", down: "#07090b",
    error: "#ff3b30", grid: "#0b0f13", text: "#c9d1d9", muted: "#8b98a5", hover: "#ffffff",
  };
  // Congestion: calm green through yellow to red. Utilisation: viridis-like dark blue to yellow.
  const SCALES = {
    congestion: [[0, "#1f4d2b"], [0.05, "#2e7d32"], [0.2, "#9e9d24"], [0.4, "#f9a825"], [0.7, "#ef6c00"], [1, "#d50000"]],
    utilisation: [[0, "#1b1f4b"], [0.25, "#31508c"], [0.5, "#21918c"], [0.75, "#5ec962"], [1, "#fde725"]],
  };
  const LEGEND = {
    congestion: "Congestion index (PortXmitWait ticks/s as a share of the tick rate), 0–100 %",
    utilisation: "Utilisation: max(xmit, rcv) bytes/s ÷ link data rate, 0–100 %",
  };

  const el = (id) => document.getElementById(id);
  const canvas = el("hm-canvas"), ctx = canvas.getContext("2d");
  const tooltip = el("hm-tooltip"), banner = el("hm-banner"), statusEl = el("hm-status");

  const cfg = {
    fabric: Number(root.dataset.fabric),
    snapshotUrl: root.dataset.snapshotUrl,
    cellUrl: root.dataset.cellUrl,
    portUrl: root.dataset.portUrl,
    annotationsUrl: root.dataset.annotationsUrl,
    wsPath: root.dataset.wsPath,
    loginUrl: root.dataset.loginUrl,
    pollInterval: Number(root.dataset.pollInterval) || 10,
    liveAccess: root.dataset.liveAccess !== "0",  // Fabric.has_live_access
  };

  const state = {
    mode: root.dataset.mode === "utilisation" ? "utilisation" : "congestion",
    rows: [], rowOf: new Map(), rowY: [], tiers: [], columns: 0,
    cells: new Map(),           // port_id -> {port, node, num, u, c, e, s, d, row, sweep}
    byNodePort: new Map(),      // "node:num" -> cell
    cell: 12, width: 0, height: 0,
    sweep: null, snapshotSweep: 0, lastAtMs: null, clockOffsetMs: 0,
    loaded: false, buffered: [], deltas: 0, hover: null,
    ws: null, wsRetry: 0, reloading: false, detailCache: new Map(),
    hotJobs: new Map(),         // port_id -> [{job, name, state, paths, share, url}] of the hot list
    hotAsked: "",               // "sweep|ids" of the last annotations request
  };

  // ---- colours -------------------------------------------------------------------------------
  function hexToRgb(hex) {
    const n = parseInt(hex.slice(1), 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }
  const scaleRgb = {};
  for (const k of Object.keys(SCALES)) scaleRgb[k] = SCALES[k].map(([t, h]) => [t, hexToRgb(h)]);

  // Values arrive rounded to 0.001 (producer.PRECISION): a 1,001-entry lookup table per mode.
  const LUT = {};
  function colourAt(mode, value) {
    if (!LUT[mode]) {
      LUT[mode] = [];
      for (let i = 0; i <= 1000; i++) LUT[mode].push(interpolate(mode, i / 1000));
    }
    return LUT[mode][Math.round(Math.max(0, Math.min(1, value)) * 1000)];
  }

  function interpolate(mode, value) {
    const stops = scaleRgb[mode];
    const v = Math.max(0, Math.min(1, value));
    for (let i = 1; i < stops.length; i++) {
      if (v <= stops[i][0]) {
        const [t0, a] = stops[i - 1], [t1, b] = stops[i];
        const f = (v - t0) / (t1 - t0 || 1);
        const c = a.map((x, j) => Math.round(x + (b[j] - x) * f));
        return "#" + c.map((x) => x.toString(16).padStart(2, "0")).join("");
      }
    }
    return SCALES[mode][SCALES[mode].length - 1][1];
  }

  function cellColour(cell) {
    if (!cell) return COLOURS.absent;
    if (cell.d) return COLOURS.down;
    if (cell.s) return COLOURS.stale;
    const v = state.mode === "congestion" ? cell.c : cell.u;
    if (v === null || v === undefined) return COLOURS.nodata;
    return colourAt(state.mode, v);
  }

  // ---- layout and drawing ----------------------------------------------------------------------
  function layout() {
    const avail = Math.max(300, el("hm-scroll").clientWidth - LABEL_W - 8);
    let cs = Math.max(MIN_CELL, Math.min(MAX_CELL, Math.floor(avail / Math.max(1, state.columns))));
    // Big fabrics (Selene: 666 switches): keep the canvas under ~9,000 px tall, cells >= MIN_CELL.
    if (state.rows.length * cs > MAX_HEIGHT) cs = Math.max(MIN_CELL, Math.floor(MAX_HEIGHT / state.rows.length));
    state.cell = cs;
    state.rowY = [];
    let y = TOP;
    let tierIndex = 0, left = state.tiers.length ? state.tiers[0].rows : 0;
    state.tierY = [];
    for (let r = 0; r < state.rows.length; r++) {
      if (r === 0 || left === 0) {
        if (r > 0) { tierIndex++; left = state.tiers[tierIndex].rows; }
        state.tierY.push([y, state.tiers[tierIndex]]);
        y += TIER_HEADER;
      }
      state.rowY.push(y);
      y += state.cell;
      left--;
    }
    state.width = LABEL_W + state.columns * state.cell + 4;
    state.height = y + 4;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.ceil(state.width * dpr);
    canvas.height = Math.ceil(state.height * dpr);
    canvas.style.width = state.width + "px";
    canvas.style.height = state.height + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  function drawAll() {
    ctx.fillStyle = COLOURS.background;
    ctx.fillRect(0, 0, state.width, state.height);
    const cs = state.cell;
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    // Column numbers (every port when there is room, else every 4th).
    ctx.fillStyle = COLOURS.muted;
    ctx.textAlign = "center";
    const every = cs >= 16 ? 1 : cs >= 10 ? 2 : 4;
    for (let p = 1; p <= state.columns; p++) {
      if (p === 1 || p % every === 0) ctx.fillText(String(p), LABEL_W + (p - 0.5) * cs, TOP / 2);
    }
    ctx.textAlign = "left";
    for (const [y, tier] of state.tierY) {
      ctx.fillStyle = COLOURS.text;
      ctx.font = "600 12px system-ui, sans-serif";
      ctx.fillText(`${tier.name} (${tier.rows})`, 4, y + TIER_HEADER / 2);
      ctx.fillStyle = "#2d3843";
      ctx.fillRect(LABEL_W, y + TIER_HEADER - 3, state.columns * cs, 1);
    }
    ctx.font = `${Math.min(11, Math.max(8, cs - 2))}px system-ui, sans-serif`;
    for (let r = 0; r < state.rows.length; r++) {
      const row = state.rows[r], y = state.rowY[r];
      if (cs >= 9) {
        ctx.fillStyle = COLOURS.muted;
        ctx.fillText(truncate(row.name || row.guid, LABEL_W - 14), 10, y + cs / 2);
      }
      for (let p = 1; p <= state.columns; p++) drawCell(r, p);
    }
  }

  function truncate(text, width) {
    if (ctx.measureText(text).width <= width) return text;
    let t = text;
    while (t.length > 1 && ctx.measureText(t + "…").width > width) t = t.slice(0, -1);
    return t + "…";
  }

  function drawCell(r, p) {
    const cs = state.cell, x = LABEL_W + (p - 1) * cs, y = state.rowY[r];
    const cell = state.byNodePort.get(state.rows[r].node + ":" + p);
    const gap = cs >= 10 ? 1 : 0;
    ctx.fillStyle = COLOURS.grid;
    ctx.fillRect(x, y, cs, cs);
    ctx.fillStyle = cellColour(cell);
    ctx.fillRect(x, y, cs - gap, cs - gap);
    if (cell && cell.d) {
      // A lost link: a red cross on black, in either colour mode.
      ctx.strokeStyle = COLOURS.error;
      ctx.lineWidth = Math.max(1, cs / 8);
      ctx.beginPath();
      ctx.moveTo(x + 1, y + 1);
      ctx.lineTo(x + cs - gap - 1, y + cs - gap - 1);
      ctx.moveTo(x + cs - gap - 1, y + 1);
      ctx.lineTo(x + 1, y + cs - gap - 1);
      ctx.stroke();
    } else if (cell && cell.s) {
      // Hatch stale cells so they read as "not current" in either colour mode.
      ctx.strokeStyle = "#8a7aa8";
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, y + cs - gap);
      ctx.lineTo(x + cs - gap, y);
      ctx.stroke();
    }
    if (cell && cell.e) {
      ctx.fillStyle = COLOURS.error;
      const k = Math.max(3, Math.floor(cs / 2.5));
      ctx.beginPath();
      ctx.moveTo(x + cs - gap - k, y);
      ctx.lineTo(x + cs - gap, y);
      ctx.lineTo(x + cs - gap, y + k);
      ctx.fill();
    }
    if (state.hover && state.hover.r === r && state.hover.p === p) {
      ctx.strokeStyle = COLOURS.hover;
      ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, y + 0.5, cs - gap - 1, cs - gap - 1);
    }
  }

  function redrawCell(cell) {
    if (cell.row !== undefined) drawCell(cell.row, cell.num);
  }

  function drawLegend() {
    const bar = el("hm-legend-bar"), lctx = bar.getContext("2d");
    for (let x = 0; x < bar.width; x++) {
      lctx.fillStyle = colourAt(state.mode, x / (bar.width - 1));
      lctx.fillRect(x, 0, 1, bar.height);
    }
    el("hm-legend-title").textContent = LEGEND[state.mode];
    el("hm-legend-ticks").textContent = "0 %  ·  25 %  ·  50 %  ·  75 %  ·  100 %";
    for (const b of root.querySelectorAll(".hm-toggle button")) {
      b.setAttribute("aria-checked", String(b.dataset.mode === state.mode));
      b.classList.toggle("active", b.dataset.mode === state.mode);
    }
  }

  // ---- data ------------------------------------------------------------------------------------
  function putCell(raw, sweep) {
    const [port, node, num, u, c, e, s, d] = raw;
    let cell = state.cells.get(port);
    if (!cell) {
      const row = state.rowOf.get(node);
      if (row === undefined) return false;   // a switch the layout does not know: reload
      cell = { port, node, num, row };
      state.cells.set(port, cell);
      state.byNodePort.set(node + ":" + num, cell);
    }
    cell.u = u; cell.c = c; cell.e = e; cell.s = s; cell.d = d ? 1 : 0; cell.sweep = sweep;
    return true;
  }

  function applySnapshot(snap) {
    state.rows = snap.rows;
    state.tiers = snap.tiers;
    state.columns = Math.max(1, snap.columns);
    state.rowOf = new Map(snap.rows.map((row, i) => [row.node, i]));
    state.cells = new Map();
    state.byNodePort = new Map();
    state.detailCache.clear();
    state.sweep = snap.sweep;
    state.clockOffsetMs = Date.parse(snap.now) - Date.now();
    state.lastAtMs = snap.sweep ? Date.parse(snap.sweep.at) : null;
    cfg.pollInterval = snap.poll_interval_s || cfg.pollInterval;
    const sweepId = snap.sweep ? snap.sweep.id : 0;
    state.snapshotSweep = sweepId;
    for (const raw of snap.cells) putCell(raw, sweepId);
    layout();
    drawAll();
    state.loaded = true;
    const pending = state.buffered;
    state.buffered = [];
    for (const msg of pending) handle(msg);
    root.dataset.sweep = String(sweepId || "");
    updateSide();
    checkStale();
  }

  async function loadSnapshot() {
    if (state.reloading) return;
    state.reloading = true;
    state.loaded = false;
    try {
      const resp = await fetch(cfg.snapshotUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (resp.status === 401 || resp.status === 403) { location.href = cfg.loginUrl; return; }
      if (!resp.ok) throw new Error(`snapshot: HTTP ${resp.status}`);
      applySnapshot(await resp.json());
    } catch (err) {
      setStatus(`could not load the heatmap (${err.message}); retrying`, "offline");
      setTimeout(loadSnapshot, 3000);
    } finally {
      state.reloading = false;
    }
  }

  function applyDelta(payload) {
    // Deltas built before the snapshot are already in it. Later ones apply in arrival order: each
    // carries the database state when it was built, so sweeps of switch groups committed by
    // several workers may arrive with their ids out of order without losing anything.
    // the devices poller's Ethernet cells ("source": "devices") are not part of the IB sweeps
    const ethernet = payload.source === "devices";
    if (!ethernet && payload.sweep <= state.snapshotSweep && !payload.full) return;
    let unknown = false;
    for (const raw of payload.cells) {
      if (!putCell(raw, payload.sweep)) { unknown = true; continue; }
      redrawCell(state.cells.get(raw[0]));
    }
    if (!ethernet && (!state.sweep || payload.sweep >= state.sweep.id)) {
      state.sweep = Object.assign({}, state.sweep || {}, {
        id: payload.sweep, at: payload.at, interval_s: payload.interval_s, status: payload.status,
      });
      state.lastAtMs = Date.parse(payload.at);
      root.dataset.sweep = String(payload.sweep);
    }
    state.deltas++;
    state.detailCache.clear();
    root.dataset.deltas = String(state.deltas);
    updateSide();
    checkStale();
    if (unknown) loadSnapshot();
  }

  function handle(msg) {
    if (!state.loaded) { state.buffered.push(msg); return; }
    if (msg.type === "heatmap.delta") applyDelta(msg.payload);
    else if (msg.type === "heatmap.topology") loadSnapshot();
    else if (msg.type === "heatmap.stale") {
      state.staleReason = `sweep ${msg.payload.sweep} failed: ${msg.payload.reason}`;
      checkStale();
    }
  }

  // ---- websocket -------------------------------------------------------------------------------
  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}${cfg.wsPath}`);
    state.ws = ws;
    ws.onopen = () => {
      const wasRetry = state.wsRetry > 0;
      state.wsRetry = 0;
      // After a reconnect, deltas may have been missed: start again from a snapshot.
      if (wasRetry) loadSnapshot();
      checkStale();
    };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch (_) { return; }
      handle(msg);
    };
    ws.onclose = (ev) => {
      state.ws = null;
      if (ev.code === 4401) { location.href = cfg.loginUrl; return; }
      if (ev.code === 4403 || ev.code === 4404) { setStatus(`live updates refused (code ${ev.code})`, "offline"); return; }
      state.wsRetry++;
      const wait = Math.min(10000, 500 * 2 ** Math.min(5, state.wsRetry));
      setStatus(`live updates disconnected; reconnecting in ${Math.round(wait / 1000)} s`, "offline");
      setTimeout(connect, wait);
    };
  }

  // ---- status, staleness, side panel -----------------------------------------------------------
  function setStatus(text, st) {
    statusEl.textContent = text;
    root.dataset.state = st;
  }

  function ago(seconds) {
    if (seconds < 90) return `${Math.round(seconds)} s ago`;
    if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
    return `${(seconds / 3600).toFixed(1)} h ago`;
  }

  function checkStale() {
    if (!state.loaded) return;
    const now = Date.now() + state.clockOffsetMs;
    const limit = STALE_FACTOR * cfg.pollInterval;
    let stale = false, text = "";
    if (state.lastAtMs === null) {
      stale = true;
      text = cfg.liveAccess
        ? "No counter sweep yet for this fabric: is polling enabled and the worker running?"
        : "Imported snapshot: this fabric was read from a file and is not reachable from this host (no " +
          "local HCA, CA name or lab environment is set), so it has no counters to show. Give it live " +
          "access (local_hca or ca_name) to poll it.";
    } else {
      const age = (now - state.lastAtMs) / 1000;
      if (age > limit) {
        stale = true;
        text = `Data is stale: the last sweep was ${ago(age)} (more than ${STALE_FACTOR} poll intervals of ${cfg.pollInterval} s).`;
      }
    }
    if (state.staleReason && state.sweep && state.sweep.status === "failed") {
      stale = true;
      text = (text ? text + " " : "") + state.staleReason;
    }
    // an imported snapshot is not a fault: a neutral note, not the red stale banner
    const snapshot = !cfg.liveAccess && state.lastAtMs === null;
    banner.classList.toggle("hm-banner-neutral", snapshot);
    banner.hidden = !stale;
    banner.textContent = text;
    const live = state.ws && state.ws.readyState === WebSocket.OPEN;
    const sweepText = state.sweep ? `sweep ${state.sweep.id}, ${ago(Math.max(0, (now - state.lastAtMs) / 1000))}` : "no sweep yet";
    if (!live && root.dataset.state === "offline") return;
    if (snapshot) { setStatus("imported snapshot · no live data", "snapshot"); return; }
    setStatus(`${live ? "live" : "connecting"} · ${sweepText}`, stale ? "stale" : live ? "live" : "loading");
  }

  function metric(cell) {
    return state.mode === "congestion" ? cell.c : cell.u;
  }

  function pct(v) {
    return v === null || v === undefined ? "–" : `${(v * 100).toFixed(1)} %`;
  }

  function updateSide() {
    const hot = [];
    let stale = 0, errors = 0, nodata = 0, down = 0;
    for (const cell of state.cells.values()) {
      if (cell.d) { down++; continue; }
      if (cell.s) stale++;
      if (cell.e) errors++;
      const v = metric(cell);
      if (v === null || v === undefined) { nodata++; continue; }
      if (!cell.s && v > 0) hot.push(cell);
    }
    hot.sort((a, b) => metric(b) - metric(a));
    const list = el("hm-hot");
    const shown = hot.slice(0, 12);
    list.replaceChildren(...shown.map((cell) => {
      const li = document.createElement("li");
      li.dataset.port = cell.port;
      const a = document.createElement("a");
      const row = state.rows[cell.row];
      a.href = row.url || cfg.portUrl.replace("{id}", cell.port);
      // the switch name may be cut (ellipsis), never the port: it is what the list is for
      const name = document.createElement("span");
      name.className = "hm-hot-name";
      name.textContent = row.kind === "ethernet" ? row.name : (row.name || row.guid);
      const port = row.kind === "ethernet" ? ` ${(row.ports || {})[cell.num] || cell.num}` : ` [${cell.num}]`;
      a.append(name, port);
      a.title = name.textContent + port;
      const value = document.createElement("span");
      value.className = "hm-hot-value";
      value.textContent = pct(metric(cell));
      li.append(a, value);
      const jobs = state.hotJobs.get(cell.port);
      if (jobs && jobs.length) li.append(hotJobsList(jobs));
      return li;
    }));
    askHotJobs(shown.filter((c) => c.port > 0).map((c) => c.port));
    list.hidden = !hot.length;  // an empty ordered list would read "1. none"
    el("hm-hot-empty").hidden = hot.length > 0;
    el("hm-summary").textContent =
      `${state.rows.length} switches, ${state.cells.size} ports; ${down} down, ${stale} stale, ${errors} with rising errors, ${nodata} without a rate.`;
  }

  /** The jobs crossing a hot port: name (a link to the job page) and its estimated share. */
  function hotJobsList(jobs) {
    const box = document.createElement("div");
    box.className = "hm-hot-jobs";
    box.append("jobs: ");
    jobs.slice(0, 3).forEach((j, i) => {
      if (i) box.append(", ");
      const a = document.createElement("a");
      a.href = j.url;
      a.dataset.job = j.job;
      a.textContent = j.name;
      a.title = `${j.paths} paths of job ${j.job} (${j.state}) leave by this port`;
      box.append(a, ` ${Math.round(j.share * 100)} % estimated`);
    });
    if (jobs.length > 3) box.append(` and ${jobs.length - 3} more`);
    return box;
  }

  let hotTimer = null;
  /** Ask the annotations API for the jobs of the listed hot ports: once per sweep and list. */
  function askHotJobs(ports) {
    if (!cfg.annotationsUrl || !ports.length) return;
    const ask = `${state.sweep ? state.sweep.id : ""}|${[...ports].sort((a, b) => a - b).join(",")}`;
    if (ask === state.hotAsked) return;
    state.hotAsked = ask;
    clearTimeout(hotTimer);
    hotTimer = setTimeout(async () => {
      try {
        const resp = await fetch(`${cfg.annotationsUrl}?ports=${ports.join(",")}`,
          { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (!resp.ok) return;
        const doc = await resp.json();
        state.hotJobs = new Map(Object.entries(doc.ports || {}).map(([id, a]) => [Number(id), a.jobs || []]));
        el("hm-hot-note").hidden = ![...state.hotJobs.values()].some((j) => j.length);
        updateSide();
        root.dataset.hotJobs = String([...state.hotJobs.values()].reduce((n, j) => n + j.length, 0));
      } catch (_) { /* the jobs are best effort: the list stands without them */ }
    }, 150);
  }

  // ---- tooltip and click -----------------------------------------------------------------------
  function hitTest(ev) {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    if (x < LABEL_W) return null;
    const p = Math.floor((x - LABEL_W) / state.cell) + 1;
    if (p < 1 || p > state.columns) return null;
    // Binary search the row whose band contains y.
    let lo = 0, hi = state.rowY.length - 1, r = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (state.rowY[mid] <= y) { r = mid; lo = mid + 1; } else hi = mid - 1;
    }
    if (r < 0 || y >= state.rowY[r] + state.cell) return null;
    return { r, p, cell: state.byNodePort.get(state.rows[r].node + ":" + p) };
  }

  function fmtRate(bytes) {
    if (bytes === null || bytes === undefined) return "–";
    const units = ["B/s", "KB/s", "MB/s", "GB/s", "TB/s"];
    let v = bytes, i = 0;
    while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return `${v.toFixed(v < 10 && i ? 2 : 1)} ${units[i]}`;
  }

  function fmtNum(v, digits = 0) {
    return v === null || v === undefined ? "–" : Number(v).toLocaleString(undefined, { maximumFractionDigits: digits });
  }

  function esc(text) {
    return String(text ?? "").replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]);
  }

  /** Tooltip of an Ethernet switch's cell (devices app row): the interface, its rates' shares. */
  function ethernetTooltipHtml(hit) {
    const row = state.rows[hit.r], cell = hit.cell;
    let html = `<b>${esc(row.name)}</b> ${esc((row.ports || {})[hit.p] || "")}<br><span class="muted">Ethernet (SNMP) · ${esc(row.description || "")}</span>`;
    if (!cell) return html + "<br>no such interface";
    if (cell.d) html += `<br><b class="hm-down-label">interface Down</b> <span class="muted">(admin up)</span>`;
    html += `<table><tr><th>congestion</th><td>${pct(cell.c)}</td></tr><tr><th>utilisation</th><td>${pct(cell.u)}</td></tr>`;
    if (cell.s) html += `<tr><th>stale</th><td>no rate this poll</td></tr>`;
    html += `<tr><th>errors</th><td>${cell.e ? "rising" : "none this interval"}</td></tr>`;
    return html + "</table><span class='muted'>click for the device page</span>";
  }
  /** Where a click (or Enter) on a cell goes: an Ethernet row's device page, else the port page. */
  function cellHref(hit) {
    const row = state.rows[hit.r];
    if (row && row.url) return row.url;
    return hit.cell ? cfg.portUrl.replace("{id}", hit.cell.port) : null;
  }

  function tooltipHtml(hit, detail) {
    const row = state.rows[hit.r], cell = hit.cell;
    if (row.kind === "ethernet") return ethernetTooltipHtml(hit);
    let html = `<b>${esc(row.name || row.guid)}</b> port ${hit.p}<br><span class="muted">${esc(row.guid)} · LID ${esc(row.lid ?? "–")} · ${esc(row.tier_name)}</span>`;
    if (!cell) return html + "<br>no such port";
    if (cell.d) html += `<br><b class="hm-down-label">link Down</b> <span class="muted">(the last rates below are from before)</span>`;
    html += `<table><tr><th>congestion</th><td>${pct(cell.c)}</td></tr><tr><th>utilisation</th><td>${pct(cell.u)}</td></tr>`;
    if (cell.s) html += `<tr><th>stale</th><td>${esc(detail?.counters?.stale_reason || "not read by the last sweep")}</td></tr>`;
    if (detail && detail.counters) {
      const k = detail.counters, r = k.rates, raw = k.raw;
      html += `<tr><th>xmit</th><td>${fmtRate(r.xmit_bytes_per_s)} · ${fmtNum(r.xmit_pkts_per_s)} pkt/s</td></tr>`;
      html += `<tr><th>rcv</th><td>${fmtRate(r.rcv_bytes_per_s)} · ${fmtNum(r.rcv_pkts_per_s)} pkt/s</td></tr>`;
      html += `<tr><th>PortXmitWait</th><td>${fmtNum(r.xmit_wait_per_s)} ticks/s (raw ${fmtNum(raw.xmit_wait)})</td></tr>`;
      html += `<tr><th>PortXmitData</th><td>${fmtNum(raw.xmit_data)} words ${k.extended ? "(64-bit)" : "(32-bit)"}</td></tr>`;
      const errs = Object.entries(k.error_deltas || {}).filter(([, v]) => v > 0);
      html += `<tr><th>errors</th><td>${errs.length ? errs.map(([n, v]) => `${esc(n)} +${fmtNum(v)}`).join(", ") : "none this interval"}</td></tr>`;
      if ((k.saturated || []).length) html += `<tr><th>saturated</th><td>${esc(k.saturated.join(", "))}</td></tr>`;
      if (k.reset) html += `<tr><th>reset</th><td>counters went down this interval</td></tr>`;
    } else if (detail) {
      html += `<tr><th>counters</th><td>never read</td></tr>`;
    }
    if (detail) {
      const link = detail.remote
        ? `${esc(detail.remote.name || detail.remote.node_guid)} port ${detail.remote.port_num}${detail.remote.width ? ` · ${esc(detail.remote.width)} ${esc(detail.remote.speed)}` : ""}`
        : "no link";
      html += `<tr><th>remote end</th><td>${link}</td></tr>`;
      const jobs = (detail.annotations || {}).jobs || [];
      if (jobs.length) {
        const names = jobs.slice(0, 5).map((j) => `${esc(j.name)} <span class="muted">#${esc(j.job)}</span> ${Math.round(j.share * 100)} %`);
        if (jobs.length > 5) names.push(`and ${jobs.length - 5} more`);
        html += `<tr><th>jobs</th><td class="hm-tip-jobs">${names.join("<br>")}<br><span class="muted">share of the port's traffic: estimated</span></td></tr>`;
      }
    } else {
      html += `<tr><th></th><td class="muted">loading counters…</td></tr>`;
    }
    return html + "</table><span class='muted'>click for charts</span>";
  }

  let detailTimer = null;
  function showTooltip(ev, hit) {
    const cached = hit.cell ? state.detailCache.get(hit.cell.port) : null;
    tooltip.innerHTML = tooltipHtml(hit, cached);
    tooltip.hidden = false;
    const pad = 14, w = tooltip.offsetWidth, h = tooltip.offsetHeight;
    let left = ev.clientX + pad, top = ev.clientY + pad;
    if (left + w > window.innerWidth) left = ev.clientX - w - pad;
    if (top + h > window.innerHeight) top = ev.clientY - h - pad;
    tooltip.style.left = left + "px";
    tooltip.style.top = top + "px";
    if (hit.cell && !cached && hit.cell.port > 0) {
      clearTimeout(detailTimer);
      const port = hit.cell.port;
      detailTimer = setTimeout(async () => {
        try {
          const resp = await fetch(cfg.cellUrl.replace("{id}", port), { credentials: "same-origin" });
          if (!resp.ok) return;
          state.detailCache.set(port, await resp.json());
          if (state.hover && state.hover.cell && state.hover.cell.port === port) showTooltip(state.lastEvent, state.hover);
        } catch (_) { /* tooltip detail is best effort */ }
      }, 120);
    }
  }

  let lastMouse = "";
  canvas.addEventListener("mousemove", (ev) => {
    // Scrolling makes the browser send a mousemove at the same spot: keep the keyboard's cell.
    const at = ev.clientX + "," + ev.clientY;
    if (at === lastMouse) return;
    lastMouse = at;
    const hit = hitTest(ev);
    const prev = state.hover;
    state.hover = hit;
    state.lastEvent = ev;
    if (prev) drawCell(prev.r, prev.p);
    if (!hit) { tooltip.hidden = true; canvas.style.cursor = "default"; return; }
    drawCell(hit.r, hit.p);
    canvas.style.cursor = hit.cell ? "pointer" : "default";
    showTooltip(ev, hit);
  });
  canvas.addEventListener("mouseleave", () => {
    const prev = state.hover;
    state.hover = null;
    tooltip.hidden = true;
    if (prev) drawCell(prev.r, prev.p);
  });
  canvas.addEventListener("click", (ev) => {
    const hit = hitTest(ev);
    if (hit && hit.cell) location.href = cellHref(hit);
  });

  // Keyboard: arrows move the highlighted cell, Enter opens its port page.
  function showAt(r, p) {
    const scroll = el("hm-scroll");
    const top = state.rowY[r];
    if (top < scroll.scrollTop + TOP || top + state.cell > scroll.scrollTop + scroll.clientHeight) {
      scroll.scrollTop = Math.max(0, top - scroll.clientHeight / 2);
    }
    const rect = canvas.getBoundingClientRect();
    const x = rect.left + LABEL_W + (p - 0.5) * state.cell, y = rect.top + state.rowY[r] + state.cell / 2;
    const hit = { r, p, cell: state.byNodePort.get(state.rows[r].node + ":" + p) };
    const prev = state.hover;
    state.hover = hit;
    state.lastEvent = { clientX: x, clientY: y };
    if (prev) drawCell(prev.r, prev.p);
    drawCell(r, p);
    showTooltip(state.lastEvent, hit);
  }
  canvas.addEventListener("keydown", (ev) => {
    if (!state.loaded || !state.rows.length) return;
    const h = state.hover || { r: 0, p: 1 };
    let { r, p } = h;
    if (ev.key === "ArrowUp") r = Math.max(0, r - 1);
    else if (ev.key === "ArrowDown") r = Math.min(state.rows.length - 1, r + 1);
    else if (ev.key === "ArrowLeft") p = Math.max(1, p - 1);
    else if (ev.key === "ArrowRight") p = Math.min(state.columns, p + 1);
    else if (ev.key === "Enter" && h.cell) { location.href = cellHref(h); return; }
    else if (ev.key === "Escape") { tooltip.hidden = true; return; }
    else return;
    ev.preventDefault();
    showAt(r, p);
  });
  el("hm-find").addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    const q = ev.target.value.trim().toLowerCase();
    if (!q) return;
    const r = state.rows.findIndex((row) => ((row.name || "").toLowerCase().includes(q) || (row.description || "").toLowerCase().includes(q)) || row.guid === q);
    if (r < 0) { setStatus(`no switch matches "${ev.target.value}"`, root.dataset.state); return; }
    canvas.focus();
    showAt(r, 1);
  });

  for (const b of root.querySelectorAll(".hm-toggle button")) {
    b.addEventListener("click", () => {
      state.mode = b.dataset.mode;
      root.dataset.mode = state.mode;
      const url = new URL(location.href);
      url.searchParams.set("mode", state.mode);
      history.replaceState(null, "", url);
      drawLegend();
      if (state.loaded) { drawAll(); updateSide(); }
    });
  }

  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (state.loaded) { layout(); drawAll(); } }, 150);
  });
  setInterval(checkStale, 1000);
  // Keep the socket alive through proxies that drop idle connections.
  setInterval(() => { if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send('{"type":"ping"}'); }, 30000);

  // ---- test and console hook -------------------------------------------------------------------
  window.weftHeatmap = {
    cellState(portId) {
      const cell = state.cells.get(Number(portId));
      if (!cell) return null;
      return { port: cell.port, node: cell.node, port_num: cell.num, utilisation: cell.u, congestion: cell.c,
        error: cell.e, stale: cell.s, down: cell.d, colour: cellColour(cell), mode: state.mode, sweep: cell.sweep };
    },
    findPort(nodeKey, portNum) {
      const row = state.rows.find((r) => r.name === nodeKey || r.description === nodeKey || r.guid === nodeKey);
      if (!row) return null;
      const cell = state.byNodePort.get(row.node + ":" + portNum);
      return cell ? cell.port : null;
    },
    cellCentre(nodeId, portNum) {
      const r = state.rowOf.get(Number(nodeId));
      if (r === undefined) return null;
      return { x: LABEL_W + (portNum - 0.5) * state.cell, y: state.rowY[r] + state.cell / 2 };
    },
    get sweep() { return state.sweep ? state.sweep.id : null; },
    get deltas() { return state.deltas; },
    get mode() { return state.mode; },
    reload: loadSnapshot,
    /** Apply a websocket frame as if it had arrived ({type, payload}); returns ms spent. */
    applyMessage(msg) {
      const t0 = performance.now();
      handle(msg);
      return performance.now() - t0;
    },
    /** Redraw everything; returns ms spent (layout + cells + labels). */
    redraw() {
      const t0 = performance.now();
      layout();
      drawAll();
      return performance.now() - t0;
    },
  };

  drawLegend();
  connect();
  loadSnapshot();
})();
