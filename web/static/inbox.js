// The inbox: a compact list with the selected item beside it, kept live (new items, items resolved
// elsewhere, claims, who has what open), the keyboard (j/k/Enter/a/e/r/d/x), the confirmation
// step, the arguments editor built from the schema, and bulk selection. The page works without
// it. Untrusted text only ever goes through textContent; server HTML is templ's, already escaped.

const { Kind, Live, validate, fetchHTML, fragment, fieldsIntoJSON, jsonIntoFields } = await import(document.getElementById("inbox-script").dataset.ui);

const page = document.getElementById("page");
const list = document.getElementById("inbox-items");
const detail = document.getElementById("inbox-detail");
const empty = document.getElementById("inbox-empty");
const count = document.getElementById("inbox-count");
const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";
const filter = new URLSearchParams();
if (page.dataset.filterTool) filter.set("tool", page.dataset.filterTool);
if (page.dataset.filterAction) filter.set("action", page.dataset.filterAction);
const tab = sessionStorage.getItem("loupe-tab") ?? (crypto.randomUUID?.() ?? String(Math.random()).slice(2));
sessionStorage.setItem("loupe-tab", tab);
// A page that does not show the newest items (more follow) does not grow live: the next page has them.
const growable = !document.getElementById("inbox-next");

let pending = Number((count?.textContent ?? "0").split(" ")[0]) || 0;
const rows = () => [...list.querySelectorAll(".inbox-item")];
const sync = () => {
  count.textContent = `${pending} pending`;
  const n = rows().length;
  empty.hidden = n > 0;
  if (n === 0) sayWhyEmpty();
};

// sayWhyEmpty asks the server why the emptied list is empty (EmptyReason): nothing waits, or the
// filters hide the items that still wait, and how many. This page cannot know: it only hears of
// the items its filters match.
let whyAsked = 0;
async function sayWhyEmpty() {
  const n = ++whyAsked;
  let fresh = null;
  try {
    fresh = fragment(await fetchHTML("/inbox" + (filter.size ? "?" + filter : "")) ?? "").getElementById("inbox-empty");
  } catch { /* said below, without the count */ }
  if (n !== whyAsked || rows().length > 0) return;
  if (fresh) empty.replaceChildren(...fresh.childNodes);
  else if (!filter.size) empty.firstChild.textContent = "Nothing waits for a reviewer. ";
}

// ---- JSON helpers, as the server compares (sameJSON in pages_inbox.go) ----

const NUM = Symbol("number");
function canonicalJSON(text) {
  let v;
  try {
    v = JSON.parse(text, (k, val, ctx) => (typeof val === "number" && typeof ctx?.source === "string" ? { [NUM]: ctx.source } : val));
  } catch { return null; }
  const out = (x) => {
    if (x === null || typeof x !== "object") return JSON.stringify(x);
    if (NUM in x) return x[NUM];
    if (Array.isArray(x)) return "[" + x.map(out).join(",") + "]";
    return "{" + Object.keys(x).sort().map((k) => JSON.stringify(k) + ":" + out(x[k])).join(",") + "}";
  };
  return out(v);
}

export function sameJSON(a, b) {
  a = a.trim();
  b = b.trim();
  if (a === b) return true;
  const ca = canonicalJSON(a), cb = canonicalJSON(b);
  return ca !== null && ca === cb;
}

const form = () => detail.querySelector("form[data-resolve]");
const argsEdited = (f) => {
  const ta = f?.elements.input;
  return !!ta && !sameJSON(ta.value, ta.dataset.original ?? "");
};

// showEdited makes the form say what Approve does: with changed arguments it is "Approve edited".
function showEdited(f) {
  if (!f) return;
  const edited = argsEdited(f);
  const approve = f.querySelector("button[data-key=a]");
  if (approve) {
    approve.value = edited ? "edit" : "approve";
    approve.textContent = edited ? "Approve edited" : "Approve";
  }
  const edit = f.querySelector("button[data-key=e]");
  if (edit) edit.hidden = edited;
  const note = f.querySelector("[data-edited-note]");
  if (note) note.hidden = !edited;
}

