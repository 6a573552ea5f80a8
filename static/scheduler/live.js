/* Job page and queue, live: listens to ws/jobs/ (scheduler.consumers.JobConsumer: the changes of
 * the jobs of the user's tenants, {"type": "job.changed", "payload": {job, state, previous,
 * source}}).
 * Job page (#job-state[data-job][data-api]): a change of this job re-reads it from the API and
 * shows its state and, when degraded, its fabric faults (#job-faults, #job-faults-list) at once.
 * Queue: the row of a changed job (tr[data-job]) gets its new state; a job the page does not list
 * (new, or moved between tables) marks the page stale (#jobs-live: "changed: reload").
 * Each change of the open job is listed as it happens (#job-live-steps li[data-step]: degraded,
 * requeued, replaced, recovered, …) with the job's reason (#job-live-reason).
 * Hooks: #jobs-live[data-live=on|off], #job-state[data-state][data-step]. Reconnects with back-off. */
(function () {
  "use strict";
  const live = document.getElementById("jobs-live");
  const badge = document.getElementById("job-state");
  const thisJob = badge ? Number(badge.dataset.job) : null;
  const LABELS = { pending: "Pending", placed: "Placed (GPUs bound)", running: "Running",
    degraded: "Degraded (fabric fault)", completed: "Completed", failed: "Failed",
    cancelled: "Cancelled", preempted: "Preempted" };

  function setState(el, state) {
    el.className = el.className.replace(/\bstate-[a-z]+/g, "") + " state-" + state;
    el.textContent = LABELS[state] || state;
    if (el.dataset) el.dataset.state = state;
  }

  function showFaults(job) {
    const card = document.getElementById("job-faults");
    const list = document.getElementById("job-faults-list");
    if (!card || !list) return;
    const faults = job.faults || [];
    list.textContent = "";
    faults.forEach((f) => {
      const li = document.createElement("li");
      li.dataset.code = f.code;
      li.dataset.key = f.object_key;
      const b = document.createElement("span");
      b.className = "badge code-" + f.code;
      b.textContent = f.code;
      li.append(b, " " + (f.message || ""));
      list.append(li);
    });
    card.dataset.count = String(faults.length);
    card.classList.toggle("hidden", faults.length === 0);
    const since = document.getElementById("job-faults-since");
    if (since) since.textContent = job.degraded_at ? "since " + job.degraded_at.slice(0, 19).replace("T", " ") : "";
  }

  function refreshJob() {
    fetch(badge.dataset.api, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((job) => {
        setState(badge, job.state);
        showFaults(job);
        const why = document.getElementById("job-live-reason");
        if (why) why.textContent = job.reason || "";
      })
      .catch(() => {});
  }

  /** What a change of this job was, in the admin's words: requeued (back to pending after it
   * ran), replaced (a failed host swapped by the scheduler), else its new state. */
  function stepName(p) {
    if (p.source === "replace") return "replaced";
    if (p.state === "pending" && p.previous && p.previous !== "pending") return "requeued";
    if (p.state === "running" && p.previous === "degraded") return "recovered";
    return p.state;
  }

  /** Each change of the open job as it happens (#job-live-steps li[data-step]): a fault that
   * degrades a job and requeues it in the same commit shows both steps, not only "Pending". */
  function showStep(p) {
    const list = document.getElementById("job-live-steps");
    if (!list) return;
    const li = document.createElement("li");
    const name = stepName(p);
    li.dataset.step = name;
    const t = document.createElement("time");
    const now = new Date();
    t.textContent = now.toTimeString().slice(0, 8);
    t.dateTime = now.toISOString();
    li.append(t, " " + name);
    list.append(li);
    list.hidden = false;
    badge.dataset.step = name;
  }

  function onChange(p) {
    if (thisJob !== null) {
      if (p.job === thisJob) {
        showStep(p); // this change at once; the state badge and the faults follow from the API
        refreshJob();
      }
      return;
    }
    const row = document.querySelector('tr[data-job="' + p.job + '"]');
    const cell = row && row.querySelector("td.job-state");
    const sameTable = row && ((p.state === "pending") === (row.dataset.state === "pending"));
    if (cell && sameTable) {
      setState(cell, p.state);
      row.dataset.state = p.state;
    } else if (live) {
      live.textContent = "changed: reload";
      live.dataset.stale = "1";
    }
  }

  let delay = 1000;
  function connect() {
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws/jobs/");
    ws.onopen = () => { delay = 1000; if (live) live.dataset.live = "on"; };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === "job.changed") onChange(msg.payload || {});
    };
    ws.onclose = (ev) => {
      if (live) live.dataset.live = "off";
      if (ev.code === 4401 || ev.code === 4403) return;
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }
  connect();
})();
