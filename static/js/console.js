// Small console behaviours shared by every page. Apps add their own scripts next to this one.
document.addEventListener("htmx:configRequest", (event) => {
  const token = document.querySelector('meta[name="csrf-token"]');
  if (token) event.detail.headers["X-CSRFToken"] = token.content;
});

// The Content-Security-Policy allows no inline handlers (onclick=, onsubmit=) and no style=
// attributes, so templates declare behaviour in data-* attributes and this file wires it up.

// <form data-confirm="Revoke X?">: ask before submitting.
document.addEventListener("submit", (event) => {
  const form = event.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// <select data-autosubmit>: submit its form on change (the tenant switcher).
document.addEventListener("change", (event) => {
  const field = event.target.closest("[data-autosubmit]");
  if (field && field.form) field.form.requestSubmit();
});

// <a data-stop-click> inside a clickable row: follow the link without also selecting the row.
document.addEventListener("click", (event) => {
  if (event.target.closest("[data-stop-click]")) event.stopPropagation();
}, true);

// Geometry: numbers computed per row (bar offsets and widths, indentation) arrive as numeric data-*
// attributes and are set through element.style, which the policy allows. Only finite numbers pass.
(() => {
  function number(value) {
    const n = Number.parseFloat(value);
    return Number.isFinite(n) ? n : null;
  }
  function applyGeometry(root) {
    const scope = root && root.querySelectorAll ? root : document;
    const elements = [scope, ...scope.querySelectorAll("[data-left-pct], [data-width-pct], [data-indent-px]")];
    elements.forEach((el) => {
      if (!el.dataset) return;
      const left = number(el.dataset.leftPct), width = number(el.dataset.widthPct);
      const indent = number(el.dataset.indentPx);
      if (left !== null) el.style.left = `${left}%`;
      if (width !== null) el.style.width = `${width}%`;
      if (indent !== null) el.style.paddingLeft = `calc(.6rem + ${indent}px)`;
    });
  }
  if (window.htmx) htmx.onLoad(applyGeometry);  // the page itself, then every swapped-in fragment
  else document.addEventListener("DOMContentLoaded", () => applyGeometry(document));
})();