// ---- the arguments editor: fields from the schema, kept in step with the raw JSON ----

function fieldsToJSON(f) {
  if (fieldsIntoJSON(f, sameJSON)) showEdited(f);
}

function jsonToFields(f) {
  jsonIntoFields(f, sameJSON);
}

// showErrors puts each error at the field it names (its JSON pointer), and all of them in the box.
function showErrors(f, errs) {
  f.querySelectorAll("[data-error-for]").forEach((el) => { el.textContent = ""; el.hidden = true; el.parentElement.classList.remove("invalid"); });
  for (const e of errs) {
    const m = /(\/[^:\s]*):/.exec(e);
    if (!m) continue;
    const top = "/" + m[1].split("/")[1];
    const at = f.querySelector(`[data-error-for="${CSS.escape(top)}"]`);
    if (at) {
      at.textContent = (at.textContent ? at.textContent + "; " : "") + e.slice(e.indexOf(":") + 1).trim();
      at.hidden = false;
      at.parentElement.classList.add("invalid");
    }
  }
  const box = f.querySelector(".form-error");
  if (box) {
    box.textContent = errs.join("\n");
    box.hidden = errs.length === 0;
  }
}

function checkJSON(text, schemaText, label) {
  let value;
  try { value = JSON.parse(text); } catch (e) { return [`${label} is not valid JSON: ${e.message}`]; }
  if (!schemaText) return [];
  let schema;
  try { schema = JSON.parse(schemaText); } catch { return []; }
  return validate(schema, value).map((e) => `${label} ${e}`);
}

// ---- the confirmation step ----

const labels = { approve: "Confirm approve", edit: "Confirm approve edited", respond: "Confirm respond", deny: "Confirm deny" };

// showSent fills the confirmation of an edited approval with what will be sent: each changed
// argument (old → new) and the edited arguments whole, instead of the original question.
function showSent(f, action) {
  const step = f.querySelector("[data-confirm-step]");
  const args = step.querySelector("[data-confirm-args]");
  const prompt = step.querySelector("[data-confirm-prompt]");
  const edit = action === "edit";
  if (prompt) prompt.hidden = edit;
  if (!args) return;
  args.hidden = !edit;
  if (!edit) return;
  const text = f.elements.input.value;
  let now = null, was = null;
  try { now = JSON.parse(text); } catch { /* shown as typed */ }
  try { was = JSON.parse(f.elements.input.dataset.original ?? ""); } catch { /* no list of changes */ }
  args.querySelector("[data-confirm-json]").textContent = now === null ? text : JSON.stringify(now, null, 2);
  const list = args.querySelector("[data-confirm-changes]");
  list.replaceChildren();
  if (now && was && typeof now === "object" && typeof was === "object") {
    for (const k of new Set([...Object.keys(was), ...Object.keys(now)])) {
      const a = JSON.stringify(was[k]), b = JSON.stringify(now[k]);
      if (a === b) continue;
      const li = document.createElement("li");
      const key = document.createElement("code");
      key.textContent = k;
      li.append(key, `: ${a ?? "(none)"} → ${b ?? "(removed)"}`);
      list.append(li);
    }
  }
}

function askConfirm(f, action) {
  showSent(f, action);
  const step = f.querySelector("[data-confirm-step]");
  const btn = step.querySelector("[data-confirm-submit]");
  btn.value = action;
  btn.textContent = labels[action] ?? "Confirm";
  btn.classList.toggle("danger", action === "deny");
  step.querySelector("[data-confirm-what]").textContent = labels[action] ?? "Confirm";
  step.querySelector("[data-confirm-flag]").disabled = false;
  const reason = step.querySelector("[data-reason]");
  if (!reason.value) reason.value = f.elements.comment?.value ?? "";
  step.hidden = false;
  reason.focus();
}

