// Weft network map, overlays.js: the overlays ("Links by"): node and cable colours by tier, speed,
// state, width and the live part (utilisation, congestion, open alarms), a group edge coloured by its
// worst member, and the legend.
(function () {
  "use strict";
  const M = window.weftMapParts;
  if (!M) return; // no #map on this page
  const S = M.state;
  const { container, legend, TIER_NAMES, NODE_COLOURS, SPEED_COLOURS, STATE_COLOURS, STATE_NAMES,
    WIDTH_COLOURS, HIGHLIGHT, GROUP_COLOURS, GROUP_NAMES, NO_DATA, UTIL_BINS, CONG_BINS, ALARM_COLOURS,
    ETH_COLOURS, el } = M;

  function nodeColour(i) {
    const t = S.data.nodes.type[i];
    if (t === 0) return NODE_COLOURS.ca;
    if (t === 2) return NODE_COLOURS.router;
    return NODE_COLOURS[TIER_NAMES[S.data.nodes.tier[i]]] || NODE_COLOURS.unknown;
  }

  function edgeColour(e) {
    const E = S.data.edges;
    if (E.down && E.down[e] > 0) return STATE_COLOURS[1];  // a cable down (open link.down alarm): red in every mode
    if (S.colourMode === "util" || S.colourMode === "cong") return binColour(liveValue(e));
    if (S.colourMode === "alarms") return liveAlarms(e) > 0 ? ALARM_COLOURS.some : ALARM_COLOURS.none;
    if (S.colourMode === "state") return STATE_COLOURS[E.state[e]] || STATE_COLOURS[0];
    if (S.colourMode === "width") return WIDTH_COLOURS[S.data.widths[E.width[e]]] || WIDTH_COLOURS[""];
    return SPEED_COLOURS[S.data.speeds[E.speed[e]]] || "#8b98a5";
  }

  // --- live overlays --------------------------------------------------------------------------
  function liveValue(e) {
    const L = S.data.live;
    if (!L) return null;
    const v = S.colourMode === "cong" ? L.cong[e] : L.util[e];
    return v == null ? null : v;
  }

  function liveAlarms(e) { return S.data.live ? S.data.live.alarms[e] || 0 : 0; }

  function bins() { return S.colourMode === "cong" ? CONG_BINS : UTIL_BINS; }

  function binOf(v) { if (v == null) return null; for (const b of bins()) if (v < b[0]) return b; return bins()[bins().length - 1]; }

  function binColour(v) { const b = binOf(v); return b ? b[1] : NO_DATA; }

  /** How bad edge e is in the current mode (higher is worse): picks a group edge's colour. */
  function badness(e) {
    const E = S.data.edges;
    if (E.down && E.down[e] > 0) return 1e9;
    if (S.colourMode === "util" || S.colourMode === "cong") { const v = liveValue(e); return v == null ? -1 : v; }
    if (S.colourMode === "alarms") return liveAlarms(e);
    if (S.colourMode === "state") return E.state[e] ? 5 - E.state[e] : 0;
    return -(E.rate[e] == null ? 1e6 : E.rate[e]);
  }

  function worst(members) {
    let best = members[0], score = badness(best);
    for (let k = 1; k < members.length; k++) { const b = badness(members[k]); if (b > score) { best = members[k]; score = b; } }
    return best;
  }

  function colourOfEdgeKey(key, attrs) { return attrs.members ? edgeColour(worst(attrs.members)) : edgeColour(Number(key)); }

  function ethEdgeColour(e) {
    const L = M.eth();
    if (L.edges.down[e] > 0) return STATE_COLOURS[1];
    return L.edges.stale && L.edges.stale[e] ? ETH_COLOURS.stale : ETH_COLOURS.link; // last-known: polling disabled
  }

  function recolourEdges() {
    container.dataset.colour = S.colourMode;
    S.graph.forEachEdge((key, attrs) => { attrs.color = key.charAt(0) === "x" ? ethEdgeColour(Number(key.slice(1))) : colourOfEdgeKey(key, attrs); });
    S.renderer.refresh();
    drawLegend();
  }

  function drawLegend() {
    legend.replaceChildren();
    const ul = el("ul");
    const nodesSeen = { core: 0, spine: 0, leaf: 0, ca: 0, router: 0, unknown: 0 };
    for (let i = 0; i < S.data.nodes.id.length; i++) {
      const t = S.data.nodes.type[i];
      const k = t === 0 ? "ca" : t === 2 ? "router" : (TIER_NAMES[S.data.nodes.tier[i]] || "unknown");
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
    const E = S.data.edges;
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
      if (S.colourMode === "util" || S.colourMode === "cong") {
        const b = binOf(liveValue(e));
        key = "l:" + (b ? b[2] : "none"); colour = b ? b[1] : NO_DATA; name = b ? b[2] : "no data";
      } else if (S.colourMode === "alarms") {
        const n = liveAlarms(e);
        key = n ? "a:some" : "a:none"; colour = n ? ALARM_COLOURS.some : ALARM_COLOURS.none; name = n ? "open alarm" : "no alarm";
      } else if (S.colourMode === "state") {
        key = E.state[e] === 1 ? DOWN_KEY : E.state[e];
        colour = STATE_COLOURS[E.state[e]]; name = STATE_NAMES[E.state[e]];
      }
      else if (S.colourMode === "width") { key = "w:" + S.data.widths[E.width[e]]; colour = WIDTH_COLOURS[S.data.widths[E.width[e]]] || WIDTH_COLOURS[""]; name = S.data.widths[E.width[e]] || "unknown width"; }
      else { key = "s:" + S.data.speeds[E.speed[e]]; colour = SPEED_COLOURS[S.data.speeds[E.speed[e]]] || "#8b98a5"; name = S.data.speeds[E.speed[e]] || "unknown speed"; }
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
    const L = M.eth();
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
    if (S.highlighted.size) {
      const li = el("li");
      li.dataset.legend = "highlight";
      const dot = el("span", null, "dot"); dot.style.background = HIGHLIGHT;
      li.append(dot, (container.dataset.highlightLabel || "highlighted") + " (" + S.highlighted.size + ")");
      ul.prepend(li);
    }
    if (M.grouped() && S.expanded.size < S.data.groups.key.length) {
      const seen = {};
      S.graph.forEachNode((key) => { if (M.isGroupKey(key)) { const k = S.data.groups.kind[Number(key.slice(1))]; seen[k] = (seen[k] || 0) + 1; } });
      for (const [k, n] of Object.entries(seen)) {
        const li = el("li");
        li.dataset.legend = "group-" + k;
        const dot = el("span", null, "dot"); dot.style.background = GROUP_COLOURS[k]; dot.style.outline = "1px solid #e6edf3";
        li.append(dot, GROUP_NAMES[k] + " (" + n + ")");
        ul.prepend(li);
      }
    }
    const MODE_NAMES = { util: "utilisation (highest end, last sweep)", cong: "congestion (PortXmitWait)", alarms: "open alarms" };
    legend.append(el("strong", "Links by " + (MODE_NAMES[S.colourMode] || S.colourMode)), ul);
  }

  Object.assign(M, { nodeColour, edgeColour, liveValue, liveAlarms, bins, binOf, binColour, badness, worst, colourOfEdgeKey, ethEdgeColour, recolourEdges, drawLegend });
})();
