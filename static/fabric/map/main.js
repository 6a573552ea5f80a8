// Weft network map, main.js: the layout fetch (/api/fabric/fabrics/{id}/map/), the first frame, then
// live updates; window.weftMap, the test and bench hooks (timings: ms from the first script's start).
(function () {
  "use strict";
  const M = window.weftMapParts;
  if (!M) return; // no #map on this page
  const S = M.state;
  const { t0, container, overlay, guidIndex, timings, setStatus, normalizeGuid, label } = M;

  function ready() {
    container.dataset.nodes = String(M.totalNodes());
    container.dataset.drawnNodes = String(S.graph.order);
    container.dataset.edges = String(S.graph.size);
    timings.total_ms = Math.round(performance.now() - t0);
    container.dataset.renderMs = String(timings.total_ms);
    container.dataset.state = "ready";
    M.showCounts();
    M.watchDiscoveries();
    M.connectLive();
    const focus = container.dataset.focus;
    const i = focus ? guidIndex.get(normalizeGuid(focus) || focus) : undefined;
    if (i !== undefined) M.select(String(i));
    else if (S.highlighted.size) M.frame([...S.highlighted, ...S.highlightNeighbours]);
  }

  fetch(container.dataset.mapUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status + " loading the map"); return r.json(); })
    .then((payload) => {
      S.data = payload;
      S.edgeUrl = container.dataset.mapUrl.split("?")[0].replace(/map\/$/, "map-edge/");
      timings.fetch_ms = Math.round(performance.now() - t0);
      M.buildGraph();
      timings.graph_ms = Math.round(performance.now() - t0);
      overlay.remove();
      if (S.graph.order === 0) {
        container.dataset.state = "ready";
        container.dataset.nodes = "0";
        container.dataset.edges = "0";
        setStatus("this fabric has no node yet");
        return;
      }
      M.startRenderer();
      if (M.fixFrame()) S.renderer.refresh();
      timings.renderer_ms = Math.round(performance.now() - t0);
      M.drawLegend();
      M.wireUi();
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
    get renderer() { return S.renderer; },
    get graph() { return S.graph; },
    get data() { return S.data; },
    select(guid) { const i = guidIndex.get(normalizeGuid(guid) || guid); if (i !== undefined) M.select(String(i)); return i !== undefined; },
    search: (q) => M.search(q).map(([i, why]) => (M.isEthKey(i)
      ? { guid: null, name: M.eth().nodes.name[Number(i.slice(1))], why }
      : { guid: S.data.nodes.guid[i], name: label(i), why })),
    viewportPosition: M.viewportPosition,
    edgeState: M.edgeState,
    /** Whether the map has settled (boolean): no camera animation runs and the frame of the
     * camera's state has been drawn. The positions below (keyPosition, viewportPosition,
     * ethPosition: CSS pixels in the page) are those of the last drawn frame, which is where a
     * click lands; after a camera move they are the old view's until the next frame (sigma 3's
     * graphToViewport uses its last render's matrix), so read them once this is true. */
    settled: () => !!S.renderer && !S.renderer.getCamera().isAnimated() && S.frameDrawn,
    /** The labels of the last frame drawn: {width, height} of the canvas and boxes [{key, label,
     * x, y, size (the node's point and radius), left, top, right, bottom (its text)}], CSS pixels
     * from the canvas's top left corner. */
    labelBoxes() {
      const { width, height } = S.renderer.getDimensions();
      return { width, height, boxes: S.labelBoxes.map((b) => ({ ...b })) };
    },
    /** Group hooks: keys drawn as collapsed groups, and the viewport point of a graph node key. */
    groups: () => S.graph.filterNodes((key) => M.isGroupKey(key)),
    expanded: () => [...S.expanded],
    keyPosition(key) {
      if (!S.graph.hasNode(key)) return null;
      const a = S.graph.getNodeAttributes(key);
      const p = S.renderer.graphToViewport({ x: a.x, y: a.y });
      const r = container.getBoundingClientRect();
      return { x: r.left + p.x, y: r.top + p.y };
    },
    /** The Ethernet edges drawn: [{a, b, n, down, colour}] by node name. */
    ethernetEdges() {
      const L = M.eth();
      const out = [];
      if (!L) return out;
      for (let e = 0; e < L.edges.a.length; e++) {
        if (!S.graph.hasEdge("x" + e)) continue;
        out.push({ a: L.nodes.name[L.edges.a[e]], b: L.nodes.name[L.edges.b[e]], n: L.edges.n[e], down: L.edges.down[e],
          stale: !!(L.edges.stale && L.edges.stale[e]), colour: S.graph.getEdgeAttribute("x" + e, "color") });
      }
      return out;
    },
    /** What sigma draws for an Ethernet node by name ({key, kind, hidden, color}), or null when
     * the layer has no such node or it is drawn on its IB switch. */
    ethDrawn(name) {
      const L = M.eth();
      const k = L ? L.nodes.name.indexOf(name) : -1;
      if (k < 0 || !S.graph.hasNode("e" + k)) return null;
      const d = S.renderer.getNodeDisplayData("e" + k);
      return d ? { key: "e" + k, kind: L.nodes.kind[k], hidden: !!d.hidden, color: d.color } : null;
    },
    /** Viewport position of an Ethernet node by name (or null). */
    ethPosition(name) {
      const L = M.eth();
      const k = L ? L.nodes.name.indexOf(name) : -1;
      if (k < 0) return null;
      const a = S.graph.getNodeAttributes(M.ethKey(k));
      const p = S.renderer.graphToViewport({ x: a.x, y: a.y });
      const r = container.getBoundingClientRect();
      return { x: r.left + p.x, y: r.top + p.y };
    },
    /** The drawn edges: [{key, source, target, colour, members}] (members: cable edge indexes). */
    edges: () => S.graph.mapEdges((key, attrs, s, t) => ({ key, source: s, target: t, colour: attrs.color, members: attrs.members || [Number(key)] })),
    /** GUIDs of the nodes marked by data-highlight that the layout has. */
    highlighted: () => [...S.highlighted].map((key) => S.data.nodes.guid[Number(key)]),
    /** What sigma draws for a node (colour, size, hidden) after the reducers, or null. */
    drawn(guid) {
      const i = guidIndex.get(normalizeGuid(guid) || guid);
      if (i === undefined) return null;
      const d = S.graph.hasNode(String(i)) ? S.renderer.getNodeDisplayData(String(i)) : null;
      return d ? { color: d.color, size: d.size, hidden: !!d.hidden, label: d.label } : null;
    },
  };
})();
