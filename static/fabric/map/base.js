// Weft network map (base.js): draws the server-computed layout (/api/fabric/fabrics/{id}/map/) with
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
// Scripts (classic scripts, loaded in this order by templates/fabric/_map_scripts.html; CSP: no
// inline script): base.js (this one: constants, the page's elements, the shared state, helpers),
// overlays.js (colours and legend), graph.js (graph build, groups, Ethernet layer), render.js
// (sigma, reducers, labels, camera), panels.js (details panel, status line), search.js (search,
// toolbar), live.js (websocket, refreshes), main.js (layout fetch, first frame, window.weftMap).
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

  const guidIndex = new Map();
  const lidIndex = new Map();
  const idIndex = new Map();
  const timings = {}; // window.weftMap.timings: ms from t0 (bench/map_render.py reads them)

  // the map's state, shared by its scripts (each reads and writes it as S.<name>)
  const S = {
    data: null, // the layout payload (map/), its edges swapped in by the light one (map/?part=edges)
    graph: null, // graphology
    renderer: null, // sigma
    colourMode: "speed",
    showCas: true,
    selected: null, // node key
    neighbours: new Set(),
    matches: new Set(),
    highlighted: new Set(), // node keys marked by data-highlight
    highlightNeighbours: new Set(),
    expanded: new Set(), // group indexes drawn as their members
    edgeUrl: null,
    // whether the frame on screen is of the camera's current state: sigma maps graph to viewport
    // points (graphToViewport) with the matrix of its last render, and a click is resolved in the
    // picking buffers of that render; a camera move or a resize draws on the next animation frame
    frameDrawn: true,
    labelQueue: [], // labels sigma picked for the frame being drawn (queueLabel)
    labelBoxes: [], // labels placeLabels drew last: {key, label, x, y, size, left, top, right, bottom} (canvas px)
    hostLabels: new Map(), // node key → its host's label: one marked CA per host (markHighlighted)
  };

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

  function label(i) { return S.data.nodes.name[i] || S.data.nodes.guid[i]; }

  // what the other scripts share (loaded after this one, in order: templates/fabric/_map_scripts.html);
  // each adds its own functions to it
  window.weftMapParts = {
    state: S,
    t0, container, statusEl, overlay, panel, legend, searchInput, results, colourSelect, nodeApi,
    TIER_NAMES, TYPE_NAMES, NODE_COLOURS, SPEED_COLOURS, STATE_COLOURS, STATE_NAMES, WIDTH_COLOURS, HIGHLIGHT,
    GROUP_COLOURS, GROUP_NAMES, NO_DATA, UTIL_BINS, CONG_BINS, ALARM_COLOURS, ETH_COLOURS, DIM_NODE, DIM_EDGE,
    guidIndex, lidIndex, idIndex, timings,
    setStatus, el, link, normalizeGuid, label,
  };
})();
