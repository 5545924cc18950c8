// Loupe's interactive pages: the live WebSocket client, the span tree, the run stream, the inbox
// (live queue, schema-checked forms, keyboard) and the action run forms. Every page works without
// it; it only adds live updates and conveniences. No eval, no inline handlers, no HTML built from
// data: untrusted text only ever goes through textContent.

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

async function fetchHTML(url) {
  const res = await fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" });
  if (res.status === 204) return null;
  if (!res.ok) throw new Error(url + ": " + res.status);
  return res.text();
}

// fragment parses server-rendered HTML (already escaped by templ) into nodes.
function fragment(html) {
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
    if (!ok) return [`${at}: want ${types.join(" or ")}, got ${t}`];
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
    if (typeof schema.minLength === "number" && n < schema.minLength) errs.push(`${at}: must have at least ${schema.minLength} characters`);
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

// checkJSON parses a textarea and validates it; it returns error strings, empty when fine.
function checkJSON(text, schemaText, label) {
  let value;
  try { value = JSON.parse(text); } catch (e) { return [`${label} is not valid JSON: ${e.message}`]; }
  if (!schemaText) return [];
  let schema;
  try { schema = JSON.parse(schemaText); } catch { return []; }
  return validate(schema, value).map((e) => `${label} ${e}`);
}

function showErrors(form, errs) {
  const box = form.querySelector(".form-error");
  if (!box) return;
  box.textContent = errs.join("\n");
  box.hidden = errs.length === 0;
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
  async function select(li, href) {
    tree.querySelectorAll(".span-row.selected").forEach((n) => n.classList.remove("selected"));
    li.classList.add("selected");
    const html = await fetchHTML(`${base}/spans/${encodeURIComponent(li.dataset.span)}?${q("").slice(1)}`);
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
  initTreeFind(root, tree, { expand, collapse, select, busy, q });
  tree.querySelector(".span-row.selected")?.scrollIntoView({ block: "nearest" });
  keepLinkedSpanInView();
}

// ---- span tree: find, expand all, collapse all, keyboard ----

// initTreeFind wires the tree's search box, its expand/collapse-all buttons and the arrow keys.
// The server answers a search with every matching span and the path to it, so a match inside a
// collapsed row is reached by opening that path, one /children request per closed ancestor.
function initTreeFind(root, tree, { expand, collapse, select, busy, q }) {
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
    await busy(async () => {
      const li = await reveal(matches[cur]);
      mark();
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

function initRun() {
  const topic = page.dataset.topic;
  const chunksEl = document.getElementById("chunks");
  const stateEl = document.getElementById("stream-state");
  const playBtn = document.getElementById("playback");
  const groups = new Map();
  const recorded = [];
  let status = document.querySelector(".run-header")?.dataset.status ?? "";
  let lastSeq = 0;
  let gapAt = -1; // a gap is asked for once; a second time it is a hole in the record, not a loss
  const terminal = (s) => ["succeeded", "failed", "aborted", "cancelled"].includes(s);

  function groupFor(ch, into) {
    const key = `${ch.turn}:${ch.index}:${ch.role}`;
    let g = into.get(key);
    if (!g) {
      const box = document.createElement("div");
      box.className = "chunk-group role-" + ch.role;
      box.dataset.key = key;
      const head = document.createElement("div");
      head.className = "muted small";
      head.textContent = `${ch.role} · turn ${ch.turn} · message ${ch.index}`;
      const body = document.createElement("pre");
      body.className = "chunk-body";
      box.append(head, body);
      chunksEl.append(box);
      g = { box, body };
      into.set(key, g);
    }
    return g;
  }
  function render(ch, into) {
    const g = groupFor(ch, into);
    const span = document.createElement("span");
    span.dataset.seq = ch.seq;
    span.append(...chunkNodes(ch.content));
    g.body.append(span);
  }
  function showPlayback() {
    if (playBtn) playBtn.hidden = !(terminal(status) && recorded.length > 0);
  }
  // The stream of a run that has ended is a record, not live: no connection state, and an empty
  // one says nothing was streamed.
  let liveState = "connecting";
  function showStreamState() {
    if (stateEl) stateEl.textContent = terminal(status) ? "" : liveState === "live" ? "live" : liveState + "…";
    if (terminal(status)) chunksEl.dataset.empty = "No chunks were streamed.";
  }
  playBtn?.addEventListener("click", () => {
    chunksEl.replaceChildren();
    const into = new Map();
    let i = 0;
    const step = Math.max(1, Math.ceil(recorded.length / 200));
    const tick = () => {
      for (let k = 0; k < step && i < recorded.length; k++, i++) render(recorded[i], into);
      if (i < recorded.length) setTimeout(tick, 20);
    };
    tick();
  });

  const refreshSections = debounce(async () => {
    const html = await fetchHTML(page.dataset.sections);
    if (html) document.getElementById("run-sections").replaceWith(fragment(html));
  }, 150);
  // The trace follows the run, keeping what the user opened and selected. It shows the execution
  // the address names, else the newest, unless a span is selected: then it stays on that span's
  // execution, and a new one shows as a tab.
  const refreshTrace = throttled(() => {
    const params = new URLSearchParams();
    const trace = document.getElementById("trace");
    const pinned = new URLSearchParams(location.search).get("trace") ||
      (trace?.querySelector(".span-row.selected, #span-detail .span-panel") ? trace.dataset.trace : "");
    if (pinned) params.set("trace", pinned);
    return reloadTree(`/runs/${encodeURIComponent(page.dataset.run)}/trace`, params);
  }, 500, 150, 1500);

  let snapshots = 0;
  const live = new Live((m, l) => {
    if (m.topic !== topic) return;
    switch (m.kind) {
      case "snapshot":
        if (m.data.status !== status) { status = m.data.status; refreshSections(); refreshTrace(); showStreamState(); }
        else if (snapshots > 0) refreshTrace(); // a reconnect: span events may have been missed meanwhile
        snapshots++;
        break;
      case "run.chunks": {
        for (const ch of m.data.chunks) {
          if (ch.seq <= lastSeq) continue;
          if (ch.seq !== lastSeq + 1 && lastSeq > 0 && gapAt !== lastSeq) {
            gapAt = lastSeq;
            l.topics.set(topic, lastSeq);
            l.resubscribe(topic);
            return;
          }
          lastSeq = ch.seq;
          recorded.push(ch);
          render(ch, groups);
        }
        l.topics.set(topic, lastSeq);
        chunksEl.dataset.count = String(recorded.length);
        showPlayback();
        break;
      }
      case "run.status":
        status = m.data.status;
        refreshSections();
        refreshTrace();
        showPlayback();
        showStreamState();
        break;
      case "run.message":
      case "run.tool_call":
      case "interrupt.changed":
        refreshSections();
        refreshTrace();
        break;
      case "span":
        refreshTrace();
        break;
      case "resync":
        refreshSections();
        refreshTrace();
        l.resubscribe(topic);
        break;
    }
  });
  live.onState = (s) => { liveState = s; showStreamState(); };
  live.subscribe(topic, 0);
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
      case "span":
        refresh();
        break;
      case "snapshot":
        // (Re)subscribed: spans may have come while the page loaded or was offline. A finished
        // trace is not reloaded just for having been opened.
        if (subscribed || document.getElementById("trace")?.dataset.running === "true") refresh();
        subscribed = true;
        break;
      case "resync":
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
    if (m.kind !== "run.status" || !m.data.run_id) return;
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

// ---- inbox: the live queue, schema checks, keyboard ----

// canonicalJSON re-encodes a JSON text with sorted keys and no spaces, numbers as written (where
// the browser tells their source text), or returns null when it is not JSON. The server compares
// arguments the same way (sameJSON in pages_inbox.go).
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

// sameJSON says whether two texts are the same JSON value, layout and key order aside.
export function sameJSON(a, b) {
  a = a.trim();
  b = b.trim();
  if (a === b) return true;
  const ca = canonicalJSON(a), cb = canonicalJSON(b);
  return ca !== null && ca === cb;
}

// argsEdited says whether a resolve form's arguments differ from the interrupt's.
function argsEdited(form) {
  const ta = form.elements.input;
  return !!ta && !sameJSON(ta.value, ta.dataset.original ?? "");
}

// showEdited makes the form say what Approve does: with changed arguments it is "Approve edited",
// and it sends them; the separate "Approve edited" button is then redundant.
function showEdited(form) {
  const edited = argsEdited(form);
  const approve = form.querySelector("button[data-key=a]");
  if (approve) {
    approve.value = edited ? "edit" : "approve";
    approve.textContent = edited ? "Approve edited" : "Approve";
  }
  const edit = form.querySelector("button[data-key=e]");
  if (edit) edit.hidden = edited;
  const note = form.querySelector("[data-edited-note]");
  if (note) note.hidden = !edited;
}

function initInbox() {
  const list = document.getElementById("inbox-items");
  const empty = document.getElementById("inbox-empty");
  const count = document.getElementById("inbox-count");
  const filter = new URLSearchParams();
  if (page.dataset.filterTool) filter.set("tool", page.dataset.filterTool);
  if (page.dataset.filterAction) filter.set("action", page.dataset.filterAction);
  const items = () => [...list.querySelectorAll(".inbox-item")];
  const sync = () => {
    const n = list.querySelectorAll(".inbox-item:not(.resolved)").length;
    count.textContent = `${n} pending`;
    empty.hidden = n > 0;
  };
  let current = null;
  const select = (el) => {
    current?.classList.remove("current");
    current = el;
    if (el) { el.classList.add("current"); el.scrollIntoView({ block: "nearest" }); }
  };
  const drop = (el) => {
    if (el === current) select(el.nextElementSibling ?? el.previousElementSibling);
    el.remove();
    sync();
  };
  // working says whether the reviewer has started on an item: typed in it, or is in its form.
  const working = (el) => {
    const form = el.querySelector("form[data-resolve]");
    if (!form) return false;
    if (form.contains(document.activeElement)) return true;
    return argsEdited(form) || !!form.elements.comment?.value.trim() || !!form.elements.output?.value.trim();
  };
  // close keeps an item resolved elsewhere in view, marked, with nothing left to press.
  const close = (el, note) => {
    el.classList.add("resolved");
    el.querySelectorAll("form[data-resolve] button").forEach((b) => { b.disabled = true; });
    el.querySelectorAll("form[data-resolve] textarea, form[data-resolve] input[type=text]").forEach((f) => { f.readOnly = true; });
    el.querySelector(".resolved-note")?.remove();
    el.querySelector("header").after(note);
    sync();
  };
  // gone handles an item that is no longer pending: one the reviewer was working on stays, with
  // who resolved it and when, until dismissed; any other one leaves.
  const gone = async (id) => {
    const el = document.getElementById("i-" + id);
    if (!el || el.classList.contains("resolved")) return;
    if (el.querySelector("form[data-resolve]")?.dataset.submitting) return; // our own decision is on its way
    if (!working(el)) { drop(el); return; }
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
    if (document.getElementById("i-" + id) === el && !el.classList.contains("resolved")) close(el, note);
  };
  const add = async (id) => {
    if (document.getElementById("i-" + id)) return;
    const html = await fetchHTML(`/inbox/items/${encodeURIComponent(id)}?${filter}`);
    if (!html || document.getElementById("i-" + id)) return;
    list.append(fragment(html)); // oldest first: a new interrupt is the newest
    sync();
  };
  const live = new Live(async (m) => {
    if (m.kind === "snapshot" && m.topic === "inbox") {
      const pending = new Set(m.data.pending);
      items().forEach((el) => { if (!pending.has(el.dataset.interrupt)) gone(el.dataset.interrupt); });
      for (const id of m.data.pending) await add(id);
    } else if (m.kind === "interrupt.changed" && m.data.interrupt_id) {
      if (m.data.status === "pending") await add(m.data.interrupt_id);
      else await gone(m.data.interrupt_id);
    } else if (m.kind === "interrupt.changed" && m.data.run_id && m.data.status !== "pending") {
      // A cancelled run's interrupts, all at once: the event names the run, not the interrupts.
      const ids = items().filter((el) => el.dataset.run === m.data.run_id).map((el) => el.dataset.interrupt);
      await Promise.all(ids.map(gone));
    } else if (m.kind === "resync") {
      live.resubscribe("inbox");
    }
  });
  live.subscribe("inbox", 0);
  live.connect();

  list.addEventListener("input", (ev) => {
    const form = ev.target.closest("form[data-resolve]");
    if (form && ev.target.name === "input") showEdited(form);
  });
  list.addEventListener("submit", (ev) => {
    const form = ev.target.closest("form[data-resolve]");
    if (!form) return;
    showEdited(form); // the arguments may have changed without an input event
    let action = ev.submitter?.value ?? "approve";
    if (action === "approve" && argsEdited(form)) action = "edit";
    let errs = [];
    if (action === "edit") errs = checkJSON(form.elements.input.value, form.dataset.inputSchema, "arguments");
    if (action === "respond") errs = checkJSON(form.elements.output.value, form.dataset.outputSchema, "response");
    showErrors(form, errs);
    if (errs.length) { ev.preventDefault(); return; }
    if (!ev.defaultPrevented) form.dataset.submitting = "1";
  });
  list.addEventListener("click", (ev) => {
    if (ev.target.closest("[data-dismiss]")) {
      ev.preventDefault();
      const el = ev.target.closest(".inbox-item");
      if (el) drop(el);
      return;
    }
    const reset = ev.target.closest("[data-reset]");
    if (reset) {
      const form = reset.closest("form[data-resolve]");
      const ta = form?.elements.input;
      if (ta) { ta.value = ta.dataset.original ?? ""; showEdited(form); ta.focus(); }
      return;
    }
    const item = ev.target.closest(".inbox-item");
    if (item && item !== current) select(item);
  });

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const tag = ev.target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") {
      if (ev.key === "Escape") ev.target.blur();
      return;
    }
    const all = items();
    if (!all.length) return;
    const i = current ? all.indexOf(current) : -1;
    const press = (key) => current?.querySelector(`form[data-resolve] button[data-key="${key}"]`)?.click();
    switch (ev.key) {
      case "j": select(all[Math.min(i + 1, all.length - 1)]); break;
      case "k": select(all[Math.max(i - 1, 0)]); break;
      case "a": if (current) press("a"); else return; break;
      case "d": if (current) press("d"); else return; break;
      case "e": {
        if (!current) return;
        const ta = current.querySelector("textarea[name=input]");
        ta?.focus();
        ta?.select();
        break;
      }
      default: return;
    }
    ev.preventDefault();
  });

  list.querySelectorAll("form[data-resolve]").forEach(showEdited);
  // A refused submit answers at /inbox/{id}/resolve: the address becomes the inbox's again (with
  // its filters), so that a reload shows the inbox instead of sending the form again, and the
  // refused item is the current one.
  const refused = list.querySelector(".form-error:not([hidden])")?.closest(".inbox-item") ?? list.querySelector(".inbox-item.resolved");
  if (!/^\/inbox\/?$/.test(location.pathname)) {
    history.replaceState(null, "", "/inbox" + (filter.size ? "?" + filter : "") + (refused ? "#" + refused.id : ""));
  }
  if (refused) select(refused);
  else if (location.hash.startsWith("#i-")) select(document.getElementById(location.hash.slice(1)));
  else select(items()[0] ?? null);
}

// ---- actions: check the input against the schema before starting a run ----

function initActions() {
  page.addEventListener("submit", (ev) => {
    const form = ev.target.closest("form[data-run-form]");
    if (!form) return;
    const errs = checkJSON(form.elements.input.value, form.dataset.inputSchema, "input");
    showErrors(form, errs);
    if (errs.length) ev.preventDefault();
  });
}

// ---- dashboard: reload the figures when runs or interrupts change ----

function initDashboard() {
  const refresh = debounce(async () => {
    const html = await fetchHTML("/");
    const doc = new DOMParser().parseFromString(html ?? "", "text/html");
    const fresh = doc.getElementById("page");
    if (fresh) page.replaceChildren(...[...fresh.childNodes].map((n) => document.adoptNode(n)));
  }, 300);
  const live = new Live((m) => { if (m.kind !== "snapshot") refresh(); });
  live.subscribe("dashboard", 0);
  live.connect();
}

if (page) {
  switch (page.dataset.page) {
    case "run": initRun(); break;
    case "runs": initRuns(); break;
    case "inbox": initInbox(); break;
    case "actions": initActions(); break;
    case "dashboard": initDashboard(); break;
    case "trace": initTrace(); break;
  }
  const tree = document.getElementById("trace");
  if (tree) initTree(tree);
}
