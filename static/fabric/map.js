// Weft network map: draws the server-computed layout (/api/fabric/fabrics/{id}/map/) with
// sigma.js (WebGL) over a graphology graph. The browser computes no layout: it builds the graph
// from parallel arrays, colours nodes by tier and links by speed/state/width, and offers search
// (GUID as a 64-bit number, LID, name) and a details panel fed by /api/fabric/nodes/{id}/.
// Live: it listens to the fabric's alarm group (ws/alarms/<fabric>/, events.consumers) and, after a
// link.*/port.* alarm change, a discovery or an Ethernet layer change (summary.changed, source
// "devices": an SNMP poll saw LLDP systems or links come or go), fetches the light payload
// (map/?part=edges) and recolours its cables in place; the Ethernet layer's nodes and links are
// swapped in place too (they are drawn apart from the IB layout); only a change of the IB nodes
// (added/removed/renamed) asks for a reload.
// Marks: #map[data-highlight] (GUIDs, space-separated: a pool's hosts) are drawn orange with their
// neighbours (the leaves they are cabled to) in colour and the rest dimmed; #map[data-host-url]
// makes the panel's host name a link (?fabric=<id>&name=<host>).
// Groups (payload "groups": the scheduler's locality units, blocks, spine groups, the rest by tier):
// above a few hundred nodes the map opens with every group collapsed into one node ("g<k>"); a click
// on a group expands it, "Collapse all" folds them back. Cables between a collapsed group and
// anything else are drawn as one edge ("m:<s>|<t>", its members the payload's edge indexes) coloured
// by its worst member. Overlays ("Links by"): speed, state, width, and the live part (payload
// "live", read at each request): utilisation, congestion, open alarms, each with its legend.
// A click on a link opens its panel: both ends, per cable their ports and counters, the open alarms
// (/api/fabric/fabrics/{id}/map-edge/?a=&b=); on a group edge, its cables by worst first.
// Ethernet layer (payload part "ethernet", devices.maplayer): SNMP devices and the systems their
// LLDP neighbours name, drawn as amber nodes (keys "e<k>"; a device managing an IB switch is drawn
// on that switch) joined by amber Ethernet links (keys "x<e>", red while down), with a legend entry.
// The "CAs" box hides the Ethernet hosts (LLDP systems that are not switches) with the IB CAs.
// Test and bench hooks: #map[data-state|data-nodes|data-edges|data-links|data-down-links|
// data-live|data-render-ms|data-selected|data-highlighted|data-highlight-missing|data-groups|
// data-expanded|data-colour] and window.weftMap.
// Labels: placed inside the canvas without overlapping each other (placeLabels); a marked host's
// CAs carry one label, the host's.
(function () {
  "use strict";
  const container = document.getElementById("map");
  if (!container) return;
  const t0 = performance.now();
  const statusEl = document.getElementById("map-status");
  const overlay = document.getElementById("map-overlay");
  const panel = document.getElementById("map-panel");
  const legend = document.getElementById("map-legend");
  const searchInput = document.getElementById("map-search");
  const results = document.getElementById("map-results");
  const colourSelect = document.getElementById("map-colour");
  const nodeApi = container.dataset.nodeApi;

  const TIER_NAMES = { 0: "host", 1: "leaf", 2: "spine", 3: "core", 9: "unknown" };
  const TYPE_NAMES = ["CA", "switch", "router"];
  const NODE_COLOURS = {
    core: "#b084f5", spine: "#4aa3ff", leaf: "#3fc1c9", ca: "#c9d1d9", router: "#db6d28", unknown: "#8b98a5",
  };
  const SPEED_COLOURS = {
    SDR: "#6e7681", DDR: "#8b949e", QDR: "#a371f7", FDR10: "#d2a8ff", FDR: "#f778ba", EDR: "#ffa657",
    HDR: "#3fb950", NDR: "#58a6ff", XDR: "#79c0ff", "": "#484f58",
  };
  const STATE_COLOURS = { 4: "#3fb950", 3: "#d29922", 2: "#db6d28", 1: "#f85149", 0: "#6e7681" };
  const STATE_NAMES = { 4: "Active", 3: "Armed", 2: "Initialize", 1: "Down", 0: "not reported (file import)" };
  const WIDTH_COLOURS = { "1x": "#f85149", "2x": "#db6d28", "4x": "#3fb950", "8x": "#58a6ff", "12x": "#a371f7", "": "#484f58" };
  const HIGHLIGHT = "#ffa657";
  const GROUP_COLOURS = { unit: "#3fc1c9", block: "#4aa3ff", spine_group: "#b084f5", tier: "#8b98a5" };
  const GROUP_NAMES = { unit: "unit (leaf or rail pod, with its hosts)", block: "block (spines)", spine_group: "spine group (cores)", tier: "other nodes by tier" };
  // live overlays: [upper bound (exclusive), colour, legend name]; None ("no data") grey
  const NO_DATA = "#3a444f";
  const UTIL_BINS = [[0.3, "#2ea043", "< 30 %"], [0.7, "#d29922", "30–70 %"], [0.9, "#db6d28", "70–90 %"], [Infinity, "#f85149", "≥ 90 %"]];
  const CONG_BINS = [[0.01, "#2ea043", "< 1 %"], [0.1, "#d29922", "1–10 %"], [0.3, "#db6d28", "10–30 %"], [Infinity, "#f85149", "≥ 30 %"]];
  const ALARM_COLOURS = { none: "#2ea043", some: "#f85149" };
  const ETH_COLOURS = { switch: "#e3b341", host: "#f2dfa7", link: "#e3b341", stale: "#6e7681" };
  const DIM_NODE = "#26303a";
  const DIM_EDGE = "#161d24";

  let data = null;
  let graph = null;
  let renderer = null;
  let colourMode = "speed";
  let showCas = true;
  let selected = null; // node key
  let neighbours = new Set();
  let matches = new Set();
  let highlighted = new Set(); // node keys marked by data-highlight
  let highlightNeighbours = new Set();
  const guidIndex = new Map();
  const lidIndex = new Map();
  const idIndex = new Map();
  const timings = {};
  let expanded = new Set(); // group indexes drawn as their members
  let edgeUrl = null;
  // whether the frame on screen is of the camera's current state: sigma maps graph to viewport
  // points (graphToViewport) with the matrix of its last render, and a click is resolved in the
  // picking buffers of that render; a camera move or a resize draws on the next animation frame
  let frameDrawn = true;
  let labelQueue = []; // labels sigma picked for the frame being drawn (queueLabel)
  let labelBoxes = []; // labels placeLabels drew last: {key, label, x, y, size, left, top, right, bottom} (canvas px)
  let hostLabels = new Map(); // node key → its host's label: one marked CA per host (markHighlighted)

  function setStatus(text) { if (statusEl) statusEl.textContent = text; }
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function link(href, text) { const a = el("a", text); a.href = href; return a; }

  /** Canonical GUID (0x + 16 lowercase hex digits) of user input, or null. */
  function normalizeGuid(text) {
    const m = /^(?:0x)?([0-9a-fA-F]{1,16})$/.exec(text.trim());
    if (!m) return null;
    return "0x" + BigInt("0x" + m[1]).toString(16).padStart(16, "0");
  }

  function nodeColour(i) {
    const t = data.nodes.type[i];
    if (t === 0) return NODE_COLOURS.ca;
    if (t === 2) return NODE_COLOURS.router;
    return NODE_COLOURS[TIER_NAMES[data.nodes.tier[i]]] || NODE_COLOURS.unknown;
  }
  function edgeColour(e) {
    const E = data.edges;
    if (E.down && E.down[e] > 0) return STATE_COLOURS[1];  // a cable down (open link.down alarm): red in every mode
    if (colourMode === "util" || colourMode === "cong") return binColour(liveValue(e));
    if (colourMode === "alarms") return liveAlarms(e) > 0 ? ALARM_COLOURS.some : ALARM_COLOURS.none;
    if (colourMode === "state") return STATE_COLOURS[E.state[e]] || STATE_COLOURS[0];
    if (colourMode === "width") return WIDTH_COLOURS[data.widths[E.width[e]]] || WIDTH_COLOURS[""];
    return SPEED_COLOURS[data.speeds[E.speed[e]]] || "#8b98a5";
  }

  function label(i) { return data.nodes.name[i] || data.nodes.guid[i]; }

  // --- live overlays --------------------------------------------------------------------------
  function liveValue(e) {
    const L = data.live;
    if (!L) return null;
    const v = colourMode === "cong" ? L.cong[e] : L.util[e];
    return v == null ? null : v;
  }
  function liveAlarms(e) { return data.live ? data.live.alarms[e] || 0 : 0; }
  function bins() { return colourMode === "cong" ? CONG_BINS : UTIL_BINS; }
  function binOf(v) { if (v == null) return null; for (const b of bins()) if (v < b[0]) return b; return bins()[bins().length - 1]; }
  function binColour(v) { const b = binOf(v); return b ? b[1] : NO_DATA; }
  /** How bad edge e is in the current mode (higher is worse): picks a group edge's colour. */
  function badness(e) {
    const E = data.edges;
    if (E.down && E.down[e] > 0) return 1e9;
    if (colourMode === "util" || colourMode === "cong") { const v = liveValue(e); return v == null ? -1 : v; }
    if (colourMode === "alarms") return liveAlarms(e);
    if (colourMode === "state") return E.state[e] ? 5 - E.state[e] : 0;
    return -(E.rate[e] == null ? 1e6 : E.rate[e]);
  }
  function worst(members) {
    let best = members[0], score = badness(best);
    for (let k = 1; k < members.length; k++) { const b = badness(members[k]); if (b > score) { best = members[k]; score = b; } }
    return best;
  }
  function colourOfEdgeKey(key, attrs) { return attrs.members ? edgeColour(worst(attrs.members)) : edgeColour(Number(key)); }

  // --- groups ---------------------------------------------------------------------------------
  function grouped() { return !!(data.groups && data.groups.member && data.groups.member.length === data.nodes.id.length); }
  /** The graph key drawing node i: its own, or its collapsed group's. */
  function keyOf(i) {
    if (!grouped()) return String(i);
    const g = data.groups.member[i];
    return expanded.has(g) ? String(i) : "g" + g;
  }
  /** Nodes of the map, collapsed or not: the IB nodes and the Ethernet ones drawn on their own. */
  function totalNodes() {
    const L = data.ethernet;
    return data.nodes.id.length + (L ? L.nodes.ib.filter((ib) => ib < 0).length : 0);
  }
  function isGroupKey(key) { return typeof key === "string" && key.charAt(0) === "g"; }
  /** Draw group g as its members (and redraw), keeping the selection and the camera. */
  function expandGroups(list) {
    let changed = false;
    for (const g of list) if (!expanded.has(g)) { expanded.add(g); changed = true; }
    if (changed && renderer) rebuild();
    return changed;
  }
  function collapseAll() {
    if (!grouped()) return;
    expanded = new Set();
    if (selected !== null && !isGroupKey(selected)) clearSelection();
    rebuild();
  }
  function rebuild() {
    graph.clear();
    addNodes();
    addEthNodes();
    addEdges();
    markHighlighted();
    if (selected !== null && !graph.hasNode(selected)) { selected = null; neighbours = new Set(); }
    if (selected !== null) neighbours = new Set(graph.neighbors(selected));
    container.dataset.nodes = String(totalNodes());
    container.dataset.drawnNodes = String(graph.order);
    container.dataset.edges = String(graph.size);
    container.dataset.expanded = String(expanded.size);
    renderer.setSetting("enableEdgeEvents", graph.size <= 6000);
    renderer.refresh();
    drawLegend();
    showCounts();
  }

  // --- Ethernet layer -------------------------------------------------------------------------
  function eth() { return data.ethernet || null; }
  function isEthKey(key) { return typeof key === "string" && key.charAt(0) === "e"; }
  /** Graph key of Ethernet node k: the IB node it is drawn on, else its own. */
  function ethKey(k) { const ib = eth().nodes.ib[k]; return ib >= 0 ? keyOf(ib) : "e" + k; } // its IB node, or that node's collapsed group
  function ethEdgeColour(e) {
    const L = eth();
    if (L.edges.down[e] > 0) return STATE_COLOURS[1];
    return L.edges.stale && L.edges.stale[e] ? ETH_COLOURS.stale : ETH_COLOURS.link; // last-known: polling disabled
  }
  function addEthNodes() {
    const L = eth();
    if (!L) return;
    for (let k = 0; k < L.nodes.name.length; k++) {
      if (L.nodes.ib[k] >= 0) continue;
      const colour = L.nodes.stale && L.nodes.stale[k] ? ETH_COLOURS.stale : ETH_COLOURS[L.nodes.kind[k]] || ETH_COLOURS.host;
      graph.addNode("e" + k, {
        x: L.nodes.x[k], y: L.nodes.y[k], size: L.nodes.kind[k] === "switch" ? 4 : 2, color: colour,
        baseColor: colour, label: L.nodes.name[k],
      });
    }
  }
  function addEthEdges() {
    const L = eth();
    if (!L) return;
    let drawn = 0;
    for (let e = 0; e < L.edges.a.length; e++) {
      const s = ethKey(L.edges.a[e]), t = ethKey(L.edges.b[e]);
      if (s === t || graph.hasEdge(s, t)) continue; // beside an IB cable between the same nodes
      graph.addEdgeWithKey("x" + e, s, t, {
        size: Math.min(0.8 + Math.log2(Math.max(L.edges.n[e] + L.edges.down[e], 1)) * 0.6, 3), color: ethEdgeColour(e),
      });
      drawn++;
    }
    container.dataset.ethNodes = String(L.nodes.name.length);
    container.dataset.ethEdges = String(drawn);
    container.dataset.ethLinks = String(L.counts.links);
    container.dataset.ethDownLinks = String(L.counts.down_links);
    container.dataset.ethStaleLinks = String(L.counts.stale_links || 0);
  }

  /** (Re)fill the GUID, node id and LID indexes from data.nodes. */
  function indexNodes() {
    guidIndex.clear(); idIndex.clear(); lidIndex.clear();
    const nd = data.nodes;
    for (let i = 0; i < nd.id.length; i++) {
      guidIndex.set(nd.guid[i], i);
      idIndex.set(nd.id[i], i);
      if (nd.lid[i] != null) addLid(nd.lid[i], i);
    }
    for (const [lid, i] of data.extra_lids) addLid(lid, i);
  }

  function buildGraph() {
    const Graph = (window.graphology && (window.graphology.Graph || window.graphology)) || null;
    graph = new Graph({ type: "undirected", multi: false, allowSelfLoops: false });
    indexNodes();
    if (grouped()) {
      const G = data.groups;
      expanded = new Set(G.collapsed ? [] : G.key.map((_, g) => g));
      // what the page asks to show (a pool's hosts, a focused node) is drawn expanded
      const wanted = (container.dataset.highlight || "").split(/[\s,]+/).filter(Boolean);
      if (container.dataset.focus) wanted.push(container.dataset.focus);
      for (const g of wanted) { const i = guidIndex.get(normalizeGuid(g) || g); if (i !== undefined) expanded.add(G.member[i]); }
      container.dataset.groups = String(G.key.length);
      container.dataset.expanded = String(expanded.size);
    }
    addNodes();
    addEthNodes();
    addEdges();
    markHighlighted();
  }

  function addNodes() {
    const nd = data.nodes;
    const G = data.groups;
    for (let i = 0; i < nd.id.length; i++) {
      const key = keyOf(i);
      if (key.charAt(0) === "g") {
        if (graph.hasNode(key)) continue;
        const g = Number(key.slice(1));
        const colour = GROUP_COLOURS[G.kind[g]] || GROUP_COLOURS.tier;
        graph.addNode(key, {
          x: G.x[g], y: G.y[g], size: Math.min(5 + Math.log2(G.n[g]) * 1.4, 16), color: colour, baseColor: colour,
          label: G.name[g] + " (" + G.n[g] + ")", type: "circle",
        });
        continue;
      }
      const isSwitch = nd.type[i] !== 0;
      graph.addNode(key, {
        x: nd.x[i], y: nd.y[i], size: isSwitch ? 4 : 2, color: nodeColour(i), label: label(i),
        baseColor: nodeColour(i),
      });
    }
  }

  /** The nodes named by #map[data-highlight] (GUIDs), and their neighbours. */
  function markHighlighted() {
    const wanted = (container.dataset.highlight || "").split(/[\s,]+/).filter(Boolean);
    highlighted = new Set();
    let missing = 0;
    for (const g of wanted) {
      const i = guidIndex.get(normalizeGuid(g) || g);
      if (i === undefined) missing++;
      else highlighted.add(String(i));
    }
    highlightNeighbours = new Set();
    for (const key of highlighted) if (graph.hasNode(key)) for (const n of graph.neighbors(key)) highlightNeighbours.add(n);
    // one label per marked host, on its first CA ("host001 (8 HCAs)"): a host's HCAs are drawn a
    // few pixels apart, and their names, one each, were drawn over each other; each CA's own
    // name shows when it is hovered or selected
    hostLabels = new Map();
    const perHost = new Map();
    for (const key of highlighted) {
      const h = data.nodes.host[Number(key)];
      if (h == null || h < 0 || data.nodes.type[Number(key)] !== 0) { hostLabels.set(key, null); continue; }
      if (!perHost.has(h)) perHost.set(h, []);
      perHost.get(h).push(key);
    }
    for (const [h, keys] of perHost) {
      keys.sort((a, b) => label(Number(a)).localeCompare(label(Number(b)), undefined, { numeric: true }));
      hostLabels.set(keys[0], data.hosts[h] + (keys.length > 1 ? " (" + keys.length + " HCAs)" : ""));
    }
    if (wanted.length) {
      container.dataset.highlighted = String(highlighted.size);
      container.dataset.highlightMissing = String(missing);
    }
  }
  function addLid(lid, i) {
    if (!lidIndex.has(lid)) lidIndex.set(lid, []);
    lidIndex.get(lid).push(i);
  }

  function addEdges() {
    const E = data.edges;
    const merged = new Map();
    for (let e = 0; e < E.a.length; e++) {
      const s = keyOf(E.a[e]), t = keyOf(E.b[e]);
      const cables = E.n[e] + (E.down ? E.down[e] : 0);
      if (s === t) continue; // inside a collapsed group
      if (!isGroupKey(s) && !isGroupKey(t)) {
        graph.addEdgeWithKey(String(e), s, t, { size: Math.min(0.6 + Math.log2(Math.max(cables, 1)) * 0.6, 3), color: edgeColour(e) });
        continue;
      }
      const key = "m:" + (s < t ? s + "|" + t : t + "|" + s);
      let m = merged.get(key);
      if (!m) { m = { s, t, members: [], cables: 0 }; merged.set(key, m); }
      m.members.push(e);
      m.cables += cables;
    }
    for (const [key, m] of merged) {
      graph.addEdgeWithKey(key, m.s, m.t, {
        size: Math.min(1.5 + Math.log2(Math.max(m.cables, 1)) * 0.5, 6), members: m.members, cables: m.cables,
        color: edgeColour(worst(m.members)),
      });
    }
    addEthEdges();
  }

  function recolourEdges() {
    container.dataset.colour = colourMode;
    graph.forEachEdge((key, attrs) => { attrs.color = key.charAt(0) === "x" ? ethEdgeColour(Number(key.slice(1))) : colourOfEdgeKey(key, attrs); });
    renderer.refresh();
    drawLegend();
  }

  /** Swap in the edges of a light payload (map/?part=edges) whose IB nodes are those drawn: the
   * layout stays, cables are re-added with their new state, down count, speed and width. The
   * Ethernet layer comes whole: its nodes are replaced in place (a new LLDP system appears, a
   * gone one goes; the selection follows an Ethernet node by name), then its links. */
  function applyEdges(part) {
    data.edges = part.edges;
    data.speeds = part.speeds;
    data.widths = part.widths;
    data.counts = part.counts;
    data.discovery = part.discovery;
    if (part.live) data.live = part.live;
    graph.clearEdges();
    if (part.ethernet) replaceEthNodes(part.ethernet);
    addEdges();
    if (selected !== null) neighbours = new Set(graph.neighbors(selected));
    markHighlighted();
    container.dataset.nodes = String(totalNodes());
    container.dataset.drawnNodes = String(graph.order);
    container.dataset.edges = String(graph.size);
    if (part.ethernet) fixFrame();
    renderer.refresh();
    drawLegend();
    showCounts();
    if (selected !== null && isEthKey(selected)) showEthNode(Number(selected.slice(1)));
  }

  /** Replace the Ethernet nodes drawn on their own ("e<k>") by those of layer L (its indexes may
   * differ: a selected or matched Ethernet node is found again by name, else let go). */
  function replaceEthNodes(L) {
    const old = eth();
    const nameOf = (key) => (old && isEthKey(key) ? old.nodes.name[Number(key.slice(1))] : null);
    const selName = nameOf(selected);
    const matchNames = [...matches].map(nameOf).filter((n) => n !== null);
    graph.forEachNode((key) => { if (isEthKey(key)) graph.dropNode(key); });
    data.ethernet = L;
    addEthNodes();
    const keyOfName = (name) => { const k = L.nodes.name.indexOf(name); return k < 0 ? null : ethKey(k); };
    if (selName !== null) {
      const key = keyOfName(selName);
      if (key !== null && isEthKey(key)) { selected = key; container.dataset.selected = selName; }
      else clearSelection();
    }
    if (matchNames.length) {
      matches = new Set([...matches].filter((key) => !isEthKey(key)));
      for (const name of matchNames) { const key = keyOfName(name); if (key !== null) matches.add(key); }
    }
  }

  function drawLegend() {
    legend.replaceChildren();
    const ul = el("ul");
    const nodesSeen = { core: 0, spine: 0, leaf: 0, ca: 0, router: 0, unknown: 0 };
    for (let i = 0; i < data.nodes.id.length; i++) {
      const t = data.nodes.type[i];
      const k = t === 0 ? "ca" : t === 2 ? "router" : (TIER_NAMES[data.nodes.tier[i]] || "unknown");
      nodesSeen[k in nodesSeen ? k : "unknown"]++;
    }
    for (const [k, n] of Object.entries(nodesSeen)) {
      if (!n) continue;
      const li = el("li");
      const dot = el("span", null, "dot"); dot.style.background = NODE_COLOURS[k];
      li.append(dot, (k === "ca" ? "CA" : k) + " (" + n + ")");
      ul.append(li);
    }
    // Cables, as drawn: the down ones (open link.down alarm, red in every mode) under "Down",
    // the live ones under their state, width or speed.
    const counts = new Map();
    const E = data.edges;
    const DOWN_KEY = "down";
    for (let e = 0; e < E.a.length; e++) {
      const down = E.down ? E.down[e] : 0;
      if (down > 0) {
        const d = counts.get(DOWN_KEY) || { colour: STATE_COLOURS[1], name: STATE_NAMES[1], n: 0 };
        d.n += down;
        counts.set(DOWN_KEY, d);
      }
      if (!E.n[e]) continue;
      let key, colour, name;
      if (colourMode === "util" || colourMode === "cong") {
        const b = binOf(liveValue(e));
        key = "l:" + (b ? b[2] : "none"); colour = b ? b[1] : NO_DATA; name = b ? b[2] : "no data";
      } else if (colourMode === "alarms") {
        const n = liveAlarms(e);
        key = n ? "a:some" : "a:none"; colour = n ? ALARM_COLOURS.some : ALARM_COLOURS.none; name = n ? "open alarm" : "no alarm";
      } else if (colourMode === "state") {
        key = E.state[e] === 1 ? DOWN_KEY : E.state[e];
        colour = STATE_COLOURS[E.state[e]]; name = STATE_NAMES[E.state[e]];
      }
      else if (colourMode === "width") { key = "w:" + data.widths[E.width[e]]; colour = WIDTH_COLOURS[data.widths[E.width[e]]] || WIDTH_COLOURS[""]; name = data.widths[E.width[e]] || "unknown width"; }
      else { key = "s:" + data.speeds[E.speed[e]]; colour = SPEED_COLOURS[data.speeds[E.speed[e]]] || "#8b98a5"; name = data.speeds[E.speed[e]] || "unknown speed"; }
      const c = counts.get(key) || { colour, name, n: 0 };
      c.n += E.n[e];
      counts.set(key, c);
    }
    for (const c of counts.values()) {
      const li = el("li");
      li.dataset.legend = c.name;
      const sw = el("span", null, "sw"); sw.style.background = c.colour;
      li.append(sw, c.name + " (" + c.n + ")");
      ul.append(li);
    }
    const L = eth();
    if (L && L.nodes.name.length) {
      for (const kind of ["switch", "host"]) {
        const n = L.nodes.kind.filter((x) => x === kind).length;
        if (!n) continue;
        const li = el("li");
        const dot = el("span", null, "dot"); dot.style.background = ETH_COLOURS[kind];
        li.append(dot, "Ethernet " + kind + " (" + n + ")");
        ul.append(li);
      }
      const li = el("li");
      li.dataset.legend = "ethernet";
      const sw = el("span", null, "sw"); sw.style.background = ETH_COLOURS.link;
      li.append(sw, "Ethernet (LLDP) (" + L.counts.links + (L.counts.down_links ? ", " + L.counts.down_links + " down" : "") + ")");
      ul.append(li);
      if (L.counts.disabled || L.counts.stale_links) {
        const st = el("li");
        st.dataset.legend = "ethernet-stale";
        const ssw = el("span", null, "sw"); ssw.style.background = ETH_COLOURS.stale;
        st.append(ssw, "Polling disabled (" + (L.counts.disabled || 0) + " devices, " + (L.counts.stale_links || 0) + " last-known links)");
        ul.append(st);
      }
    }
    if (highlighted.size) {
      const li = el("li");
      li.dataset.legend = "highlight";
      const dot = el("span", null, "dot"); dot.style.background = HIGHLIGHT;
      li.append(dot, (container.dataset.highlightLabel || "highlighted") + " (" + highlighted.size + ")");
      ul.prepend(li);
    }
    if (grouped() && expanded.size < data.groups.key.length) {
      const seen = {};
      graph.forEachNode((key) => { if (isGroupKey(key)) { const k = data.groups.kind[Number(key.slice(1))]; seen[k] = (seen[k] || 0) + 1; } });
      for (const [k, n] of Object.entries(seen)) {
        const li = el("li");
        li.dataset.legend = "group-" + k;
        const dot = el("span", null, "dot"); dot.style.background = GROUP_COLOURS[k]; dot.style.outline = "1px solid #e6edf3";
        li.append(dot, GROUP_NAMES[k] + " (" + n + ")");
        ul.prepend(li);
      }
    }
    const MODE_NAMES = { util: "utilisation (highest end, last sweep)", cong: "congestion (PortXmitWait)", alarms: "open alarms" };
    legend.append(el("strong", "Links by " + (MODE_NAMES[colourMode] || colourMode)), ul);
  }

  /** Whether node key is a host the "CAs" box hides: an IB CA, or an Ethernet host (an LLDP system
   * that is not a switch; keys "e<k>"). */
  function isHostKey(key) {
    if (isEthKey(key)) return eth().nodes.kind[Number(key.slice(1))] !== "switch";
    return !isGroupKey(key) && data.nodes.type[Number(key)] === 0;
  }
  function nodeReducer(key, attrs) {
    const marked = highlighted.has(key);
    if (!showCas && isHostKey(key) && key !== selected && !marked) return { ...attrs, hidden: true };
    if (selected === null && matches.size === 0 && highlighted.size === 0) return attrs;
    const res = { ...attrs };
    if (key === selected) {
      // drawn as hovered: its label on an opaque box, above the edges and the other labels
      res.color = "#ffffff"; res.size = attrs.size * 1.6; res.zIndex = 2; res.forceLabel = true; res.highlighted = true;
    } else if (matches.has(key)) {
      res.color = "#f2cc60"; res.size = attrs.size * 1.5; res.zIndex = 1; res.forceLabel = matches.size <= 20;
    } else if (marked) {
      res.color = HIGHLIGHT; res.size = attrs.size * 2; res.zIndex = 1;
      if (hostLabels.has(key)) {
        const text = hostLabels.get(key); // null: not a host's CA, its own name
        if (text) res.label = text;
        res.forceLabel = hostLabels.size <= 24;
      } else res.label = "";
    } else if (neighbours.has(key) || (selected === null && matches.size === 0 && highlightNeighbours.has(key))) {
      res.zIndex = 1;
    } else {
      res.color = DIM_NODE; res.label = ""; res.zIndex = 0;
    }
    return res;
  }
  function edgeReducer(key, attrs) {
    if (selected === null && showCas && highlighted.size === 0) return attrs;
    const [s, t] = graph.extremities(key);
    const shown = (n) => !isHostKey(n) || n === selected || highlighted.has(n);
    if (!showCas && (!shown(s) || !shown(t))) return { ...attrs, hidden: true };
    if (selected === null) {
      if (highlighted.size === 0) return attrs;
      if (highlighted.has(s) || highlighted.has(t)) return { ...attrs, size: attrs.size * 1.5, zIndex: 1 };
      return { ...attrs, color: DIM_EDGE };
    }
    if (s === selected || t === selected) return { ...attrs, size: attrs.size * 2, zIndex: 1 };
    return { ...attrs, color: DIM_EDGE };
  }

  /** When the map opened with its groups collapsed: the frame of the whole fabric and its Ethernet
   * layer, so that expanding a group does not move the others (again after the layer changed).
   * Returns whether it set one. */
  function fixFrame() {
    if (!(grouped() && data.groups.collapsed)) return false;
    const L = data.ethernet;
    const xs = data.nodes.x.concat(L ? L.nodes.x : []), ys = data.nodes.y.concat(L ? L.nodes.y : []);
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (let i = 0; i < xs.length; i++) { x0 = Math.min(x0, xs[i]); x1 = Math.max(x1, xs[i]); y0 = Math.min(y0, ys[i]); y1 = Math.max(y1, ys[i]); }
    renderer.setCustomBBox({ x: [x0, x1], y: [y0, y1] });
    return true;
  }

  // --- labels ---------------------------------------------------------------------------------
  // sigma draws a label right of its node whatever lies there: near the canvas's right edge (a
  // collapsed group's long name) it was cut off, and close labels were drawn over each other.
  // Sigma still picks a frame's labels (its grid, and the forced ones) and hands each to
  // queueLabel; once the frame is drawn placeLabels draws them, the forced ones (search matches,
  // marked hosts; a selected node's is drawHover's) and the groups first, each on the first free
  // spot inside the canvas: right of its node, left of it, then for those a row above or below (up
  // to LABEL_ROWS, joined to the node by a thin line); a label with no free spot is left out
  // (hovering or selecting its node shows it). Hook: weftMap.labelBoxes().
  const LABEL_ROWS = 3;
  const LABEL_MARGIN = 2; // px kept free at the canvas's edges and between two labels
  function labelFont(settings) { return settings.labelWeight + " " + settings.labelSize + "px " + settings.labelFont; }
  function queueLabel(ctx, d) { if (d.label && !d.highlighted) labelQueue.push({ ...d }); } // highlighted: drawHover writes it
  /** The spot of a label of text metrics m for node d ({x, y, size}, canvas px): the first of
   * right of it, left of it, pushed inside the canvas, on its own row then (rows > 0) on rows
   * above and below, that lies inside the canvas and that free(box) accepts; or null.
   * Returns {tx, ty} (where fillText writes, ty the baseline) and the text's box {left, top,
   * right, bottom}. */
  function labelSpot(d, m, rows, free, size) {
    const { width: W, height: H } = renderer.getDimensions();
    const w = m.width, asc = m.actualBoundingBoxAscent, desc = m.actualBoundingBoxDescent;
    const step = Math.ceil(asc + desc) + 2 * LABEL_MARGIN;
    const right = d.x + d.size + 3, left = d.x - d.size - 3 - w;
    const xs = [right, left, Math.min(Math.max(right, LABEL_MARGIN), W - LABEL_MARGIN - w)];
    for (let r = 0; r <= 2 * rows; r++) {
      const ty = d.y + size / 3 + (r === 0 ? 0 : (r % 2 ? -1 : 1) * Math.ceil(r / 2) * step); // rows 0, -1, +1, -2...
      for (const tx of xs) {
        const box = { tx, ty, left: tx, top: ty - asc, right: tx + w, bottom: ty + desc };
        if (box.left < LABEL_MARGIN || box.right > W - LABEL_MARGIN || box.top < LABEL_MARGIN || box.bottom > H - LABEL_MARGIN) continue;
        if (free(box)) return box;
      }
    }
    return null;
  }
  /** A thin line from node d to its label's box b, when the label left the node's row. */
  function leaderLine(ctx, d, b) {
    const px = Math.min(Math.max(d.x, b.left), b.right), py = Math.min(Math.max(d.y, b.top), b.bottom);
    const dx = px - d.x, dy = py - d.y, len = Math.hypot(dx, dy);
    if (len <= d.size + 2) return;
    ctx.save();
    ctx.globalAlpha = 0.5;
    ctx.beginPath();
    ctx.moveTo(d.x + (dx / len) * (d.size + 1), d.y + (dy / len) * (d.size + 1));
    ctx.lineTo(px, py);
    ctx.stroke();
    ctx.restore();
  }
  function placeLabels() {
    const queue = labelQueue;
    labelQueue = [];
    const boxes = [];
    labelBoxes = boxes;
    if (!queue.length) return;
    const settings = renderer.getSettings();
    const ctx = renderer.getCanvases().labels.getContext("2d");
    const rank = (d) => (d.forceLabel ? 2 : isGroupKey(d.key) ? 1 : 0);
    queue.sort((a, b) => rank(b) - rank(a)); // stable: sigma's order within a rank
    const free = (b) => boxes.every((o) => b.right + LABEL_MARGIN <= o.left || o.right + LABEL_MARGIN <= b.left ||
      b.bottom + LABEL_MARGIN <= o.top || o.bottom + LABEL_MARGIN <= b.top);
    ctx.font = labelFont(settings);
    ctx.fillStyle = ctx.strokeStyle = settings.labelColor.color;
    ctx.lineWidth = 1;
    for (const d of queue) {
      const spot = labelSpot(d, ctx.measureText(d.label), rank(d) ? LABEL_ROWS : 0, free, settings.labelSize);
      if (!spot) continue;
      boxes.push({ key: d.key, label: d.label, x: d.x, y: d.y, size: d.size, left: spot.left, top: spot.top, right: spot.right, bottom: spot.bottom });
      if (Math.abs(spot.ty - (d.y + settings.labelSize / 3)) > 0.5) leaderLine(ctx, d, spot);
      ctx.fillText(d.label, spot.tx, spot.ty);
    }
  }
  /** A hovered or selected node (sigma's hover layer): a white disc under it and its own name
   * (a marked host's CA: the CA's, not the host's label) on a white box, placed as the labels
   * are (inside the canvas); dark text (sigma's default wrote the near-white label colour). */
  function drawHover(ctx, d, settings) {
    const name = (graph.hasNode(d.key) && graph.getNodeAttribute(d.key, "label")) || d.label;
    ctx.save();
    ctx.font = labelFont(settings);
    ctx.fillStyle = "#ffffff";
    ctx.shadowBlur = 8;
    ctx.shadowColor = "#000000";
    ctx.beginPath();
    ctx.arc(d.x, d.y, d.size + 2, 0, Math.PI * 2);
    ctx.fill();
    const spot = name ? labelSpot({ ...d, size: d.size + 2 }, ctx.measureText(name), LABEL_ROWS, () => true, settings.labelSize) : null;
    if (spot) {
      ctx.fillRect(spot.left - 2, spot.top - 2, spot.right - spot.left + 4, spot.bottom - spot.top + 4);
      ctx.shadowBlur = 0;
      ctx.fillStyle = "#0d1117";
      ctx.fillText(name, spot.tx, spot.ty);
    }
    ctx.restore();
  }

  function startRenderer() {
    const SigmaCls = (window.Sigma && (window.Sigma.Sigma || window.Sigma.default)) || window.Sigma;
    renderer = new SigmaCls(graph, container, {
      renderEdgeLabels: false,
      enableEdgeEvents: graph.size <= 6000,
      hideEdgesOnMove: graph.size > 5000,
      hideLabelsOnMove: graph.order > 2000,
      labelRenderedSizeThreshold: 7,
      labelColor: { color: "#e6edf3" },
      labelFont: "system-ui, sans-serif",
      labelSize: 11,
      defaultDrawNodeLabel: queueLabel,
      defaultDrawNodeHover: drawHover,
      defaultEdgeType: "line",
      zIndex: true,
      nodeReducer,
      edgeReducer,
      minCameraRatio: 0.002,
      maxCameraRatio: 4,
      stagePadding: 20,
    });
    frameDrawn = true; // the constructor drew the graph
    placeLabels(); // and queued its labels before the listeners below were there
    renderer.getCamera().on("updated", () => { frameDrawn = false; });
    window.addEventListener("resize", () => { frameDrawn = false; });
    renderer.on("beforeRender", () => { labelQueue = []; });
    renderer.on("afterRender", () => { placeLabels(); frameDrawn = true; });
    renderer.on("clickNode", ({ node }) => select(node, { moveCamera: false }));
    renderer.on("clickStage", ({ event }) => {
      // thin lines are hard to hit exactly: a click within a few pixels of a link opens it
      const near = edgeNear(event.x, event.y, 6);
      if (near !== null) showEdge(near);
      else clearSelection();
    });
    renderer.on("clickEdge", ({ edge }) => showEdge(edge));
    renderer.on("enterEdge", () => { container.style.cursor = "pointer"; });
    renderer.on("leaveEdge", () => { container.style.cursor = ""; });
    renderer.on("enterNode", () => { container.style.cursor = "pointer"; });
    renderer.on("leaveNode", () => { container.style.cursor = ""; });
  }

  /** The drawn edge nearest to viewport point (x, y) within tol pixels, or null. */
  function edgeNear(x, y, tol) {
    let best = null, bestD = tol * tol;
    const pos = new Map();
    const at = (key) => {
      let p = pos.get(key);
      if (!p) { const a = graph.getNodeAttributes(key); p = renderer.graphToViewport({ x: a.x, y: a.y }); pos.set(key, p); }
      return p;
    };
    const shown = (n) => showCas || !isHostKey(n) || n === selected || highlighted.has(n);
    graph.forEachEdge((key, attrs, s, t) => {
      if (!shown(s) || !shown(t)) return;
      const p = at(s), q = at(t);
      const dx = q.x - p.x, dy = q.y - p.y;
      const len = dx * dx + dy * dy;
      const u = len ? Math.max(0, Math.min(1, ((x - p.x) * dx + (y - p.y) * dy) / len)) : 0;
      const ex = p.x + u * dx - x, ey = p.y + u * dy - y;
      const d = ex * ex + ey * ey;
      if (d < bestD) { bestD = d; best = key; }
    });
    return best;
  }

  function clearSelection() {
    selected = null;
    neighbours = new Set();
    delete container.dataset.selected;
    delete panel.dataset.nodeId;
    delete panel.dataset.guid;
    delete panel.dataset.edge;
    delete panel.dataset.ethNode;
    panel.replaceChildren(el("p", "Click a node, or search for one, to see its ports and links. Esc clears the selection.", "muted"));
    renderer.refresh();
  }

  function select(key, { moveCamera = true } = {}) {
    if (isGroupKey(key)) {
      // a click on a collapsed group expands it, its members drawn in place
      const g = Number(key.slice(1));
      if (selected === key) clearSelection();
      expandGroups([g]);
      return;
    }
    if (grouped() && !graph.hasNode(key)) expandGroups([data.groups.member[Number(key)]]);
    selected = key;
    neighbours = new Set(graph.neighbors(key));
    if (isEthKey(key)) {
      container.dataset.selected = eth().nodes.name[Number(key.slice(1))];
      renderer.refresh();
      showEthNode(Number(key.slice(1)));
      return;
    }
    const i = Number(key);
    delete panel.dataset.edge;
    container.dataset.selected = data.nodes.guid[i];
    if (moveCamera) {
      const d = renderer.getNodeDisplayData(key);
      if (d) renderer.getCamera().animate({ x: d.x, y: d.y, ratio: Math.min(renderer.getCamera().ratio, 0.08) }, { duration: 300 });
    }
    renderer.refresh();
    showNode(i);
  }

  function showNode(i) {
    const nd = data.nodes;
    panel.replaceChildren();
    panel.dataset.nodeId = nd.id[i];
    panel.dataset.guid = nd.guid[i];
    const h = el("h3"); h.append(link("/fabric/nodes/" + nd.id[i] + "/", label(i))); h.id = "panel-title";
    panel.append(h);
    const dl = el("dl", null, "kv"); dl.id = "panel-identity";
    const rows = [
      ["type", TYPE_NAMES[nd.type[i]]], ["tier", TIER_NAMES[nd.tier[i]]], ["GUID", nd.guid[i]],
      ["LID", nd.lid[i] == null ? "—" : nd.lid[i]],
    ];
    if (nd.host[i] >= 0) {
      const name = data.hosts[nd.host[i]];
      const hostUrl = container.dataset.hostUrl;
      const a = hostUrl ? link(hostUrl + "?fabric=" + data.fabric.id + "&name=" + encodeURIComponent(name), name) : null;
      if (a) a.id = "panel-host";
      rows.push(["host", a || name]);
    }
    rows.push(["links", graph.degree(String(i)) + " neighbours"]);
    for (const [k, v] of rows) {
      const dd = v instanceof Node ? el("dd") : el("dd", v);
      if (v instanceof Node) dd.append(v);
      dl.append(el("dt", k), dd);
    }
    panel.append(dl);
    const portsBox = el("div", "loading ports…", "muted"); portsBox.id = "panel-ports";
    panel.append(portsBox);
    const portDetail = el("div"); portDetail.id = "panel-port";
    panel.append(portDetail);
    fetch(nodeApi + nd.id[i] + "/", { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then((node) => { if (panel.dataset.nodeId === String(nd.id[i])) renderPorts(node, portsBox, portDetail); })
      .catch((err) => { portsBox.textContent = "could not load ports: " + err.message; portsBox.className = "error"; });
  }

  // --- link panel -----------------------------------------------------------------------------
  function nodeText(key) {
    if (isGroupKey(key)) { const g = Number(key.slice(1)); return data.groups.name[g] + " (group of " + data.groups.n[g] + ")"; }
    return label(Number(key));
  }
  function pct(v) { return v == null ? "—" : (Math.round(v * 1000) / 10) + " %"; }

  /** The panel of a clicked link: a cable edge loads both ends' ports, counters and alarms; a
   * group edge lists its node pairs, worst first in the current overlay, each opening its detail. */
  function showEdge(key) {
    const attrs = graph.getEdgeAttributes(key);
    const [s, t] = graph.extremities(key);
    if (key.charAt(0) === "x") { // an Ethernet link: the panel of its Ethernet end
      const end = isEthKey(s) ? s : isEthKey(t) ? t : null;
      if (end !== null) select(end);
      return;
    }
    selected = null; neighbours = new Set();
    delete container.dataset.selected;
    delete panel.dataset.nodeId;
    panel.replaceChildren();
    panel.dataset.edge = key;
    const h = el("h3"); h.id = "panel-title"; h.className = "panel-edge";
    h.append(el("span", nodeText(s), "edge-end-a"), " ↔ ", el("span", nodeText(t), "edge-end-b"));
    panel.append(h);
    if (!attrs.members) {
      const e = Number(key);
      showEdgeDetail(data.nodes.id[data.edges.a[e]], data.nodes.id[data.edges.b[e]]);
      renderer.refresh();
      return;
    }
    const members = [...attrs.members].sort((x, y) => badness(y) - badness(x));
    panel.append(el("p", attrs.cables + " cables between " + members.length + " node pairs; click one for both ends, counters and alarms. Click a group on the map to expand it.", "muted"));
    const table = el("table"); table.id = "panel-edge-members";
    const head = el("tr");
    for (const c of ["end A", "end B", "cables", "util", "cong", "alarms"]) head.append(el("th", c));
    table.append(head);
    const E = data.edges, L = data.live || { util: [], cong: [], alarms: [] };
    for (const e of members.slice(0, 100)) {
      const tr = el("tr", null, "edge-row");
      tr.dataset.edge = e;
      tr.append(el("td", label(E.a[e])), el("td", label(E.b[e])), el("td", E.n[e] + (E.down && E.down[e] ? " (+" + E.down[e] + " down)" : "")),
        el("td", pct(L.util[e])), el("td", pct(L.cong[e])), el("td", L.alarms[e] || 0));
      tr.addEventListener("click", () => showEdgeDetail(data.nodes.id[E.a[e]], data.nodes.id[E.b[e]]));
      table.append(tr);
    }
    panel.append(table);
    if (members.length > 100) panel.append(el("p", (members.length - 100) + " more pairs: expand the groups to see them", "muted"));
    const detail = el("div"); detail.id = "panel-edge-detail";
    panel.append(detail);
    renderer.refresh();
  }

  function showEdgeDetail(idA, idB) {
    let box = document.getElementById("panel-edge-detail");
    if (!box) { box = el("div"); box.id = "panel-edge-detail"; panel.append(box); }
    box.replaceChildren(el("p", "loading the link…", "muted"));
    const url = edgeUrl + "?a=" + idA + "&b=" + idB;
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then((d) => renderEdgeDetail(d, box))
      .catch((err) => { box.textContent = "could not load the link: " + err.message; box.className = "error"; });
  }

  function renderEdgeDetail(d, box) {
    box.replaceChildren();
    box.className = "";
    box.dataset.a = d.a.guid;
    box.dataset.b = d.b.guid;
    const h = el("h4");
    h.append(link("/fabric/nodes/" + d.a.id + "/", d.a.name), " ↔ ", link("/fabric/nodes/" + d.b.id + "/", d.b.name));
    box.append(h);
    const table = el("table"); table.id = "panel-cables";
    const head = el("tr");
    for (const c of ["port A", "port B", "state", "link", "util A / B", "cong A / B", "errors"]) head.append(el("th", c));
    table.append(head);
    for (const c of d.cables) {
      const tr = el("tr", null, "cable-row");
      const errs = Object.entries(Object.assign({}, c.a.error_deltas, c.b.error_deltas)).map(([k, v]) => k + " +" + v).join(", ");
      const portCell = (end) => { const td = el("td"); td.append(link("/fabric/ports/" + end.port_id + "/", String(end.port_num))); return td; };
      tr.append(portCell(c.a), portCell(c.b), el("td", c.a.state + " / " + c.b.state),
        el("td", (c.a.width || "") + " " + (c.a.speed || "") + (c.a.rate_gbps ? " · " + c.a.rate_gbps + " Gb/s" : "")),
        el("td", pct(c.a.utilisation) + " / " + pct(c.b.utilisation)), el("td", pct(c.a.congestion) + " / " + pct(c.b.congestion)),
        el("td", errs || (c.a.stale || c.b.stale ? "stale" : "—")));
      table.append(tr);
    }
    if (!d.cables.length) box.append(el("p", "no cable up between these nodes (a cable down stays drawn while its alarm is open)", "muted"));
    else box.append(table);
    const al = el("ul"); al.id = "panel-edge-alarms";
    for (const a of d.alarms) {
      const li = el("li");
      li.append(link("/events/alarms/" + a.id + "/", a.severity + " · " + a.code), " " + (a.object_repr || "") + " " + (a.message || ""));
      al.append(li);
    }
    box.append(el("h4", d.alarms.length + " open alarm" + (d.alarms.length === 1 ? "" : "s")), al);
    renderEdgeJobs(d.jobs || [], box);
  }

  /** The jobs whose routed paths cross the cables of the panel's link, per direction, with the
   * estimated share of that direction's traffic each causes (the scheduler's job→links index). */
  function renderEdgeJobs(jobs, box) {
    const ids = new Set(jobs.map((j) => j.job));
    box.append(el("h4", ids.size + " job" + (ids.size === 1 ? "" : "s") + " crossing this link"));
    if (!jobs.length) { box.append(el("p", "no running job's routes cross it", "muted")); return; }
    const table = el("table"); table.id = "panel-edge-jobs";
    const head = el("tr");
    for (const c of ["job", "state", "direction", "paths", "share (estimated)"]) head.append(el("th", c));
    table.append(head);
    for (const j of jobs.slice(0, 50)) {
      const tr = el("tr", null, "edge-job");
      tr.dataset.job = j.job;
      const name = el("td");
      name.append(link(j.url, j.name), " #" + j.job);
      tr.append(name, el("td", j.state), el("td", j.from + " → " + j.to), el("td", String(j.paths)),
        el("td", Math.round(j.share * 100) + " % estimated"));
      table.append(tr);
    }
    box.append(table);
    if (jobs.length > 50) box.append(el("p", (jobs.length - 50) + " more: the port pages list them all", "muted"));
    box.append(el("p", "share: the job's paths on the port × its measured HCA rate, over the jobs on it — an estimate", "muted"));
  }

  /** The panel of an Ethernet node: kind, its device page, its Ethernet links. */
  function showEthNode(k) {
    const L = eth();
    panel.replaceChildren();
    panel.dataset.ethNode = L.nodes.name[k];
    const h = el("h3"); h.id = "panel-title";
    if (L.nodes.device[k] != null) h.append(link("/devices/" + L.nodes.device[k] + "/", L.nodes.name[k]));
    else h.append(L.nodes.name[k]);
    panel.append(h);
    const ul = el("ul"); ul.id = "panel-eth-links";
    for (let e = 0; e < L.edges.a.length; e++) {
      const other = L.edges.a[e] === k ? L.edges.b[e] : L.edges.b[e] === k ? L.edges.a[e] : -1;
      if (other < 0) continue;
      const li = el("li", L.nodes.name[other] + " · " + L.edges.n[e] + " cable(s)" + (L.edges.down[e] ? ", " + L.edges.down[e] + " down" : "") +
        (L.edges.stale && L.edges.stale[e] ? ", last known (polling disabled)" : "") +
        (L.edges.speed_mbps[e] ? " · " + L.edges.speed_mbps[e] / 1000 + " Gb/s" : ""));
      ul.append(li);
    }
    const how = L.nodes.device[k] != null ? (L.nodes.disabled && L.nodes.disabled[k] ? " (SNMP device, polling disabled: last-known links)" : " (SNMP device)") : " (seen by LLDP)";
    panel.append(el("p", "Ethernet " + L.nodes.kind[k] + how, "muted"), ul);
  }

  function renderPorts(node, box, detail) {
    box.replaceChildren();
    box.className = "";
    const linked = node.ports.filter((p) => p.remote);
    box.append(el("h4", node.ports.length + " ports, " + linked.length + " linked"));
    const table = el("table"); table.id = "panel-port-table";
    const head = el("tr");
    for (const t of ["port", "state", "link", "rate", "remote end"]) head.append(el("th", t));
    table.append(head);
    for (const p of node.ports) {
      const tr = el("tr", null, "port-row");
      tr.dataset.port = p.port_num;
      tr.append(el("td", p.port_num + (p.label ? " (" + p.label + ")" : "")));
      tr.append(el("td", p.state.label, "state-" + p.state.value));
      tr.append(el("td", (p.width || "") + " " + (p.speed || "")));
      tr.append(el("td", p.rate_gbps == null ? "" : p.rate_gbps + " Gb/s"));
      const remote = el("td");
      if (p.remote) {
        const a = el("a", (p.remote.node.name || p.remote.node.node_guid) + " [" + p.remote.port_num + "]");
        a.href = "#";
        a.className = "remote-link";
        a.dataset.nodeId = p.remote.node.id;
        a.addEventListener("click", (ev) => {
          ev.preventDefault(); ev.stopPropagation();
          const j = idIndex.get(p.remote.node.id);
          if (j !== undefined) select(String(j));
        });
        remote.append(a);
      } else remote.append(el("span", "—", "muted"));
      tr.append(remote);
      tr.addEventListener("click", () => {
        for (const r of table.querySelectorAll("tr.selected")) r.classList.remove("selected");
        tr.classList.add("selected");
        showPort(p, detail);
      });
      table.append(tr);
    }
    box.append(table);
  }

  function showPort(p, box) {
    box.replaceChildren();
    box.dataset.port = p.port_num;
    const h = el("h4"); h.append("Port ", link("/fabric/ports/" + p.id + "/", String(p.port_num)));
    box.append(h);
    const dl = el("dl", null, "kv");
    const rows = [
      ["port GUID", p.port_guid || "—"], ["LID", p.lid == null ? "—" : p.lid], ["state", p.state.label],
      ["physical", p.phys_state.label], ["width/speed", (p.width || "—") + " " + (p.speed || "")],
      ["rate", p.rate_gbps == null ? "—" : p.rate_gbps + " Gb/s"], ["label", p.label || "—"],
    ];
    if (p.remote) {
      rows.push(["remote node", p.remote.node.name || p.remote.node.node_guid]);
      rows.push(["remote GUID", p.remote.node.node_guid]);
      rows.push(["remote port", p.remote.port_num + (p.remote.lid != null ? " (LID " + p.remote.lid + ")" : "")]);
    }
    for (const [k, v] of rows) dl.append(el("dt", k), el("dd", v));
    box.append(dl);
  }

  function search(q) {
    q = q.trim();
    const out = [];
    const seen = new Set();
    const push = (i, why) => { if (!seen.has(i) && out.length < 50) { seen.add(i); out.push([i, why]); } };
    if (!q) return out;
    if (/^\d+$/.test(q)) for (const i of lidIndex.get(Number(q)) || []) push(i, "LID " + q);
    const g = normalizeGuid(q);
    if (g && guidIndex.has(g)) push(guidIndex.get(g), "GUID");
    const ql = q.toLowerCase();
    const nd = data.nodes;
    for (let i = 0; i < nd.id.length && out.length < 50; i++) {
      if ((nd.name[i] || "").toLowerCase().includes(ql)) push(i, "name");
      else if (nd.host[i] >= 0 && data.hosts[nd.host[i]].toLowerCase().includes(ql)) push(i, "host");
      else if (ql.length >= 4 && nd.guid[i].includes(ql.replace(/^0x/, ""))) push(i, "GUID");
    }
    const L = eth();  // Ethernet devices and LLDP systems by name (keys "e<k>"; one on an IB switch is that switch)
    if (L) for (let k = 0; k < L.nodes.name.length && out.length < 50; k++) {
      if (L.nodes.name[k].toLowerCase().includes(ql)) {
        const key = ethKey(k);
        push(isEthKey(key) ? key : Number(key), "Ethernet " + L.nodes.kind[k]);
      }
    }
    return out;
  }

  function showResults(list) {
    results.replaceChildren();
    matches = new Set(list.map(([i]) => String(i)));
    for (const [i, why] of list) {
      const li = el("li");
      if (isEthKey(i)) {
        const name = eth().nodes.name[Number(i.slice(1))];
        li.dataset.ethNode = name;
        li.append(name + " ", el("span", why, "muted"));
        li.addEventListener("mousedown", (ev) => { ev.preventDefault(); pick(i); });
        results.append(li);
        continue;
      }
      li.dataset.guid = data.nodes.guid[i];
      li.append(label(i) + " ", el("span", TYPE_NAMES[data.nodes.type[i]] + " · " + data.nodes.guid[i] + " · " + why, "muted"));
      li.addEventListener("mousedown", (ev) => { ev.preventDefault(); pick(i); });
      results.append(li);
    }
    if (renderer) renderer.refresh();
  }
  function pick(i) {
    results.replaceChildren();
    matches = new Set();
    select(String(i));
  }

  /** Port GUIDs are not in the layout payload: ask the API which node has that port. */
  function searchServer(q) {
    const g = normalizeGuid(q);
    if (!g) { setStatus("no node matches “" + q + "”"); return; }
    const url = nodeApi + "?brief=1&limit=1&fabric=" + data.fabric.id + "&port_guid=" + encodeURIComponent(g);
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => r.json())
      .then((body) => {
        const hit = body.results && body.results[0];
        const i = hit ? idIndex.get(hit.id) : undefined;
        if (i === undefined) setStatus("no node or port has GUID " + g);
        else pick(i);
      })
      .catch(() => setStatus("search failed"));
  }

  function wireUi() {
    let timer = null;
    searchInput.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => showResults(search(searchInput.value)), 120);
    });
    searchInput.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        ev.preventDefault();
        const list = search(searchInput.value);
        if (list.length) pick(list[0][0]);
        else searchServer(searchInput.value);
      } else if (ev.key === "Escape") {
        if (results.childElementCount) showResults([]);
        else if (selected !== null) clearSelection();
      }
    });
    searchInput.addEventListener("blur", () => setTimeout(() => { results.replaceChildren(); }, 150));
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && ev.target !== searchInput && selected !== null) clearSelection();
    });
    const casBox = document.getElementById("map-show-cas");
    casBox.addEventListener("change", () => {
      showCas = casBox.checked;
      container.dataset.showCas = showCas ? "1" : "0";
      renderer.refresh();
    });
    colourSelect.addEventListener("change", () => { colourMode = colourSelect.value; recolourEdges(); });
    const collapseBtn = document.getElementById("map-collapse");
    if (collapseBtn) {
      collapseBtn.hidden = !grouped();
      collapseBtn.addEventListener("click", collapseAll);
    }
    const cam = () => renderer.getCamera();
    document.getElementById("map-zoom-in").addEventListener("click", () => cam().animatedZoom({ duration: 200 }));
    document.getElementById("map-zoom-out").addEventListener("click", () => cam().animatedUnzoom({ duration: 200 }));
    document.getElementById("map-zoom-reset").addEventListener("click", () => cam().animatedReset({ duration: 200 }));
  }


  let refreshing = false;
  let refreshAgain = false;
  let refreshTimer = null;
  /** Fetch the light payload and recolour the cables in place; when the nodes changed (added,
   * removed, renamed: the layout moves) fetch the whole map and redraw it (reloadNodes), saying
   * so in the banner. Coalesces bursts. */
  function scheduleRefresh() {
    if (refreshTimer !== null) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; refreshEdges(); }, 100);
  }
  function refreshEdges() {
    if (refreshing) { refreshAgain = true; return; }
    refreshing = true;
    const url = container.dataset.mapUrl + (container.dataset.mapUrl.includes("?") ? "&" : "?") + "part=edges";
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then((part) => {
        // the nodes as drawn (ids, names, positions…): only the cables changed
        if (part.nodes_version === data.nodes_version) applyEdges(part);
        else return reloadNodes();
      })
      .catch((err) => console.warn("map refresh failed", err))
      .finally(() => {
        refreshing = false;
        if (refreshAgain) { refreshAgain = false; scheduleRefresh(); }
      });
  }

  /** The nodes changed (a host's only cable pulled removes it; put back, it returns as a new
   * node): fetch the whole map and redraw it in place, keeping the camera, the groups drawn
   * expanded (by group key) and the selection (by GUID) where they still exist. Edge updates
   * address nodes by index, so they go on against the new node list. */
  function reloadNodes() {
    return fetch(container.dataset.mapUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status + " reloading the map"); return r.json(); })
      .then((payload) => {
        const selGuid = selected !== null && !isGroupKey(selected) && !isEthKey(selected) ? data.nodes.guid[Number(selected)] : null;
        const openGroups = grouped() ? [...expanded].map((g) => data.groups.key[g]) : [];
        data = payload;
        indexNodes();
        if (grouped()) {
          const G = data.groups;
          expanded = new Set(G.collapsed ? [] : G.key.map((_, g) => g));
          for (const key of openGroups) { const g = G.key.indexOf(key); if (g >= 0) expanded.add(g); }
          container.dataset.groups = String(G.key.length);
        } else expanded = new Set();
        matches = new Set();
        const sel = selGuid !== null ? guidIndex.get(selGuid) : undefined;
        selected = sel !== undefined ? String(sel) : null;
        rebuild();
        if (selGuid !== null && sel === undefined) clearSelection();
        container.dataset.reloads = String(Number(container.dataset.reloads || 0) + 1);
        const banner = document.getElementById("map-changed");
        banner.hidden = false;
        clearTimeout(reloadNodes.timer);
        reloadNodes.timer = setTimeout(() => { banner.hidden = true; }, 15000);
      });
  }

  /** Live updates: the fabric's alarm group (events.consumers.AlarmConsumer). A link or port
   * alarm change, a burst reload, a discovery's rules having run or an Ethernet layer change
   * (devices.maplayer.announce) trigger a refresh. */
  function connectLive() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(proto + "//" + location.host + "/ws/alarms/" + data.fabric.id + "/");
    let retry = 0;
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch (_) { return; }
      const p = msg.payload || {};
      if (msg.type === "hello") {
        const reconnected = container.dataset.live === "0";
        container.dataset.live = "1";
        if (reconnected) scheduleRefresh(); // changes may have been missed while away
      } else if (msg.type === "alarm.changed") {
        const code = (p.alarm && p.alarm.code) || "";
        if (code.startsWith("link.") || code.startsWith("port.") || code.startsWith("device.link")) scheduleRefresh();
      } else if (msg.type === "alarms.reload") scheduleRefresh();
      else if (msg.type === "summary.changed" && (p.source === "discovery" || p.source === "devices")) scheduleRefresh();
      // a counter sweep changed utilisation and congestion: recolour when a live overlay is shown
      else if (msg.type === "summary.changed" && p.source === "sweep" && (colourMode === "util" || colourMode === "cong")) scheduleRefresh();
    };
    ws.onclose = (ev) => {
      container.dataset.live = "0";
      if (ev.code === 4401 || ev.code === 4403 || ev.code === 4404) return; // the discovery poll remains
      retry++;
      setTimeout(connectLive, Math.min(10000, 500 * 2 ** Math.min(5, retry)));
    };
    const ping = setInterval(() => {
      if (ws.readyState === WebSocket.OPEN) ws.send('{"type":"ping"}');
      else if (ws.readyState === WebSocket.CLOSED) clearInterval(ping);
    }, 30000);
  }

  /** Fallback without the websocket: poll the newest discovery that changed something; when it is
   * newer than what is drawn, refresh (in place, or the banner when nodes changed). */
  function watchDiscoveries() {
    const every = Math.max(1, Number(container.dataset.pollS || 30)) * 1000;
    const url = container.dataset.discoveriesApi + "?brief=1&limit=1&ordering=-id&changed=true&fabric=" + data.fabric.id;
    const check = () => {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then((r) => (r.ok ? r.json() : null))
        .then((body) => {
          const newest = body && body.results && body.results[0];
          if (newest && newest.id > (data.discovery || 0) && newest.status !== "running" && newest.status !== "failed") {
            refreshEdges();
          }
        })
        .catch(() => {})
        .finally(() => setTimeout(check, every));
    };
    setTimeout(check, every);
  }

  function edgeState(guidA, guidB) {
    const a = guidIndex.get(normalizeGuid(guidA) || guidA);
    const b = guidIndex.get(normalizeGuid(guidB) || guidB);
    if (a === undefined || b === undefined) return null;
    const E = data.edges;
    for (let e = 0; e < E.a.length; e++) {
      if ((E.a[e] === a && E.b[e] === b) || (E.a[e] === b && E.b[e] === a)) {
        return { n: E.n[e], down: E.down ? E.down[e] : 0, state: E.state[e], colour: drawnEdgeColour(e) };
      }
    }
    return null;
  }

  /** The colour the cable edge e is drawn with: its own edge's, or the group edge holding it. */
  function drawnEdgeColour(e) {
    if (graph.hasEdge(String(e))) return graph.getEdgeAttribute(String(e), "color");
    const s = keyOf(data.edges.a[e]), t = keyOf(data.edges.b[e]);
    const key = "m:" + (s < t ? s + "|" + t : t + "|" + s);
    return graph.hasEdge(key) ? graph.getEdgeAttribute(key, "color") : null;
  }

  function showCounts() {
    const c = data.counts;
    const down = c.down_links || 0;
    container.dataset.links = String(c.links);
    container.dataset.downLinks = String(down);
    const L = eth();
    const ethText = L && L.nodes.name.length ? " · Ethernet: " + L.counts.links + " links" + (L.counts.down_links ? ", " + L.counts.down_links + " down" : "") : "";
    setStatus((c.switches + c.cas + c.routers) + " nodes (" + c.switches + " switches, " + c.cas + " CAs" + (c.routers ? ", " + c.routers + " routers" : "") +
      ") · " + c.links + " links up" + (down ? ", " + down + " down" : "") + " as " + graph.size + " edges" + ethText +
      (grouped() && expanded.size < data.groups.key.length ? " · " + (data.groups.key.length - expanded.size) + " of " + data.groups.key.length + " groups collapsed (click one to expand)" : ""));
  }

  function viewportPosition(guid) {
    const i = guidIndex.get(normalizeGuid(guid) || guid);
    if (i === undefined || !graph.hasNode(String(i))) return null;
    const a = graph.getNodeAttributes(String(i));
    const p = renderer.graphToViewport({ x: a.x, y: a.y });
    const r = container.getBoundingClientRect();
    return { x: r.left + p.x, y: r.top + p.y };
  }

  function ready() {
    container.dataset.nodes = String(totalNodes());
    container.dataset.drawnNodes = String(graph.order);
    container.dataset.edges = String(graph.size);
    timings.total_ms = Math.round(performance.now() - t0);
    container.dataset.renderMs = String(timings.total_ms);
    container.dataset.state = "ready";
    showCounts();
    watchDiscoveries();
    connectLive();
    const focus = container.dataset.focus;
    const i = focus ? guidIndex.get(normalizeGuid(focus) || focus) : undefined;
    if (i !== undefined) select(String(i));
    else if (highlighted.size) frame([...highlighted, ...highlightNeighbours]);
  }

  /** Move the camera onto these nodes (the highlighted hosts and their leaves). */
  function frame(keys) {
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const key of keys) {
      const d = renderer.getNodeDisplayData(key);
      if (!d) continue;
      x0 = Math.min(x0, d.x); x1 = Math.max(x1, d.x); y0 = Math.min(y0, d.y); y1 = Math.max(y1, d.y);
    }
    if (x0 > x1) return;
    const camera = renderer.getCamera();
    const { width, height } = renderer.getDimensions();
    const pad = 24; // px kept free around the framed nodes (their labels)
    const inside = () => [[x0, y0], [x1, y1]].every(([x, y]) => {
      const p = renderer.framedGraphToViewport({ x, y });
      return p.x >= pad && p.x <= width - pad && p.y >= pad && p.y <= height - pad;
    });
    // the tightest view that still shows every one of them in this container, whatever its shape
    let ratio = Math.min(1, Math.max(0.05, 1.3 * Math.max(x1 - x0, y1 - y0)));
    camera.setState({ x: (x0 + x1) / 2, y: (y0 + y1) / 2, ratio });
    for (let i = 0; i < 12 && ratio < 1 && !inside(); i++) {
      ratio = Math.min(1, ratio * 1.25);
      camera.setState({ x: (x0 + x1) / 2, y: (y0 + y1) / 2, ratio });
    }
  }

  fetch(container.dataset.mapUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status + " loading the map"); return r.json(); })
    .then((payload) => {
      data = payload;
      edgeUrl = container.dataset.mapUrl.split("?")[0].replace(/map\/$/, "map-edge/");
      timings.fetch_ms = Math.round(performance.now() - t0);
      buildGraph();
      timings.graph_ms = Math.round(performance.now() - t0);
      overlay.remove();
      if (graph.order === 0) {
        container.dataset.state = "ready";
        container.dataset.nodes = "0";
        container.dataset.edges = "0";
        setStatus("this fabric has no node yet");
        return;
      }
      startRenderer();
      if (fixFrame()) renderer.refresh();
      timings.renderer_ms = Math.round(performance.now() - t0);
      drawLegend();
      wireUi();
      // Two animation frames: the first WebGL frame has then been drawn and composited.
      requestAnimationFrame(() => requestAnimationFrame(() => { performance.mark("weft-map-first-frame"); ready(); }));
    })
    .catch((err) => {
      container.dataset.state = "error";
      if (overlay) overlay.textContent = "Could not draw the map: " + err.message;
      setStatus("error");
      console.error(err);
    });

  window.weftMap = {
    timings,
    get renderer() { return renderer; },
    get graph() { return graph; },
    get data() { return data; },
    select(guid) { const i = guidIndex.get(normalizeGuid(guid) || guid); if (i !== undefined) select(String(i)); return i !== undefined; },
    search: (q) => search(q).map(([i, why]) => (isEthKey(i)
      ? { guid: null, name: eth().nodes.name[Number(i.slice(1))], why }
      : { guid: data.nodes.guid[i], name: label(i), why })),
    viewportPosition,
    edgeState,
    /** Whether the map has settled (boolean): no camera animation runs and the frame of the
     * camera's state has been drawn. The positions below (keyPosition, viewportPosition,
     * ethPosition: CSS pixels in the page) are those of the last drawn frame, which is where a
     * click lands; after a camera move they are the old view's until the next frame (sigma 3's
     * graphToViewport uses its last render's matrix), so read them once this is true. */
    settled: () => !!renderer && !renderer.getCamera().isAnimated() && frameDrawn,
    /** The labels of the last frame drawn: {width, height} of the canvas and boxes [{key, label,
     * x, y, size (the node's point and radius), left, top, right, bottom (its text)}], CSS pixels
     * from the canvas's top left corner. */
    labelBoxes() {
      const { width, height } = renderer.getDimensions();
      return { width, height, boxes: labelBoxes.map((b) => ({ ...b })) };
    },
    /** Group hooks: keys drawn as collapsed groups, and the viewport point of a graph node key. */
    groups: () => graph.filterNodes((key) => isGroupKey(key)),
    expanded: () => [...expanded],
    keyPosition(key) {
      if (!graph.hasNode(key)) return null;
      const a = graph.getNodeAttributes(key);
      const p = renderer.graphToViewport({ x: a.x, y: a.y });
      const r = container.getBoundingClientRect();
      return { x: r.left + p.x, y: r.top + p.y };
    },
    /** The Ethernet edges drawn: [{a, b, n, down, colour}] by node name. */
    ethernetEdges() {
      const L = eth();
      const out = [];
      if (!L) return out;
      for (let e = 0; e < L.edges.a.length; e++) {
        if (!graph.hasEdge("x" + e)) continue;
        out.push({ a: L.nodes.name[L.edges.a[e]], b: L.nodes.name[L.edges.b[e]], n: L.edges.n[e], down: L.edges.down[e],
          stale: !!(L.edges.stale && L.edges.stale[e]), colour: graph.getEdgeAttribute("x" + e, "color") });
      }
      return out;
    },
    /** What sigma draws for an Ethernet node by name ({key, kind, hidden, color}), or null when
     * the layer has no such node or it is drawn on its IB switch. */
    ethDrawn(name) {
      const L = eth();
      const k = L ? L.nodes.name.indexOf(name) : -1;
      if (k < 0 || !graph.hasNode("e" + k)) return null;
      const d = renderer.getNodeDisplayData("e" + k);
      return d ? { key: "e" + k, kind: L.nodes.kind[k], hidden: !!d.hidden, color: d.color } : null;
    },
    /** Viewport position of an Ethernet node by name (or null). */
    ethPosition(name) {
      const L = eth();
      const k = L ? L.nodes.name.indexOf(name) : -1;
      if (k < 0) return null;
      const a = graph.getNodeAttributes(ethKey(k));
      const p = renderer.graphToViewport({ x: a.x, y: a.y });
      const r = container.getBoundingClientRect();
      return { x: r.left + p.x, y: r.top + p.y };
    },
    /** The drawn edges: [{key, source, target, colour, members}] (members: cable edge indexes). */
    edges: () => graph.mapEdges((key, attrs, s, t) => ({ key, source: s, target: t, colour: attrs.color, members: attrs.members || [Number(key)] })),
    /** GUIDs of the nodes marked by data-highlight that the layout has. */
    highlighted: () => [...highlighted].map((key) => data.nodes.guid[Number(key)]),
    /** What sigma draws for a node (colour, size, hidden) after the reducers, or null. */
    drawn(guid) {
      const i = guidIndex.get(normalizeGuid(guid) || guid);
      if (i === undefined) return null;
      const d = graph.hasNode(String(i)) ? renderer.getNodeDisplayData(String(i)) : null;
      return d ? { color: d.color, size: d.size, hidden: !!d.hidden, label: d.label } : null;
    },
  };
})();