function cancelConfirm(f) {
  const step = f.querySelector("[data-confirm-step]");
  if (!step) return;
  step.hidden = true;
  step.querySelector("[data-confirm-flag]").disabled = true;
}

// ---- selection and the detail pane ----

let current = list.querySelector(".inbox-item.current");
let loading = 0;

// working says whether the reviewer has started on the shown item: typed in it, or is in its form.
function working() {
  const f = form();
  if (!f) return false;
  if (f.contains(document.activeElement)) return true;
  if (!f.querySelector("[data-confirm-step]")?.hidden) return true;
  const c = f.elements.comment;
  return argsEdited(f) || (!!c && c.value.trim() !== (c.defaultValue ?? "").trim()) ||
    (!!f.elements.output && f.elements.output.value.trim() !== (f.elements.output.defaultValue ?? "").trim());
}

const shownID = () => detail.querySelector(".inbox-detail")?.dataset.interrupt;

// drafts keeps what the reviewer typed in an item they moved away from, so that coming back to
// it finds the work as they left it (until the page is reloaded).
const drafts = new Map();
const draftFields = ["input", "output", "comment", "reason"];

function stash() {
  const f = form();
  const id = shownID();
  if (!f || !id || f.dataset.submitting || detail.querySelector(".inbox-detail.resolved")) return;
  const edited = argsEdited(f) || draftFields.slice(1).some((k) => f.elements[k] && f.elements[k].value !== f.elements[k].defaultValue);
  if (!edited) { drafts.delete(id); return; }
  drafts.set(id, Object.fromEntries(draftFields.filter((k) => f.elements[k]).map((k) => [k, f.elements[k].value])));
}

function restore(id) {
  const d = drafts.get(id);
  const f = form();
  if (!d || !f) return;
  for (const [k, v] of Object.entries(d)) if (f.elements[k]) f.elements[k].value = v;
  jsonToFields(f);
  if (d.output) f.querySelector("[data-respond]")?.setAttribute("open", "");
}

// ahead holds the next item's detail, fetched while the reviewer reads the current one, so that a
// decision shows the next item at once. An entry is dropped when used, when a live event touches
// its item, and after a few seconds (claims and presence move on).
const ahead = new Map();
const aheadTTL = 5000;
const itemURL = (id) => `/inbox/items/${encodeURIComponent(id)}?${filter}`;
function prefetch(row) {
  const id = row?.dataset.interrupt;
  if (!id || ahead.has(id) || shownID() === id) return;
  ahead.set(id, { at: Date.now(), html: fetchHTML(itemURL(id)).catch(() => undefined) });
}
async function fetched(id) {
  const hit = ahead.get(id);
  ahead.delete(id);
  if (hit && Date.now() - hit.at < aheadTTL) {
    const html = await hit.html;
    if (html !== undefined) return html;
  }
  return fetchHTML(itemURL(id));
}

async function load(id) {
  const n = ++loading;
  const html = await fetched(id);
  if (n !== loading) return;
  stash();
  if (html === null) { detail.replaceChildren(); return; }
  detail.replaceChildren(fragment(html));
  restore(id);
  initDetail();
  prefetch(current?.nextElementSibling);
}

function select(row, { fetch = true } = {}) {
  current?.classList.remove("current");
  current = row;
  if (!row) { beat(); return; }
  row.classList.add("current");
  row.scrollIntoView({ block: "nearest" });
  const q = new URLSearchParams(filter);
  q.set("sel", row.dataset.interrupt);
  history.replaceState(null, "", "/inbox?" + q);
  if (!fetch) return beat();
  if (shownID() !== row.dataset.interrupt) load(row.dataset.interrupt);
  else loading++; // back to the item shown: a load still on its way for another one must not land
  beat();
}

function initDetail() {
  const f = form();
  if (!f) return;
  showEdited(f);
  const step = f.querySelector("[data-confirm-step]:not([hidden])");
  if (step) showSent(f, step.querySelector("[data-confirm-submit]").value);
}

