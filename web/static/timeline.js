// The waterfall's timeline: a time ruler over the span tree's bars, the trace's long idle
// stretches folded to a fixed width and marked ("waited 17 s for a reviewer"), and zoom: to a span
// (its "zoom to span" button, a double-click on its bar, or z on its row) or to a range dragged
// across the ruler, with "reset zoom" (or Z). The server draws the bars on the folded axis and
// gives the axis as breakpoints (data-timeline: {"len", "points": [[unit, ns]…]}, units 0..1000);
// each bar carries its start and end (data-s, data-e: ns from the trace's start), from which a
// zoom places it again. Over the ruler, a minimap draws every span of the trace and a window on
// the part shown, to drag along it (drawMinimap). No HTML is built from data: labels go through textContent, places through
// element.style (the CSP allows no style attributes).
const axisWidth = 1000;
const minBar = 1.5;
const state = new WeakMap(); // .timeline -> { view: {t0, t1} | null }

function axisOf(tl) {
  const head = tl.querySelector(".timeline-head");
  try {
    const ax = JSON.parse(head?.dataset.timeline ?? "");
    return ax && Array.isArray(ax.points) && ax.points.length >= 2 ? ax : null;
  } catch { return null; }
}

// lerp maps v from the breakpoints' column a to column b, linearly between two breakpoints.
function lerp(points, v, a, b) {
  if (v <= points[0][a]) return points[0][b];
  for (let i = 1; i < points.length; i++) {
    const p = points[i - 1], q = points[i];
    if (v <= q[a]) return q[a] === p[a] ? q[b] : p[b] + (q[b] - p[b]) * (v - p[a]) / (q[a] - p[a]);
  }
  return points[points.length - 1][b];
}
const unitAt = (ax, t) => lerp(ax.points, t, 1, 0);
const timeAt = (ax, u) => lerp(ax.points, u, 0, 1);

// nice rounds a step up to 1, 2 or 5 times a power of ten.
function nice(x) {
  const p = 10 ** Math.floor(Math.log10(Math.max(x, 1)));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

// fmtTick renders a time from the trace's start to the precision of the ruler's step: 0, 250ms,
// 1.25s, 17.05s, 2m05s.
function fmtTick(ns, step) {
  if (ns === 0) return "0";
  const dec = (unit) => Math.min(6, Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9)));
  if (ns >= 60e9 && step >= 1e9) {
    const m = Math.floor(ns / 60e9), s = Math.round((ns % 60e9) / 1e9);
    return `${m}m${String(s).padStart(2, "0")}s`;
  }
  if (ns >= 1e9) return (ns / 1e9).toFixed(dec(1e9)) + "s";
  if (ns >= 1e6) return (ns / 1e6).toFixed(dec(1e6)) + "ms";
  return (ns / 1e3).toFixed(dec(1e3)) + "µs";
}

