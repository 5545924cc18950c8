// Loupe's interactive pages: the live WebSocket client, the span tree, the run stream, the inbox
// (live queue, schema-checked forms, keyboard) and the action run forms. Every page works without
// it; it only adds live updates and conveniences. No eval, no inline handlers, no HTML built from
// data: untrusted text only ever goes through textContent.

// The kinds of live events, generated from internal/event (the server's contract).
const { Kind, FinishedRunStatuses } = await import(document.getElementById("ui-script").dataset.events);
export { Kind };

const page = document.getElementById("page");
const liveURL = document.querySelector('meta[name="loupe-live"]')?.content ?? "";

// ---- live: one WebSocket per page, resumed from the last sequence number per topic ----

export class Live {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.topics = new Map(); // topic -> last seq seen
    this.backoff = 250;
    this.state = "connecting";
    this.onState = () => {};
  }
  subscribe(topic, after = 0) {
    this.topics.set(topic, after);
    this.send({ type: "subscribe", topic, after });
  }
  // resubscribe asks the server for everything after the last seq seen: the database fills the gap.
  resubscribe(topic) {
    this.send({ type: "subscribe", topic, after: this.topics.get(topic) ?? 0 });
  }
  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }
  connect() {
    if (!liveURL) return; // the server has no live hub: the page stays as rendered
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + liveURL;
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.addEventListener("open", () => {
      this.backoff = 250;
      this.setState("live");
      for (const [topic, after] of this.topics) ws.send(JSON.stringify({ type: "subscribe", topic, after }));
    });
    ws.addEventListener("message", (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch { return; }
      this.onMessage(m, this);
    });
    ws.addEventListener("close", () => {
      if (this.ws !== ws) return;
      this.setState("reconnecting");
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 5000);
    });
  }
  setState(s) {
    this.state = s;
    document.documentElement.dataset.live = s;
    this.onState(s);
  }
}

// throttled returns a trigger that runs fn at most once every ms and never twice at once: a burst
// of triggers (2,000 span events) is a handful of runs. The first run waits lead ms, so that a
// burst starts as one; with settle, fn runs once more settle ms after the last trigger, because a
// span is announced a moment before it is written. fn returning false means "not now": it runs
// again later. A run that fails (the server busy or restarting) is tried again, ms later each time,
// up to maxRetries times in a row, so that the last change of a burst is never lost to one failed
// reload.
const maxRetries = 5;
function throttled(fn, ms, lead = 150, settle = 0) {
  let timer = null, settleTimer = null, running = false, again = false, last = 0, failures = 0;
  const run = async () => {
    timer = null;
    running = true;
    again = false;
    last = Date.now();
    try {
      if ((await fn()) === false) again = true;
      failures = 0;
    } catch {
      // a failed reload leaves the page as it was, and is tried again
      failures++;
      if (failures <= maxRetries) again = true;
    }
    running = false;
    if (again) schedule();
  };
  const schedule = () => {
    if (running) { again = true; return; }
    if (timer) return;
    timer = setTimeout(run, Math.max(lead, last + ms - Date.now()));
  };
  return () => {
    schedule();
    if (settle) {
      clearTimeout(settleTimer);
      settleTimer = setTimeout(schedule, settle);
    }
  };
}