// ---- the flash: what became of the last decision ----

function flash(text, isError) {
  let el = document.getElementById("flash");
  if (!el) {
    el = document.createElement("div");
    el.id = "flash";
    el.setAttribute("role", "status");
    page.querySelector(".section-head").after(el);
  }
  el.className = isError ? "flash" : "flash ok";
  el.textContent = text;
}

// ---- decisions in place: the form's POST sent by fetch; the server answers JSON ----

// decide sends a resolve form as the browser would (the same fields, the pressed button's value,
// the CSRF token) and applies the answer here: a decision taken drops its row and shows the next
// item; a refusal or a confirmation step puts the item back as the server rendered it.
async function decide(f, submitter) {
  f.dataset.submitting = "1";
  const art = f.closest(".inbox-detail");
  const id = art?.dataset.interrupt;
  let res, out;
  try {
    res = await fetch(f.getAttribute("action"), {
      method: "POST", body: new FormData(f, submitter), credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRF-Token": csrf },
    });
    out = await res.json();
  } catch (e) {
    delete f.dataset.submitting;
    flash(`Not sent (${e.message}): nothing was resolved; try again.`, true);
    return;
  }
  if (res.ok && out.status) {
    flash(out.flash, false);
    const row = document.getElementById("i-" + id);
    if (row) dropRow(row);
    else if (shownID() === id) { detail.replaceChildren(); select(current ?? rows()[0] ?? null); }
    countSoon();
    return;
  }
  flash(out.flash || out.error?.message || `Not resolved (${res.status}).`, true);
  if (!out.detail || shownID() !== id) { delete f.dataset.submitting; return; }
  detail.replaceChildren(fragment(out.detail));
  initDetail();
  const q = new URLSearchParams(filter);
  q.set("sel", id);
  history.replaceState(null, "", "/inbox?" + q); // a reload shows the item again, and sends nothing
  const reason = form()?.querySelector("[data-confirm-step]:not([hidden]) [data-reason]");
  if (reason) reason.focus();
  else form()?.querySelector(".form-error:not([hidden]), .field-error:not([hidden])")?.scrollIntoView({ block: "nearest" });
}

// ---- the pending count: asked of the server after live events, so that it counts the items
// this page does not show too ----

