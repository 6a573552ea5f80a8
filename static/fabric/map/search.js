// Weft network map, search.js: search (GUID as a 64-bit number, LID, name, host, Ethernet name; a port
// GUID asks the API) and the toolbar (CAs box, "Links by", collapse, zoom).
(function () {
  "use strict";
  const M = window.weftMapParts;
  if (!M) return; // no #map on this page
  const S = M.state;
  const { container, searchInput, results, colourSelect, nodeApi, TYPE_NAMES, guidIndex, lidIndex, idIndex,
    setStatus, el, normalizeGuid, label } = M;

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
    const nd = S.data.nodes;
    for (let i = 0; i < nd.id.length && out.length < 50; i++) {
      if ((nd.name[i] || "").toLowerCase().includes(ql)) push(i, "name");
      else if (nd.host[i] >= 0 && S.data.hosts[nd.host[i]].toLowerCase().includes(ql)) push(i, "host");
      else if (ql.length >= 4 && nd.guid[i].includes(ql.replace(/^0x/, ""))) push(i, "GUID");
    }
    const L = M.eth();  // Ethernet devices and LLDP systems by name (keys "e<k>"; one on an IB switch is that switch)
    if (L) for (let k = 0; k < L.nodes.name.length && out.length < 50; k++) {
      if (L.nodes.name[k].toLowerCase().includes(ql)) {
        const key = M.ethKey(k);
        push(M.isEthKey(key) ? key : Number(key), "Ethernet " + L.nodes.kind[k]);
      }
    }
    return out;
  }

  function showResults(list) {
    results.replaceChildren();
    S.matches = new Set(list.map(([i]) => String(i)));
    for (const [i, why] of list) {
      const li = el("li");
      if (M.isEthKey(i)) {
        const name = M.eth().nodes.name[Number(i.slice(1))];
        li.dataset.ethNode = name;
        li.append(name + " ", el("span", why, "muted"));
        li.addEventListener("mousedown", (ev) => { ev.preventDefault(); pick(i); });
        results.append(li);
        continue;
      }
      li.dataset.guid = S.data.nodes.guid[i];
      li.append(label(i) + " ", el("span", TYPE_NAMES[S.data.nodes.type[i]] + " · " + S.data.nodes.guid[i] + " · " + why, "muted"));
      li.addEventListener("mousedown", (ev) => { ev.preventDefault(); pick(i); });
      results.append(li);
    }
    if (S.renderer) S.renderer.refresh();
  }

  function pick(i) {
    results.replaceChildren();
    S.matches = new Set();
    M.select(String(i));
  }

  /** Port GUIDs are not in the layout payload: ask the API which node has that port. */
  function searchServer(q) {
    const g = normalizeGuid(q);
    if (!g) { setStatus("no node matches “" + q + "”"); return; }
    const url = nodeApi + "?brief=1&limit=1&fabric=" + S.data.fabric.id + "&port_guid=" + encodeURIComponent(g);
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
        else if (S.selected !== null) M.clearSelection();
      }
    });
    searchInput.addEventListener("blur", () => setTimeout(() => { results.replaceChildren(); }, 150));
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && ev.target !== searchInput && S.selected !== null) M.clearSelection();
    });
    const casBox = document.getElementById("map-show-cas");
    casBox.addEventListener("change", () => {
      S.showCas = casBox.checked;
      container.dataset.showCas = S.showCas ? "1" : "0";
      S.renderer.refresh();
    });
    colourSelect.addEventListener("change", () => { S.colourMode = colourSelect.value; M.recolourEdges(); });
    const collapseBtn = document.getElementById("map-collapse");
    if (collapseBtn) {
      collapseBtn.hidden = !M.grouped();
      collapseBtn.addEventListener("click", M.collapseAll);
    }
    const cam = () => S.renderer.getCamera();
    document.getElementById("map-zoom-in").addEventListener("click", () => cam().animatedZoom({ duration: 200 }));
    document.getElementById("map-zoom-out").addEventListener("click", () => cam().animatedUnzoom({ duration: 200 }));
    document.getElementById("map-zoom-reset").addEventListener("click", () => cam().animatedReset({ duration: 200 }));
  }

  Object.assign(M, { search, showResults, pick, searchServer, wireUi });
})();
