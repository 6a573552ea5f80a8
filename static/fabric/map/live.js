// Weft network map, live.js: live updates: the fabric's alarm group (ws/alarms/<fabric>/) and, without
// it, a poll of the newest discovery; a change fetches the light payload (map/?part=edges) and recolours
// in place, or reloads the whole map when the IB nodes changed.
(function () {
  "use strict";
  const M = window.weftMapParts;
  if (!M) return; // no #map on this page
  const S = M.state;
  const { container, guidIndex } = M;

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
        if (part.nodes_version === S.data.nodes_version) M.applyEdges(part);
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
        const selGuid = S.selected !== null && !M.isGroupKey(S.selected) && !M.isEthKey(S.selected) ? S.data.nodes.guid[Number(S.selected)] : null;
        const openGroups = M.grouped() ? [...S.expanded].map((g) => S.data.groups.key[g]) : [];
        S.data = payload;
        M.indexNodes();
        if (M.grouped()) {
          const G = S.data.groups;
          S.expanded = new Set(G.collapsed ? [] : G.key.map((_, g) => g));
          for (const key of openGroups) { const g = G.key.indexOf(key); if (g >= 0) S.expanded.add(g); }
          container.dataset.groups = String(G.key.length);
        } else S.expanded = new Set();
        S.matches = new Set();
        const sel = selGuid !== null ? guidIndex.get(selGuid) : undefined;
        S.selected = sel !== undefined ? String(sel) : null;
        M.rebuild();
        if (selGuid !== null && sel === undefined) M.clearSelection();
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
    const ws = new WebSocket(proto + "//" + location.host + "/ws/alarms/" + S.data.fabric.id + "/");
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
      else if (msg.type === "summary.changed" && p.source === "sweep" && (S.colourMode === "util" || S.colourMode === "cong")) scheduleRefresh();
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
    const url = container.dataset.discoveriesApi + "?brief=1&limit=1&ordering=-id&changed=true&fabric=" + S.data.fabric.id;
    const check = () => {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then((r) => (r.ok ? r.json() : null))
        .then((body) => {
          const newest = body && body.results && body.results[0];
          if (newest && newest.id > (S.data.discovery || 0) && newest.status !== "running" && newest.status !== "failed") {
            refreshEdges();
          }
        })
        .catch(() => {})
        .finally(() => setTimeout(check, every));
    };
    setTimeout(check, every);
  }

  Object.assign(M, { scheduleRefresh, refreshEdges, reloadNodes, connectLive, watchDiscoveries });
})();