let countTimer = 0;
let countAsked = 0;
function countSoon() {
  clearTimeout(countTimer);
  countTimer = setTimeout(async () => {
    // Answers can come back out of order: only the latest question's answer is shown, so that an
    // older count never overwrites a newer one.
    const asked = ++countAsked;
    try {
      const res = await fetch("/inbox/count" + (filter.size ? "?" + filter : ""), { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!res.ok) return;
      const n = (await res.json()).pending;
      if (asked !== countAsked) return;
      pending = n;
      count.textContent = `${pending} pending`;
    } catch { /* the next event asks again */ }
  }, 250);
}

// ---- presence: which item this tab has open, every change and every 15 s ----

function beat(item = current?.dataset.interrupt ?? "") {
  const body = new FormData();
  body.set("tab", tab);
  body.set("item", item);
  body.set("_csrf", csrf);
  fetch("/inbox/presence", { method: "POST", body, credentials: "same-origin", headers: { "X-CSRF-Token": csrf } }).catch(() => {});
}
setInterval(() => beat(), 15000);
addEventListener("pagehide", () => {
  const body = new FormData();
  body.set("tab", tab);
  body.set("item", "");
  body.set("_csrf", csrf);
  navigator.sendBeacon("/inbox/presence", body);
});

function showPresence(id, viewers) {
  const names = [...new Set(viewers.filter((v) => v.tab !== tab).map((v) => v.user))];
  const text = names.length ? `${names.join(", ")} has it open` : "";
  const rowSpan = document.getElementById("i-" + id)?.querySelector("[data-presence]");
  if (rowSpan) rowSpan.textContent = text ? " · " + text : "";
  if (shownID() === id) {
    const d = detail.querySelector(".claimbar [data-presence]");
    if (d) d.textContent = text ? text + "." : "";
  }
}

// ---- live: new items, items resolved elsewhere, claims, presence ----

function dropRow(row) {
  const next = row.nextElementSibling ?? row.previousElementSibling;
  row.remove();
  pending = Math.max(0, pending - 1);
  if (row === current) {
    current = null;
    select(next ?? null);
    if (!next) detail.replaceChildren();
  }
  sync();
}

function closeDetail(note) {
  const art = detail.querySelector(".inbox-detail");
  if (!art) return;
  art.classList.add("resolved");
  art.querySelectorAll("form[data-resolve] button, .claim-form button").forEach((b) => { b.disabled = true; });
  art.querySelectorAll("form[data-resolve] textarea, form[data-resolve] input[type=text]").forEach((el) => { el.readOnly = true; });
  art.querySelector(".resolved-note")?.remove();
  art.querySelector("header").after(note);
}

async function gone(id) {
  ahead.delete(id);
  const row = document.getElementById("i-" + id);
  const f = form();
  if (shownID() === id && f?.dataset.submitting) return; // our own decision is on its way
  if (shownID() === id && working()) {
    let note = null;
    try {
      const q = new URLSearchParams(filter);
      q.set("notice", "1");
      const html = await fetchHTML(`/inbox/items/${encodeURIComponent(id)}?${q}`);
      if (html === null) return; // still pending after all
      note = fragment(html).querySelector(".resolved-note");
    } catch { /* said below without the details */ }
    if (!note) {
      note = document.createElement("div");
      note.className = "resolved-note";
      note.setAttribute("role", "status");
      const text = document.createElement("span");
      text.textContent = "Resolved by another reviewer.";
      const dismiss = document.createElement("a");
      dismiss.href = "/inbox" + (filter.size ? "?" + filter : "");
      dismiss.className = "dismiss";
      dismiss.dataset.dismiss = "";
      dismiss.textContent = "Dismiss";
      note.append(text, " ", dismiss);
    }
    closeDetail(note);
    if (row) { row.remove(); pending = Math.max(0, pending - 1); if (row === current) current = null; sync(); }
    return;
  }
  if (row) dropRow(row);
  else if (shownID() === id) detail.replaceChildren();
}

async function add(id) {
  if (!growable || document.getElementById("i-" + id)) return;
  const q = new URLSearchParams(filter);
  q.set("row", "1");
  const html = await fetchHTML(`/inbox/items/${encodeURIComponent(id)}?${q}`);
  if (!html || document.getElementById("i-" + id)) return;
  const row = fragment(html).firstElementChild;
  row.classList.remove("current");
  list.append(row); // oldest first: a new interrupt is the newest
  pending++;
  sync();
  if (!current) select(row);
}

async function refreshRow(id) {
  ahead.delete(id);
  const row = document.getElementById("i-" + id);
  if (row) {
    const q = new URLSearchParams(filter);
    q.set("row", "1");
    const html = await fetchHTML(`/inbox/items/${encodeURIComponent(id)}?${q}`);
    const fresh = html && fragment(html).firstElementChild;
    if (fresh && document.getElementById("i-" + id) === row) {
      const picked = row.querySelector(".pick")?.checked;
      fresh.classList.toggle("current", row === current);
      if (fresh.querySelector(".pick")) fresh.querySelector(".pick").checked = !!picked;
      row.replaceWith(fresh);
      if (row === current) current = fresh;
    }
  }
  if (shownID() === id && !working()) load(id);
}

const live = new Live(async (m) => {
  if (m.topic !== "inbox") return;
  if (m.kind !== Kind.InboxPresence) countSoon();
  if (m.kind === Kind.Snapshot) {
    const ids = new Set(m.data.pending);
    const all = rows();
    // The snapshot lists the oldest 500: a row past them may still wait.
    const covered = m.data.pending.length < 500;
    all.forEach((el) => { if (!ids.has(el.dataset.interrupt) && covered) gone(el.dataset.interrupt); });
    for (const id of m.data.pending) await add(id);
  } else if (m.kind === Kind.InterruptChanged && m.data.interrupt_id) {
    if (m.data.status === "pending") await add(m.data.interrupt_id);
    else await gone(m.data.interrupt_id);
  } else if (m.kind === Kind.InterruptChanged && m.data.run_id && m.data.status !== "pending") {
    // A cancelled run's interrupts, all at once: the event names the run, not the interrupts.
    const ids = rows().filter((el) => el.dataset.run === m.data.run_id).map((el) => el.dataset.interrupt);
    const shown = detail.querySelector(".inbox-detail");
    if (shown?.dataset.run === m.data.run_id && !ids.includes(shown.dataset.interrupt)) ids.push(shown.dataset.interrupt);
    await Promise.all(ids.map(gone));
  } else if (m.kind === Kind.InboxPresence) {
    showPresence(m.data.interrupt_id, m.data.viewers ?? []);
  } else if (m.kind === Kind.InterruptClaimed) {
    await refreshRow(m.data.interrupt_id);
  } else if (m.kind === Kind.Resync) {
    live.resubscribe("inbox");
  }
});
live.subscribe("inbox", 0);
live.connect();

// ---- events ----

list.addEventListener("click", (ev) => {
  const open = ev.target.closest("[data-open]");
  if (!open || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
  ev.preventDefault();
  select(open.closest(".inbox-item"));
});

detail.addEventListener("input", (ev) => {
  const f = ev.target.closest("form[data-resolve]");
  if (!f) return;
  if (ev.target.dataset.pointer !== undefined) fieldsToJSON(f);
  else if (ev.target.name === "input") { jsonToFields(f); showEdited(f); }
});
detail.addEventListener("change", (ev) => {
  const f = ev.target.closest("form[data-resolve]");
  if (f && ev.target.dataset.pointer !== undefined) fieldsToJSON(f);
});

detail.addEventListener("submit", (ev) => {
  const f = ev.target.closest("form[data-resolve]");
  if (!f) return;
  showEdited(f);
  if (f.dataset.submitting) { ev.preventDefault(); return; } // one decision at a time
  if (ev.submitter?.name === "apply") { ev.preventDefault(); decide(f, ev.submitter); return; } // the server confirms what needs it
  let action = ev.submitter?.value ?? "approve";
  if (action === "approve" && argsEdited(f)) action = "edit";
  let errs = [];
  if (action === "edit") errs = checkJSON(f.elements.input.value, f.dataset.inputSchema, "arguments");
  if (action === "respond") errs = checkJSON(f.elements.output.value, f.dataset.outputSchema, "response");
  showErrors(f, errs);
  if (errs.length) { ev.preventDefault(); return; }
  const flag = f.querySelector("[data-confirm-flag]");
  const confirming = ev.submitter?.dataset.confirmSubmit !== undefined;
  if ((action === "deny" || f.dataset.risk) && !confirming) {
    ev.preventDefault();
    askConfirm(f, action);
    return;
  }
  if (confirming && action === "deny" && !f.querySelector("[data-reason]").value.trim()) {
    ev.preventDefault();
    const r = f.querySelector("[data-reason]");
    r.setCustomValidity("Say why you deny it: the model receives the reason.");
    r.reportValidity();
    return;
  }
  if (flag && !confirming) flag.disabled = true;
  ev.preventDefault();
  decide(f, ev.submitter);
});

// swallow drops the keypress that follows a key we handled on keydown: a shortcut that moved the
// focus into a field must not type its letter there, and Enter in the reason must not also submit
// the form with its first button (implicit submission). It holds until that key is released, not
// for a time: a busy machine delivers the keypress late.
let swallowed = null;
const swallow = (key) => { swallowed = key; };
document.addEventListener("keypress", (ev) => {
  if (swallowed !== null && ev.key === swallowed) {
    ev.preventDefault();
    swallowed = null;
  }
}, true);
document.addEventListener("keyup", (ev) => {
  if (ev.key === swallowed) swallowed = null;
}, true);

detail.addEventListener("keydown", (ev) => {
  if (ev.key !== "Enter" || ev.target.dataset.reason === undefined) return;
  ev.preventDefault();
  swallow("Enter");
  ev.target.closest("form").querySelector("[data-confirm-submit]").click();
});

detail.addEventListener("click", (ev) => {
  if (ev.target.closest("[data-dismiss]")) {
    ev.preventDefault();
    const id = shownID();
    detail.replaceChildren();
    const row = id && document.getElementById("i-" + id);
    if (row) dropRow(row);
    else select(current ?? rows()[0] ?? null);
    return;
  }
  if (ev.target.closest("[data-confirm-cancel]")) {
    const f = form();
    cancelConfirm(f);
    f?.querySelector("button[data-key=a]")?.focus();
    return;
  }
  const reset = ev.target.closest("[data-reset]");
  if (reset) {
    const f = reset.closest("form[data-resolve]");
    const ta = f?.elements.input;
    if (ta) { ta.value = ta.dataset.original ?? ""; jsonToFields(f); showEdited(f); ta.focus(); }
  }
});

// ---- bulk selection ----

const bulk = document.getElementById("bulk");
const bulkCount = document.getElementById("bulk-count");
const picked = () => rows().map((r) => r.querySelector(".pick")).filter((c) => c?.checked);
const showPicked = () => {
  const n = picked().length;
  if (bulkCount) bulkCount.textContent = `${n} selected`;
  bulk?.classList.toggle("picking", n > 0 || !!bulk.querySelector("#bulk-error")); // the reason and the confirm box, once needed
};
showPicked();
page.addEventListener("change", (ev) => {
  if (ev.target.matches("[data-select-all]")) rows().forEach((r) => { const c = r.querySelector(".pick"); if (c) c.checked = ev.target.checked; });
  if (ev.target.matches(".pick, [data-select-all]")) showPicked();
});
// A refusal set on the reason must not block the next button: each click starts clean.
bulk?.addEventListener("click", () => bulk.elements.reason?.setCustomValidity(""), true);
detail.addEventListener("click", () => detail.querySelector("[data-reason]")?.setCustomValidity(""), true);
bulk?.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const n = picked().length;
  if (n === 0) { bulkCount.textContent = "select items first"; return; }
  if (ev.submitter?.value === "deny" && !bulk.elements.reason.value.trim()) {
    bulk.elements.reason.setCustomValidity("A denial needs a reason: the model receives it.");
    bulk.elements.reason.reportValidity();
    return;
  }
  if (!bulk.dataset.running) runBulk(ev.submitter);
});

