// The run page's long lists, a page at a time: the pagers of the conversation and the ledger, and
// the stream's window over its chunks. The server renders one page with links to the pages around
// it, which work without JS; here those links fetch the same pages as fragments and put them in
// place, and a list keeps a few pages (the stream a few pages' worth of chunks) at most, dropping
// the far ones, so that the page does not grow with the run. ui.js imports it on the run page.
// Untrusted text only ever goes through textContent; server HTML is templ's, already escaped.

// maxPages is how many pages of the conversation or the ledger the page keeps.
export const maxPages = 3;

// maxChunks is how many chunks the stream keeps: three of its pages.
export const maxChunks = 600;

const blocksOf = (pager) => [...pager.querySelectorAll("[data-pager-list] > [data-page]")];

// lastPage is the number of the last page a pager shows, for a reload to fetch that page again
// (its new items come at its end); 0 when there is no pager.
export function lastPage(root) {
  const blocks = root ? [...root.querySelectorAll("[data-pager]")].flatMap(blocksOf) : [];
  return blocks.length ? Number(blocks[blocks.length - 1].dataset.page) : 0;
}

// showPager sets a pager's count and its links from the pages it shows.
function showPager(pager) {
  const blocks = blocksOf(pager);
  if (!blocks.length) return;
  const first = blocks[0], last = blocks[blocks.length - 1];
  const from = Number(first.dataset.page), to = Number(last.dataset.page), pages = Number(pager.dataset.pages);
  const link = (dir, n, hidden) => {
    const a = pager.querySelector(`a[data-pager-link="${dir}"]`);
    if (!a) return;
    a.hidden = hidden;
    if (hidden) return;
    a.href = pager.dataset.pageUrl + n;
    a.dataset.page = String(n);
    a.dataset.fragment = pager.dataset.fragmentUrl + n;
  };
  link("prev", from - 1, from <= 1);
  link("next", to + 1, to >= pages);
  const count = pager.querySelector("[data-pager-count]");
  if (count) count.textContent = `${pager.dataset.noun} ${first.dataset.from}–${last.dataset.to} of ${pager.dataset.total}`;
}

// loadPage puts page n beside the pages shown (dir says which side: prev or next) and drops the
// page farthest from it when there are more than maxPages. The new page opens where its link
// was; a page dropped above the screen does not move what the reader sees.
async function loadPage(pager, dir, n, { fetchHTML, fragment }) {
  const html = await fetchHTML(pager.dataset.fragmentUrl + n);
  const fresh = html && fragment(html).querySelector("[data-pager]");
  const block = fresh?.querySelector("[data-pager-list] > [data-page]");
  if (!block) return;
  const list = pager.querySelector("[data-pager-list]");
  const blocks = blocksOf(pager);
  const stays = dir === "prev" ? blocks[0] : blocks[blocks.length - 1];
  const top = stays.getBoundingClientRect().top;
  const same = blocks.find((b) => b.dataset.page === block.dataset.page);
  if (same) same.replaceWith(block);
  else if (dir === "prev") list.insertBefore(block, blocks[0]);
  else blocks[blocks.length - 1].after(block);
  const now = blocksOf(pager);
  while (now.length > maxPages) (dir === "prev" ? now.pop() : now.shift()).remove();
  if (dir === "next" && stays.isConnected) window.scrollBy(0, stays.getBoundingClientRect().top - top);
  pager.dataset.total = fresh.dataset.total;
  pager.dataset.pages = fresh.dataset.pages;
  showPager(pager);
}

