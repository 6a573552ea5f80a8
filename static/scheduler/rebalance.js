// The rebalancer's button (templates/scheduler/_rebalance.html): POST /api/scheduler/rebalance/
// with {"dry_run": …} and list the actions. Text only (textContent): reasons carry job names.
(function () {
  "use strict";
  const box = document.getElementById("rebalance");
  if (!box) return;
  const status = box.querySelector(".rebalance-status");
  const table = box.querySelector(".rebalance-actions");
  const body = table.querySelector("tbody");
  const real = box.querySelector('.rebalance-run[data-dry-run="0"]');
  const token = box.querySelector("input[name=csrfmiddlewaretoken]").value;

  function show(data) {
    body.replaceChildren();
    for (const a of data.actions || []) {
      const tr = document.createElement("tr");
      tr.dataset.kind = a.kind;
      tr.dataset.job = a.job;
      for (const text of [a.label || a.kind, `job ${a.job}`, a.reason, a.outcome]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      const apply = (a.details || {}).apply;
      if (apply && !a.execute) {
        // a proposal the admin may take alone (a notify job's replacement): its own button
        const b = document.createElement("button");
        b.type = "button";
        b.className = "rebalance-apply";
        b.textContent = "Replace now";
        b.addEventListener("click", () => applyOne(apply, b, tr));
        tr.lastChild.append(" ", b);
      }
      body.appendChild(tr);
    }
    table.hidden = !(data.actions || []).length;
  }

  async function applyOne(url, button, tr) {
    button.disabled = true;
    let resp, data;
    try {
      resp = await fetch(url, {
        method: "POST", credentials: "same-origin",
        headers: { "X-CSRFToken": token, "Accept": "application/json" },
      });
      data = await resp.json();
    } catch (err) {
      status.textContent = `The replacement could not be sent (${err}).`;
      button.disabled = false;
      return;
    }
    tr.lastChild.textContent = resp.ok ? `done: now on ${Object.keys(data.placement || {}).join(", ")}` : `refused: ${data.detail || resp.status}`;
  }

  async function run(dry) {
    status.textContent = dry ? "Planning…" : "Rebalancing…";
    let resp, data;
    try {
      resp = await fetch(box.dataset.url, {
        method: "POST", credentials: "same-origin",
        headers: { "X-CSRFToken": token, "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify({ dry_run: dry }),
      });
      data = await resp.json();
    } catch (err) {
      status.textContent = `The rebalancer could not be reached (${err}).`;
      return;
    }
    if (!resp.ok) {
      status.textContent = data.skipped || data.detail || `Refused (HTTP ${resp.status}).`;
      return;
    }
    show(data);
    const n = (data.actions || []).length;
    status.textContent = n ? `${dry ? "Dry run" : "Done"}: ${n} action${n === 1 ? "" : "s"}.` : "Nothing to do.";
    real.disabled = !(dry && data.actions.some((a) => a.execute));
  }

  for (const b of box.querySelectorAll(".rebalance-run")) {
    b.addEventListener("click", () => run(b.dataset.dryRun === "1"));
  }
})();