// runBulk records the bulk decision, applies it a step at a time with its progress in view, and
// ends on its result page (a GET: reloading it sends nothing again).
async function runBulk(submitter) {
  bulk.dataset.running = "1";
  const box = bulk.querySelector("[data-bulk-progress]");
  const bar = box.querySelector("progress");
  const text = box.querySelector("[data-bulk-progress-text]");
  const body = new FormData(bulk, submitter); // before the buttons are disabled: a disabled submitter is not sent
  const buttons = [...bulk.querySelectorAll("button")];
  buttons.forEach((b) => { b.disabled = true; });
  const stop = (msg) => {
    delete bulk.dataset.running;
    buttons.forEach((b) => { b.disabled = false; });
    box.hidden = true;
    flash(msg, true);
  };
  const post = async (url, body) => {
    const res = await fetch(url, { method: "POST", body, credentials: "same-origin", headers: { Accept: "application/json", "X-CSRF-Token": csrf } });
    const out = await res.json();
    if (!res.ok) throw new Error(out.error?.message ?? `${res.status}`);
    return out;
  };
  let p;
  try {
    p = await post(bulk.getAttribute("action"), body);
  } catch (e) { stop(e.message); return; }
  const done = p.url; // with the inbox's filters, for its way back
  box.hidden = false;
  bar.max = p.total;
  const verb = submitter?.value === "deny" ? "Denying" : "Approving";
  text.textContent = `${verb}: 0 of ${p.total}`;
  const step = new FormData();
  step.set("_csrf", csrf);
  while (!p.finished) {
    try {
      p = await post(`/inbox/bulk/${encodeURIComponent(p.id)}/step`, step);
    } catch (e) { stop(`Stopped (${e.message}); the result page says what was applied.`); return; }
    bar.value = p.done;
    text.textContent = `${verb}: ${p.done} of ${p.total}`;
  }
  location.assign(done);
}

