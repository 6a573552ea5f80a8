// Weft network map, render.js: rendering with sigma.js (WebGL): the reducers (selection, search matches,
// marked hosts, hidden CAs), the labels placed inside the canvas without overlaps, the hover box,
// clicks, and camera framing.
(function () {
  "use strict";
  const M = window.weftMapParts;
  if (!M) return; // no #map on this page
  const S = M.state;
  const { container, HIGHLIGHT, DIM_NODE, DIM_EDGE, guidIndex, normalizeGuid, label } = M;

  function nodeReducer(key, attrs) {
    const marked = S.highlighted.has(key);
    if (!S.showCas && M.isHostKey(key) && key !== S.selected && !marked) return { ...attrs, hidden: true };
    if (S.selected === null && S.matches.size === 0 && S.highlighted.size === 0) return attrs;
    const res = { ...attrs };
    if (key === S.selected) {
      // drawn as hovered: its label on an opaque box, above the edges and the other labels
      res.color = "#ffffff"; res.size = attrs.size * 1.6; res.zIndex = 2; res.forceLabel = true; res.highlighted = true;
    } else if (S.matches.has(key)) {
      res.color = "#f2cc60"; res.size = attrs.size * 1.5; res.zIndex = 1; res.forceLabel = S.matches.size <= 20;
    } else if (marked) {
      res.color = HIGHLIGHT; res.size = attrs.size * 2; res.zIndex = 1;
      if (S.hostLabels.has(key)) {
        const text = S.hostLabels.get(key); // null: not a host's CA, its own name
        if (text) res.label = text;
        res.forceLabel = S.hostLabels.size <= 24;
      } else res.label = "";
    } else if (S.neighbours.has(key) || (S.selected === null && S.matches.size === 0 && S.highlightNeighbours.has(key))) {
      res.zIndex = 1;
    } else {
      res.color = DIM_NODE; res.label = ""; res.zIndex = 0;
    }
    return res;
  }

  function edgeReducer(key, attrs) {
    if (S.selected === null && S.showCas && S.highlighted.size === 0) return attrs;
    const [s, t] = S.graph.extremities(key);
    const shown = (n) => !M.isHostKey(n) || n === S.selected || S.highlighted.has(n);
    if (!S.showCas && (!shown(s) || !shown(t))) return { ...attrs, hidden: true };
    if (S.selected === null) {
      if (S.highlighted.size === 0) return attrs;
      if (S.highlighted.has(s) || S.highlighted.has(t)) return { ...attrs, size: attrs.size * 1.5, zIndex: 1 };
      return { ...attrs, color: DIM_EDGE };
    }
    if (s === S.selected || t === S.selected) return { ...attrs, size: attrs.size * 2, zIndex: 1 };
    return { ...attrs, color: DIM_EDGE };
  }

  /** When the map opened with its groups collapsed: the frame of the whole fabric and its Ethernet
   * layer, so that expanding a group does not move the others (again after the layer changed).
   * Returns whether it set one. */
  function fixFrame() {
    if (!(M.grouped() && S.data.groups.collapsed)) return false;
    const L = S.data.ethernet;
    const xs = S.data.nodes.x.concat(L ? L.nodes.x : []), ys = S.data.nodes.y.concat(L ? L.nodes.y : []);
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (let i = 0; i < xs.length; i++) { x0 = Math.min(x0, xs[i]); x1 = Math.max(x1, xs[i]); y0 = Math.min(y0, ys[i]); y1 = Math.max(y1, ys[i]); }
    S.renderer.setCustomBBox({ x: [x0, x1], y: [y0, y1] });
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

  function queueLabel(ctx, d) { if (d.label && !d.highlighted) S.labelQueue.push({ ...d }); } // highlighted: drawHover writes it

  /** The spot of a label of text metrics m for node d ({x, y, size}, canvas px): the first of
   * right of it, left of it, pushed inside the canvas, on its own row then (rows > 0) on rows
   * above and below, that lies inside the canvas and that free(box) accepts; or null.
   * Returns {tx, ty} (where fillText writes, ty the baseline) and the text's box {left, top,
   * right, bottom}. */
  function labelSpot(d, m, rows, free, size) {
    const { width: W, height: H } = S.renderer.getDimensions();
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
    const queue = S.labelQueue;
    S.labelQueue = [];
    const boxes = [];
    S.labelBoxes = boxes;
    if (!queue.length) return;
    const settings = S.renderer.getSettings();
    const ctx = S.renderer.getCanvases().labels.getContext("2d");
    const rank = (d) => (d.forceLabel ? 2 : M.isGroupKey(d.key) ? 1 : 0);
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
    const name = (S.graph.hasNode(d.key) && S.graph.getNodeAttribute(d.key, "label")) || d.label;
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
    S.renderer = new SigmaCls(S.graph, container, {
      renderEdgeLabels: false,
      enableEdgeEvents: S.graph.size <= 6000,
      hideEdgesOnMove: S.graph.size > 5000,
      hideLabelsOnMove: S.graph.order > 2000,
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
    S.frameDrawn = true; // the constructor drew the graph
    placeLabels(); // and queued its labels before the listeners below were there
    S.renderer.getCamera().on("updated", () => { S.frameDrawn = false; });
    window.addEventListener("resize", () => { S.frameDrawn = false; });
    S.renderer.on("beforeRender", () => { S.labelQueue = []; });
    S.renderer.on("afterRender", () => { placeLabels(); S.frameDrawn = true; });
    S.renderer.on("clickNode", ({ node }) => M.select(node, { moveCamera: false }));
    S.renderer.on("clickStage", ({ event }) => {
      // thin lines are hard to hit exactly: a click within a few pixels of a link opens it
      const near = edgeNear(event.x, event.y, 6);
      if (near !== null) M.showEdge(near);
      else M.clearSelection();
    });
    S.renderer.on("clickEdge", ({ edge }) => M.showEdge(edge));
    S.renderer.on("enterEdge", () => { container.style.cursor = "pointer"; });
    S.renderer.on("leaveEdge", () => { container.style.cursor = ""; });
    S.renderer.on("enterNode", () => { container.style.cursor = "pointer"; });
    S.renderer.on("leaveNode", () => { container.style.cursor = ""; });
  }

  /** The drawn edge nearest to viewport point (x, y) within tol pixels, or null. */
  function edgeNear(x, y, tol) {
    let best = null, bestD = tol * tol;
    const pos = new Map();
    const at = (key) => {
      let p = pos.get(key);
      if (!p) { const a = S.graph.getNodeAttributes(key); p = S.renderer.graphToViewport({ x: a.x, y: a.y }); pos.set(key, p); }
      return p;
    };
    const shown = (n) => S.showCas || !M.isHostKey(n) || n === S.selected || S.highlighted.has(n);
    S.graph.forEachEdge((key, attrs, s, t) => {
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

  /** Move the camera onto these nodes (the highlighted hosts and their leaves). */
  function frame(keys) {
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const key of keys) {
      const d = S.renderer.getNodeDisplayData(key);
      if (!d) continue;
      x0 = Math.min(x0, d.x); x1 = Math.max(x1, d.x); y0 = Math.min(y0, d.y); y1 = Math.max(y1, d.y);
    }
    if (x0 > x1) return;
    const camera = S.renderer.getCamera();
    const { width, height } = S.renderer.getDimensions();
    const pad = 24; // px kept free around the framed nodes (their labels)
    const inside = () => [[x0, y0], [x1, y1]].every(([x, y]) => {
      const p = S.renderer.framedGraphToViewport({ x, y });
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

  function viewportPosition(guid) {
    const i = guidIndex.get(normalizeGuid(guid) || guid);
    if (i === undefined || !S.graph.hasNode(String(i))) return null;
    const a = S.graph.getNodeAttributes(String(i));
    const p = S.renderer.graphToViewport({ x: a.x, y: a.y });
    const r = container.getBoundingClientRect();
    return { x: r.left + p.x, y: r.top + p.y };
  }

  Object.assign(M, { nodeReducer, edgeReducer, fixFrame, labelFont, queueLabel, labelSpot, leaderLine, placeLabels, drawHover, startRenderer, edgeNear, frame, viewportPosition });
})();