// initPagers makes the pagers' links under root load their pages in place. A failed load
// follows the link instead.
export function initPagers(root, deps) {
  root.addEventListener("click", async (ev) => {
    const link = ev.target.closest("a[data-pager-link]");
    const pager = link?.closest("[data-pager]");
    if (!pager || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    ev.preventDefault();
    if (pager.dataset.busy) return;
    pager.dataset.busy = "true";
    try {
      await loadPage(pager, link.dataset.pagerLink, Number(link.dataset.page), deps);
    } catch {
      location.href = link.href;
    } finally {
      delete pager.dataset.busy;
    }
  });
}

// keepPages carries the pages a reader loaded over a reload of the sections: fresh holds the
// last page shown, read again, which takes that page's place among the others kept. It returns
// false when fresh cannot be merged (another list, another page), to be taken whole.
export function keepPages(current, fresh) {
  const old = current.querySelector("[data-pager]");
  const nu = fresh.querySelector("[data-pager]");
  if (!old && !nu) return true;
  if (!old || !nu || old.dataset.pager !== nu.dataset.pager) return false;
  const block = nu.querySelector("[data-pager-list] > [data-page]");
  const same = block && blocksOf(old).find((b) => b.dataset.page === block.dataset.page);
  if (!same) return false;
  same.replaceWith(block);
  old.dataset.total = nu.dataset.total;
  old.dataset.pages = nu.dataset.pages;
  nu.replaceWith(old);
  showPager(old);
  return true;
}

// ---- the stream: a window over the run's chunks ----

// StreamWindow is the stream tab's chunks: the page the server rendered, pages loaded before and
// after it, and the live chunks, which it follows while it shows the stream's end. It keeps
// maxChunks at most: following, it drops the oldest; loading earlier ones, the newest, and then
// keeps what comes live for when the reader gets back to the end. Scrolled up, it stays put and a
// button counts what came.
export class StreamWindow {
  constructor(section, { chunkNodes, fetchHTML, fragment, api }) {
    this.section = section;
    this.box = section.querySelector("#chunks");
    this.deps = { chunkNodes, fetchHTML, fragment };
    this.api = api; // the run's chunks as JSON, for play back
    this.earlier = section.querySelector('[data-stream-link="earlier"]');
    this.later = section.querySelector('[data-stream-link="later"]');
    this.count = section.querySelector("[data-pager-count]");
    this.spans = []; // the chunks shown, in sequence order
    this.groups = new Map(); // turn:index:role -> its box
    this.adopt(this.box);
    this.offset = Number(section.dataset.offset) || 0; // chunks before the first shown
    this.total = Number(section.dataset.total) || 0;
    this.maxSeq = Number(section.dataset.maxSeq) || 0; // the last chunk counted in total
    this.latest = section.dataset.latest !== "false"; // the window ends at the stream's end
    this.edge = Number(section.dataset.lastSeq) || 0; // the last sequence number the window covers
    this.pending = []; // live chunks that came while the window was away from the end
    this.overflowed = false; // and some of them were let go
    this.busy = false;
    this.follow = { on: true, missed: 0 };
    this.newBtn = document.createElement("button");
    this.newBtn.type = "button";
    this.newBtn.className = "secondary new-chunks";
    this.newBtn.hidden = true;
    this.newBtn.dataset.testid = "new-chunks";
    this.box.after(this.newBtn);
    this.box.addEventListener("scroll", () => {
      this.follow.on = this.atEnd();
      if (this.follow.on && this.latest) { this.follow.missed = 0; this.newBtn.hidden = true; }
    }, { passive: true });
    this.newBtn.addEventListener("click", () => this.toEnd());
    const onLink = (fn) => async (ev) => {
      if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
      ev.preventDefault();
      try { await this.once(fn); } catch { location.href = ev.currentTarget.href; }
    };
    this.earlier?.addEventListener("click", onLink(() => this.loadEarlier()));
    this.later?.addEventListener("click", onLink(() => this.loadLater()));
    if (this.latest) this.box.scrollTop = this.box.scrollHeight;
    this.show();
  }

  atEnd() { return this.box.scrollHeight - this.box.scrollTop - this.box.clientHeight < 24; }
  firstSeq() { return this.spans.length ? Number(this.spans[0].dataset.seq) : this.edge + 1; }
  lastSeq() { return this.spans.length ? Number(this.spans[this.spans.length - 1].dataset.seq) : this.edge; }

  async once(fn) {
    if (this.busy) return;
    this.busy = true;
    try { await fn(); } finally { this.busy = false; }
  }

  // adopt takes the groups of server-rendered chunks in from (the page's, or a fragment's) and
  // returns their chunks in sequence order.
  adopt(from) {
    const spans = [...from.querySelectorAll(".chunk-body > span[data-seq]")].sort((a, b) => a.dataset.seq - b.dataset.seq);
    if (from === this.box) {
      this.spans = spans;
      for (const g of from.querySelectorAll(".chunk-group")) this.groups.set(g.dataset.key, g);
    }
    return spans;
  }

  // place puts a fragment's groups at the start or the end of the window, each chunk into the
  // box of its message when that is shown already.
  place(fresh, where) {
    const incoming = [...fresh.querySelectorAll("#chunks > .chunk-group")];
    const spans = this.adopt(fresh);
    for (const g of where === "start" ? incoming.reverse() : incoming) {
      const mine = this.groups.get(g.dataset.key);
      if (mine?.isConnected) {
        const body = mine.querySelector(".chunk-body");
        const add = [...g.querySelectorAll(".chunk-body > span[data-seq]")];
        if (where === "start") body.prepend(...add);
        else body.append(...add);
      } else {
        if (where === "start") this.box.prepend(g);
        else this.box.append(g);
        this.groups.set(g.dataset.key, g);
      }
    }
    this.spans = where === "start" ? [...spans, ...this.spans] : [...this.spans, ...spans];
  }

  // render draws a chunk that came as JSON (live, or played back) at the window's end.
  render(ch) {
    const key = `${ch.turn}:${ch.index}:${ch.role}`;
    let g = this.groups.get(key);
    if (!g?.isConnected) {
      g = document.createElement("div");
      g.className = "chunk-group role-" + ch.role;
      g.dataset.key = key;
      const head = document.createElement("div");
      head.className = "muted small";
      head.textContent = `${ch.role} · turn ${ch.turn} · message ${ch.index}`;
      const body = document.createElement("pre");
      body.className = "chunk-body";
      g.append(head, body);
      this.box.append(g);
      this.groups.set(key, g);
    }
    const span = document.createElement("span");
    span.dataset.seq = ch.seq;
    // Each chunk says when it came: stored chunks carry their time, live ones are stamped on arrival.
    const at = ch.created_at && !ch.created_at.startsWith("0001") ? new Date(ch.created_at) : new Date();
    const clock = at.toISOString().slice(11, 23);
    span.title = clock + " UTC";
    if (ch.role === "flow") {
      // A flow's own chunks are values, one a line: each line starts with its time.
      const t = document.createElement("time");
      t.className = "chunk-time muted small";
      t.dateTime = at.toISOString();
      t.textContent = clock + " ";
      span.append(t);
    }
    span.append(...this.deps.chunkNodes(ch.content));
    g.querySelector(".chunk-body").append(span);
    this.spans.push(span);
    this.edge = ch.seq;
  }

  // trim drops chunks beyond maxChunks from one end: the start (the oldest) or the end.
  trim(from) {
    while (this.spans.length > maxChunks) {
      const span = from === "start" ? this.spans.shift() : this.spans.pop();
      const body = span.parentElement;
      span.remove();
      if (body && !body.firstChild) {
        const g = body.closest(".chunk-group");
        this.groups.delete(g.dataset.key);
        g.remove();
      }
      if (from === "start") this.offset++;
      else this.latest = false;
    }
    if (!this.latest && from === "end") this.edge = this.lastSeq();
  }

  // live takes a chunk that came over the WebSocket.
  live(ch) {
    if (ch.seq > this.maxSeq) { this.total++; this.maxSeq = ch.seq; }
    if (ch.seq <= this.lastSeq() && this.latest) return; // shown already
    const detach = this.latest && !this.follow.on && this.spans.length >= maxChunks;
    if (!this.latest || detach) {
      this.latest = false;
      this.hold(ch);
      this.missed();
      this.show();
      return;
    }
    this.render(ch);
    if (this.follow.on) {
      this.trim("start");
      this.box.scrollTop = this.box.scrollHeight;
    } else this.missed();
    this.show();
  }

  hold(ch) {
    if (this.pending.length >= maxChunks) { this.pending.shift(); this.overflowed = true; }
    this.pending.push(ch);
  }

  missed() {
    this.follow.missed++;
    this.newBtn.hidden = false;
    this.newBtn.textContent = `↓ ${this.follow.missed} new chunk${this.follow.missed === 1 ? "" : "s"}`;
  }

  // rejoin draws the live chunks held while away, once the window has reached the stream's end
  // as the database had it: it is at the live end again unless some were let go.
  rejoin() {
    const last = this.lastSeq();
    const held = this.pending.filter((ch) => ch.seq > last);
    if (this.overflowed && held.length && held[0].seq > last + 1) {
      this.latest = false; // a hole between the page and what was kept: the next page fills it
      return;
    }
    for (const ch of held) this.render(ch);
    this.pending = [];
    this.overflowed = false;
    this.latest = true;
  }

  async page(query) {
    const html = await this.deps.fetchHTML(this.section.dataset.fragmentUrl + query);
    const fresh = html && this.deps.fragment(html).querySelector("[data-stream]");
    if (!fresh) throw new Error("no stream in the answer");
    this.total = Math.max(this.total, Number(fresh.dataset.total) || 0);
    this.maxSeq = Math.max(this.maxSeq, Number(fresh.dataset.maxSeq) || 0);
    return fresh;
  }

  async loadEarlier() {
    const fresh = await this.page("&before=" + this.firstSeq());
    this.place(fresh, "start");
    this.offset = Number(fresh.dataset.offset) || 0;
    this.trim("end");
    this.follow.on = false;
    this.show();
  }

  async loadLater() {
    const fresh = await this.page("&after=" + this.lastSeq());
    const stays = this.spans[this.spans.length - 1];
    const top = stays?.getBoundingClientRect().top;
    this.place(fresh, "end");
    this.edge = Math.max(this.edge, Number(fresh.dataset.lastSeq) || 0);
    if (fresh.dataset.latest === "true") this.rejoin();
    this.trim("start");
    if (stays?.isConnected) this.box.scrollTop += stays.getBoundingClientRect().top - top;
    this.show();
  }

  // toEnd goes to the stream's end and follows it again: the newest page, read again when the
  // window is away from it.
  async toEnd() {
    await this.once(async () => {
      if (!this.latest) {
        const fresh = await this.page("");
        this.box.replaceChildren();
        this.groups.clear();
        this.spans = [];
        this.place(fresh, "end");
        this.offset = Number(fresh.dataset.offset) || 0;
        this.edge = Number(fresh.dataset.lastSeq) || 0;
        this.rejoin();
        this.trim("start");
      }
      this.box.scrollTop = this.box.scrollHeight;
      this.follow.on = true;
      this.follow.missed = 0;
      this.newBtn.hidden = true;
      this.show();
    });
  }

  // playback plays the whole stream again from its start, fetching it a batch at a time, in
  // about 200 steps; the window keeps its last maxChunks.
  async playback() {
    await this.once(async () => {
      this.box.replaceChildren();
      this.groups.clear();
      this.spans = [];
      this.offset = 0;
      this.latest = false;
      this.follow.on = true;
      this.show();
      const step = Math.max(1, Math.ceil(this.total / 200));
      const batch = 500;
      let after = 0, done = false, queue = [];
      while (!done || queue.length) {
        if (queue.length < step && !done) {
          const res = await fetch(`${this.api}?after=${after}&limit=${batch}`, { headers: { Accept: "application/json" }, credentials: "same-origin" });
          if (!res.ok) throw new Error("chunks: " + res.status);
          const chunks = (await res.json()).chunks ?? [];
          if (chunks.length) after = chunks[chunks.length - 1].seq;
          done = chunks.length < batch;
          queue.push(...chunks);
          continue;
        }
        for (const ch of queue.splice(0, step)) this.render(ch);
        this.trim("start");
        this.box.scrollTop = this.box.scrollHeight;
        this.show();
        await new Promise((r) => setTimeout(r, 20));
      }
      this.latest = true;
      this.rejoin();
      this.show();
    });
  }

  // show says which chunks the window holds, and links to those before and after it.
  show() {
    const n = this.spans.length;
    if (this.count) {
      this.count.hidden = this.total === 0;
      this.count.textContent = n ? `chunks ${this.offset + 1}–${this.offset + n} of ${this.total}` : `${this.total} chunks`;
    }
    const url = this.section.dataset.pageUrl;
    if (this.earlier) {
      this.earlier.hidden = this.offset === 0 || n === 0;
      this.earlier.href = url + "&before=" + this.firstSeq();
    }
    if (this.later) {
      this.later.hidden = this.latest;
      this.later.href = url + "&after=" + this.lastSeq();
    }
    const d = this.section.dataset;
    d.offset = String(this.offset);
    d.total = String(this.total);
    d.latest = String(this.latest);
    this.box.dataset.count = String(n);
  }
}