function setup(tl) {
  if (state.has(tl)) return;
  const st = { view: null };
  state.set(tl, st);
  const tree = tl.querySelector(".spantree");
  // The gaps' bands across the bars live in a layer of their own, so that drawing them is not a
  // change of the timeline's children that would ask for another drawing.
  const bands = document.createElement("div");
  bands.className = "gap-bands";
  tl.append(bands);

  // view is the shown part of the folded axis, in units: [u0, u1].
  const view = (ax) => st.view ? [unitAt(ax, st.view.t0), unitAt(ax, st.view.t1)] : [0, axisWidth];

  function draw() {
    const ax = axisOf(tl);
    const head = tl.querySelector(".timeline-head");
    if (!ax || !head) return;
    const [u0, u1] = view(ax);
    const k = axisWidth / Math.max(u1 - u0, 1e-9);
    const place = (t) => (unitAt(ax, t) - u0) * k;
    // The bars, waits included.
    tl.querySelectorAll(".spantree .wf rect[data-s]").forEach((r) => {
      const x = place(Number(r.dataset.s));
      const w = place(Number(r.dataset.e)) - x;
      r.setAttribute("x", x.toFixed(2));
      r.setAttribute("width", Math.max(w, minBar).toFixed(2));
    });
    const ruler = head.querySelector(".ruler");
    const width = ruler.clientWidth || 1;
    const t0 = timeAt(ax, u0), t1 = timeAt(ax, u1);
    ruler.dataset.viewStart = String(Math.round(t0));
    ruler.dataset.viewEnd = String(Math.round(t1));
    // Ticks: the unfolded stretches are the breakpoints' even segments, all at one scale.
    ruler.querySelectorAll(".ruler-tick").forEach((n) => n.remove());
    const pts = ax.points;
    let nsPerUnit = 0;
    for (let i = 0; i + 1 < pts.length; i += 2) {
      if (pts[i + 1][0] > pts[i][0]) { nsPerUnit = (pts[i + 1][1] - pts[i][1]) / (pts[i + 1][0] - pts[i][0]); break; }
    }
    if (nsPerUnit > 0) {
      const nsPerPx = nsPerUnit * (u1 - u0) / width;
      const step = nice(nsPerPx * 90);
      // Where the work resumes after a gap is always marked, with its real time; the regular
      // ticks keep clear of it and of each other.
      const ticks = [];
      const free = (px) => px <= width - 30 && ticks.every((k) => Math.abs(k.px - px) >= 60);
      for (let i = 2; i + 1 < pts.length; i += 2) {
        const t = pts[i][1];
        if (t >= t0 && t <= t1) ticks.push({ t, px: place(t) / axisWidth * width, resume: true });
      }
      // Zoomed, the view's start is marked too, unless it falls in a gap.
      const inGap = (t) => { for (let i = 1; i + 1 < pts.length; i += 2) if (t > pts[i][1] && t < pts[i + 1][1]) return true; return false; };
      if (st.view && !inGap(t0) && free(0)) ticks.push({ t: t0, px: 0 });
      for (let i = 0; i + 1 < pts.length; i += 2) {
        const a = Math.max(pts[i][1], t0), b = Math.min(pts[i + 1][1], t1);
        for (let t = Math.ceil(a / step) * step; t <= b; t += step) {
          const px = place(t) / axisWidth * width;
          if (free(px)) ticks.push({ t, px });
        }
      }
      ticks.sort((p, q) => p.px - q.px);
      for (const k of ticks) {
        const tick = document.createElement("div");
        tick.className = k.resume ? "ruler-tick resume" : "ruler-tick";
        tick.style.left = k.px + "px";
        const label = document.createElement("span");
        label.textContent = fmtTick(k.t, step);
        tick.append(label);
        ruler.append(tick);
        // A label that would run past the ruler's end hangs to the left of its tick.
        if (k.px + label.offsetWidth + 2 > width) label.classList.add("end");
      }
    }
    // The folded gaps, on the ruler with their labels and as bands across the bars.
    bands.replaceChildren();
    const box = tl.getBoundingClientRect(), rbox = ruler.getBoundingClientRect(), tbox = tree?.getBoundingClientRect();
    ruler.querySelectorAll(".ruler-gap").forEach((li) => {
      const x0 = place(Number(li.dataset.s)) / axisWidth * width;
      const x1 = place(Number(li.dataset.e)) / axisWidth * width;
      const shown = x1 > 0 && x0 < width;
      li.hidden = !shown;
      if (!shown) return;
      const l = Math.max(x0, 0), r = Math.min(x1, width);
      li.style.left = l + "px";
      li.style.width = Math.max(r - l, 2) + "px";
      const label = li.querySelector(".gap-label");
      if (label) {
        // Centred on the gap, kept inside the ruler.
        const lw = label.offsetWidth;
        const at = Math.min(Math.max((l + r) / 2 - lw / 2, 0), Math.max(width - lw, 0));
        label.style.left = (at - l) + "px";
      }
      if (tbox) {
        const band = document.createElement("div");
        band.className = "gap-band " + (li.classList.contains("kind-wait") ? "kind-wait" : "kind-idle");
        band.title = li.title;
        band.style.left = (rbox.left - box.left + l) + "px";
        band.style.width = Math.max(r - l, 2) + "px";
        band.style.top = (tbox.top - box.top) + "px";
        band.style.height = tree.clientHeight + "px";
        bands.append(band);
      }
    });
    drawMinimap(ax, u0, u1);
    const reset = head.querySelector("[data-zoom-reset]");
    if (reset) reset.hidden = !st.view;
    const range = head.querySelector(".zoom-range");
    if (range) range.textContent = st.view ? `${fmtTick(t0, (t1 - t0) / 100)} – ${fmtTick(t1, (t1 - t0) / 100)}` : "";
    tl.dataset.zoomed = String(!!st.view);
  }

  // The minimap: every span of the trace (data-minimap: bars in bands of spans, in the tree's
  // order, on the folded axis), drawn on a canvas again only when its size or data change, and a
  // window on the part the waterfall shows.
  let minimapDrawn = "";
  function drawMinimap(ax, u0, u1) {
    const mm = tl.querySelector(".minimap");
    if (!mm) return;
    const win = mm.querySelector(".minimap-window");
    win.style.left = (u0 / axisWidth * 100) + "%";
    win.style.width = ((u1 - u0) / axisWidth * 100) + "%";
    mm.dataset.zoomed = String(!!st.view);
    const shown = u1 - u0;
    win.setAttribute("aria-valuenow", String(shown >= axisWidth ? 0 : Math.round(u0 / (axisWidth - shown) * 100)));
    const t0 = timeAt(ax, u0), t1 = timeAt(ax, u1), step = Math.max(t1 - t0, 1) / 100;
    win.setAttribute("aria-valuetext", st.view ? `${fmtTick(t0, step)} – ${fmtTick(t1, step)} of ${fmtTick(ax.len, ax.len / 100)}` : "the whole trace");
    const canvas = mm.querySelector("canvas");
    const dpr = window.devicePixelRatio || 1;
    const w = Math.round(canvas.clientWidth * dpr), h = Math.round(canvas.clientHeight * dpr);
    const dark = matchMedia("(prefers-color-scheme: dark)").matches;
    const key = `${w}x${h} ${dark} ${mm.dataset.minimap}`;
    if (!w || !h || key === minimapDrawn) return;
    minimapDrawn = key;
    let data;
    try { data = JSON.parse(mm.dataset.minimap); } catch { return; }
    canvas.width = w;
    canvas.height = h;
    const ctx = canvas.getContext("2d");
    const root = getComputedStyle(document.documentElement);
    const colour = {};
    for (const k of data.kinds) {
      const sw = tl.querySelector(`.timeline-legend .swatch.kind-${k}`);
      if (sw) colour[k] = getComputedStyle(sw).backgroundColor;
    }
    colour.error = root.getPropertyValue("--err").trim() || "#c92a2a";
    const other = root.getPropertyValue("--idle").trim() || "#868e96";
    const bh = h / Math.max(data.bands, 1);
    for (const [band, a, b, k] of data.bars) {
      ctx.fillStyle = colour[data.kinds[k]] || other;
      ctx.fillRect(a / axisWidth * w, band * bh, Math.max((b - a) / axisWidth * w, dpr), Math.max(bh > 3 * dpr ? bh - dpr : bh, dpr));
    }
  }
  // setView shows [a, b] of the folded axis, in units; all of it is no zoom.
  function setView(a, b) {
    const ax = axisOf(tl);
    if (!ax) return;
    st.view = b - a >= axisWidth - 1e-6 ? null : { t0: timeAt(ax, a), t1: timeAt(ax, Math.max(b, a + 1e-3)) };
    draw();
  }
  // Dragging the minimap's window moves the view along the trace; dragging across the rest of the
  // minimap chooses the view; a click there centres the window on it.
  let mmDrag = null;
  tl.addEventListener("pointerdown", (ev) => {
    const mm = ev.target.closest(".minimap");
    const ax = axisOf(tl);
    if (!mm || !ax || ev.button !== 0) return;
    ev.preventDefault();
    const box = mm.getBoundingClientRect();
    const [u0, u1] = view(ax);
    mmDrag = { mm, box, x0: ev.clientX - box.left, u0, u1, pan: !!(st.view && ev.target.closest(".minimap-window")) };
    mm.setPointerCapture?.(ev.pointerId);
    if (mmDrag.pan) {
      mm.classList.add("dragging");
      mm.querySelector(".minimap-window").focus({ preventScroll: true });
    } else {
      const sel = document.createElement("div");
      sel.className = "ruler-sel";
      sel.style.left = mmDrag.x0 + "px";
      sel.style.width = "0px";
      mm.append(sel);
      mmDrag.sel = sel;
    }
  });
  const mmX = (ev) => Math.min(Math.max(ev.clientX - mmDrag.box.left, 0), mmDrag.box.width);
  // pan moves the view with the window by how far the pointer went since it took it.
  const pan = (d, x) => {
    const du = Math.min(Math.max((x - d.x0) / d.box.width * axisWidth, -d.u0), axisWidth - d.u1);
    setView(d.u0 + du, d.u1 + du);
  };
  tl.addEventListener("pointermove", (ev) => {
    if (!mmDrag) return;
    const x = mmX(ev);
    if (mmDrag.pan) {
      pan(mmDrag, x);
    } else {
      mmDrag.sel.style.left = Math.min(x, mmDrag.x0) + "px";
      mmDrag.sel.style.width = Math.abs(x - mmDrag.x0) + "px";
    }
  });
  const endMinimapDrag = (ev) => {
    if (!mmDrag) return;
    const d = mmDrag;
    const x = mmX(ev);
    mmDrag = null;
    d.mm.classList.remove("dragging");
    d.sel?.remove();
    if (ev.type !== "pointerup") return;
    // The release is where the drag ends, whether or not a move there was seen first.
    if (d.pan) { pan(d, x); return; }
    const at = (px) => px / d.box.width * axisWidth;
    if (Math.abs(x - d.x0) >= 4) {
      setView(at(Math.min(x, d.x0)), at(Math.max(x, d.x0)));
    } else if (st.view) {
      const half = (d.u1 - d.u0) / 2;
      const c = Math.min(Math.max(at(x), half), axisWidth - half);
      setView(c - half, c + half);
    }
  };
  tl.addEventListener("pointerup", endMinimapDrag);
  tl.addEventListener("pointercancel", endMinimapDrag);
  tl.addEventListener("keydown", (ev) => {
    if (!ev.target.closest?.(".minimap-window")) return;
    const ax = axisOf(tl);
    if (!ax || !st.view) return;
    const [u0, u1] = view(ax), w = u1 - u0;
    let a = null;
    if (ev.key === "ArrowLeft") a = Math.max(u0 - w / 4, 0);
    else if (ev.key === "ArrowRight") a = Math.min(u0 + w / 4, axisWidth - w);
    else if (ev.key === "Home") a = 0;
    else if (ev.key === "End") a = axisWidth - w;
    if (a === null) return;
    ev.preventDefault();
    ev.stopPropagation();
    setView(a, a + w);
  });

  function zoomTo(t0, t1) {
    const ax = axisOf(tl);
    if (!ax) return;
    // A little room either side, on the folded axis: a margin in time would be 0.7 s beside a
    // 17-s wait, and swallow the work around it.
    const u0 = unitAt(ax, t0), u1 = unitAt(ax, t1);
    const pad = (u1 - u0) * 0.04 || 0.01;
    st.view = { t0: timeAt(ax, Math.max(0, u0 - pad)), t1: timeAt(ax, Math.min(axisWidth, u1 + pad)) };
    if (st.view.t1 - st.view.t0 < 1000) st.view.t1 = st.view.t0 + 1000;
    draw();
  }
  // A row's span is its bar and, for a turn Genkit nested the next one in, the bar's faint tail.
  const zoomToRow = (li) => {
    const bar = li?.querySelector(".wf rect.bar");
    if (!bar) return;
    const tail = li.querySelector(".wf rect.tail");
    zoomTo(Number(bar.dataset.s), Number((tail ?? bar).dataset.e));
  };

  tl.addEventListener("click", (ev) => {
    if (ev.target.closest("[data-zoom-reset]")) { st.view = null; draw(); return; }
    if (ev.target.closest("[data-zoom-selected]")) {
      const id = tl.querySelector(".span-row.selected")?.dataset.span ??
        tl.closest("#trace")?.querySelector("#span-detail .span-panel")?.dataset.span;
      const li = id ? document.getElementById("span-" + id) : null;
      if (li) zoomToRow(li);
      else tl.querySelector(".zoom-range").textContent = "select a span first";
    }
  });
  // A double-click on a bar zooms; it does not select the text of the rows around it.
  tl.addEventListener("mousedown", (ev) => { if (ev.detail > 1 && ev.target.closest(".spantree .wf")) ev.preventDefault(); });
  tl.addEventListener("dblclick", (ev) => {
    const wf = ev.target.closest(".spantree .wf");
    if (!wf) return;
    ev.preventDefault();
    // A wait zooms to the wait, anything else in the row to the span.
    const wait = ev.target.closest("rect.wait");
    if (wait) zoomTo(Number(wait.dataset.s), Number(wait.dataset.e));
    else zoomToRow(wf.closest(".span-row"));
  });

  // z on a row zooms to its span; Z resets.
  tl.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.target.closest("input, textarea, select")) return;
    const li = ev.target.closest(".span-row[data-span]");
    if (ev.key === "z" && li) { ev.preventDefault(); zoomToRow(li); }
    else if (ev.key === "Z" && st.view) { ev.preventDefault(); st.view = null; draw(); }
  });

  // Dragging across the ruler zooms to the range dragged.
  let drag = null;
  tl.addEventListener("pointerdown", (ev) => {
    const ruler = ev.target.closest(".ruler");
    if (!ruler || ev.button !== 0) return;
    ev.preventDefault();
    const box = ruler.getBoundingClientRect();
    const sel = document.createElement("div");
    sel.className = "ruler-sel";
    ruler.append(sel);
    drag = { ruler, box, x0: ev.clientX - box.left, sel };
    ruler.setPointerCapture?.(ev.pointerId);
    sel.style.left = drag.x0 + "px";
    sel.style.width = "0px";
  });
  tl.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const x = Math.min(Math.max(ev.clientX - drag.box.left, 0), drag.box.width);
    drag.sel.style.left = Math.min(x, drag.x0) + "px";
    drag.sel.style.width = Math.abs(x - drag.x0) + "px";
  });
  const endDrag = (ev) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    d.sel.remove();
    if (ev.type !== "pointerup") return;
    const x = Math.min(Math.max(ev.clientX - d.box.left, 0), d.box.width);
    if (Math.abs(x - d.x0) < 6) return;
    const ax = axisOf(tl);
    if (!ax) return;
    const [u0, u1] = view(ax);
    const at = (px) => timeAt(ax, u0 + (px / d.box.width) * (u1 - u0));
    const a = at(Math.min(x, d.x0)), b = at(Math.max(x, d.x0));
    st.view = { t0: a, t1: Math.max(b, a + 1000) };
    draw();
  };
  tl.addEventListener("pointerup", endDrag);
  tl.addEventListener("pointercancel", endDrag);

  // Rows come and go (expand, show more, a live reload), the head is replaced when the axis grows,
  // and the page is resized: each is drawn again, in the current zoom, before the page is painted
  // (observers run before it), so that a new head never shows without its ticks.
  new MutationObserver(draw).observe(tl, { childList: true });
  if (tree) new MutationObserver(draw).observe(tree, { childList: true });
  if ("ResizeObserver" in window) {
    const ro = new ResizeObserver(draw);
    ro.observe(tl);
    if (tree) ro.observe(tree);
  }
  draw();
}

