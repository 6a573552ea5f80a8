// Behaviour that Weft's pages declare in their markup: the Content-Security-Policy allows no inline
// handler (onchange=...), so they are wired here, for every page (base.html).
//   <select|input data-autosubmit>: submit the element's form when it changes;
//   <select data-navigate>: go to the chosen option's value (a URL) when it changes.
"use strict";
document.addEventListener("change", (ev) => {
  const el = ev.target;
  if (!(el instanceof HTMLInputElement || el instanceof HTMLSelectElement)) return;
  if (el.hasAttribute("data-autosubmit") && el.form) el.form.submit();
  else if (el.hasAttribute("data-navigate") && el.value) location.href = el.value;
});
