// Weft network map, graph.js: the graph build: the graphology graph from the layout's parallel arrays,
// the GUID/LID/id indexes, collapsed groups and the Ethernet layer, the marked hosts, and the light
// payload's edges swapped in place.
(function () {
  "use strict";
  const M = window.weftMapParts;
  if (!M) return; // no #map on this page
  const S = M.state;
  const { container, GROUP_COLOURS, ETH_COLOURS, guidIndex, lidIndex, idIndex, normalizeGuid, label } = M;

  // --- groups ---------------------------------------------------------------------------------
  function grouped() { return !!(S.data.groups && S.data.groups.member && S.data.groups.member.length === S.data.nodes.id.length); }

  /** The graph key drawing node i: its own, or its collapsed group's. */
  function keyOf(i) {
    if (!grouped()) return String(i);
    const g = S.data.groups.member[i];
    return S.expanded.has(g) ? String(i) : "g" + g;
  }

  /** Nodes of the map, collapsed or not: the IB nodes and the Ethernet ones drawn on their own. */
  function totalNodes() {
    const L = S.data.ethernet;
    return S.data.nodes.id.length + (L ? L.nodes.ib.filter((ib) => ib < 0).length : 0);
  }

  function isGroupKey(key) { return typeof key === "string" && key.charAt(0) === "g"; }

  /** Draw group g as its members (and redraw), keeping the selection and the camera. */
  function expandGroups(list) {
    let changed = false;
    for (const g of list) if (!S.expanded.has(g)) { S.expanded.add(g); changed = true; }
    if (changed && S.renderer) rebuild();
    return changed;
  }

  function collapseAll() {
    if (!grouped()) return;
    S.expanded = new Set();
    if (S.selected !== null && !isGroupKey(S.selected)) M.clearSelection();
    rebuild();
  }

  function rebuild() {
    S.graph.clear();
    addNodes();
    addEthNodes();
    addEdges();
    markHighlighted();
    if (S.selected !== null && !S.graph.hasNode(S.selected)) { S.selected = null; S.neighbours = new Set(); }
    if (S.selected !== null) S.neighbours = new Set(S.graph.neighbors(S.selected));
    container.dataset.nodes = String(totalNodes());
    container.dataset.drawnNodes = String(S.graph.order);
    container.dataset.edges = String(S.graph.size);
    container.dataset.expanded = String(S.expanded.size);
    S.renderer.setSetting("enableEdgeEvents", S.graph.size <= 6000);
    S.renderer.refresh();
    M.drawLegend();
    M.showCounts();
  }

  // --- Ethernet layer -------------------------------------------------------------------------
  function eth() { return S.data.ethernet || null; }

  function isEthKey(key) { return typeof key === "string" && key.charAt(0) === "e"; }

  /** Graph key of Ethernet node k: the IB node it is drawn on, else its own. */
  function ethKey(k) { const ib = eth().nodes.ib[k]; return ib >= 0 ? keyOf(ib) : "e" + k; } // its IB node, or that node's collapsed group

  function addEthNodes() {
    const L = eth();
    if (!L) return;
    for (let k = 0; k < L.nodes.name.length; k++) {
      if (L.nodes.ib[k] >= 0) continue;
      const colour = L.nodes.stale && L.nodes.stale[k] ? ETH_COLOURS.stale : ETH_COLOURS[L.nodes.kind[k]] || ETH_COLOURS.host;
      S.graph.addNode("e" + k, {
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
      if (s === t || S.graph.hasEdge(s, t)) continue; // beside an IB cable between the same nodes
      S.graph.addEdgeWithKey("x" + e, s, t, {
        size: Math.min(0.8 + Math.log2(Math.max(L.edges.n[e] + L.edges.down[e], 1)) * 0.6, 3), color: M.ethEdgeColour(e),
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
    const nd = S.data.nodes;
    for (let i = 0; i < nd.id.length; i++) {
      guidIndex.set(nd.guid[i], i);
      idIndex.set(nd.id[i], i);
      if (nd.lid[i] != null) addLid(nd.lid[i], i);
    }
    for (const [lid, i] of S.data.extra_lids) addLid(lid, i);
  }

  function buildGraph() {
    const Graph = (window.graphology && (window.graphology.Graph || window.graphology)) || null;
    S.graph = new Graph({ type: "undirected", multi: false, allowSelfLoops: false });
    indexNodes();
    if (grouped()) {
      const G = S.data.groups;
      S.expanded = new Set(G.collapsed ? [] : G.key.map((_, g) => g));
      // what the page asks to show (a pool's hosts, a focused node) is drawn expanded
      const wanted = (container.dataset.highlight || "").split(/[\s,]+/).filter(Boolean);
      if (container.dataset.focus) wanted.push(container.dataset.focus);
      for (const g of wanted) { const i = guidIndex.get(normalizeGuid(g) || g); if (i !== undefined) S.expanded.add(G.member[i]); }
      container.dataset.groups = String(G.key.length);
      container.dataset.expanded = String(S.expanded.size);
    }
    addNodes();
    addEthNodes();
    addEdges();
    markHighlighted();
  }

  function addNodes() {
    const nd = S.data.nodes;
    const G = S.data.groups;
    for (let i = 0; i < nd.id.length; i++) {
      const key = keyOf(i);
      if (key.charAt(0) === "g") {
        if (S.graph.hasNode(key)) continue;
        const g = Number(key.slice(1));
        const colour = GROUP_COLOURS[G.kind[g]] || GROUP_COLOURS.tier;
        S.graph.addNode(key, {
          x: G.x[g], y: G.y[g], size: Math.min(5 + Math.log2(G.n[g]) * 1.4, 16), color: colour, baseColor: colour,
          label: G.name[g] + " (" + G.n[g] + ")", type: "circle",
        });
        continue;
      }
      const isSwitch = nd.type[i] !== 0;
      S.graph.addNode(key, {
        x: nd.x[i], y: nd.y[i], size: isSwitch ? 4 : 2, color: M.nodeColour(i), label: label(i),
        baseColor: M.nodeColour(i),
      });
    }
  }

  /** The nodes named by #map[data-highlight] (GUIDs), and their neighbours. */
  function markHighlighted() {
    const wanted = (container.dataset.highlight || "").split(/[\s,]+/).filter(Boolean);
    S.highlighted = new Set();
    let missing = 0;
    for (const g of wanted) {
      const i = guidIndex.get(normalizeGuid(g) || g);
      if (i === undefined) missing++;
      else S.highlighted.add(String(i));
    }
    S.highlightNeighbours = new Set();
    for (const key of S.highlighted) if (S.graph.hasNode(key)) for (const n of S.graph.neighbors(key)) S.highlightNeighbours.add(n);
    // one label per marked host, on its first CA ("host001 (8 HCAs)"): a host's HCAs are drawn a
    // few pixels apart, and their names, one each, were drawn over each other; each CA's own
    // name shows when it is hovered or selected
    S.hostLabels = new Map();
    const perHost = new Map();
    for (const key of S.highlighted) {
      const h = S.data.nodes.host[Number(key)];
      if (h == null || h < 0 || S.data.nodes.type[Number(key)] !== 0) { S.hostLabels.set(key, null); continue; }
      if (!perHost.has(h)) perHost.set(h, []);
      perHost.get(h).push(key);
    }
    for (const [h, keys] of perHost) {
      keys.sort((a, b) => label(Number(a)).localeCompare(label(Number(b)), undefined, { numeric: true }));
      S.hostLabels.set(keys[0], S.data.hosts[h] + (keys.length > 1 ? " (" + keys.length + " HCAs)" : ""));
    }
    if (wanted.length) {
      container.dataset.highlighted = String(S.highlighted.size);
      container.dataset.highlightMissing = String(missing);
    }
  }

  function addLid(lid, i) {
    if (!lidIndex.has(lid)) lidIndex.set(lid, []);
    lidIndex.get(lid).push(i);
  }

  function addEdges() {
    const E = S.data.edges;
    const merged = new Map();
    for (let e = 0; e < E.a.length; e++) {
      const s = keyOf(E.a[e]), t = keyOf(E.b[e]);
      const cables = E.n[e] + (E.down ? E.down[e] : 0);
      if (s === t) continue; // inside a collapsed group
      if (!isGroupKey(s) && !isGroupKey(t)) {
        S.graph.addEdgeWithKey(String(e), s, t, { size: Math.min(0.6 + Math.log2(Math.max(cables, 1)) * 0.6, 3), color: M.edgeColour(e) });
        continue;
      }
      const key = "m:" + (s < t ? s + "|" + t : t + "|" + s);
      let m = merged.get(key);
      if (!m) { m = { s, t, members: [], cables: 0 }; merged.set(key, m); }
      m.members.push(e);
      m.cables += cables;
    }
    for (const [key, m] of merged) {
      S.graph.addEdgeWithKey(key, m.s, m.t, {
        size: Math.min(1.5 + Math.log2(Math.max(m.cables, 1)) * 0.5, 6), members: m.members, cables: m.cables,
        color: M.edgeColour(M.worst(m.members)),
      });
    }
    addEthEdges();
  }

  /** Swap in the edges of a light payload (map/?part=edges) whose IB nodes are those drawn: the
   * layout stays, cables are re-added with their new state, down count, speed and width. The
   * Ethernet layer comes whole: its nodes are replaced in place (a new LLDP system appears, a
   * gone one goes; the selection follows an Ethernet node by name), then its links. */
  function applyEdges(part) {
    S.data.edges = part.edges;
    S.data.speeds = part.speeds;
    S.data.widths = part.widths;
    S.data.counts = part.counts;
    S.data.discovery = part.discovery;
    if (part.live) S.data.live = part.live;
    S.graph.clearEdges();
    if (part.ethernet) replaceEthNodes(part.ethernet);
    addEdges();
    if (S.selected !== null) S.neighbours = new Set(S.graph.neighbors(S.selected));
    markHighlighted();
    container.dataset.nodes = String(totalNodes());
    container.dataset.drawnNodes = String(S.graph.order);
    container.dataset.edges = String(S.graph.size);
    if (part.ethernet) M.fixFrame();
    S.renderer.refresh();
    M.drawLegend();
    M.showCounts();
    if (S.selected !== null && isEthKey(S.selected)) M.showEthNode(Number(S.selected.slice(1)));
  }

  /** Replace the Ethernet nodes drawn on their own ("e<k>") by those of layer L (its indexes may
   * differ: a selected or matched Ethernet node is found again by name, else let go). */
  function replaceEthNodes(L) {
    const old = eth();
    const nameOf = (key) => (old && isEthKey(key) ? old.nodes.name[Number(key.slice(1))] : null);
    const selName = nameOf(S.selected);
    const matchNames = [...S.matches].map(nameOf).filter((n) => n !== null);
    S.graph.forEachNode((key) => { if (isEthKey(key)) S.graph.dropNode(key); });
    S.data.ethernet = L;
    addEthNodes();
    const keyOfName = (name) => { const k = L.nodes.name.indexOf(name); return k < 0 ? null : ethKey(k); };
    if (selName !== null) {
      const key = keyOfName(selName);
      if (key !== null && isEthKey(key)) { S.selected = key; container.dataset.selected = selName; }
      else M.clearSelection();
    }
    if (matchNames.length) {
      S.matches = new Set([...S.matches].filter((key) => !isEthKey(key)));
      for (const name of matchNames) { const key = keyOfName(name); if (key !== null) S.matches.add(key); }
    }
  }

  /** Whether node key is a host the "CAs" box hides: an IB CA, or an Ethernet host (an LLDP system
   * that is not a switch; keys "e<k>"). */
  function isHostKey(key) {
    if (isEthKey(key)) return eth().nodes.kind[Number(key.slice(1))] !== "switch";
    return !isGroupKey(key) && S.data.nodes.type[Number(key)] === 0;
  }

  function edgeState(guidA, guidB) {
    const a = guidIndex.get(normalizeGuid(guidA) || guidA);
    const b = guidIndex.get(normalizeGuid(guidB) || guidB);
    if (a === undefined || b === undefined) return null;
    const E = S.data.edges;
    for (let e = 0; e < E.a.length; e++) {
      if ((E.a[e] === a && E.b[e] === b) || (E.a[e] === b && E.b[e] === a)) {
        return { n: E.n[e], down: E.down ? E.down[e] : 0, state: E.state[e], colour: drawnEdgeColour(e) };
      }
    }
    return null;
  }

  /** The colour the cable edge e is drawn with: its own edge's, or the group edge holding it. */
  function drawnEdgeColour(e) {
    if (S.graph.hasEdge(String(e))) return S.graph.getEdgeAttribute(String(e), "color");
    const s = keyOf(S.data.edges.a[e]), t = keyOf(S.data.edges.b[e]);
    const key = "m:" + (s < t ? s + "|" + t : t + "|" + s);
    return S.graph.hasEdge(key) ? S.graph.getEdgeAttribute(key, "color") : null;
  }

  Object.assign(M, { grouped, keyOf, totalNodes, isGroupKey, expandGroups, collapseAll, rebuild, eth, isEthKey, ethKey, addEthNodes, addEthEdges, indexNodes, buildGraph, addNodes, markHighlighted, addLid, addEdges, applyEdges, replaceEthNodes, isHostKey, edgeState, drawnEdgeColour });
})();
