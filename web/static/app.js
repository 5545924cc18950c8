// Loupe's page script. Pages work without it; it only adds live updates and shortcuts.
// It is loaded as a module with the page's CSP nonce; it never uses eval or inline handlers.
document.documentElement.dataset.js = "on";

// data-confirm on a form, a button or a link asks before it acts: dismissing the dialog cancels
// the submit or the click. The listeners capture, so they run before any other handler.
document.addEventListener("click", (ev) => {
  const el = ev.target instanceof Element ? ev.target.closest("[data-confirm]") : null;
  if (!el || el instanceof HTMLFormElement) return;
  if (!window.confirm(el.dataset.confirm)) {
    ev.preventDefault();
    ev.stopImmediatePropagation();
  } else {
    el.dataset.confirmed = "1"; // its form's own data-confirm need not ask again
  }
}, true);

document.addEventListener("submit", (ev) => {
  const form = ev.target;
  if (!(form instanceof HTMLFormElement) || form.dataset.confirm === undefined) return;
  const by = ev.submitter;
  if (by?.dataset.confirmed) {
    delete by.dataset.confirmed;
    return;
  }
  if (!window.confirm(form.dataset.confirm)) {
    ev.preventDefault();
    ev.stopImmediatePropagation();
  }
}, true);
