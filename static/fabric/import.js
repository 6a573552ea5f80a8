// Import page: upload with XMLHttpRequest so that upload progress can be shown, then render the
// API's JSON summary, the warnings with their line numbers, or the located parse error.
(function () {
  "use strict";
  const form = document.getElementById("import-form");
  if (!form) return;
  const bar = document.getElementById("import-bar");
  const phase = document.getElementById("import-phase");
  const progress = document.getElementById("import-progress");
  const result = document.getElementById("import-result");
  const title = document.getElementById("import-title");
  const errorBox = document.getElementById("import-error");
  const summary = document.getElementById("import-summary");
  const links = document.getElementById("import-links");
  const warnings = document.getElementById("import-warnings");
  const submit = document.getElementById("import-submit");

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmtBytes(n) {
    if (n >= 1048576) return (n / 1048576).toFixed(1) + " MB";
    if (n >= 1024) return (n / 1024).toFixed(0) + " kB";
    return n + " B";
  }

  function showResult(status, body) {
    result.hidden = false;
    errorBox.textContent = "";
    summary.replaceChildren();
    links.replaceChildren();
    warnings.replaceChildren();
    result.dataset.status = String(status);
    if (status === 201) {
      const d = body.discovery, s = body.summary;
      title.textContent = "Imported into " + body.fabric.name;
      const rows = [["switches", s.switches], ["CAs", s.cas], ["routers", s.routers], ["links", s.links],
        ["added", s.added], ["removed", s.removed], ["changed", s.changed], ["warnings", s.warnings],
        ["rows written", s.rows_written], ["status", s.status],
        ["duration", s.duration_s != null ? Number(s.duration_s).toFixed(2) + " s" : ""]];
      for (const [k, v] of rows) {
        const tr = el("tr");
        tr.append(el("th", k), el("td", v === undefined ? "" : v));
        tr.dataset.key = k;
        summary.append(tr);
      }
      const map = el("a", "Open the map of " + body.fabric.name);
      map.href = "/fabric/map/?fabric=" + body.fabric.id;
      map.id = "import-map-link";
      const fab = el("a", "fabric page");
      fab.href = "/fabric/" + body.fabric.id + "/";
      links.append(map, " · ", fab);
      const ws = d.warnings || [];
      if (ws.length) {
        warnings.append(el("h4", ws.length + " warning" + (ws.length > 1 ? "s" : "")));
        const ul = el("ul", null, "mono");
        ul.id = "import-warning-list";
        for (const w of ws.slice(0, 500)) {
          ul.append(el("li", (w.line ? "line " + w.line + ": " : "") + (w.message || JSON.stringify(w))));
        }
        if (ws.length > 500) ul.append(el("li", "… and " + (ws.length - 500) + " more", "muted"));
        warnings.append(ul);
      }
    } else {
      title.textContent = "Import rejected (HTTP " + status + ")";
      let msg;
      if (body && body.error) {
        msg = body.error + (body.line && String(body.error).indexOf(String(body.line)) < 0 ? " (line " + body.line + ")" : "");
      } else if (body && typeof body === "object") {
        msg = Object.entries(body).map(([k, v]) => k + ": " + (Array.isArray(v) ? v.join(" ") : v)).join("\n");
      } else {
        msg = String(body || "no response");
      }
      errorBox.textContent = msg;
      if (body && body.line) errorBox.dataset.line = body.line;
      if (status === 409 && body && body.would_remove) {
        // The import would remove much of the stored fabric: say what, and how to go on.
        const ul = el("ul");
        ul.id = "import-would-remove";
        const examples = body.would_remove.examples || [];
        for (const item of examples) ul.append(el("li", item));
        warnings.append(el("p", "It would remove " + body.would_remove.nodes + " node(s) and " +
          body.would_remove.links + " link(s)" + (examples.length ? ", among them:" : ".")), ul,
          el("p", "If the file is the whole fabric, tick \"The file is the whole fabric\" and import again.", "muted"));
      }
    }
  }

  // Suggest a fabric name from the file name (selene_compute.ibnetdiscover.txt.gz → selene_compute).
  const nameInput = document.getElementById("import-fabric");
  document.getElementById("import-file").addEventListener("change", function () {
    const f = this.files[0];
    if (!f || nameInput.value.trim()) return;
    nameInput.value = f.name.split(".")[0].replace(/[^-a-zA-Z0-9_]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 64);
  });

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    const file = document.getElementById("import-file").files[0];
    if (!file) return;
    const data = new FormData();
    data.append("fabric", document.getElementById("import-fabric").value.trim());
    data.append("file", file, file.name);
    if (document.getElementById("import-replace").checked) data.append("replace", "true");
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.dataset.url);
    xhr.setRequestHeader("X-CSRFToken", form.querySelector("[name=csrfmiddlewaretoken]").value);
    xhr.setRequestHeader("Accept", "application/json");
    progress.hidden = false;
    result.hidden = true;
    submit.disabled = true;
    bar.value = 0;
    phase.textContent = "uploading " + fmtBytes(file.size);
    xhr.upload.onprogress = function (e) {
      if (e.lengthComputable) {
        bar.value = Math.round((100 * e.loaded) / e.total);
        phase.textContent = "uploading " + fmtBytes(e.loaded) + " of " + fmtBytes(e.total);
      }
    };
    xhr.upload.onload = function () {
      bar.removeAttribute("value"); // indeterminate while the server parses and ingests
      phase.textContent = "uploaded; parsing and comparing with the stored fabric…";
    };
    xhr.onload = function () {
      submit.disabled = false;
      bar.value = 100;
      phase.textContent = "done";
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = xhr.responseText; }
      showResult(xhr.status, body);
    };
    xhr.onerror = function () {
      submit.disabled = false;
      phase.textContent = "network error";
      showResult(0, "the upload failed (network error)");
    };
    xhr.send(data);
  });
})();