// ---- keyboard ----

document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const tag = ev.target.tagName;
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") {
    if (ev.key === "Escape") {
      ev.target.blur();
      const f = form();
      if (f && ev.target.dataset.reason !== undefined) cancelConfirm(f);
    }
    return;
  }
  const all = rows();
  const i = current ? all.indexOf(current) : -1;
  const f = form();
  const press = (key) => f?.querySelector(`button[data-key="${key}"]`)?.click();
  switch (ev.key) {
    case "j": if (!all.length) return; select(all[Math.min(i + 1, all.length - 1)]); break;
    case "k": if (!all.length) return; select(all[Math.max(i - 1, 0)]); break;
    case "Enter": {
      // Enter on a focused button or link keeps its own meaning; on the page or a row it opens the form.
      if (!f || (ev.target !== document.body && !ev.target.closest?.(".inbox-item"))) return;
      (f.querySelector("[data-pointer]:not([disabled])") ?? f.elements.input)?.focus();
      break;
    }
    case "a": if (!f) return; press("a"); break;
    case "d": if (!f) return; press("d"); break;
    case "e": {
      if (!f) return;
      const ta = f.elements.input;
      ta?.focus();
      ta?.select();
      break;
    }
    case "r": {
      if (!f) return;
      const d = f.querySelector("[data-respond]");
      if (d) d.open = true;
      f.elements.output?.focus();
      break;
    }
    case "x": {
      const c = current?.querySelector(".pick");
      if (!c) return;
      c.checked = !c.checked;
      showPicked();
      break;
    }
    default: return;
  }
  ev.preventDefault();
  swallow(ev.key);
});

