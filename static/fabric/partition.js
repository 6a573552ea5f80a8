// Partition pages (no inline script: CSP). The form: "Find hosts" narrows the host list (picked
// hosts stay listed) and the count of picked hosts and the HCA ports they add is shown. The
// partition page: while the requested apply is queued or running, poll its record
// (GET /api/fabric/partition-applies/<id>/) and reload the page once it has ended, so the
// server draws the final state (the record is then final: no reload loop).
(function () {
  "use strict";
  const search = document.getElementById("host-search");
  const hosts = document.getElementById("id_hosts");
  const picked = document.getElementById("hosts-picked");
  function count() {
    if (!hosts || !picked) return;
    let n = 0, ports = 0;
    for (const o of hosts.options) {
      if (o.selected) { n += 1; ports += Number(o.dataset.ports || 0); }
    }
    picked.textContent = n ? `${n} host${n === 1 ? "" : "s"} picked, ${ports} HCA port${ports === 1 ? "" : "s"}` : "";
    picked.dataset.hosts = String(n);
    picked.dataset.ports = String(ports);
  }
  if (search && hosts) {
    search.addEventListener("input", () => {
      const q = search.value.trim().toLowerCase();
      for (const o of hosts.options) o.hidden = q !== "" && !o.selected && !o.text.toLowerCase().includes(q);
    });
    hosts.addEventListener("change", count);
    count();
  }

  const state = document.getElementById("apply-state");
  if (!state || state.dataset.follow !== "1") return;
  const FINAL = new Set(["done", "failed"]);
  const started = Date.now();
  let wait = 500;
  async function poll() {
    try {
      const resp = await fetch(state.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (resp.ok) {
        const rec = await resp.json();
        state.dataset.polled = rec.state;
        if (FINAL.has(rec.state)) { window.location.reload(); return; }
      }
    } catch (e) { /* the next poll tries again */ }
    if (Date.now() - started > 15 * 60 * 1000) return; // an apply is bounded well below this
    wait = Math.min(wait * 1.5, 3000);
    window.setTimeout(poll, wait);
  }
  window.setTimeout(poll, wait);
})();