// The divider between the span names and the waterfall: drag it (or focus it and press ← →) to
// give the names more or less room. The width is kept in localStorage, for every trace.
const nameWidthKey = "loupe.timeline.names";
const clampName = (tl, px) => Math.round(Math.max(160, Math.min(px, tl.getBoundingClientRect().width - 240)));
function applyNameWidth(tl, px) {
  const trace = tl.closest(".trace") ?? tl;
  trace.style.setProperty("--tl-name", `${px}px`);
  const div = tl.querySelector("[data-tl-divider]");
  if (div) div.setAttribute("aria-valuenow", String(px));
}
function setupDivider(tl) {
  const div = tl.querySelector("[data-tl-divider]");
  if (!div || div.dataset.ready) return;
  div.dataset.ready = "1";
  const saved = Number(localStorage.getItem(nameWidthKey));
  if (saved > 0) applyNameWidth(tl, clampName(tl, saved));
  const set = (px) => {
    const w = clampName(tl, px);
    applyNameWidth(tl, w);
    localStorage.setItem(nameWidthKey, String(w));
  };
  const current = () => tl.querySelector(".span-row .tree-cell, .timeline-tools")?.getBoundingClientRect().width ?? 0;
  div.addEventListener("pointerdown", (ev) => {
    ev.preventDefault();
    div.setPointerCapture(ev.pointerId);
    const left = tl.getBoundingClientRect().left;
    const move = (e) => set(e.clientX - left - 8);
    const up = () => { div.removeEventListener("pointermove", move); div.removeEventListener("pointerup", up); };
    div.addEventListener("pointermove", move);
    div.addEventListener("pointerup", up);
  });
  div.addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight") return;
    ev.preventDefault();
    set(current() + (ev.key === "ArrowLeft" ? -24 : 24));
  });
}

document.querySelectorAll(".timeline").forEach((tl) => { setup(tl); setupDivider(tl); });
// ui.js announces each span tree it sets up (a live reload may replace the whole trace).
document.addEventListener("loupe:tree", (ev) => ev.target.querySelectorAll?.(".timeline").forEach((tl) => { setup(tl); setupDivider(tl); }));