function debounce(fn, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

export async function fetchHTML(url) {
  // X-Loupe-Fragment asks for the fragment: the same address opened in a tab is the whole page.
  const res = await fetch(url, { headers: { Accept: "text/html", "X-Loupe-Fragment": "1" }, credentials: "same-origin" });
  if (res.status === 204) return null;
  if (!res.ok) throw new Error(url + ": " + res.status);
  return res.text();
}

// fragment parses server-rendered HTML (already escaped by templ) into nodes.
export function fragment(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  return t.content;
}

// ---- JSON Schema: the subset the tools' schemas use, checked before submit; the server checks again ----

export function validate(schema, value, path = "") {
  const errs = [];
  if (!schema || typeof schema !== "object") return errs;
  const at = path || "(root)";
  const typeOf = (v) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "number" && Number.isInteger(v) ? "integer" : typeof v);
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const t = typeOf(value);
    const ok = types.some((x) => x === t || (x === "number" && t === "integer"));
    const article = (x) => (x === "null" ? "null" : /^[aeiou]/.test(x) ? `an ${x}` : `a ${x}`);
    if (!ok) return [`${at}: must be ${types.map(article).join(" or ")}, not ${article(t)}`]; // the server's words (engine/schema_messages.go)
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) errs.push(`${at}: must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) errs.push(`${at}: must be ${JSON.stringify(schema.const)}`);
  if (typeof value === "number") {
    if (typeof schema.minimum === "number" && value < schema.minimum) errs.push(`${at}: must be ≥ ${schema.minimum}`);
    if (typeof schema.maximum === "number" && value > schema.maximum) errs.push(`${at}: must be ≤ ${schema.maximum}`);
    if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) errs.push(`${at}: must be > ${schema.exclusiveMinimum}`);
    if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) errs.push(`${at}: must be < ${schema.exclusiveMaximum}`);
  }
  if (typeof value === "string") {
    const n = [...value].length;
    if (typeof schema.minLength === "number" && n < schema.minLength) errs.push(schema.minLength === 1 ? `${at}: must not be empty` : `${at}: must be at least ${schema.minLength} characters long`);
    if (typeof schema.maxLength === "number" && n > schema.maxLength) errs.push(`${at}: must have at most ${schema.maxLength} characters`);
    if (schema.pattern) {
      try { if (!new RegExp(schema.pattern, "u").test(value)) errs.push(`${at}: must match ${schema.pattern}`); } catch { /* the server decides */ }
    }
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === "number" && value.length < schema.minItems) errs.push(`${at}: needs at least ${schema.minItems} items`);
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) errs.push(`${at}: takes at most ${schema.maxItems} items`);
    if (schema.items && typeof schema.items === "object") value.forEach((v, i) => errs.push(...validate(schema.items, v, `${path}/${i}`)));
  }
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const k of schema.required ?? []) if (!(k in value)) errs.push(`${path}/${k}: is required`);
    const props = schema.properties ?? {};
    for (const [k, v] of Object.entries(value)) {
      if (k in props) errs.push(...validate(props[k], v, `${path}/${k}`));
      else if (schema.additionalProperties === false) errs.push(`${path}/${k}: is not allowed`);
      else if (typeof schema.additionalProperties === "object") errs.push(...validate(schema.additionalProperties, v, `${path}/${k}`));
    }
  }
  for (const key of ["anyOf", "oneOf"]) {
    if (Array.isArray(schema[key]) && !schema[key].some((s) => validate(s, value, path).length === 0)) errs.push(`${at}: matches none of the allowed shapes`);
  }
  if (Array.isArray(schema.allOf)) schema.allOf.forEach((s) => errs.push(...validate(s, value, path)));
  return errs;
}

// ---- a form's fields built from a schema (data-pointer), kept in step with its raw JSON ----
// (the inbox's arguments editor and the Actions page's input form)

const unptr = (p) => p.slice(1).replaceAll("~1", "/").replaceAll("~0", "~");

export function fieldsIntoJSON(f) {
  const ta = f.elements.input;
  let obj;
  try { obj = JSON.parse(ta.value); } catch { return false; } // the raw JSON is being typed: it wins
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) return false;
  f.querySelectorAll("[data-pointer]").forEach((el) => {
    const key = unptr(el.dataset.pointer);
    const kind = el.closest("[data-kind]")?.dataset.kind;
    if (kind === "boolean") {
      // On a run form an optional box left unticked is left out (not set), not sent as false.
      const optional = f.matches("[data-run-form]") && el.closest("[data-required]") === null;
      if (!el.checked && optional) delete obj[key];
      else obj[key] = el.checked;
    } else if (kind === "number" || kind === "integer") {
      if (el.value === "") delete obj[key];
      else obj[key] = Number(el.value);
    } else if (kind === "select") {
      if (el.value === "") delete obj[key];
      else obj[key] = JSON.parse(el.value);
    } else if (kind === "text") obj[key] = el.value;
  });
  ta.value = JSON.stringify(obj, null, 2);
  return true;
}

export function jsonIntoFields(f, sameJSON = (a, b) => a.trim() === b.trim()) {
  let obj;
  try { obj = JSON.parse(f.elements.input.value); } catch { return; }
  if (!obj || typeof obj !== "object") return;
  f.querySelectorAll("[data-pointer]").forEach((el) => {
    const key = unptr(el.dataset.pointer);
    const kind = el.closest("[data-kind]")?.dataset.kind;
    const v = obj[key];
    if (kind === "boolean") el.checked = v === true;
    else if (kind === "select") {
      const want = v === undefined ? "" : JSON.stringify(v);
      const op = [...el.options].find((o) => o.value === want || (o.value && sameJSON(o.value, want)));
      if (op) el.value = op.value;
    } else if (kind === "number" || kind === "integer" || kind === "text") el.value = v === undefined ? "" : String(v);
  });
}

// checkJSON parses a textarea and validates it; it returns error strings, empty when fine.
export function checkJSON(text, schemaText, label) {
  let value;
  try { value = JSON.parse(text); } catch (e) { return [`${label} is not valid JSON: ${e.message}`]; }
  if (!schemaText) return [];
  let schema;
  try { schema = JSON.parse(schemaText); } catch { return []; }
  return validate(schema, value).map((e) => `${label} ${e}`);
}

// showErrors shows each error at the field it names (an "input /pointer: …" error of a form with
// fields built from the schema) and the rest in the form's error box.
function showErrors(form, errs) {
  const rest = [];
  form.querySelectorAll("[data-error-for]").forEach((el) => { el.textContent = ""; el.hidden = true; el.closest(".schema-field")?.classList.remove("invalid"); });
  for (const e of errs) {
    const m = /^input (\/[^:]*): (.*)$/s.exec(e);
    const at = m && [...form.querySelectorAll("[data-error-for]")].find((el) => el.dataset.errorFor === m[1]);
    if (!at) { rest.push(e); continue; }
    at.textContent = at.textContent ? `${at.textContent}; ${m[2]}` : m[2];
    at.hidden = false;
    at.closest(".schema-field")?.classList.add("invalid");
  }
  const box = form.querySelector(".form-error");
  if (!box) return;
  box.textContent = rest.join("\n");
  box.hidden = rest.length === 0;
}

// ---- span tree ----

// treeBusy counts the tree's own requests in flight (expand, select, more) and treeEdits its
// changes: a live reload neither lands in the middle of one nor undoes one made while it loaded.
let treeBusy = 0;
let treeEdits = 0;

// treeQuery is what a reload needs to keep the tree as the user left it: the selected span, the
// expanded nodes and the collapsed roots (the server opens the roots by default).
function treeQuery(root) {
  const q = new URLSearchParams();
  const sel = root.querySelector(".span-row.selected")?.dataset.span ?? root.querySelector("#span-detail .span-panel")?.dataset.span;
  if (sel) q.set("span", sel);
  const open = [];
  const closed = [];
  root.querySelectorAll(".span-row[aria-expanded]").forEach((li) => {
    if (li.getAttribute("aria-expanded") === "true") open.push(li.dataset.span);
    else if (li.dataset.depth === "0") closed.push(li.dataset.span);
  });
  q.set("open", open.slice(0, 2000).join(","));
  if (closed.length) q.set("closed", closed.slice(0, 2000).join(","));
  return q;
}

// reloadTree fetches the trace section again (url answers with it as a fragment) and swaps it in
// keeping the expanded nodes, the selection, the scroll position and the focus. The span panel is
// kept (with any payload loaded in full) unless the selection changed or the span was running.
// It returns false when the user is busy with the tree, so that the caller tries again later.
async function reloadTree(url, params = new URLSearchParams()) {
  if (treeBusy > 0) return false;
  const root = document.getElementById("trace");
  if (!root) return true;
  const edits = treeEdits;
  const q = treeQuery(root);
  for (const [k, v] of params) q.set(k, v);
  const html = await fetchHTML(url + (url.includes("?") ? "&" : "?") + q);
  if (!html) return true;
  if (treeBusy > 0 || edits !== treeEdits || document.getElementById("trace") !== root) return false;
  const fresh = fragment(html).querySelector("#trace");
  if (!fresh) return true;
  const tree = root.querySelector(".spantree");
  const freshTree = fresh.querySelector(".spantree");
  if (!tree || !freshTree || root.dataset.trace !== fresh.dataset.trace) {
    root.replaceWith(fresh);
    initTree(fresh);
    return true;
  }
  const focused = root.contains(document.activeElement) ? document.activeElement : null;
  const focusRow = focused?.closest(".span-row")?.dataset.span;
  const focusSel = focused?.matches("[data-toggle]") ? "[data-toggle]" : "[data-select]";
  const top = tree.scrollTop;
  root.querySelector(".trace-head").replaceWith(fresh.querySelector(".trace-head"));
  // The timeline's axis may have grown: timeline.js redraws it, keeping the zoom.
  const head = root.querySelector(".timeline-head");
  const freshHead = fresh.querySelector(".timeline-head");
  if (head && freshHead) head.replaceWith(freshHead);
  tree.replaceChildren(...[...freshTree.childNodes]);
  tree.scrollTop = top;
  const detail = root.querySelector("#span-detail");
  const freshDetail = fresh.querySelector("#span-detail");
  const cur = detail.querySelector(".span-panel");
  const next = freshDetail.querySelector(".span-panel");
  if (!cur || !next || cur.dataset.span !== next.dataset.span || cur.querySelector(".badge.running")) {
    detail.replaceChildren(...[...freshDetail.childNodes]);
  }
  for (const k of ["name", "running", "link"]) {
    if (fresh.dataset[k] !== undefined) root.dataset[k] = fresh.dataset[k];
  }
  if (focusRow) document.getElementById("span-" + focusRow)?.querySelector(focusSel)?.focus({ preventScroll: true });
  return true;
}

function initTree(root) {
  const tree = root.querySelector(".spantree");
  if (!tree) return;
  const base = root.dataset.base;
  const link = root.dataset.link;
  const detail = root.querySelector("#span-detail");
  const q = (p) => `&link=${encodeURIComponent(link)}` + p;

  const descendants = (li) => {
    const depth = Number(li.dataset.depth);
    const out = [];
    for (let n = li.nextElementSibling; n && Number(n.dataset.depth) > depth; n = n.nextElementSibling) out.push(n);
    return out;
  };
  const setToggle = (li, open) => {
    li.setAttribute("aria-expanded", String(open));
    const b = li.querySelector("[data-toggle]");
    if (b) b.textContent = open ? "▾" : "▸";
  };
  async function expand(li) {
    const depth = Number(li.dataset.depth) + 1;
    const html = await fetchHTML(`${base}/children?parent=${encodeURIComponent(li.dataset.span)}&depth=${depth}${q("")}`);
    descendants(li).forEach((n) => n.remove());
    li.after(fragment(html ?? ""));
    setToggle(li, true);
  }
  function collapse(li) {
    descendants(li).forEach((n) => n.remove());
    setToggle(li, false);
  }
  let selections = 0; // how many times a span was selected: a slow search result yields to a later choice
  async function select(li, href) {
    selections++;
    tree.querySelectorAll(".span-row.selected").forEach((n) => n.classList.remove("selected"));
    li.classList.add("selected");
    const url = `${base}/spans/${encodeURIComponent(li.dataset.span)}?${q("").slice(1)}`;
    // A failed fetch (the server restarting, a dropped connection) is tried again once, then said
    // in the panel, rather than leaving the previous span's panel beside the new selection.
    let html;
    try {
      html = await fetchHTML(url);
    } catch {
      try {
        html = await fetchHTML(url);
      } catch (err) {
        const p = document.createElement("p");
        p.className = "error";
        p.textContent = `This span could not be loaded (${err.message}). Select it again to retry.`;
        detail.replaceChildren(p);
        return;
      }
    }
    detail.replaceChildren(fragment(html ?? ""));
    history.replaceState(null, "", href);
  }
  // busy wraps the tree's own changes: a live reload waits for them and never undoes them.
  const busy = async (fn) => {
    treeBusy++;
    treeEdits++;
    try { await fn(); } finally { treeBusy--; treeEdits++; }
  };
  tree.addEventListener("click", async (ev) => {
    const li = ev.target.closest(".span-row");
    if (!li) return;
    if (ev.target.closest("[data-toggle]")) {
      ev.preventDefault();
      await busy(async () => {
        if (li.getAttribute("aria-expanded") === "true") collapse(li);
        else await expand(li);
      });
    } else if (ev.target.closest("[data-select]")) {
      if (ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
      ev.preventDefault();
      await busy(() => select(li, ev.target.closest("a").href));
    } else if (ev.target.closest("[data-more]")) {
      await busy(async () => {
        const parent = li.dataset.parent;
        // A row with an end stands for a gap before rows already shown: it loads up to them.
        const end = li.dataset.end ? `&end=${li.dataset.end}` : "";
        const html = await fetchHTML(`${base}/children?parent=${encodeURIComponent(parent)}&offset=${li.dataset.offset}${end}&depth=${li.dataset.depth}${q("")}`);
        li.replaceWith(fragment(html ?? ""));
      });
    }
  });
  tree.addEventListener("keydown", async (ev) => {
    const li = ev.target.closest(".span-row");
    if (!li) return;
    if (ev.key === "ArrowRight" && li.getAttribute("aria-expanded") === "false") { ev.preventDefault(); await busy(() => expand(li)); }
    if (ev.key === "ArrowLeft" && li.getAttribute("aria-expanded") === "true") { ev.preventDefault(); await busy(async () => collapse(li)); }
  });
  detail.addEventListener("click", async (ev) => {
    const b = ev.target.closest("[data-load-payload]");
    if (!b) return;
    await busy(async () => {
      const html = await fetchHTML(b.dataset.loadPayload);
      const pre = b.parentElement.querySelector(".payload-text");
      pre.replaceChildren(fragment(html ?? ""));
      b.remove();
    });
  });
  initTreeFind(root, tree, { expand, collapse, select, busy, q, selections: () => selections });
  // timeline.js (a module of its own) draws the ruler and the zoom of this tree's waterfall.
  root.dispatchEvent(new CustomEvent("loupe:tree", { bubbles: true }));
  tree.querySelector(".span-row.selected")?.scrollIntoView({ block: "nearest" });
  keepLinkedSpanInView();
}

// ---- span tree: find, expand all, collapse all, keyboard ----

// initTreeFind wires the tree's search box, its expand/collapse-all buttons and the arrow keys.
// The server answers a search with every matching span and the path to it, so a match inside a
// collapsed row is reached by opening that path, one /children request per closed ancestor.
function initTreeFind(root, tree, { expand, collapse, select, busy, q, selections }) {
  const tools = root.querySelector(".tree-tools");
  const input = tools?.querySelector(".span-search");
  const count = tools?.querySelector(".search-count");
  const prevBtn = tools?.querySelector("[data-search-prev]");
  const nextBtn = tools?.querySelector("[data-search-next]");
  const rowOf = (id) => document.getElementById("span-" + id);
  let matches = [];
  let ids = new Set();
  let cur = -1;
  let seq = 0;
  let searched = "";

  // mark highlights the matches among the rows on the page; it runs again whenever rows change.
  const mark = () => {
    tree.querySelectorAll(".span-row.match").forEach((li) => {
      if (!ids.has(li.dataset.span)) li.classList.remove("match", "current-match");
    });
    for (const id of ids) rowOf(id)?.classList.add("match");
    tree.querySelectorAll(".span-row.current-match").forEach((li) => {
      if (li.dataset.span !== matches[cur]?.id) li.classList.remove("current-match");
    });
    if (cur >= 0) rowOf(matches[cur].id)?.classList.add("current-match");
  };
  new MutationObserver(mark).observe(tree, { childList: true });

  const showCount = () => {
    if (!count) return;
    if (!input.value.trim()) count.textContent = "";
    else if (matches.length === 0) count.textContent = "no spans match";
    else count.textContent = `${cur + 1} of ${matches.length}${root.dataset.searchCapped === "true" ? "+" : ""}`;
    if (prevBtn) prevBtn.disabled = matches.length === 0;
    if (nextBtn) nextBtn.disabled = matches.length === 0;
  };

  // reveal opens the closed ancestors of a match, top down, and brings it into view. A span past
  // a page of its parent's children is reached by loading the pages after it ("show more").
  async function load(id, parent) {
    for (let pages = 0; !rowOf(id) && pages < 100; pages++) {
      const more = [...tree.querySelectorAll(".span-row.more")].find((r) => (r.dataset.parent ?? "") === parent);
      if (!more) return;
      const end = more.dataset.end ? `&end=${more.dataset.end}` : "";
      const html = await fetchHTML(`${root.dataset.base}/children?parent=${encodeURIComponent(parent)}&offset=${more.dataset.offset}${end}&depth=${more.dataset.depth}${q("")}`);
      more.replaceWith(fragment(html ?? ""));
    }
  }
  async function reveal(m) {
    let parent = "";
    for (const a of m.path) {
      await load(a, parent);
      const li = rowOf(a);
      if (li && li.getAttribute("aria-expanded") === "false") await expand(li);
      parent = a;
    }
    await load(m.id, parent);
    const li = rowOf(m.id);
    if (li) li.scrollIntoView({ block: "nearest" });
    return li;
  }
  async function go(k) {
    if (matches.length === 0) return;
    cur = (k + matches.length) % matches.length;
    showCount();
    // Opening the path to a match can take a while on a large trace: if a newer search ran, or the
    // reader selected a span meanwhile, this match is no longer wanted and is not selected.
    const s0 = seq, n0 = selections();
    await busy(async () => {
      const li = await reveal(matches[cur]);
      mark();
      if (seq !== s0 || selections() !== n0) return;
      if (li) await select(li, li.querySelector("[data-select]").href);
    });
  }
  async function search() {
    const text = input.value.trim();
    searched = text;
    const mine = ++seq;
    if (!text) {
      matches = []; ids = new Set(); cur = -1;
      mark(); showCount();
      return;
    }
    const res = await fetch(`${root.dataset.base}/search?q=${encodeURIComponent(text)}`, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!res.ok || mine !== seq) return;
    const body = await res.json();
    if (mine !== seq) return;
    matches = body.matches ?? [];
    root.dataset.searchCapped = String(!!body.capped);
    ids = new Set(matches.map((m) => m.id));
    cur = -1;
    mark();
    showCount();
    if (matches.length) await go(0);
  }
  if (input) {
    const later = debounce(search, 250);
    input.addEventListener("input", later);
    input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        ev.preventDefault();
        if (input.value.trim() !== searched) search();
        else go(cur + (ev.shiftKey ? -1 : 1));
      } else if (ev.key === "Escape") {
        input.value = "";
        search();
      }
    });
    prevBtn?.addEventListener("click", () => go(cur - 1));
    nextBtn?.addEventListener("click", () => go(cur + 1));
  }

  tools?.querySelector("[data-expand-all]")?.addEventListener("click", () => busy(async () => {
    const html = await fetchHTML(`${root.dataset.base}/children?expand=all&depth=0${q("")}`);
    tree.replaceChildren(fragment(html ?? ""));
  }));
  tools?.querySelector("[data-collapse-all]")?.addEventListener("click", () => busy(async () => {
    [...tree.querySelectorAll('.span-row[aria-expanded="true"]')].reverse().forEach((li) => collapse(li));
  }));

  // Up/Down move between rows, Right opens a row or goes to its first child, Left closes it or
  // goes to its parent; Enter on a row's name selects it (it is a link).
  const rows = () => [...tree.querySelectorAll(".span-row[data-span]")];
  const focusRow = (li) => li?.querySelector("[data-select]")?.focus();
  tree.addEventListener("keydown", (ev) => {
    const li = ev.target.closest(".span-row[data-span]");
    if (!li || ev.defaultPrevented) return; // the tree's own handler opened or closed it
    const all = () => rows();
    switch (ev.key) {
      case "ArrowDown": {
        ev.preventDefault();
        const r = all();
        focusRow(r[r.indexOf(li) + 1]);
        break;
      }
      case "ArrowUp": {
        ev.preventDefault();
        const r = all();
        focusRow(r[r.indexOf(li) - 1]);
        break;
      }
      case "ArrowRight":
        if (li.getAttribute("aria-expanded") === "true") {
          ev.preventDefault();
          const next = li.nextElementSibling;
          if (next && Number(next.dataset.depth) > Number(li.dataset.depth)) focusRow(next);
        }
        break;
      case "ArrowLeft":
        if (li.getAttribute("aria-expanded") !== "true") {
          ev.preventDefault();
          const depth = Number(li.dataset.depth);
          let p = li.previousElementSibling;
          while (p && !(p.dataset.span && Number(p.dataset.depth) < depth)) p = p.previousElementSibling;
          focusRow(p);
        }
        break;
    }
  });
  if (!slashBound) {
    slashBound = true;
    document.addEventListener("keydown", (ev) => {
      if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.target.closest?.("input, textarea, select, [contenteditable]")) return;
      const box = document.querySelector("#trace .span-search");
      if (!box) return;
      ev.preventDefault();
      box.focus();
      box.select();
    });
  }
}

// slashBound is set once the page-wide "/" to search is listening (initTree runs again when the
// tree is replaced).
let slashBound = false;

// keepLinkedSpanInView brings the span a link names (#span-<id>, as "show the failing span") to
// the middle of the screen, and keeps it there while the page is still laying itself out (the
// stream replaying, sections reloading) until the reader scrolls or three seconds pass.
function keepLinkedSpanInView() {
  if (!location.hash.startsWith("#span-")) return;
  const id = location.hash.slice(1);
  const show = () => document.getElementById(id)?.scrollIntoView({ block: "center" });
  show();
  if (!("ResizeObserver" in window)) return;
  const ro = new ResizeObserver(show);
  ro.observe(document.body);
  const stop = () => { ro.disconnect(); ["wheel", "keydown", "touchstart", "mousedown"].forEach((e) => removeEventListener(e, stop)); };
  ["wheel", "keydown", "touchstart", "mousedown"].forEach((e) => addEventListener(e, stop, { once: true, passive: true }));
  setTimeout(stop, 3000);
}

// ---- run page: sections, trace and the chunk stream ----

// fmtDuration renders milliseconds as the server's fmtNanos does: 850µs, 12ms, 1.4s, 2m05s.
function fmtDuration(ms) {
  if (ms < 1) return Math.floor(ms * 1000) + "µs";
  if (ms < 1000) return Math.floor(ms) + "ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
  const m = Math.floor(ms / 60000), sec = Math.floor((ms % 60000) / 1000);
  return `${m}m${String(sec).padStart(2, "0")}s`;
}

// compact is a value as one line of JSON, cut short.
function compact(v, max = 160) {
  let s;
  try { s = JSON.stringify(v); } catch { s = String(v); }
  if (s === undefined) s = "";
  return s.length > max ? s.slice(0, max) + "…" : s;
}

// chunkNodes renders a streamed chunk's content: a model's chunk is an array of message parts (or
// an object holding them as content), whose text parts read as running text and whose other parts
// (tool requests, media, data…) show as one compact line each; anything else a streaming flow sent
// shows as a line of JSON. Only text nodes are made from the data.
function chunkNodes(c) {
  const parts = Array.isArray(c) ? c : c && typeof c === "object" && Array.isArray(c.content) ? c.content : null;
  if (!parts) {
    if (c && typeof c === "object" && typeof c.text === "string") return [c.text];
    return [compact(c, 4000) + "\n"];
  }
  return parts.map((p) => {
    if (p && typeof p === "object" && typeof p.text === "string") return p.text;
    const el = document.createElement("span");
    const show = (kind, text) => { el.className = "chunk-part part-" + kind; el.textContent = text; };
    if (!p || typeof p !== "object") show("other", compact(p));
    else if (typeof p.reasoning === "string") show("reasoning", p.reasoning);
    else if (p.toolRequest) show("tool-request", `→ ${p.toolRequest.name ?? "tool"}(${p.toolRequest.input === undefined ? "" : compact(p.toolRequest.input)})`);
    else if (p.toolResponse) show("tool-response", `← ${p.toolResponse.name ?? "tool"}: ${compact(p.toolResponse.output)}`);
    else if (p.media) show("media", `[media${p.media.contentType ? " " + p.media.contentType : ""}] ${compact(p.media.url ?? "", 80).replace(/^"|"$/g, "")}`);
    else if ("data" in p) show("data", "data " + compact(p.data));
    else show("other", compact(p));
    return el;
  });
}

async function initRun() {
  const topic = page.dataset.topic;
  // The long lists (the conversation, the ledger, the stream) are paged: paging.js loads their
  // pages in place and keeps the page from growing with the run.
  const { initPagers, keepPages, lastPage, StreamWindow } = await import(page.dataset.paging);
  initPagers(page, { fetchHTML, fragment });
  const section = document.getElementById("stream");
  const stream = section ? new StreamWindow(section, {
    chunkNodes, fetchHTML, fragment, api: `/api/v1/runs/${encodeURIComponent(page.dataset.run)}/chunks`,
  }) : null;
  const stateEl = document.getElementById("stream-state");
  const playBtn = document.getElementById("playback");
  let status = document.querySelector(".run-header")?.dataset.status ?? "";
  // The live stream resumes after the last chunk the page was rendered with.
  let lastSeq = Number(page.dataset.after) || 0;
  let gapAt = -1; // a gap is asked for once; a second time it is a hole in the record, not a loss
  const terminal = (s) => FinishedRunStatuses.includes(s);

  // A running run's duration ticks.
  setInterval(() => {
    const el = document.querySelector("[data-ticking]");
    if (!el) return;
    const ms = Date.now() - new Date(el.dataset.ticking).getTime();
    if (ms >= 0) el.textContent = fmtDuration(ms);
  }, 1000);
  function showPlayback() {
    if (playBtn) playBtn.hidden = !(terminal(status) && stream && stream.total > 0);
  }
  // The stream of a run that has ended is a record, not live: no connection state, and an empty
  // one says nothing was streamed.
  let liveState = "connecting";
  const chunksEl = document.getElementById("chunks");
  function showStreamState() {
    if (stateEl) stateEl.textContent = terminal(status) ? "" : liveState === "live" ? "live" : liveState + "…";
    if (terminal(status) && chunksEl) chunksEl.dataset.empty = "No chunks were streamed.";
  }
  playBtn?.addEventListener("click", () => stream.playback().catch(() => {}));
  showPlayback();

  // The sections reload as the run goes; a list keeps the pages the reader loaded, its last page
  // read again (new items come at its end). A reload that fails (the server died under it, or
  // answered 503 in a database outage) is done again when the WebSocket is back.
  let sectionsStale = false;
  const refreshSections = debounce(async () => {
    const current = document.getElementById("run-sections");
    const n = lastPage(current);
    let html;
    try {
      html = await fetchHTML(page.dataset.sections + (n ? "&page=" + n : ""));
      sectionsStale = false;
    } catch {
      sectionsStale = true;
      return;
    }
    if (!html) return;
    const fresh = fragment(html).querySelector("#run-sections");
    if (!fresh || document.getElementById("run-sections") !== current) return;
    keepPages(current, fresh);
    current.replaceWith(fresh);
  }, 150);
  // The trace follows the run, keeping what the user opened and selected. It shows the execution
  // the address names, else the newest, unless a span is selected: then it stays on that span's
  // execution, and a new one shows as a tab.
  const refreshTrace = throttled(() => {
    const params = new URLSearchParams();
    const trace = document.getElementById("trace");
    if (!trace) return Promise.resolve(true); // another tab than the trace's
    const pinned = new URLSearchParams(location.search).get("trace") ||
      (trace?.querySelector(".span-row.selected, #span-detail .span-panel") ? trace.dataset.trace : "");
    if (pinned) params.set("trace", pinned);
    return reloadTree(`/runs/${encodeURIComponent(page.dataset.run)}/trace`, params);
  }, 500, 150, 1500);

  let snapshots = 0;
  const live = new Live((m, l) => {
    if (m.topic !== topic) return;
    switch (m.kind) {
      case Kind.Snapshot:
        if (m.data.status !== status) { status = m.data.status; refreshSections(); refreshTrace(); showStreamState(); }
        else if (snapshots > 0) { // a reconnect: span events may have been missed meanwhile
          refreshTrace();
          if (sectionsStale) refreshSections();
        }
        snapshots++;
        break;
      case Kind.RunChunks: {
        for (const ch of m.data.chunks) {
          if (ch.seq <= lastSeq) continue;
          if (ch.seq !== lastSeq + 1 && lastSeq > 0 && gapAt !== lastSeq) {
            gapAt = lastSeq;
            l.topics.set(topic, lastSeq);
            l.resubscribe(topic);
            return;
          }
          lastSeq = ch.seq;
          stream?.live(ch);
        }
        l.topics.set(topic, lastSeq);
        showPlayback();
        break;
      }
      case Kind.RunStatus:
        status = m.data.status;
        refreshSections();
        refreshTrace();
        showPlayback();
        showStreamState();
        break;
      case Kind.RunMessage:
      case Kind.RunToolCall:
      case Kind.InterruptChanged:
        refreshSections();
        refreshTrace();
        break;
      case Kind.Span:
        refreshTrace();
        break;
      case Kind.Resync:
        refreshSections();
        refreshTrace();
        l.resubscribe(topic);
        break;
    }
  });
  live.onState = (s) => { liveState = s; showStreamState(); };
  live.subscribe(topic, lastSeq);
  live.connect();
}

// ---- trace page: spans appear and finish live ----

function initTrace() {
  const topic = page.dataset.topic;
  const root = document.getElementById("trace");
  if (!topic || !root) return;
  const title = document.getElementById("trace-title");
  const refresh = throttled(async () => {
    const done = await reloadTree(`${root.dataset.base}/tree`);
    const name = document.getElementById("trace")?.dataset.name;
    if (title && name && title.textContent !== name) title.textContent = name;
    return done;
  }, 500, 150, 1500);
  let subscribed = false;
  const live = new Live((m, l) => {
    if (m.topic !== topic) return;
    switch (m.kind) {
      case Kind.Span:
        refresh();
        break;
      case Kind.Snapshot:
        // (Re)subscribed: spans may have come while the page loaded or was offline. A finished
        // trace is not reloaded just for having been opened.
        if (subscribed || document.getElementById("trace")?.dataset.running === "true") refresh();
        subscribed = true;
        break;
      case Kind.Resync:
        refresh();
        l.resubscribe(topic);
        break;
    }
  });
  live.subscribe(topic, 0);
  live.connect();
}

// ---- runs list: new runs appear, changed ones update ----

function initRuns() {
  if (!page.dataset.topic) return;
  const tbody = document.getElementById("run-rows");
  const live = new Live(async (m) => {
    if (m.kind !== Kind.RunStatus || !m.data.run_id) return;
    const html = await fetchHTML(`/runs/${encodeURIComponent(m.data.run_id)}/row`);
    if (!html) return;
    const row = fragment(html).firstElementChild;
    const old = tbody.querySelector(`tr[data-run="${CSS.escape(m.data.run_id)}"]`);
    if (old) old.replaceWith(row);
    else { tbody.prepend(row); row.classList.add("fresh"); }
  });
  live.subscribe("runs", 0);
  live.connect();
}

// ---- inbox: in inbox.js, which imports Live, validate and the helpers above ----

// ---- actions: check the input against the schema before starting a run ----

function initActions() {
  initActionsFilter();
  initPlayground();
  page.addEventListener("submit", (ev) => {
    const form = ev.target.closest("form[data-run-form]");
    if (!form) return;
    const errs = [...checkJSON(form.elements.input.value, form.dataset.inputSchema, "input"), ...checkContext(form)];
    showErrors(form, errs);
    if (errs.length) ev.preventDefault();
  });
  // The fields built from the schema and the raw JSON follow each other.
  const sync = (ev) => {
    const form = ev.target.closest("form[data-run-form]");
    if (!form) return;
    if (ev.target.dataset.pointer !== undefined) fieldsIntoJSON(form);
    else if (ev.target.name === "input") jsonIntoFields(form);
  };
  page.addEventListener("input", sync);
  page.addEventListener("change", sync);
  page.addEventListener("click", async (ev) => {
    const btn = ev.target.closest("button[data-run-here]");
    if (!btn) return;
    const form = btn.closest("form[data-run-form]");
    const errs = [...checkJSON(form.elements.input.value, form.dataset.inputSchema, "input"), ...checkContext(form)];
    showErrors(form, errs);
    if (errs.length) return;
    btn.disabled = true;
    try { await runHere(form, btn.dataset.runHere); } finally { btn.disabled = false; }
  });
}

// checkContext checks a run form's context: empty, or a JSON object.
function checkContext(form) {
  const text = form.elements.context?.value.trim() ?? "";
  if (!text) return [];
  let v;
  try { v = JSON.parse(text); } catch (e) { return [`context is not valid JSON: ${e.message}`]; }
  return v && typeof v === "object" && !Array.isArray(v) ? [] : ["context must be a JSON object"];
}

// contextOf is a run form's context as runAction takes it, or undefined when none is given.
function contextOf(form) {
  const text = form.elements.context?.value.trim() ?? "";
  return text ? JSON.parse(text) : undefined;
}

// initActionsFilter filters the actions list as one types: the rows the server rendered hidden
// for ?q= and ?type= come back when the text widens again. The address follows, so that a reload
// or a shared link shows the same list.
function initActionsFilter() {
  const search = page.querySelector("[data-actions-search]");
  if (!search) return;
  const rows = [...page.querySelectorAll("tr[data-action]")];
  const count = page.querySelector("[data-actions-count]");
  const none = page.querySelector("[data-actions-none]");
  const params = new URLSearchParams(location.search);
  let type = params.get("type") ?? "";
  const apply = () => {
    const q = search.value.trim().toLowerCase();
    let shown = 0;
    for (const tr of rows) {
      const hide = (type !== "" && tr.dataset.type !== type) || (q !== "" && !tr.dataset.search.includes(q));
      tr.hidden = hide;
      if (!hide) shown++;
    }
    page.querySelectorAll("table.actions-list").forEach((t) => { t.hidden = !t.querySelector("tbody tr:not([hidden])"); });
    count.textContent = shown === rows.length ? `${rows.length} actions` : `${shown} of ${rows.length} actions`;
    none.hidden = shown > 0;
    const p = new URLSearchParams();
    if (search.value.trim()) p.set("q", search.value.trim());
    if (type) p.set("type", type);
    const qs = p.toString();
    history.replaceState(null, "", "/actions" + (qs ? "?" + qs : ""));
    page.querySelectorAll("[data-type-filter] a").forEach((a) => {
      const ap = new URLSearchParams(p);
      if (a.dataset.type) ap.set("type", a.dataset.type); else ap.delete("type");
      a.href = "/actions" + (ap.toString() ? "?" + ap : "");
      if (a.dataset.type === type) a.setAttribute("aria-current", "true"); else a.removeAttribute("aria-current");
    });
    const hiddenType = page.querySelector("[data-actions-filter] input[name=type]");
    if (hiddenType) hiddenType.value = type;
  };
  search.addEventListener("input", apply);
  page.querySelector("[data-type-filter]")?.addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-type]");
    if (!a) return;
    ev.preventDefault();
    type = a.dataset.type;
    apply();
  });
  // "/" moves to the search box, as on the trace page.
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "/" && !ev.target.closest("input, textarea, select")) { ev.preventDefault(); search.focus(); }
  });
  apply();
}

// runHere runs an action through the reflection API (POST /api/runAction?stream=true) and shows
// what it streams, then its result or error, in place, with links to its trace and its run.
async function runHere(form, key) {
  await streamRun(form.querySelector("[data-run-output]"), "/api/runAction?stream=true",
    { key, input: JSON.parse(form.elements.input.value), context: contextOf(form) });
}

// streamRun POSTs body to url, which answers as runAction does (a chunk a line when streamed, then
// {"result"} or {"error"}, the trace in X-Genkit-Trace-Id), and shows it in out as it comes.
// opts.joinChunks writes text chunks one after the other (a model's), not a line each (a flow's);
// opts.showResult shows a result its own way. It returns the final answer and the trace id.
async function streamRun(out, url, body, opts = {}) {
  const state = out.querySelector("[data-run-state]");
  const chunks = out.querySelector("[data-run-chunks]");
  const result = out.querySelector("[data-run-result]");
  const links = out.querySelector("[data-run-links]");
  out.hidden = false;
  chunks.textContent = "";
  result.textContent = "";
  result.classList.remove("error-text");
  state.classList.remove("waiting");
  links.replaceChildren();
  state.textContent = "running…";
  const link = (href, text) => { const a = document.createElement("a"); a.href = href; a.textContent = text; links.append(a, " "); };
  let resp;
  try {
    resp = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken() },
      body: JSON.stringify(body),
    });
  } catch (e) {
    state.textContent = "could not reach the server: " + e.message;
    return {};
  }
  const trace = resp.headers.get("X-Genkit-Trace-Id");
  const run = resp.headers.get("X-Loupe-Run-Id");
  if (run) link("/runs/" + run, "open its run");
  if (trace) link("/traces/" + trace, "open its trace");
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      let chunk;
      try { chunk = JSON.parse(line); } catch { chunk = line; }
      chunks.append(...chunkNodes(chunk));
      if (!opts.joinChunks && !chunks.lastChild?.textContent?.endsWith("\n")) chunks.append("\n");
    }
  }
  let final = null;
  try { final = JSON.parse(buf); } catch { /* a non-JSON answer is shown as it is */ }
  if (final && "result" in final) {
    state.textContent = "done";
    if (opts.showResult) opts.showResult(final.result, result);
    else result.textContent = typeof final.result === "string" ? final.result : JSON.stringify(final.result, null, 2);
  } else if (final?.error?.details?.inbox && final.error.details.interrupts?.length) {
    // A durable run that stopped to ask a person waits; it has not failed.
    state.textContent = "waiting for a reviewer";
    state.classList.add("waiting");
    result.textContent = final.error.details.interrupts.map((i) => `${i.name}: ${i.interrupt?.message ?? "asks a person"}`).join("\n");
    link(final.error.details.inbox, "answer it in the inbox");
  } else if (final && final.error) {
    state.textContent = "failed";
    result.classList.add("error-text");
    result.textContent = final.error.message ?? JSON.stringify(final.error);
    if (final.error.details?.inbox) link(final.error.details.inbox, "answer it in the inbox");
  } else {
    state.textContent = `answered ${resp.status}`;
    result.classList.add("error-text");
    result.textContent = buf;
  }
  return { final, trace };
}

// ---- the prompt playground: edit a .prompt file, render it, run it, save or copy it ----

function initPlayground() {
  const root = page.querySelector("[data-prompt-playground]");
  if (!root) return;
  const form = root.querySelector("form[data-playground-form]");
  const api = root.dataset.api;
  const errBox = root.querySelector("[data-playground-error]");
  const status = root.querySelector("[data-playground-status]");
  const fields = [...form.querySelectorAll("[data-model-field]")];
  // A field the user changed is sent, and written into the front matter; the others follow
  // what the source says after each render.
  form.addEventListener("input", (ev) => { if (ev.target.matches("[data-model-field]")) ev.target.dataset.dirty = "true"; });
  const fail = (msg) => { errBox.textContent = msg; errBox.hidden = false; };
  const body = () => {
    const b = { source: form.elements.source.value };
    const text = form.elements.input.value.trim();
    if (text) {
      try { b.input = JSON.parse(text); } catch (e) { throw new Error("The input is not valid JSON: " + e.message); }
    }
    for (const f of fields) {
      if (!f.dataset.dirty) continue;
      const v = f.value.trim();
      if (f.name === "tools") b.tools = v ? v.split(",").map((t) => t.trim()).filter(Boolean) : null;
      else if (f.type === "number") b[f.name] = v === "" ? null : Number(v);
      else b[f.name] = v === "" ? null : v;
    }
    return b;
  };
  const call = async (method, path, b) => {
    const resp = await fetch(api + path, {
      method, credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": csrfToken() },
      body: JSON.stringify(b),
    });
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) throw new Error(data?.error?.message ?? `the server answered ${resp.status}`);
    return data;
  };
  // sourceBack puts the source the server compiled (the fields written in) in the editor.
  const sourceBack = (src) => {
    if (typeof src === "string") form.elements.source.value = src;
    for (const f of fields) delete f.dataset.dirty;
  };
  const showRendered = (r) => {
    sourceBack(r.source);
    form.elements.model.value = r.model ?? "";
    form.elements.temperature.value = r.config?.temperature ?? "";
    form.elements.max_output_tokens.value = r.config?.maxOutputTokens ?? "";
    form.elements.tools.value = (r.tools ?? []).join(", ");
    const box = root.querySelector("[data-rendered-messages]");
    box.replaceChildren(...(r.messages ?? []).map((m) => {
      const el = document.createElement("div");
      el.className = "rendered-message";
      el.dataset.role = m.role;
      const role = document.createElement("span");
      role.className = "badge";
      role.textContent = m.role;
      const pre = document.createElement("pre");
      pre.append(...chunkNodes(m.content ?? []));
      el.append(role, pre);
      return el;
    }));
    const cfg = r.config && Object.keys(r.config).length ? " · " + JSON.stringify(r.config) : "";
    const tools = r.tools?.length ? " · tools " + r.tools.join(", ") : "";
    root.querySelector("[data-rendered-model]").textContent = `model ${r.model || "(none)"}${cfg}${tools}`;
  };
  const render = async () => {
    const r = await call("POST", "/render", body());
    showRendered(r);
    return r;
  };
  const act = async (btn, fn) => {
    errBox.hidden = true;
    errBox.textContent = "";
    status.textContent = "";
    btn.disabled = true;
    try { await fn(); } catch (e) { fail(e.message); } finally { btn.disabled = false; }
  };
  root.addEventListener("click", async (ev) => {
    const btn = ev.target.closest("button");
    if (!btn || !root.contains(btn)) return;
    if (btn.matches("[data-playground-render]")) {
      await act(btn, async () => { await render(); status.textContent = "rendered"; });
    } else if (btn.matches("[data-playground-run]")) {
      await act(btn, async () => {
        await render();
        const b = body();
        const { final, trace } = await streamRun(root.querySelector("[data-run-output]"), api + "/run?stream=true", b, {
          joinChunks: true,
          showResult: (res, el) => {
            el.textContent = typeof res?.text === "string" ? res.text : JSON.stringify(res, null, 2);
            const u = res?.usage ?? {};
            root.querySelector("[data-run-usage]").textContent =
              `finish ${res?.finishReason ?? "?"} · tokens ${u.inputTokens ?? 0} in / ${u.outputTokens ?? 0} out`;
          },
        });
        if (final && trace) await refreshRuns(trace);
      });
    } else if (btn.matches("[data-playground-save]")) {
      await act(btn, async () => {
        const r = await call("PUT", "/source", body());
        sourceBack(r.source);
        status.textContent = `saved to ${r.file}`;
      });
    } else if (btn.matches("[data-playground-copy]")) {
      await act(btn, async () => {
        // With the fields written in when the page may render; as typed otherwise.
        let text = form.elements.source.value;
        if (root.querySelector("[data-playground-render]")) text = (await render()).source;
        await navigator.clipboard.writeText(text);
        status.textContent = "copied";
      });
    }
  });
  // refreshRuns reloads the last runs list until the run's trace is in it (its spans are written
  // a moment after it ends).
  const refreshRuns = async (trace) => {
    for (let i = 0; i < 20; i++) {
      const html = await fetchHTML(location.pathname);
      const doc = new DOMParser().parseFromString(html ?? "", "text/html");
      const fresh = doc.querySelector('[data-testid="prompt-runs"]');
      if (fresh) root.querySelector('[data-testid="prompt-runs"]').replaceWith(document.adoptNode(fresh));
      if (fresh?.querySelector(`tr[data-trace="${CSS.escape(trace)}"]`)) return;
      await new Promise((r) => setTimeout(r, 250));
    }
  };
  // Edits made before this script ran were not seen as edits: a test (or a tool) waits for this.
  root.dataset.ready = "true";
}

// csrfToken is the page's CSRF token, which scripts send in X-CSRF-Token.
function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]')?.content ?? "";
}

// ---- dashboard: reload the figures when runs or interrupts change ----

function initDashboard() {
  const refresh = debounce(async () => {
    const html = await fetchHTML("/");
    const doc = new DOMParser().parseFromString(html ?? "", "text/html");
    const fresh = doc.getElementById("page");
    if (fresh) page.replaceChildren(...[...fresh.childNodes].map((n) => document.adoptNode(n)));
  }, 300);
  const live = new Live((m) => { if (m.kind !== Kind.Snapshot) refresh(); });
  live.subscribe("dashboard", 0);
  live.connect();
}

// ---- experiment: the progress bar follows the experiment's live events, the table follows it ----

function initExperiment() {
  if (!("running" in page.dataset)) return; // an ended experiment's page does not change
  const topic = "experiment:" + page.dataset.experiment;
  let latest = null; // the newest counts heard, which a swapped-in page must not undo
  const show = (d) => {
    const bar = page.querySelector("#exp-progress");
    if (!bar) return;
    bar.max = d.total;
    bar.value = d.scored;
    for (const el of page.querySelectorAll("[data-count]")) {
      const v = d[el.dataset.count];
      if (v !== undefined) el.textContent = String(v);
    }
  };
  // reload swaps in the page as the server renders it now: the examples scored so far and, once
  // the experiment has ended, its totals and final table. No navigation: the reader stays put.
  const reload = throttled(async () => {
    const html = await fetchHTML(location.pathname + location.search);
    const fresh = new DOMParser().parseFromString(html ?? "", "text/html").getElementById("page");
    if (!fresh) return;
    page.replaceChildren(...[...fresh.childNodes].map((n) => document.adoptNode(n)));
    page.dataset.status = fresh.dataset.status;
    if (!("running" in fresh.dataset)) delete page.dataset.running;
    if (latest && latest.scored > Number(page.querySelector('[data-count="scored"]')?.textContent ?? 0)) show(latest);
  }, 1000, 0);
  const live = new Live((m) => {
    if (m.topic !== topic && m.kind !== Kind.Resync) return;
    switch (m.kind) {
      case Kind.Snapshot:
      case Kind.ExperimentProgress: {
        const d = m.data;
        if (!d || d.total === undefined) { reload(); return; } // too large for a notification: read it
        if (!latest || d.scored >= latest.scored) { latest = d; show(d); }
        if (d.status !== "running" || (d.scores && d.scores.length)) reload();
        break;
      }
      case Kind.Resync:
        live.resubscribe(topic);
        break;
    }
  });
  live.subscribe(topic, 0);
  live.connect();
}

// ---- copy buttons and the attribute table's sort, anywhere on a page (span panels come and go) ----

document.addEventListener("click", async (ev) => {
  const copy = ev.target.closest("button[data-copy]");
  if (copy) {
    ev.preventDefault(); // inside a <summary>, a click would also fold the details
    const was = copy.textContent;
    copy.dataset.copied = "true";
    try {
      await navigator.clipboard.writeText(copy.dataset.copy);
      copy.textContent = "copied";
    } catch {
      copy.textContent = "copy failed";
    }
    setTimeout(() => { copy.textContent = was; }, 1200);
    return;
  }
  const sort = ev.target.closest("button[data-sort-attrs]");
  if (sort) {
    // Grouped (Genkit's keys first, then GenAI's) and by key, or by key alone.
    const body = sort.closest("table").tBodies[0];
    const byKey = sort.dataset.sorted !== "key";
    const rows = [...body.rows].sort((a, b) => (byKey ? 0 : a.dataset.group - b.dataset.group) || a.dataset.key.localeCompare(b.dataset.key));
    body.append(...rows);
    sort.dataset.sorted = byKey ? "key" : "group";
    sort.textContent = byKey ? "key (A–Z)" : "key";
  }
});

if (page) {
  switch (page.dataset.page) {
    case "run": initRun(); break;
    case "runs": initRuns(); break;
    case "actions": initActions(); break;
    case "dashboard": initDashboard(); break;
    case "experiment": initExperiment(); break;
    case "trace": initTrace(); break;
  }
  const tree = document.getElementById("trace");
  if (tree) initTree(tree);
}
