/* fencecheck run report: draws the timeline, epoch plots, latency and throughput from the
 * JSON embedded in the page, and links them to the anomaly cards. Plain DOM + canvas, no
 * framework, nothing fetched. Every chart shares one time window (`view`), so zooming one
 * zooms all, and their plot areas share left/right margins so their time axes line up. */
(function () {
  "use strict";

  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const D = JSON.parse($("#fc-data").textContent);
  const C = D.ops.cols;
  const N = C.s.length;
  const END = Math.max(D.end, 1);

  const OUTCOME_COLOR = ["#3aa76d", "#e0625a", "#f2b134", "#a78bfa"];
  const OUTCOME_LABEL = ["ok", "fail", "info (unknown)", "open (never completed)"];
  // How an operation is drawn: its outcome, except two kinds of fail that are no failure.
  const REFUSED = 4;
  const NOT_SENT = 5;
  const LOOK_COLOR = [...OUTCOME_COLOR, "#2f6fd6", "#a3a9b3"];
  const LOOK_LABEL = [...OUTCOME_LABEL, "refused by the fence (stale epoch)",
    "not sent (lease gone, or lock busy)"];
  const HOLDER_COLOR = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#9c755f",
    "#edc948", "#ff9da7", "#e15759", "#bab0ac"];
  const STALE = "#d0021b";
  const INVOLVED = "#7c3aed";
  const EXPECTED = "#6b7280";
  const SELECTED = "#111827";
  const ML = 96;
  const MR = 18;
  const FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

  const stats = { timelineDrawn: 0, epochPanels: 0, epochPoints: 0, staleMarked: 0,
    latencyPoints: 0, throughputBars: 0, faultBands: 0, redraws: 0 };

  // ---- derived data -------------------------------------------------------------------------
  const ends = new Float64Array(N);
  let maxDuration = 0;
  for (let i = 0; i < N; i++) {
    ends[i] = C.e[i] == null ? END : C.e[i];
    maxDuration = Math.max(maxDuration, ends[i] - C.s[i]);
  }
  const errorsIn = (words) => new Set((D.ops.errors || []).flatMap((e, n) => (words || []).includes(e) ? [n] : []));
  const refusalErrors = errorsIn(D.refusal_errors);
  const contentionErrors = errorsIn(D.contention_errors);
  const look = new Uint8Array(N);
  for (let i = 0; i < N; i++) {
    look[i] = C.o[i];
    if (C.o[i] === 1 && C.err[i] != null) {
      if (refusalErrors.has(C.err[i])) look[i] = REFUSED;
      else if (contentionErrors.has(C.err[i])) look[i] = NOT_SENT;
    }
  }
  const fName = (i) => D.ops.fs[C.f[i]];
  const nodeName = (i) => (C.n[i] == null ? null : D.ops.nodes[C.n[i]]);
  // The colours come from the fault-kind registry (nemeses/registry.py) with the data.
  const faultColor = (kind) => (D.fault_colours || {})[kind] || "#8c8c8c";
  const faultEnd = (f) => (f.e == null ? END : f.e);
  const faultFailed = (f) => f.applied === false || !!f.error;

  const mark = new Map();
  const anomaliesOf = new Map();
  const RANK = { expected: 1, involved: 2, stale: 3 };
  function setMark(row, kind) {
    if (!mark.has(row) || RANK[kind] > RANK[mark.get(row)]) mark.set(row, kind);
  }
  D.anomalies.forEach((a, n) => {
    for (const r of a.rows) {
      setMark(r, a.expected ? "expected" : "involved");
      if (!anomaliesOf.has(r)) anomaliesOf.set(r, []);
      anomaliesOf.get(r).push(n);
    }
    if (!a.expected) for (const r of a.stale) setMark(r, "stale");
  });
  // Expected anomalies (unguarded sinks) are listed, not drawn: there can be thousands.
  const loud = (row) => mark.has(row) && mark.get(row) !== "expected";
  const markColor = (kind) => (kind === "stale" ? STALE : kind === "involved" ? INVOLVED : EXPECTED);

  // ---- formatting ---------------------------------------------------------------------------
  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({
      "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  const fmtS = (us) => (us / 1e6).toFixed(3) + " s";
  function fmtDur(us) {
    if (us < 1000) return us.toFixed(0) + " µs";
    if (us < 1e6) return (us / 1000).toFixed(2) + " ms";
    return (us / 1e6).toFixed(3) + " s";
  }
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9))));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  function opLabel(i, width) {
    const f = fName(i);
    const ep = C.ep[i];
    let text = f;
    if (f === "write") text = ep == null ? "w" : "w e" + ep;
    else if (f === "acquire") text = ep == null ? "acq" : "acq e" + ep;
    else if (f === "release") text = "rel";
    else if (f === "read") text = C.x[i] == null ? "r" : "r " + C.x[i];
    return width > text.length * 6 + 6 ? text : "";
  }
  function opDetails(i) {
    const rows = [
      ["operation", esc(fName(i)) + " · <b>" + LOOK_LABEL[look[i]] + "</b>"],
      ["process", (C.p[i] < 0 ? "?" : C.p[i]) + (nodeName(i) ? " on " + esc(nodeName(i)) : "")],
      ["time", fmtS(C.s[i]) + " → " + (C.e[i] == null ? "never completed" : fmtS(C.e[i]))],
      ["latency", C.e[i] == null ? "—" : fmtDur(C.e[i] - C.s[i])],
    ];
    if (C.lk[i] != null) rows.push(["lock", esc(D.ops.locks[C.lk[i]])]);
    if (C.ep[i] != null) rows.push(["epoch", C.ep[i]]);
    if (C.sk[i] != null) rows.push(["sink", esc(D.ops.sinks[C.sk[i]])]);
    if (C.k[i] != null) rows.push(["key", esc(D.ops.keys[C.k[i]])]);
    if (C.id[i] != null) rows.push(["write id", esc(C.id[i])]);
    if (C.also[i] != null) {
      rows.push(["also wrote", C.also[i].map(([k, id]) =>
        esc(D.ops.keys[k]) + " (" + esc(id) + ")").join(", ")]);
    }
    if (C.x[i] != null) rows.push(["entries read", C.x[i]]);
    if (C.err[i] != null) rows.push(["error", esc(D.ops.errors[C.err[i]])]);
    if (C.a[i] === 2) rows.push(["accepted", "seen in a read, never acknowledged"]);
    rows.push(["history", "event " + C.ix[i] + (C.cx[i] == null ? "" : " → " + C.cx[i])]);
    const named = anomaliesOf.get(i) || [];
    if (named.length) {
      rows.push(["anomalies", named.map((n) => '<a href="#anomaly-' + n + '">' +
        esc(D.anomalies[n].name) + " #" + (n + 1) + "</a>").join(", ")]);
    }
    const faults = faultsDuring(i);
    if (faults.length) {
      rows.push(["faults on " + esc(nodeName(i) || "its node"), faults.map((f) =>
        esc(f.kind) + " " + fmtS(f.s) + "–" + (f.e == null ? "end" : fmtS(f.e))).join("; ")]);
    }
    return rows;
  }
  function faultsDuring(i) {
    const node = nodeName(i);
    return D.faults.filter((f) => f.targets.indexOf(node) >= 0 && f.s <= ends[i] &&
      faultEnd(f) >= C.s[i]);
  }
  function faultDetails(f) {
    const rows = [
      ["fault", "<b>" + esc(f.kind) + "</b> on " + esc(f.targets.join(", ") || "?")],
      ["in force", fmtS(f.s) + " → " + (f.e == null ? "never healed" : fmtS(f.e))],
    ];
    if (f.proc) rows.push(["process", esc(f.proc)]);
    if (f.mult != null) rows.push(["length", f.mult + "× the lease TTL"]);
    if (f.sched != null) rows.push(["scheduled", fmtS(f.sched)]);
    if (f.conf != null) rows.push(["confirmed", fmtS(f.conf)]);
    if (f.sched != null && f.conf != null) rows.push(["latency", fmtDur(f.conf - f.sched)]);
    if (f.applied === false) rows.push(["applied", "<b>no</b>"]);
    if (f.error) rows.push(["error", esc(f.error)]);
    if (f.stop_error) rows.push(["heal error", esc(f.stop_error)]);
    return rows;
  }
  const rowsHtml = (rows) => rows.map((r) => '<span class="dim">' + r[0] + ":</span> " + r[1])
    .join("<br>");

  // ---- the shared time window ---------------------------------------------------------------
  const view = { t0: 0, t1: END };
  let selected = -1;
  const plots = [];
  let pending = false;

  function setView(t0, t1) {
    const minSpan = 20;
    let span = Math.max(t1 - t0, minSpan);
    const lo = -END * 0.02;
    const hi = END * 1.02;
    if (span >= hi - lo) { t0 = lo; span = hi - lo; }
    t0 = Math.min(Math.max(t0, lo), hi - span);
    view.t0 = t0;
    view.t1 = t0 + span;
    redraw();
  }
  function zoom(factor, centre) {
    const c = centre == null ? (view.t0 + view.t1) / 2 : centre;
    setView(c - (c - view.t0) * factor, c + (view.t1 - c) * factor);
  }
  const resetView = () => setView(-END * 0.02, END * 1.02);
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      drawAll();
    });
  }
  function drawAll() {
    stats.redraws++;
    stats.epochPoints = 0;
    for (const p of plots) p.draw();
    const span = view.t1 - view.t0;
    $("#view-range").textContent = fmtS(Math.max(view.t0, 0)) + " – " +
      fmtS(Math.min(view.t1, END)) + "  (" + fmtDur(span) + " of " + fmtDur(END) + ")";
  }

  // ---- canvas plumbing ----------------------------------------------------------------------
  function sized(canvas, height) {
    const dpr = window.devicePixelRatio || 1;
    const width = Math.max(canvas.parentElement.clientWidth, 200);
    if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.width = width + "px";
      canvas.style.height = height + "px";
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = FONT;
    return { ctx, w: width, h: height };
  }
  const X = (t, w) => ML + ((t - view.t0) / (view.t1 - view.t0)) * (w - ML - MR);
  const T = (x, w) => view.t0 + ((x - ML) / (w - ML - MR)) * (view.t1 - view.t0);

  function lowerBound(rows, key, value) {
    let lo = 0;
    let hi = rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (key(rows[mid]) < value) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  function drawTimeAxis(ctx, w, y, gridTop, gridBottom) {
    const span = view.t1 - view.t0;
    const step = niceStep(span / Math.max((w - ML - MR) / 95, 1));
    const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / 1e6))));
    ctx.save();
    ctx.strokeStyle = "#eceef3";
    ctx.fillStyle = "#6b7280";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      const x = Math.round(X(t, w)) + 0.5;
      if (x < ML || x > w - MR) continue;
      ctx.beginPath();
      ctx.moveTo(x, gridTop);
      ctx.lineTo(x, gridBottom);
      ctx.stroke();
      ctx.fillText((t / 1e6).toFixed(decimals) + " s", x, y);
    }
    ctx.restore();
  }
  function clipPlot(ctx, w, top, bottom) {
    ctx.save();
    ctx.beginPath();
    ctx.rect(ML, top, w - ML - MR, bottom - top);
    ctx.clip();
  }
  function drawFaultBands(ctx, w, top, bottom, alpha) {
    clipPlot(ctx, w, top, bottom);
    for (const f of D.faults) {
      const x0 = X(f.s, w);
      const x1 = X(faultEnd(f), w);
      if (x1 < ML || x0 > w - MR) continue;
      ctx.globalAlpha = faultFailed(f) ? alpha / 2 : alpha;
      ctx.fillStyle = faultColor(f.kind);
      ctx.fillRect(x0, top, Math.max(x1 - x0, 1), bottom - top);
    }
    ctx.restore();
  }
  function drawSelectionGuides(ctx, w, top, bottom) {
    if (selected < 0) return;
    clipPlot(ctx, w, top, bottom);
    ctx.strokeStyle = SELECTED;
    ctx.setLineDash([4, 3]);
    for (const t of [C.s[selected], ends[selected]]) {
      const x = Math.round(X(t, w)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, bottom);
      ctx.stroke();
    }
    ctx.restore();
  }
  const hatches = new Map();
  function hatch(ctx, kind) {
    if (!hatches.has(kind)) {
      const tile = document.createElement("canvas");
      tile.width = 8;
      tile.height = 8;
      const t = tile.getContext("2d");
      t.strokeStyle = faultColor(kind);
      t.globalAlpha = 0.7;
      t.lineWidth = 2;
      t.beginPath();
      t.moveTo(-2, 10);
      t.lineTo(10, -2);
      t.stroke();
      hatches.set(kind, ctx.createPattern(tile, "repeat"));
    }
    return hatches.get(kind);
  }
  function faultAt(t, tolerance) {
    for (const f of D.faults) if (f.s - tolerance <= t && t <= faultEnd(f) + tolerance) return f;
    return null;
  }
  function emptyNote(ctx, w, h, text) {
    ctx.fillStyle = "#9aa3b2";
    ctx.textAlign = "center";
    ctx.fillText(text, w / 2, h / 2);
  }

  // ---- tooltip, selection, focus --------------------------------------------------------------
  const tooltip = $("#tooltip");
  function showTooltip(html, ev) {
    tooltip.innerHTML = html;
    tooltip.hidden = false;
    const pad = 14;
    const box = tooltip.getBoundingClientRect();
    let x = ev.clientX + pad;
    let y = ev.clientY + pad;
    if (x + box.width > window.innerWidth - 4) x = ev.clientX - box.width - pad;
    if (y + box.height > window.innerHeight - 4) y = ev.clientY - box.height - pad;
    tooltip.style.left = Math.max(4, x) + "px";
    tooltip.style.top = Math.max(4, y) + "px";
  }
  const hideTooltip = () => { tooltip.hidden = true; };

  function showPanel(title, rows) {
    const panel = $("#selected");
    panel.innerHTML = '<button class="close" title="clear selection">×</button><b>' + title +
      "</b><table>" + rows.map((r) => "<tr><th>" + r[0] + "</th><td>" + r[1] + "</td></tr>")
      .join("") + "</table>";
    panel.hidden = false;
    $(".close", panel).addEventListener("click", () => select(-1));
  }
  function select(row, focus) {
    selected = row;
    if (row < 0) {
      $("#selected").hidden = true;
    } else {
      showPanel("Selected operation", opDetails(row));
      if (focus) {
        const span = Math.max((ends[row] - C.s[row]) * 8, END * 0.01, 2000);
        const mid = (C.s[row] + ends[row]) / 2;
        setView(mid - span / 2, mid + span / 2);
        $("#timeline-canvas").scrollIntoView({ block: "center" });
      }
    }
    redraw();
  }
  function focusAnomaly(n) {
    const a = D.anomalies[n];
    $$(".anomaly.active").forEach((el) => el.classList.remove("active"));
    const card = document.getElementById("anomaly-" + n);
    if (card) card.classList.add("active");
    if (!a || !a.rows.length) return;
    const [t0, t1] = a.focus || [C.s[a.rows[0]], ends[a.rows[0]]];
    const pad = Math.max((t1 - t0) * 0.12, END * 0.005, 2000);
    setView(t0 - pad, t1 + pad);
    selected = a.stale.length ? a.stale[0] : a.rows[0];
    showPanel("Selected operation", opDetails(selected));
    $("#timeline-canvas").scrollIntoView({ block: "center" });
    redraw();
  }

  function interact(plot) {
    const canvas = plot.canvas;
    let drag = null;
    let hoverEvent = null;
    const local = (ev) => {
      const box = canvas.getBoundingClientRect();
      return [ev.clientX - box.left, ev.clientY - box.top, box.width];
    };
    canvas.addEventListener("mousedown", (ev) => {
      if (ev.button !== 0) return;
      drag = { x: ev.clientX, t0: view.t0, t1: view.t1, moved: false };
      ev.preventDefault();
    });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (!drag.moved) return;
      canvas.style.cursor = "grabbing";
      const width = canvas.clientWidth - ML - MR;
      const dt = (dx / width) * (drag.t1 - drag.t0);
      setView(drag.t0 - dt, drag.t1 - dt);
    });
    window.addEventListener("mouseup", (ev) => {
      if (!drag) return;
      const moved = drag.moved;
      drag = null;
      canvas.style.cursor = "";
      if (moved || ev.target !== canvas) return;
      const [x, y, w] = local(ev);
      const hit = plot.hit(x, y, w);
      if (hit && hit.row != null) select(hit.row, false);
      else if (hit && hit.fault) showPanel("Selected fault", faultDetails(hit.fault));
    });
    canvas.addEventListener("mousemove", (ev) => {
      if (drag && drag.moved) return;
      const first = hoverEvent == null;
      hoverEvent = ev;
      if (!first) return;
      requestAnimationFrame(() => {
        const e = hoverEvent;
        hoverEvent = null;
        const [x, y, w] = local(e);
        const hit = plot.hit(x, y, w);
        if (!hit) { hideTooltip(); return; }
        showTooltip(hit.html || (hit.row != null ? rowsHtml(opDetails(hit.row)) :
          rowsHtml(faultDetails(hit.fault))), e);
      });
    });
    canvas.addEventListener("mouseleave", hideTooltip);
    canvas.addEventListener("wheel", (ev) => {
      const [x, , w] = local(ev);
      if (ev.ctrlKey || ev.metaKey || ev.altKey) {
        ev.preventDefault();
        zoom(Math.exp(ev.deltaY * 0.0025), T(x, w));
      } else if (Math.abs(ev.deltaX) > Math.abs(ev.deltaY) || ev.shiftKey) {
        ev.preventDefault();
        const delta = ev.shiftKey && !ev.deltaX ? ev.deltaY : ev.deltaX;
        const dt = (delta / (w - ML - MR)) * (view.t1 - view.t0);
        setView(view.t0 + dt, view.t1 + dt);
      }
    }, { passive: false });
    canvas.addEventListener("dblclick", resetView);
    plots.push(plot);
  }

  // ---- timeline -----------------------------------------------------------------------------
  const lanes = D.lanes;
  const laneRows = lanes.map(() => []);
  for (let i = 0; i < N; i++) laneRows[C.lane[i]].push(i);
  const laneLongest = laneRows.map((rows) => rows.reduce((m, i) => Math.max(m, ends[i] - C.s[i]), 0));
  const lanesOfNode = new Map();
  lanes.forEach((lane, l) => {
    if (!lanesOfNode.has(lane.node)) lanesOfNode.set(lane.node, []);
    lanesOfNode.get(lane.node).push(l);
  });
  const faultNodes = D.fault_nodes;
  const faultsOfNode = new Map(faultNodes.map((node) => [node, D.faults.filter((f) =>
    f.targets.indexOf(node) >= 0)]));
  // Faults in force together on one node share its row as tracks, one above the other, so that
  // an overlap reads as two bands, not one painted over the other.
  const trackOf = new Map();
  const tracksOfNode = new Map();
  for (const [node, faults] of faultsOfNode) {
    const ends = [];
    for (const f of faults.slice().sort((a, b) => a.s - b.s)) {
      let track = ends.findIndex((end) => end <= f.s);
      if (track < 0) { track = ends.length; ends.push(0); }
      ends[track] = faultEnd(f);
      trackOf.set(node + "\u0000" + faults.indexOf(f), track);
    }
    tracksOfNode.set(node, Math.max(ends.length, 1));
  }
  const AXIS = 22;
  const FAULT_ROW = 16;
  const LANE = lanes.length <= 24 ? 22 : lanes.length <= 80 ? 13 : 7;
  const lanesTop = AXIS + faultNodes.length * FAULT_ROW + (faultNodes.length ? 10 : 0);
  const timelineHeight = lanesTop + Math.max(lanes.length, 1) * LANE + 6;

  function visibleRows(l, t0, t1) {
    const rows = laneRows[l];
    const from = lowerBound(rows, (i) => C.s[i], t0 - laneLongest[l]);
    const out = [];
    for (let k = from; k < rows.length && C.s[rows[k]] <= t1; k++) {
      if (ends[rows[k]] >= t0) out.push(rows[k]);
    }
    return out;
  }

  const timeline = {
    canvas: $("#timeline-canvas"),
    draw() {
      const { ctx, w, h } = sized(this.canvas, timelineHeight);
      const bottom = h - 4;
      stats.timelineDrawn = 0;
      lanes.forEach((lane, l) => {
        if (l % 2 === 0) {
          ctx.fillStyle = "#f7f8fa";
          ctx.fillRect(ML, lanesTop + l * LANE, w - ML - MR, LANE);
        }
      });
      // Faults shade the lanes of the nodes they hit.
      clipPlot(ctx, w, lanesTop, bottom);
      stats.faultBands = 0;
      for (const f of D.faults) {
        const x0 = X(f.s, w);
        const x1 = X(faultEnd(f), w);
        if (x1 < ML || x0 > w - MR) continue;
        for (const node of f.targets) {
          for (const l of lanesOfNode.get(node) || []) {
            ctx.globalAlpha = faultFailed(f) ? 0.08 : 0.2;
            ctx.fillStyle = faultColor(f.kind);
            ctx.fillRect(x0, lanesTop + l * LANE, Math.max(x1 - x0, 1), LANE);
            stats.faultBands++;
          }
        }
      }
      ctx.restore();
      drawTimeAxis(ctx, w, AXIS / 2, AXIS, bottom);
      // Fault rows: one per node that any fault targeted, the lock service and store included.
      clipPlot(ctx, w, AXIS, lanesTop);
      faultNodes.forEach((node, r) => {
        const tracks = tracksOfNode.get(node);
        const high = (FAULT_ROW - 4) / tracks;
        faultsOfNode.get(node).forEach((f, n) => {
          const y = AXIS + r * FAULT_ROW + 2 + trackOf.get(node + "\u0000" + n) * high;
          const x0 = X(f.s, w);
          const x1 = X(faultEnd(f), w);
          if (x1 < ML || x0 > w - MR) return;
          const width = Math.max(x1 - x0, 2);
          ctx.fillStyle = faultColor(f.kind);
          ctx.globalAlpha = faultFailed(f) ? 0.3 : 0.85;
          ctx.fillRect(x0, y, width, high - (tracks > 1 ? 1 : 0));
          ctx.globalAlpha = 1;
          if (faultFailed(f)) {
            ctx.strokeStyle = STALE;
            ctx.setLineDash([3, 2]);
            ctx.strokeRect(x0 + 0.5, y + 0.5, width - 1, high - 1);
            ctx.setLineDash([]);
          }
          if (tracks === 1 && width > f.kind.length * 6 + 8) {
            ctx.fillStyle = "#fff";
            ctx.textBaseline = "middle";
            ctx.textAlign = "left";
            ctx.fillText(f.kind, Math.max(x0, ML) + 4, y + high / 2);
          }
        });
      });
      ctx.restore();
      // Operations: per lane, only those in view; many in one pixel column draw once.
      clipPlot(ctx, w, lanesTop, bottom);
      const marked = [];
      const inset = LANE >= 13 ? 3 : 1;
      for (let l = 0; l < lanes.length; l++) {
        const y = lanesTop + l * LANE + inset;
        const height = LANE - 2 * inset;
        let lastPx = -1;
        let lastOutcome = -1;
        for (const i of visibleRows(l, view.t0, view.t1)) {
          const x0 = X(C.s[i], w);
          const x1 = X(ends[i], w);
          const width = x1 - x0;
          if (loud(i) || i === selected) marked.push([i, y, height]);
          if (width < 1 && Math.floor(x0) === lastPx && look[i] === lastOutcome) continue;
          lastPx = Math.floor(x0);
          lastOutcome = look[i];
          ctx.fillStyle = LOOK_COLOR[look[i]];
          ctx.globalAlpha = C.o[i] === 3 ? 0.55 : 1;
          ctx.fillRect(x0, y, Math.max(width - (width > 3 ? 1 : 0), 1), height);
          ctx.globalAlpha = 1;
          stats.timelineDrawn++;
          if (LANE >= 13 && width > 24) {
            const label = opLabel(i, width);
            if (label) {
              ctx.fillStyle = "#10261a";
              ctx.textBaseline = "middle";
              ctx.textAlign = "left";
              ctx.fillText(label, Math.max(x0, ML) + 3, y + height / 2);
            }
          }
        }
      }
      // Hatch the faults over the bars too, so an operation caught in a fault shows it.
      for (const f of D.faults) {
        const x0 = X(f.s, w);
        const x1 = X(faultEnd(f), w);
        if (x1 < ML || x0 > w - MR || faultFailed(f)) continue;
        ctx.fillStyle = hatch(ctx, f.kind);
        for (const node of f.targets) {
          for (const l of lanesOfNode.get(node) || []) {
            ctx.fillRect(x0, lanesTop + l * LANE + inset, Math.max(x1 - x0, 1), LANE - 2 * inset);
          }
        }
      }
      stats.staleMarked = 0;
      for (const [i, y, height] of marked) {
        const x0 = X(C.s[i], w);
        const x1 = Math.max(X(ends[i], w), x0 + 2);
        const kind = i === selected ? "selected" : mark.get(i);
        ctx.strokeStyle = kind === "selected" ? SELECTED : markColor(kind);
        ctx.lineWidth = kind === "selected" ? 3 : 2;
        ctx.strokeRect(x0 - 1, y - 1, x1 - x0 + 2, height + 2);
        if (loud(i)) {
          // A marker above the bar keeps the anomaly visible when the bar is sub-pixel.
          ctx.fillStyle = markColor(mark.get(i) || "involved");
          const cx = (x0 + x1) / 2;
          ctx.beginPath();
          ctx.moveTo(cx - 5, y - 4);
          ctx.lineTo(cx + 5, y - 4);
          ctx.lineTo(cx, y + 2);
          ctx.fill();
          if (mark.get(i) === "stale") stats.staleMarked++;
        }
        ctx.lineWidth = 1;
      }
      ctx.restore();
      drawSelectionGuides(ctx, w, AXIS, bottom);
      // Labels last, over everything, in the left margin.
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, ML - 1, h);
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      faultNodes.forEach((node, r) => {
        ctx.fillStyle = "#8a6d3b";
        ctx.fillText("⚡ " + node, ML - 8, AXIS + r * FAULT_ROW + FAULT_ROW / 2);
      });
      if (LANE >= 7) {
        ctx.fillStyle = "#384152";
        lanes.forEach((lane, l) => {
          if (LANE >= 13 || l % 2 === 0) ctx.fillText(lane.label, ML - 8, lanesTop + l * LANE + LANE / 2);
        });
      }
      if (!N) emptyNote(ctx, w, h, "no operations in the history");
    },
    hit(x, y, w) {
      if (x < ML || x > w - MR) return null;
      const t = T(x, w);
      const tolerance = (4 / (w - ML - MR)) * (view.t1 - view.t0);
      if (y >= AXIS && y < lanesTop) {
        const node = faultNodes[Math.floor((y - AXIS) / FAULT_ROW)];
        const f = node && faultsOfNode.get(node).find((g) =>
          g.s - tolerance <= t && t <= faultEnd(g) + tolerance);
        return f ? { fault: f } : null;
      }
      const l = Math.floor((y - lanesTop) / LANE);
      if (l < 0 || l >= lanes.length) return null;
      let best = null;
      let bestDistance = Infinity;
      for (const i of visibleRows(l, t - tolerance, t + tolerance)) {
        const distance = t < C.s[i] ? C.s[i] - t : t > ends[i] ? t - ends[i] : 0;
        if (distance < bestDistance) { best = i; bestDistance = distance; }
      }
      if (best != null) return { row: best };
      const node = lanes[l].node;
      const f = (faultsOfNode.get(node) || []).find((g) => g.s <= t && t <= faultEnd(g));
      return f ? { fault: f } : null;
    },
  };

  // ---- overview strip: the whole run, the window in view, where the anomalies are -----------
  const overview = {
    canvas: $("#overview-canvas"),
    draw() {
      const { ctx, w, h } = sized(this.canvas, 44);
      const whole = (t) => ML + (t / END) * (w - ML - MR);
      const tp = D.throughput;
      const totals = tp.ok.map((v, k) => v + tp.fail[k] + tp.info[k]);
      const columns = Math.max(1, Math.floor(w - ML - MR));
      const perColumn = new Float64Array(columns);
      totals.forEach((v, k) => {
        const c = Math.min(columns - 1, Math.floor(whole(k * tp.bin) - ML));
        if (c >= 0) perColumn[c] += v;
      });
      const peak = Math.max(1, ...perColumn);
      ctx.fillStyle = "#c9d3e6";
      for (let c = 0; c < columns; c++) {
        const v = (perColumn[c] / peak) * (h - 16);
        if (v > 0) ctx.fillRect(ML + c, h - 8 - v, 1, v);
      }
      for (const f of D.faults) {
        ctx.fillStyle = faultColor(f.kind);
        ctx.fillRect(whole(f.s), h - 7, Math.max(whole(faultEnd(f)) - whole(f.s), 2), 5);
      }
      ctx.fillStyle = STALE;
      for (const [i, kind] of mark) {
        if (kind === "expected") continue;
        ctx.fillRect(whole(C.s[i]) - 1, 2, 2, 8);
      }
      const v0 = whole(Math.max(view.t0, 0));
      const v1 = whole(Math.min(view.t1, END));
      ctx.fillStyle = "rgba(47, 91, 211, .12)";
      ctx.fillRect(v0, 1, Math.max(v1 - v0, 2), h - 2);
      ctx.strokeStyle = "#2f5bd3";
      ctx.strokeRect(v0 + 0.5, 1.5, Math.max(v1 - v0, 2) - 1, h - 3);
      ctx.fillStyle = "#6b7280";
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText("whole run", ML - 8, h / 2);
    },
  };
  (function overviewInput() {
    const canvas = overview.canvas;
    let brush = null;
    const timeAt = (ev) => {
      const box = canvas.getBoundingClientRect();
      const t = ((ev.clientX - box.left - ML) / (box.width - ML - MR)) * END;
      return Math.min(Math.max(t, 0), END);
    };
    canvas.addEventListener("mousedown", (ev) => {
      const t = timeAt(ev);
      const inside = t >= view.t0 && t <= view.t1 && view.t1 - view.t0 < END;
      brush = { start: t, moved: false, move: inside, t0: view.t0, t1: view.t1 };
      ev.preventDefault();
    });
    window.addEventListener("mousemove", (ev) => {
      if (!brush) return;
      const t = timeAt(ev);
      if (Math.abs(t - brush.start) > END / 400) brush.moved = true;
      if (!brush.moved) return;
      if (brush.move) setView(brush.t0 + t - brush.start, brush.t1 + t - brush.start);
      else setView(Math.min(brush.start, t), Math.max(brush.start, t));
    });
    window.addEventListener("mouseup", () => {
      if (!brush) return;
      if (!brush.moved) {
        const span = view.t1 - view.t0;
        setView(brush.start - span / 2, brush.start + span / 2);
      }
      brush = null;
    });
    canvas.addEventListener("dblclick", resetView);
    plots.push(overview);
  })();

  // ---- accepted epochs per sink and lock ----------------------------------------------------
  const acceptedAt = (i) => (C.a[i] === 1 ? ends[i] : C.s[i]);
  function epochGroups() {
    const groups = new Map();
    const grants = new Map();
    for (let i = 0; i < N; i++) {
      const f = fName(i);
      if (f === "acquire" && C.o[i] === 0 && C.ep[i] != null) {
        if (!grants.has(C.lk[i])) grants.set(C.lk[i], []);
        grants.get(C.lk[i]).push(i);
      }
      if (f !== "write" || C.sk[i] == null || C.ep[i] == null) continue;
      const key = C.sk[i] + "|" + C.lk[i];
      if (!groups.has(key)) groups.set(key, { sink: C.sk[i], lock: C.lk[i], acc: [], ref: [] });
      const g = groups.get(key);
      if (C.a[i] > 0) g.acc.push(i);
      else if (C.o[i] === 1) g.ref.push(i);
    }
    const out = Array.from(groups.values());
    for (const g of out) {
      g.acc.sort((a, b) => acceptedAt(a) - acceptedAt(b));
      g.grants = (grants.get(g.lock) || []).slice().sort((a, b) => ends[a] - ends[b]);
      let lo = Infinity;
      let hi = -Infinity;
      for (const i of g.acc.concat(g.ref, g.grants)) {
        lo = Math.min(lo, C.ep[i]);
        hi = Math.max(hi, C.ep[i]);
      }
      g.lo = lo;
      g.hi = hi;
      let best = -Infinity;
      g.highest = g.acc.map((i) => (best = Math.max(best, C.ep[i])));
    }
    out.sort((a, b) => (D.ops.sinks[a.sink] + a.lock).localeCompare(D.ops.sinks[b.sink] + b.lock));
    return out;
  }
  // "stale: w2-15 (epoch 7)" beside the ring, on a white patch, in the first spot near it that
  // no earlier label took (right or left, above or below, then further out); a label with no
  // free spot is left out and counted, so many stale writes never pile into an unreadable heap.
  function staleLabel(ctx, w, i, x, y, placed, bottom) {
    const text = "stale: " + (C.id[i] || "write") + " (epoch " + C.ep[i] + ")";
    ctx.font = "bold " + FONT;
    const width = ctx.measureText(text).width;
    const spots = [];
    for (let step = 0; step < 6; step++) {
      for (const dy of [-20 - 16 * step, 6 + 16 * step]) {
        for (const left of [x + 12, x - 12 - width]) spots.push([left, y + dy]);
      }
    }
    const free = spots.find(([left, top]) => left >= ML && left + width <= w - MR && top >= 2 &&
      top + 15 <= bottom && placed.every((r) => left + width + 3 < r[0] || left - 3 > r[2] ||
        top + 15 < r[1] || top > r[3]));
    if (!free) {
      ctx.font = FONT;
      return false;
    }
    const [left, top] = free;
    placed.push([left - 3, top - 1, left + width + 3, top + 14]);
    ctx.fillStyle = "rgba(255, 255, 255, .85)";
    ctx.fillRect(left - 3, top - 1, width + 6, 15);
    ctx.fillStyle = STALE;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(text, left, top);
    ctx.font = FONT;
    return true;
  }
  const hiddenByPlot = new Map();
  function hiddenLabels(ctx, w, top, count) {
    hiddenByPlot.set(ctx.canvas, count);
    stats.staleLabelsHidden = Array.from(hiddenByPlot.values()).reduce((a, b) => a + b, 0);
    if (!count) return;
    const text = "+" + count + " more stale write" + (count === 1 ? "" : "s") + " (zoom in)";
    ctx.font = "bold " + FONT;
    ctx.fillStyle = STALE;
    ctx.textAlign = "right";
    ctx.textBaseline = "top";
    ctx.fillText(text, w - MR - 4, top + 2);
    ctx.font = FONT;
  }
  function epochPlot(g, holder) {
    const sink = D.ops.sinks[g.sink];
    const info = D.sinks[sink];
    const wrap = document.createElement("div");
    wrap.className = "plot epoch-plot";
    wrap.dataset.sink = sink;
    let tags = "";
    if (info) {
      tags += info.fenced ? '<span class="tag">checks epochs</span>' :
        '<span class="tag">unfenced · mitigation ' + esc(info.mitigation) + "</span>";
      tags += '<span class="pill ' + esc(info.verdict) + '">' + esc(info.verdict) + "</span>";
      if (info.detail) tags += ' <span class="plot-detail">' + esc(info.detail) + "</span>";
    }
    const lock = g.lock == null ? "" : " · lock <b>" + esc(D.ops.locks[g.lock]) + "</b>";
    wrap.innerHTML = '<div class="plot-title">sink <b>' + esc(sink) + "</b>" + lock + " " + tags +
      '</div><canvas></canvas>';
    $("#epoch-plots").appendChild(wrap);
    const H = 190;
    const top = 8;
    const bottom = H - 24;
    const accTimes = g.acc.map(acceptedAt);
    const refSorted = g.ref.slice().sort((a, b) => ends[a] - ends[b]);
    const refTimes = refSorted.map((i) => ends[i]);
    const grantTimes = g.grants.map((i) => ends[i]);
    const range = { lo: g.lo, hi: g.hi };
    const Y = (e) => bottom - ((e - range.lo + 0.5) / (range.hi - range.lo + 1)) * (bottom - top);
    // The epoch axis fits what is in view, so a stale write stands out when zoomed in too.
    function fitRange() {
      let lo = Infinity;
      let hi = -Infinity;
      const take = (e) => { lo = Math.min(lo, e); hi = Math.max(hi, e); };
      const scan = (times, epochOf) => {
        const from = lowerBound(times, (t) => t, view.t0);
        if (from > 0) take(epochOf(from - 1));
        for (let k = from; k < times.length && times[k] <= view.t1; k++) take(epochOf(k));
      };
      scan(accTimes, (k) => C.ep[g.acc[k]]);
      scan(accTimes, (k) => g.highest[k]);
      scan(refTimes, (k) => C.ep[refSorted[k]]);
      scan(grantTimes, (k) => C.ep[g.grants[k]]);
      if (lo > hi) { lo = g.lo; hi = g.hi; }
      const pad = Math.max(1, Math.ceil((hi - lo) * 0.08));
      const spare = Math.max(0, 4 - (hi - lo));
      range.lo = Math.max(g.lo - 1, lo - pad - Math.ceil(spare / 2));
      range.hi = Math.max(hi + pad, range.lo + 4);
    }
    function steps(ctx, w, rows, timeOf, valueOf, colour, dashed, width) {
      if (!rows.length) return;
      ctx.strokeStyle = colour;
      ctx.lineWidth = width;
      ctx.setLineDash(dashed ? [5, 4] : []);
      ctx.beginPath();
      let y = Y(valueOf(0));
      ctx.moveTo(X(timeOf(0), w), y);
      for (let k = 1; k < rows.length; k++) {
        const x = X(timeOf(k), w);
        ctx.lineTo(x, y);
        y = Y(valueOf(k));
        ctx.lineTo(x, y);
      }
      ctx.lineTo(X(END, w), y);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.lineWidth = 1;
    }
    const plot = {
      canvas: $("canvas", wrap),
      draw() {
        const { ctx, w, h } = sized(this.canvas, H);
        fitRange();
        drawFaultBands(ctx, w, top, bottom, 0.13);
        const estep = Math.max(1, niceStep((range.hi - range.lo + 1) / 5));
        ctx.strokeStyle = "#eceef3";
        ctx.fillStyle = "#6b7280";
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        for (let e = Math.ceil(range.lo / estep) * estep; e <= range.hi; e += estep) {
          const y = Math.round(Y(e)) + 0.5;
          ctx.beginPath();
          ctx.moveTo(ML, y);
          ctx.lineTo(w - MR, y);
          ctx.stroke();
          ctx.fillText("epoch " + e, ML - 8, y);
        }
        drawTimeAxis(ctx, w, h - 10, bottom, bottom);
        clipPlot(ctx, w, 0, bottom + 4);
        steps(ctx, w, g.grants, (k) => ends[g.grants[k]], (k) => C.ep[g.grants[k]], "#a3acbb",
          true, 1.5);
        steps(ctx, w, g.acc, (k) => accTimes[k], (k) => g.highest[k], "#1f2937", false, 1.5);
        const from = lowerBound(refTimes, (t) => t, view.t0);
        ctx.strokeStyle = "#8b93a1";
        for (let k = from; k < refTimes.length && refTimes[k] <= view.t1; k++) {
          const x = X(refTimes[k], w);
          const y = Y(C.ep[refSorted[k]]);
          ctx.beginPath();
          ctx.moveTo(x - 3, y - 3);
          ctx.lineTo(x + 3, y + 3);
          ctx.moveTo(x + 3, y - 3);
          ctx.lineTo(x - 3, y + 3);
          ctx.stroke();
        }
        const start = lowerBound(accTimes, (t) => t, view.t0);
        const rings = [];
        let lastX = -1;
        let lastY = -1;
        for (let k = start; k < accTimes.length && accTimes[k] <= view.t1; k++) {
          const i = g.acc[k];
          const x = X(accTimes[k], w);
          const y = Y(C.ep[i]);
          if (loud(i) || i === selected) rings.push([i, x, y]);
          if (Math.round(x) === lastX && Math.round(y) === lastY) continue;
          lastX = Math.round(x);
          lastY = Math.round(y);
          ctx.fillStyle = holder(i);
          ctx.strokeStyle = holder(i);
          ctx.beginPath();
          ctx.arc(x, y, 3.5, 0, 2 * Math.PI);
          if (C.a[i] === 2) ctx.stroke(); else ctx.fill();
          stats.epochPoints++;
        }
        const placed = [];
        let hidden = 0;
        for (const [i, x, y] of rings) {
          const kind = loud(i) ? mark.get(i) : null;
          const radius = kind === "stale" ? 8 : 6.5;
          if (kind) {
            ctx.strokeStyle = markColor(kind);
            ctx.lineWidth = kind === "stale" ? 2.5 : 2;
            ctx.beginPath();
            ctx.arc(x, y, radius, 0, 2 * Math.PI);
            ctx.stroke();
          }
          if (i === selected) {
            ctx.strokeStyle = SELECTED;
            ctx.lineWidth = 1.5;
            ctx.beginPath();
            ctx.arc(x, y, radius + 3.5, 0, 2 * Math.PI);
            ctx.stroke();
          }
          ctx.lineWidth = 1;
        }
        // Labels after every ring, so no ring covers one; the corner note's place is kept.
        placed.push([w - MR - 230, top, w - MR, top + 18]);
        for (const [i, x, y] of rings) {
          const stale = loud(i) && mark.get(i) === "stale";
          if (stale && !staleLabel(ctx, w, i, x, y, placed, bottom)) hidden++;
        }
        hiddenLabels(ctx, w, top, hidden);
        ctx.restore();
        drawSelectionGuides(ctx, w, top, bottom);
      },
      hit(x, y, w) {
        if (x < ML || x > w - MR) return null;
        let best = null;
        let bestDistance = 49;
        const t0 = T(x - 7, w);
        const t1 = T(x + 7, w);
        const check = (i, t) => {
          const dx = X(t, w) - x;
          const dy = Y(C.ep[i]) - y;
          const distance = dx * dx + dy * dy;
          if (distance < bestDistance) { best = i; bestDistance = distance; }
        };
        for (let k = lowerBound(accTimes, (t) => t, t0); k < accTimes.length && accTimes[k] <= t1; k++) {
          check(g.acc[k], accTimes[k]);
        }
        for (let k = lowerBound(refTimes, (t) => t, t0); k < refTimes.length && refTimes[k] <= t1; k++) {
          check(refSorted[k], refTimes[k]);
        }
        if (best != null) return { row: best };
        const f = y >= top && y <= bottom ? faultAt(T(x, w), 0) : null;
        return f ? { fault: f } : null;
      },
    };
    interact(plot);
    stats.epochPanels++;
  }
  function buildEpochPlots() {
    const groups = epochGroups();
    const holders = new Map();
    const holder = (i) => {
      const n = C.n[i] == null ? -1 : C.n[i];
      if (!holders.has(n)) holders.set(n, HOLDER_COLOR[holders.size % HOLDER_COLOR.length]);
      return holders.get(n);
    };
    D.ops.nodes.forEach((_, n) => holders.set(n, HOLDER_COLOR[n % HOLDER_COLOR.length]));
    if (!groups.length) {
      $("#epoch-plots").innerHTML = '<p class="none">No writes with an epoch in this run.</p>';
      return;
    }
    const limit = 24;
    groups.slice(0, limit).forEach((g) => epochPlot(g, holder));
    const legend = document.createElement("p");
    legend.className = "legend holders";
    legend.innerHTML = D.ops.nodes.map((node, n) => '<span><i style="background:' +
      HOLDER_COLOR[n % HOLDER_COLOR.length] + '"></i>' + esc(node) + "</span>").join("") +
      (groups.length > limit ? '<span class="note">showing ' + limit + " of " + groups.length +
        " sink/lock pairs</span>" : "");
    $("#epoch-plots").before(legend);
  }

  // ---- latency ------------------------------------------------------------------------------
  const latency = {
    canvas: $("#latency-canvas"),
    lo: 1,
    hi: 10,
    init() {
      let lo = Infinity;
      let hi = 0;
      for (let i = 0; i < N; i++) {
        if (C.e[i] == null) continue;
        const d = Math.max(C.e[i] - C.s[i], 1);
        lo = Math.min(lo, d);
        hi = Math.max(hi, d);
      }
      if (hi > 0) {
        this.lo = Math.pow(10, Math.floor(Math.log10(lo)));
        this.hi = Math.pow(10, Math.ceil(Math.log10(hi * 1.01)));
      }
    },
    Y(d, top, bottom) {
      const v = (Math.log10(Math.max(d, this.lo)) - Math.log10(this.lo)) /
        (Math.log10(this.hi) - Math.log10(this.lo));
      return bottom - v * (bottom - top);
    },
    draw() {
      const { ctx, w, h } = sized(this.canvas, 210);
      const top = 8;
      const bottom = h - 24;
      drawFaultBands(ctx, w, top, bottom, 0.13);
      ctx.strokeStyle = "#eceef3";
      ctx.fillStyle = "#6b7280";
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      for (let d = this.lo; d <= this.hi; d *= 10) {
        const y = Math.round(this.Y(d, top, bottom)) + 0.5;
        ctx.beginPath();
        ctx.moveTo(ML, y);
        ctx.lineTo(w - MR, y);
        ctx.stroke();
        ctx.fillText(fmtDur(d).replace(/\.0+ /, " "), ML - 8, y);
      }
      drawTimeAxis(ctx, w, h - 10, bottom, bottom);
      clipPlot(ctx, w, 0, bottom);
      const seen = new Set();
      stats.latencyPoints = 0;
      const from = lowerBound(C.s, (t) => t, view.t0 - maxDuration);
      for (let i = from; i < N && C.s[i] <= view.t1; i++) {
        if (C.e[i] == null || C.e[i] < view.t0 || C.e[i] > view.t1) continue;
        const x = Math.round(X(C.e[i], w));
        const y = Math.round(this.Y(C.e[i] - C.s[i], top, bottom));
        const key = (x * 4096 + y) * 8 + look[i];
        if (seen.has(key)) continue;
        seen.add(key);
        ctx.fillStyle = LOOK_COLOR[look[i]];
        ctx.fillRect(x - 1, y - 1, 3, 3);
        stats.latencyPoints++;
      }
      for (const [i] of mark) {
        if (C.e[i] == null || !loud(i)) continue;
        ctx.strokeStyle = markColor(mark.get(i));
        ctx.beginPath();
        ctx.arc(X(C.e[i], w), this.Y(C.e[i] - C.s[i], top, bottom), 6, 0, 2 * Math.PI);
        ctx.stroke();
      }
      ctx.restore();
      drawSelectionGuides(ctx, w, top, bottom);
      if (!N) emptyNote(ctx, w, h, "no operations");
    },
    hit(x, y, w) {
      if (x < ML || x > w - MR) return null;
      const top = 8;
      const bottom = this.canvas.clientHeight - 24;
      let best = null;
      let bestDistance = 36;
      const t0 = T(x - 6, w);
      const t1 = T(x + 6, w);
      for (let i = lowerBound(C.s, (t) => t, t0 - maxDuration); i < N && C.s[i] <= t1; i++) {
        if (C.e[i] == null || C.e[i] < t0 || C.e[i] > t1) continue;
        const dx = X(C.e[i], w) - x;
        const dy = this.Y(C.e[i] - C.s[i], top, bottom) - y;
        if (dx * dx + dy * dy < bestDistance) { best = i; bestDistance = dx * dx + dy * dy; }
      }
      if (best != null) return { row: best };
      const f = faultAt(T(x, w), 0);
      return f ? { fault: f } : null;
    },
  };

  // ---- throughput ---------------------------------------------------------------------------
  const throughput = {
    canvas: $("#throughput-canvas"),
    bars: [],
    draw() {
      const { ctx, w, h } = sized(this.canvas, 170);
      const top = 8;
      const bottom = h - 24;
      const tp = D.throughput;
      const binPx = (tp.bin / (view.t1 - view.t0)) * (w - ML - MR);
      const group = Math.max(1, Math.ceil(4 / binPx));
      const first = Math.max(0, Math.floor(view.t0 / tp.bin / group) * group);
      const last = Math.min(tp.ok.length, Math.ceil(view.t1 / tp.bin) + 1);
      this.bars = [];
      let peak = 1;
      for (let k = first; k < last; k += group) {
        const sums = [0, 0, 0];
        for (let j = k; j < Math.min(k + group, tp.ok.length); j++) {
          sums[0] += tp.ok[j];
          sums[1] += tp.fail[j];
          sums[2] += tp.info[j];
        }
        const seconds = (group * tp.bin) / 1e6;
        const rates = sums.map((v) => v / seconds);
        peak = Math.max(peak, rates[0] + rates[1] + rates[2]);
        this.bars.push({ t0: k * tp.bin, t1: (k + group) * tp.bin, sums, rates });
      }
      drawFaultBands(ctx, w, top, bottom, 0.13);
      const step = niceStep(peak / 4);
      ctx.strokeStyle = "#eceef3";
      ctx.fillStyle = "#6b7280";
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      const Y = (v) => bottom - (v / (Math.ceil(peak / step) * step)) * (bottom - top);
      for (let v = 0; v <= peak + step; v += step) {
        const y = Math.round(Y(v)) + 0.5;
        if (y < top - 1) break;
        ctx.beginPath();
        ctx.moveTo(ML, y);
        ctx.lineTo(w - MR, y);
        ctx.stroke();
        ctx.fillText(v.toFixed(v < 10 && step < 1 ? 1 : 0) + " /s", ML - 8, y);
      }
      this.Y = Y;
      drawTimeAxis(ctx, w, h - 10, bottom, bottom);
      clipPlot(ctx, w, 0, bottom);
      stats.throughputBars = 0;
      for (const bar of this.bars) {
        const x0 = X(bar.t0, w);
        const width = Math.max(X(bar.t1, w) - x0 - (binPx * group > 3 ? 1 : 0), 1);
        let base = 0;
        for (let o = 0; o < 3; o++) {
          if (!bar.rates[o]) continue;
          ctx.fillStyle = OUTCOME_COLOR[o];
          const y0 = Y(base);
          const y1 = Y(base + bar.rates[o]);
          ctx.fillRect(x0, y1, width, y0 - y1);
          base += bar.rates[o];
        }
        if (base) stats.throughputBars++;
      }
      ctx.restore();
      drawSelectionGuides(ctx, w, top, bottom);
    },
    hit(x, y, w) {
      if (x < ML || x > w - MR) return null;
      const t = T(x, w);
      const bar = this.bars.find((b) => b.t0 <= t && t < b.t1);
      if (!bar || !(bar.sums[0] + bar.sums[1] + bar.sums[2])) {
        const f = faultAt(t, 0);
        return f ? { fault: f } : null;
      }
      return { html: rowsHtml([
        ["window", fmtS(Math.max(bar.t0, 0)) + " – " + fmtS(bar.t1)],
        ["completed", bar.sums[0] + " ok, " + bar.sums[1] + " fail, " + bar.sums[2] + " info"],
        ["rate", (bar.rates[0] + bar.rates[1] + bar.rates[2]).toFixed(1) + " ops/s"],
      ]) };
    },
  };

  // ---- legend, buttons, keys, links -----------------------------------------------------------
  function buildLegend() {
    const kinds = Array.from(new Set(D.faults.map((f) => f.kind)));
    const present = new Set(look);
    const parts = LOOK_LABEL.map((label, o) => (o >= 3 && !present.has(o)) ? "" :
      '<span><i style="background:' + LOOK_COLOR[o] + '"></i>' + label + "</span>");
    for (const kind of kinds) {
      parts.push('<span><i style="background:' + faultColor(kind) + ';opacity:.6"></i>' +
        esc(kind) + "</span>");
    }
    if (D.anomalies.some((a) => !a.expected && a.stale.length)) {
      parts.push('<span><i class="ring" style="border-color:' + STALE + '"></i>stale write</span>');
    }
    if (D.anomalies.some((a) => !a.expected)) {
      parts.push('<span><i class="ring" style="border-color:' + INVOLVED +
        '"></i>in an anomaly</span>');
    }
    $("#legend").innerHTML = parts.join("");
  }
  function wire() {
    $$("#timeline-tools button[data-zoom]").forEach((button) => {
      button.addEventListener("click", () => {
        const how = button.dataset.zoom;
        if (how === "in") zoom(0.5);
        else if (how === "out") zoom(2);
        else resetView();
      });
    });
    $$("tr.op-link").forEach((tr) => {
      const go = () => select(Number(tr.dataset.row), true);
      tr.addEventListener("click", go);
      tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go(); });
    });
    $$("button.show-anomaly").forEach((button) => {
      button.addEventListener("click", () => focusAnomaly(Number(button.dataset.anomaly)));
    });
    $$(".fault-link").forEach((el) => {
      el.addEventListener("click", () => {
        const t0 = Number(el.dataset.t0);
        const t1 = Number(el.dataset.t1);
        const pad = Math.max((t1 - t0) * 0.2, END * 0.01);
        setView(t0 - pad, t1 + pad);
        $("#timeline-canvas").scrollIntoView({ block: "center" });
      });
    });
    const copy = $("#copy-command");
    if (copy) {
      copy.addEventListener("click", () => {
        const text = $("#rerun").textContent;
        const done = () => { copy.textContent = "copied"; setTimeout(() => { copy.textContent = "copy"; }, 1500); };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done, () => selectText($("#rerun")));
        } else {
          selectText($("#rerun"));
        }
      });
    }
    document.addEventListener("keydown", (ev) => {
      if (ev.target.closest && ev.target.closest("input, textarea, select")) return;
      if (ev.key === "+" || ev.key === "=") zoom(0.5);
      else if (ev.key === "-") zoom(2);
      else if (ev.key === "0") resetView();
      else if (ev.key === "Escape") select(-1);
      else if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
        if (ev.target !== document.body) return;
        const dt = (ev.key === "ArrowLeft" ? -0.2 : 0.2) * (view.t1 - view.t0);
        setView(view.t0 + dt, view.t1 + dt);
        ev.preventDefault();
      }
    });
    let width = window.innerWidth;
    window.addEventListener("resize", () => {
      if (window.innerWidth !== width) { width = window.innerWidth; redraw(); }
    });
  }
  function selectText(el) {
    const range = document.createRange();
    range.selectNodeContents(el);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // Where an operation's bar is on screen (client coordinates), for tests and tools.
  function locate(row) {
    const box = timeline.canvas.getBoundingClientRect();
    const x = (X(C.s[row], box.width) + X(ends[row], box.width)) / 2;
    return { x: box.left + x, y: box.top + lanesTop + C.lane[row] * LANE + LANE / 2,
      visible: x >= ML && x <= box.width - MR };
  }

  latency.init();
  interact(timeline);
  buildEpochPlots();
  interact(latency);
  interact(throughput);
  buildLegend();
  wire();
  resetView();
  drawAll();
  window.fencecheck = { data: D, view, stats, select, focusAnomaly, setView, resetView, locate,
    selected: () => selected, drawAll };
  document.body.dataset.ready = "1";
})();