// ---- start ----

initDetail();
prefetch(current?.nextElementSibling ?? list.querySelector(".inbox-item.current")?.nextElementSibling);
// A refused or confirming submit answers at /inbox/{id}/resolve or /inbox/bulk: the address
// becomes the inbox's again (with its filters and the item), so that a reload shows the inbox
// instead of sending the form again.
if (!/^\/inbox\/?$/.test(location.pathname)) {
  const q = new URLSearchParams(filter);
  const id = shownID();
  if (id) q.set("sel", id);
  history.replaceState(null, "", "/inbox" + (q.size ? "?" + q : ""));
}
// An old-style link (/inbox#i-<id>, as the run page's "Resolve in the inbox" has) selects its item.
const linked = location.hash.startsWith("#i-") ? document.getElementById(location.hash.slice(1)) : null;
if (linked?.classList.contains("inbox-item")) select(linked);
else if (current) current.scrollIntoView({ block: "nearest" });
else if (shownID()) current = document.getElementById("i-" + shownID());
const step = form()?.querySelector("[data-confirm-step]:not([hidden])");
if (step) step.querySelector("[data-reason]")?.focus();
beat();
// Ready: every handler is attached. The time since navigation is the inbox benchmark's time to
// interactive (BenchmarkInboxPageInteractive).
document.documentElement.dataset.inboxReadyMs = String(Math.round(performance.now()));
document.documentElement.dataset.inbox = "ready";
