// Weft network map, panels.js: the details panel: a node (identity, ports from /api/fabric/nodes/{id}/,
// a port), a link (both ends, cables, counters, alarms and the jobs crossing it), a group edge, an
// Ethernet node; the status line.
(function () {
  "use strict";
  const M = window.weftMapParts;
  if (!M) return; // no #map on this page
  const S = M.state;
  const { container, panel, nodeApi, TIER_NAMES, TYPE_NAMES, idIndex, setStatus, el, link, label } = M;

  function clearSelection() {
    S.selected = null;
    S.neighbours = new Set();
    delete container.dataset.selected;
    delete panel.dataset.nodeId;
    delete panel.dataset.guid;
    delete panel.dataset.edge;
    delete panel.dataset.ethNode;
    panel.replaceChildren(el("p", "Click a node, or search for one, to see its ports and links. Esc clears the selection.", "muted"));
    S.renderer.refresh();
  }

  function select(key, { moveCamera = true } = {}) {
    if (M.isGroupKey(key)) {
      // a click on a collapsed group expands it, its members drawn in place
      const g = Number(key.slice(1));
      if (S.selected === key) clearSelection();
      M.expandGroups([g]);
      return;
    }
    if (M.grouped() && !S.graph.hasNode(key)) M.expandGroups([S.data.groups.member[Number(key)]]);
    S.selected = key;
    S.neighbours = new Set(S.graph.neighbors(key));
    if (M.isEthKey(key)) {
      container.dataset.selected = M.eth().nodes.name[Number(key.slice(1))];
      S.renderer.refresh();
      showEthNode(Number(key.slice(1)));
      return;
    }
    const i = Number(key);
    delete panel.dataset.edge;
    container.dataset.selected = S.data.nodes.guid[i];
    if (moveCamera) {
      const d = S.renderer.getNodeDisplayData(key);
      if (d) S.renderer.getCamera().animate({ x: d.x, y: d.y, ratio: Math.min(S.renderer.getCamera().ratio, 0.08) }, { duration: 300 });
    }
    S.renderer.refresh();
    showNode(i);
  }

  function showNode(i) {
    const nd = S.data.nodes;
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
      const name = S.data.hosts[nd.host[i]];
      const hostUrl = container.dataset.hostUrl;
      const a = hostUrl ? link(hostUrl + "?fabric=" + S.data.fabric.id + "&name=" + encodeURIComponent(name), name) : null;
      if (a) a.id = "panel-host";
      rows.push(["host", a || name]);
    }
    rows.push(["links", S.graph.degree(String(i)) + " neighbours"]);
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
    if (M.isGroupKey(key)) { const g = Number(key.slice(1)); return S.data.groups.name[g] + " (group of " + S.data.groups.n[g] + ")"; }
    return label(Number(key));
  }

  function pct(v) { return v == null ? "—" : (Math.round(v * 1000) / 10) + " %"; }

  /** The panel of a clicked link: a cable edge loads both ends' ports, counters and alarms; a
   * group edge lists its node pairs, worst first in the current overlay, each opening its detail. */
  function showEdge(key) {
    const attrs = S.graph.getEdgeAttributes(key);
    const [s, t] = S.graph.extremities(key);
    if (key.charAt(0) === "x") { // an Ethernet link: the panel of its Ethernet end
      const end = M.isEthKey(s) ? s : M.isEthKey(t) ? t : null;
      if (end !== null) select(end);
      return;
    }
    S.selected = null; S.neighbours = new Set();
    delete container.dataset.selected;
    delete panel.dataset.nodeId;
    panel.replaceChildren();
    panel.dataset.edge = key;
    const h = el("h3"); h.id = "panel-title"; h.className = "panel-edge";
    h.append(el("span", nodeText(s), "edge-end-a"), " ↔ ", el("span", nodeText(t), "edge-end-b"));
    panel.append(h);
    if (!attrs.members) {
      const e = Number(key);
      showEdgeDetail(S.data.nodes.id[S.data.edges.a[e]], S.data.nodes.id[S.data.edges.b[e]]);
      S.renderer.refresh();
      return;
    }
    const members = [...attrs.members].sort((x, y) => M.badness(y) - M.badness(x));
    panel.append(el("p", attrs.cables + " cables between " + members.length + " node pairs; click one for both ends, counters and alarms. Click a group on the map to expand it.", "muted"));
    const table = el("table"); table.id = "panel-edge-members";
    const head = el("tr");
    for (const c of ["end A", "end B", "cables", "util", "cong", "alarms"]) head.append(el("th", c));
    table.append(head);
    const E = S.data.edges, L = S.data.live || { util: [], cong: [], alarms: [] };
    for (const e of members.slice(0, 100)) {
      const tr = el("tr", null, "edge-row");
      tr.dataset.edge = e;
      tr.append(el("td", label(E.a[e])), el("td", label(E.b[e])), el("td", E.n[e] + (E.down && E.down[e] ? " (+" + E.down[e] + " down)" : "")),
        el("td", pct(L.util[e])), el("td", pct(L.cong[e])), el("td", L.alarms[e] || 0));
      tr.addEventListener("click", () => showEdgeDetail(S.data.nodes.id[E.a[e]], S.data.nodes.id[E.b[e]]));
      table.append(tr);
    }
    panel.append(table);
    if (members.length > 100) panel.append(el("p", (members.length - 100) + " more pairs: expand the groups to see them", "muted"));
    const detail = el("div"); detail.id = "panel-edge-detail";
    panel.append(detail);
    S.renderer.refresh();
  }

  function showEdgeDetail(idA, idB) {
    let box = document.getElementById("panel-edge-detail");
    if (!box) { box = el("div"); box.id = "panel-edge-detail"; panel.append(box); }
    box.replaceChildren(el("p", "loading the link…", "muted"));
    const url = S.edgeUrl + "?a=" + idA + "&b=" + idB;
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
    const L = M.eth();
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

  function showCounts() {
    const c = S.data.counts;
    const down = c.down_links || 0;
    container.dataset.links = String(c.links);
    container.dataset.downLinks = String(down);
    const L = M.eth();
    const ethText = L && L.nodes.name.length ? " · Ethernet: " + L.counts.links + " links" + (L.counts.down_links ? ", " + L.counts.down_links + " down" : "") : "";
    setStatus((c.switches + c.cas + c.routers) + " nodes (" + c.switches + " switches, " + c.cas + " CAs" + (c.routers ? ", " + c.routers + " routers" : "") +
      ") · " + c.links + " links up" + (down ? ", " + down + " down" : "") + " as " + S.graph.size + " edges" + ethText +
      (M.grouped() && S.expanded.size < S.data.groups.key.length ? " · " + (S.data.groups.key.length - S.expanded.size) + " of " + S.data.groups.key.length + " groups collapsed (click one to expand)" : ""));
  }

  Object.assign(M, { clearSelection, select, showNode, nodeText, pct, showEdge, showEdgeDetail, renderEdgeDetail, renderEdgeJobs, showEthNode, renderPorts, showPort, showCounts });
})();
