// Pool page, "Allocate" form (no inline script: CSP): show the inputs the chosen kind takes
// (count for GPUs and MIG slices, the profile for MIG, memory and compute for a fraction). Without
// this script every input shows and the server refuses what does not fit the kind.
(function () {
  "use strict";
  const form = document.getElementById("allocate-form");
  const kind = document.getElementById("id_kind");
  if (!form || !kind) return;
  const USED = {
    gpu: ["count"],
    mig: ["count", "mig_profile"],
    fraction: ["memory_mib", "compute_pct"],
  };
  const OPTIONAL = ["count", "mig_profile", "memory_mib", "compute_pct"];
  function show() {
    const used = USED[kind.value] || OPTIONAL;
    for (const name of OPTIONAL) {
      const row = form.querySelector(`.alloc-field[data-field="${name}"]`);
      // a field with an error stays shown whatever the kind
      if (row) row.hidden = !used.includes(name) && !row.querySelector(".errorlist");
    }
  }
  kind.addEventListener("change", show);
  show();
})();
