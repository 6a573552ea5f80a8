// Live alarm list: rows appear (new), update (changed) and leave or strike out (cleared).
(function () {
  "use strict";
  const table = document.getElementById("alarm-table");
  if (!table) return;
  const body = table.querySelector("tbody");
  const operator = table.dataset.operator === "1";
  const showingOpen = table.dataset.open === "1";
  const pick = table.dataset.pick === "1";  // bulk acknowledge: a check box per active alarm
  const labels = { critical: "Critical", minor: "Minor", warning: "Warning", info: "Info" };
  const RANK = { critical: 3, minor: 2, warning: 1, info: 0 };  // events.choices.SEVERITY_RANK
  const stateLabels = { active: "Active", acknowledged: "Acknowledged", cleared: "Cleared" };
  const fmt = (iso) => iso ? iso.replace("T", " ").slice(0, 19) : "";

  function cell(text, cls) { const td = document.createElement("td"); if (cls) td.className = cls; td.textContent = text; return td; }

  function render(a) {
    const tr = document.createElement("tr");
    tr.dataset.alarm = a.id; tr.dataset.state = a.state; tr.dataset.severity = a.severity; tr.className = "state-" + a.state + " flash";
    if (pick) {
      const td = document.createElement("td");
      if (a.state === "active") {
        const box = document.createElement("input");
        box.type = "checkbox"; box.name = "alarm"; box.value = a.id; box.className = "pick"; box.setAttribute("form", "bulk-ack");
        td.appendChild(box);
      }
      tr.appendChild(td);
    }
    tr.appendChild(cell(labels[a.severity] || a.severity, "sev-" + a.severity));
    const name = document.createElement("td"); const link = document.createElement("a");
    link.href = a.url; link.textContent = a.name; name.appendChild(link); tr.appendChild(name);
    tr.appendChild(cell(a.object));
    tr.appendChild(cell(a.fabric_name));
    tr.appendChild(cell(a.state_text || stateLabels[a.state], "state"));
    tr.appendChild(cell(fmt(a.first_seen)));
    tr.appendChild(cell(fmt(a.last_seen), "last-seen"));
    tr.appendChild(cell(String(a.count), "count"));
    tr.appendChild(cell(a.message.length > 160 ? a.message.slice(0, 159) + "…" : a.message, "msg"));
    const act = document.createElement("td");
    if (operator && a.state === "active") {
      const b = document.createElement("button"); b.className = "ack"; b.dataset.id = a.id; b.textContent = "Acknowledge"; act.appendChild(b);
    }
    tr.appendChild(act);
    return tr;
  }

  function bump(sev, delta) {
    document.querySelectorAll(`#severity-counts [data-sev="${sev}"]`).forEach((el) => {
      el.textContent = String(Math.max(0, (parseInt(el.textContent, 10) || 0) + delta));
    });
  }

  function apply(msg) {
    if (msg.type === "alarms.reload") { location.reload(); return; }
    if (msg.type !== "alarm.changed") return;
    const { action, alarm } = msg.payload;
    const old = body.querySelector(`tr[data-alarm="${alarm.id}"]`);
    const empty = body.querySelector("tr.empty"); if (empty) empty.remove();
    if (action === "new" && !old) bump(alarm.severity, 1);
    if (action === "cleared" && old && old.dataset.state !== "cleared") bump(alarm.severity, -1);
    const wanted = showingOpen ? alarm.state !== "cleared" : alarm.state === "cleared";
    if (!wanted) {
      if (old) { old.className = "state-cleared flash"; old.dataset.state = "cleared"; old.querySelector(".state").textContent = alarm.state_text || "Cleared";
        const b = old.querySelector("button.ack"); if (b) b.remove(); setTimeout(() => old.remove(), 4000); }
      return;
    }
    const row = render(alarm);
    if (old) old.remove();
    if (!showingOpen) { body.prepend(row); return; }
    // Open alarms are listed most severe first, then most recent (events.models.AlarmQuerySet.by_severity):
    // a new or updated one goes above the first row of a lower severity.
    const rank = RANK[alarm.severity] ?? -1;
    const below = [...body.querySelectorAll("tr[data-alarm]")].find((r) => (RANK[r.dataset.severity] ?? -1) <= rank);
    if (below) below.before(row); else body.append(row);
  }

  body.addEventListener("click", async (ev) => {
    const b = ev.target.closest("button.ack"); if (!b) return;
    b.disabled = true;
    const resp = await fetch(`/api/fabric/alarms/${b.dataset.id}/acknowledge/`, {
      method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": WeftLive.csrf(), "Accept": "application/json" },
    });
    if (resp.ok) {
      const r = await resp.json();  // serializer names -> live payload names
      apply({ type: "alarm.changed", payload: { action: "changed", alarm: { ...r, object: r.object_repr } } });
    } else {
      b.disabled = false; b.textContent = resp.status === 403 ? "Not allowed" : "Failed";
    }
  });

  const all = document.getElementById("select-all");
  if (all) all.addEventListener("change", () => body.querySelectorAll("input.pick").forEach((b) => { b.checked = all.checked; }));

  WeftLive.connect("/ws/alarms/", apply);
})();
