// Anamnesis memory map: notes as dots grouped by project, links and shared tags as lines.
// Plain canvas, a small force layout (grid-bucketed repulsion, springs, pull to the project's centre),
// zoom with the wheel or the buttons, drag to pan, click a dot to open its note. Labels are placed
// most important first and one that would overlap a placed label is left out. With a note
// (canvas data-note) it draws that note's neighbourhood: its links and backlinks on an inner ring,
// notes sharing its tags on an outer one.
"use strict";

(() => {
  const PALETTE = ["#5b5bd6", "#e0663f", "#1f9d6b", "#c2378f", "#d9a21b", "#2b8fd6",
    "#8c5bd6", "#5f8f1f", "#d04e5e", "#199aa5", "#a0702b", "#6b7280"];
  const SPACING = 16;       // world units between neighbouring dots
  const ITERATIONS = 140;   // force steps (the initial sunflower layout is already even)
  const LINK = 0;
  const GLOBAL = "(global)";
  const LABEL_ZOOM = 1.4;   // node labels from this zoom on (always around one note)
  const ROLE_NAMES = ["this note", "links to", "linked from", "links both ways", "shares tags"];

  const canvas = document.getElementById("map");
  if (!canvas) return;
  const ctx = canvas.getContext("2d");
  const tip = document.getElementById("map-tip");
  const stats = document.getElementById("map-stats");
  const legend = document.getElementById("map-legend");
  const findBox = document.getElementById("map-find");
  const results = document.getElementById("map-results");
  const legendToggle = document.getElementById("map-legend-toggle");
  const around = canvas.dataset.note || "";

  const view = { k: 1, tx: 0, ty: 0, w: 0, h: 0, dpr: 1 };
  let nodes = [];      // {path, title, group, type, conflicted, x, y, r, deg}
  let edges = [];      // [a, b, kind]
  let groups = [];     // {name, x, y, R, n}
  let hover = -1;
  let matches = null;  // Set of node indexes matching the filter, or null
  let colors = {};
  let focus = -1;      // the centre of a neighbourhood, or the note found with the search box
  let byPriority = []; // node indexes, most important label first
  let placedLabels = []; // the labels of the last frame: {x, y, w, h, text}

  // Global notes are grey; projects take the other colours in turn.
  function colorIndex(g) {
    if (groups[g].name === GLOBAL) return PALETTE.length - 1;
    const before = groups.slice(0, g).filter((group) => group.name !== GLOBAL).length;
    return before % (PALETTE.length - 1);
  }

  function cssVar(name, fallback) {
    const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return value || fallback;
  }

  function readColors() {
    colors = {
      text: cssVar("--text", "#1c1f24"),
      muted: cssVar("--muted", "#6a717d"),
      bg: cssVar("--bg", "#f6f6f3"),
      warn: cssVar("--warn", "#b45309"),
      edge: cssVar("--muted", "#6a717d"),
    };
  }

  // ---- layout ---------------------------------------------------------------------------

  function placeGroups(counts) {
    // Largest project first, each on an outward spiral until it overlaps no placed project.
    const order = counts.map((n, i) => i).sort((a, b) => counts[b] - counts[a]);
    const placed = [];
    const result = new Array(counts.length);
    for (const g of order) {
      const R = Math.sqrt(counts[g]) * SPACING * 0.62 + SPACING * 2.5;
      let t = 0;
      let x = 0;
      let y = 0;
      for (;;) {
        x = Math.cos(t) * t * SPACING * 0.9;
        y = Math.sin(t) * t * SPACING * 0.9;
        let ok = true;
        for (const p of placed) {
          const dx = p.x - x;
          const dy = p.y - y;
          const min = p.R + R + SPACING * 2;
          if (dx * dx + dy * dy < min * min) { ok = false; break; }
        }
        if (ok) break;
        t += 0.35;
      }
      const group = { x, y, R, n: counts[g] };
      placed.push(group);
      result[g] = group;
    }
    return result;
  }

  function radialLayout() {
    // The centre in the middle, its links and backlinks on a ring, notes sharing tags outside.
    const inner = [];
    const outer = [];
    nodes.forEach((node, i) => {
      if (node.role === 0) { node.x = 0; node.y = 0; } else if (node.role === 4) outer.push(i); else inner.push(i);
    });
    const ring = (members, radius, turn) => {
      members.forEach((i, n) => {
        const angle = turn + (n / Math.max(members.length, 1)) * Math.PI * 2 - Math.PI / 2;
        nodes[i].x = Math.cos(angle) * radius;
        nodes[i].y = Math.sin(angle) * radius;
      });
    };
    const r1 = Math.max(110, (inner.length * 34) / (Math.PI * 2));
    const r2 = Math.max(r1 + 120, (outer.length * 30) / (Math.PI * 2));
    ring(inner, r1, 0);
    ring(outer, r2, Math.PI / Math.max(outer.length, 1));
    for (const g of groups) { g.lx = 0; g.ly = 0; }
  }

  function layout() {
    const counts = groups.map(() => 0);
    for (const node of nodes) counts[node.group] += 1;
    const placed = placeGroups(counts);
    groups.forEach((g, i) => Object.assign(g, placed[i]));
    // Sunflower (Vogel) start inside each project's disc: even, deterministic, no overlaps.
    const seen = groups.map(() => 0);
    const golden = Math.PI * (3 - Math.sqrt(5));
    for (const node of nodes) {
      const g = groups[node.group];
      const i = seen[node.group]++;
      const r = (g.R - SPACING) * Math.sqrt((i + 0.5) / Math.max(g.n, 1));
      node.x = g.x + r * Math.cos(i * golden);
      node.y = g.y + r * Math.sin(i * golden);
      node.vx = 0;
      node.vy = 0;
    }
    const n = nodes.length;
    const cell = SPACING * 2;
    const fx = new Float64Array(n);
    const fy = new Float64Array(n);
    for (let step = 0; step < ITERATIONS; step++) {
      const alpha = 1 - step / ITERATIONS;
      fx.fill(0);
      fy.fill(0);
      // Repulsion between dots closer than one cell, found through a grid of buckets.
      const grid = new Map();
      for (let i = 0; i < n; i++) {
        const key = Math.floor(nodes[i].x / cell) * 73856093 ^ Math.floor(nodes[i].y / cell) * 19349663;
        let bucket = grid.get(key);
        if (!bucket) { bucket = []; grid.set(key, bucket); }
        bucket.push(i);
      }
      for (let i = 0; i < n; i++) {
        const a = nodes[i];
        const cx = Math.floor(a.x / cell);
        const cy = Math.floor(a.y / cell);
        for (let ox = -1; ox <= 1; ox++) {
          for (let oy = -1; oy <= 1; oy++) {
            const bucket = grid.get((cx + ox) * 73856093 ^ (cy + oy) * 19349663);
            if (!bucket) continue;
            for (const j of bucket) {
              if (j <= i) continue;
              const b = nodes[j];
              let dx = a.x - b.x;
              let dy = a.y - b.y;
              let d2 = dx * dx + dy * dy;
              if (d2 > cell * cell) continue;
              if (d2 < 0.01) { dx = (i % 7) - 3 + 0.1; dy = (j % 5) - 2 + 0.1; d2 = dx * dx + dy * dy; }
              const d = Math.sqrt(d2);
              const push = (cell - d) / d * 0.5;
              fx[i] += dx * push; fy[i] += dy * push;
              fx[j] -= dx * push; fy[j] -= dy * push;
            }
          }
        }
      }
      // Springs along edges inside a project: links pull harder than shared tags.
      for (const [s, t, kind] of edges) {
        const a = nodes[s];
        const b = nodes[t];
        const dx = b.x - a.x;
        const dy = b.y - a.y;
        const d = Math.sqrt(dx * dx + dy * dy) || 1;
        if (a.group !== b.group) continue; // drawn, but projects keep their own place
        const strength = kind === LINK ? 0.06 : 0.015;
        const pull = (d - SPACING * 1.6) / d * strength;
        fx[s] += dx * pull; fy[s] += dy * pull;
        fx[t] -= dx * pull; fy[t] -= dy * pull;
      }
      // Each dot is held near its project's centre.
      for (let i = 0; i < n; i++) {
        const node = nodes[i];
        const g = groups[node.group];
        fx[i] += (g.x - node.x) * 0.012;
        fy[i] += (g.y - node.y) * 0.012;
        const max = SPACING * 1.5 * alpha + 0.5;
        let mx = fx[i] * alpha;
        let my = fy[i] * alpha;
        const m = Math.sqrt(mx * mx + my * my);
        if (m > max) { mx *= max / m; my *= max / m; }
        node.x += mx;
        node.y += my;
      }
    }
    // Each project's label sits above its dots.
    for (const g of groups) { g.minY = Infinity; g.sx = 0; g.c = 0; }
    for (const node of nodes) {
      const g = groups[node.group];
      g.minY = Math.min(g.minY, node.y - node.r);
      g.sx += node.x;
      g.c += 1;
    }
    for (const g of groups) { g.lx = g.c ? g.sx / g.c : g.x; g.ly = g.c ? g.minY : g.y; }
  }

  // ---- drawing --------------------------------------------------------------------------

  function resize() {
    const rect = canvas.getBoundingClientRect();
    view.dpr = window.devicePixelRatio || 1;
    view.w = rect.width;
    view.h = rect.height;
    canvas.width = Math.max(1, Math.round(rect.width * view.dpr));
    canvas.height = Math.max(1, Math.round(rect.height * view.dpr));
  }

  function fit() {
    if (!nodes.length) { view.k = 1; view.tx = view.w / 2; view.ty = view.h / 2; return; }
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const node of nodes) {
      x0 = Math.min(x0, node.x); y0 = Math.min(y0, node.y);
      x1 = Math.max(x1, node.x); y1 = Math.max(y1, node.y);
    }
    const pad = 60;
    const k = Math.min((view.w - pad * 2) / Math.max(x1 - x0, 1), (view.h - pad * 2) / Math.max(y1 - y0, 1), 2.5);
    view.k = Math.max(k, 0.02);
    view.tx = view.w / 2 - (x0 + x1) / 2 * view.k;
    view.ty = view.h / 2 - (y0 + y1) / 2 * view.k + 10;
  }

  function draw() {
    const { k, tx, ty, dpr } = view;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.setTransform(dpr * k, 0, 0, dpr * k, dpr * tx, dpr * ty);
    const faded = matches !== null;
    // Edges: shared tags faint, links stronger, lines between projects fainter still.
    const styles = [[1, true, 0.05, 0.8], [0, true, 0.13, 1], [1, false, 0.16, 0.8], [0, false, 0.6, 1.3]];
    for (const [kind, across, alpha, width] of styles) {
      ctx.beginPath();
      for (const [s, t, e] of edges) {
        if (e !== kind || (nodes[s].group !== nodes[t].group) !== across) continue;
        if (faded && !(matches.has(s) || matches.has(t))) continue;
        ctx.moveTo(nodes[s].x, nodes[s].y);
        ctx.lineTo(nodes[t].x, nodes[t].y);
      }
      ctx.strokeStyle = colors.edge;
      ctx.globalAlpha = around ? (kind === LINK ? 0.75 : 0.35) : alpha;
      ctx.lineWidth = (around ? width * 1.4 : width) / Math.sqrt(k);
      ctx.setLineDash(around && kind !== LINK ? [4 / k, 4 / k] : []);
      ctx.stroke();
    }
    ctx.setLineDash([]);
    ctx.globalAlpha = 1;
    // Dots, batched per colour (and per faded state).
    for (let pass = 0; pass < 2; pass++) {
      const dim = pass === 0;
      if (dim && !faded) continue;
      const paths = new Map();
      for (let i = 0; i < nodes.length; i++) {
        const isMatch = !faded || matches.has(i);
        if (dim === isMatch) continue;
        const node = nodes[i];
        const color = groups[node.group].color;
        let path = paths.get(color);
        if (!path) { path = new Path2D(); paths.set(color, path); }
        path.moveTo(node.x + node.r, node.y);
        path.arc(node.x, node.y, node.r, 0, Math.PI * 2);
      }
      ctx.globalAlpha = dim ? 0.18 : 1;
      for (const [color, path] of paths) { ctx.fillStyle = color; ctx.fill(path); }
    }
    ctx.globalAlpha = 1;
    // Conflicted notes get a ring.
    ctx.beginPath();
    for (const node of nodes) {
      if (!node.conflicted) continue;
      ctx.moveTo(node.x + node.r + 3, node.y);
      ctx.arc(node.x, node.y, node.r + 3, 0, Math.PI * 2);
    }
    ctx.strokeStyle = colors.warn;
    ctx.lineWidth = 2 / k;
    ctx.stroke();
    // Hovered dot.
    if (hover >= 0) {
      const node = nodes[hover];
      ctx.beginPath();
      ctx.arc(node.x, node.y, node.r + 2.5, 0, Math.PI * 2);
      ctx.strokeStyle = colors.text;
      ctx.lineWidth = 2 / k;
      ctx.stroke();
    }
    // Found or centre note.
    if (focus >= 0) {
      const node = nodes[focus];
      ctx.beginPath();
      ctx.arc(node.x, node.y, node.r + 4, 0, Math.PI * 2);
      ctx.strokeStyle = colors.text;
      ctx.lineWidth = 2.5 / k;
      ctx.stroke();
    }
    drawLabels();
  }

  // Labels in screen space so they keep their size; each is placed only where it overlaps no label
  // placed before it (a grid of buckets keeps the test cheap with thousands of candidates).
  function drawLabels() {
    const { k, tx, ty, dpr } = view;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const CELL = 80;
    const grid = new Map();
    placedLabels = [];
    const fits = (x, y, w, h) => {
      const x0 = Math.floor(x / CELL), x1 = Math.floor((x + w) / CELL);
      const y0 = Math.floor(y / CELL), y1 = Math.floor((y + h) / CELL);
      for (let cx = x0; cx <= x1; cx++) {
        for (let cy = y0; cy <= y1; cy++) {
          const bucket = grid.get(cx * 65536 + cy);
          if (!bucket) continue;
          for (const b of bucket) {
            if (x < b.x + b.w && b.x < x + w && y < b.y + b.h && b.y < y + h) return false;
          }
        }
      }
      return true;
    };
    const place = (rect) => {
      for (let cx = Math.floor(rect.x / CELL); cx <= Math.floor((rect.x + rect.w) / CELL); cx++) {
        for (let cy = Math.floor(rect.y / CELL); cy <= Math.floor((rect.y + rect.h) / CELL); cy++) {
          const key = cx * 65536 + cy;
          let bucket = grid.get(key);
          if (!bucket) { bucket = []; grid.set(key, bucket); }
          bucket.push(rect);
        }
      }
      placedLabels.push(rect);
    };
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    // Project names first (not around one note: there the colours say it, and the legend).
    if (!around) {
      ctx.font = "600 12px system-ui, sans-serif";
      for (const group of groups) {
        const x = group.lx * k + tx;
        const y = group.ly * k + ty - 14;
        if (x < -200 || x > view.w + 200 || y < -20 || y > view.h + 40) continue;
        const w = ctx.measureText(group.name).width + 8;
        const rect = { x: x - w / 2, y: y - 9, w, h: 18, text: group.name, kind: "project" };
        if (!fits(rect.x, rect.y, rect.w, rect.h)) continue;
        place(rect);
        ctx.fillStyle = colors.bg;
        ctx.globalAlpha = 0.8;
        ctx.fillRect(rect.x, rect.y, rect.w, rect.h);
        ctx.globalAlpha = 1;
        ctx.fillStyle = group.color;
        ctx.fillText(group.name, x, y);
      }
    }
    // Then notes, most important first: hovered, found, matches, then by number of lines.
    const showAll = around || k >= LABEL_ZOOM;
    const order = [];
    if (hover >= 0) order.push(hover);
    if (focus >= 0) order.push(focus);
    if (matches !== null) for (const i of matches) order.push(i);
    if (showAll) for (const i of byPriority) order.push(i);
    ctx.font = "11.5px system-ui, sans-serif";
    const done = new Set();
    let tried = 0;
    for (const i of order) {
      if (done.has(i)) continue;
      done.add(i);
      if (matches !== null && !matches.has(i) && i !== hover && i !== focus) continue;
      const node = nodes[i];
      const x = node.x * k + tx;
      const y = node.y * k + ty + node.r * k + 9;
      if (x < -40 || y < -10 || x > view.w + 40 || y > view.h + 10) continue;
      if (++tried > 3000) break;
      const text = short(node.title);
      const w = ctx.measureText(text).width + 6;
      const rect = { x: x - w / 2, y: y - 8, w, h: 16, text, kind: "note" };
      if (!fits(rect.x, rect.y, rect.w, rect.h)) continue;
      place(rect);
      ctx.fillStyle = colors.bg;
      ctx.globalAlpha = 0.72;
      ctx.fillRect(rect.x, rect.y, rect.w, rect.h);
      ctx.globalAlpha = 1;
      ctx.fillStyle = i === focus || i === hover ? colors.text : colors.muted;
      ctx.fillText(text, x, y);
    }
  }

  function short(text) {
    return text.length > 32 ? text.slice(0, 30) + "…" : text;
  }

  let pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }

  // ---- interaction ----------------------------------------------------------------------

  function nodeAt(sx, sy) {
    const wx = (sx - view.tx) / view.k;
    const wy = (sy - view.ty) / view.k;
    let best = -1;
    let bestD = Infinity;
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[i];
      const dx = node.x - wx;
      const dy = node.y - wy;
      const d = dx * dx + dy * dy;
      const reach = node.r + 4 / view.k;
      if (d < reach * reach && d < bestD) { best = i; bestD = d; }
    }
    return best;
  }

  function noteUrl(path) {
    return "/note/" + path.split("/").map(encodeURIComponent).join("/");
  }

  function zoomAt(factor, sx, sy) {
    const k = Math.min(12, Math.max(0.02, view.k * factor));
    view.tx = sx - (sx - view.tx) * (k / view.k);
    view.ty = sy - (sy - view.ty) * (k / view.k);
    view.k = k;
    redraw();
  }

  function showTip(i, sx, sy) {
    if (i < 0) { tip.hidden = true; return; }
    const node = nodes[i];
    tip.textContent = "";
    const title = document.createElement("strong");
    title.textContent = node.title;
    const where = document.createElement("small");
    const role = node.role !== undefined ? " · " + ROLE_NAMES[node.role] : "";
    where.textContent = groups[node.group].name + " · " + node.type + (node.conflicted ? " · conflict" : "") + role;
    tip.append(title, where);
    tip.hidden = false;
    tip.style.left = Math.max(4, Math.min(sx + 14, view.w - 240)) + "px";
    tip.style.top = (sy + 14) + "px";
  }

  // Centre the map on a note and mark it (the search box, and anamnesisMap.centreOn for tests).
  function centreOn(i) {
    if (i < 0 || i >= nodes.length) return;
    focus = i;
    const node = nodes[i];
    view.k = Math.max(view.k, around ? view.k : 2.4);
    view.tx = view.w / 2 - node.x * view.k;
    view.ty = view.h / 2 - node.y * view.k;
    redraw();
  }

  function findMatches(text) {
    const words = text.trim().toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return null;
    const found = [];
    nodes.forEach((node, i) => {
      const hay = (node.title + " " + node.path + " " + groups[node.group].name).toLowerCase();
      if (words.every((w) => hay.includes(w))) found.push(i);
    });
    // Titles that start with the words first, then shorter titles.
    const first = words.join(" ");
    found.sort((a, b) => {
      const sa = nodes[a].title.toLowerCase().startsWith(first) ? 0 : 1;
      const sb = nodes[b].title.toLowerCase().startsWith(first) ? 0 : 1;
      return sa - sb || nodes[a].title.length - nodes[b].title.length;
    });
    return found;
  }

  let listed = [];
  let picked = 0;
  function showResults() {
    results.textContent = "";
    listed.slice(0, 8).forEach((i, n) => {
      const item = document.createElement("li");
      item.setAttribute("role", "option");
      item.id = "map-result-" + n;
      item.setAttribute("aria-selected", n === picked ? "true" : "false");
      item.textContent = nodes[i].title;
      const where = document.createElement("small");
      where.textContent = groups[nodes[i].group].name;
      item.append(where);
      item.addEventListener("mousedown", (event) => { event.preventDefault(); pick(n); });
      results.append(item);
    });
    results.hidden = listed.length === 0;
  }

  function pick(n) {
    const i = listed[n];
    if (i === undefined) return;
    results.hidden = true;
    findBox.value = nodes[i].title;
    matches = null;
    centreOn(i);
  }

  function setLegend(shown, remember) {
    legend.hidden = !shown || !groups.length;
    legendToggle.setAttribute("aria-pressed", shown ? "true" : "false");
    if (!remember) return;
    try { localStorage.setItem("anamnesis.map.legend", shown ? "1" : "0"); } catch (error) { /* private mode */ }
  }

  function bind() {
    let drag = null;
    canvas.addEventListener("wheel", (event) => {
      event.preventDefault();
      const rect = canvas.getBoundingClientRect();
      zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - rect.left, event.clientY - rect.top);
    }, { passive: false });
    canvas.addEventListener("pointerdown", (event) => {
      drag = { x: event.clientX, y: event.clientY, tx: view.tx, ty: view.ty, moved: false };
      canvas.setPointerCapture(event.pointerId);
    });
    canvas.addEventListener("pointermove", (event) => {
      const rect = canvas.getBoundingClientRect();
      const sx = event.clientX - rect.left;
      const sy = event.clientY - rect.top;
      if (drag) {
        const dx = event.clientX - drag.x;
        const dy = event.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 4) drag.moved = true;
        if (drag.moved) {
          canvas.classList.add("dragging");
          view.tx = drag.tx + dx;
          view.ty = drag.ty + dy;
          tip.hidden = true;
          redraw();
          return;
        }
      }
      const found = nodeAt(sx, sy);
      if (found !== hover) { hover = found; redraw(); }
      canvas.classList.toggle("pointing", found >= 0);
      showTip(found, sx, sy);
    });
    canvas.addEventListener("pointerup", (event) => {
      canvas.classList.remove("dragging");
      const wasDrag = drag && drag.moved;
      drag = null;
      if (wasDrag) return;
      const rect = canvas.getBoundingClientRect();
      const found = nodeAt(event.clientX - rect.left, event.clientY - rect.top);
      if (found >= 0) window.location.href = noteUrl(nodes[found].path);
    });
    canvas.addEventListener("pointerleave", () => { tip.hidden = true; hover = -1; redraw(); });
    document.getElementById("map-zoom-in").addEventListener("click", () => zoomAt(1.4, view.w / 2, view.h / 2));
    document.getElementById("map-zoom-out").addEventListener("click", () => zoomAt(1 / 1.4, view.w / 2, view.h / 2));
    document.getElementById("map-fit").addEventListener("click", () => { fit(); redraw(); });
    legendToggle.addEventListener("click", () => setLegend(legend.hidden, true));
    findBox.addEventListener("input", () => {
      const found = findMatches(findBox.value);
      matches = found === null ? null : new Set(found);
      listed = found || [];
      picked = 0;
      showResults();
      redraw();
    });
    findBox.addEventListener("keydown", (event) => {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        if (!listed.length) return;
        event.preventDefault();
        const shown = Math.min(listed.length, 8);
        picked = (picked + (event.key === "ArrowDown" ? 1 : shown - 1)) % shown;
        showResults();
      } else if (event.key === "Enter") {
        event.preventDefault();
        pick(picked);
      } else if (event.key === "Escape") {
        results.hidden = true;
      }
    });
    findBox.addEventListener("blur", () => setTimeout(() => { results.hidden = true; }, 150));
    new ResizeObserver(() => { resize(); redraw(); }).observe(canvas);
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => { readColors(); redraw(); });
  }

  function fillLegend(data) {
    legend.textContent = "";
    data.projects.forEach((name, g) => {
      const item = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = "swatch sw-" + groups[g].ci;
      const label = document.createElement("span");
      label.textContent = name + " (" + groups[g].n + ")";
      item.append(swatch, label);
      legend.append(item);
    });
    let stored = null;
    try { stored = localStorage.getItem("anamnesis.map.legend"); } catch (error) { /* private mode */ }
    const narrow = window.matchMedia("(max-width: 760px)").matches;
    setLegend(stored === null ? !narrow : stored === "1", false);
  }

  // ---- start ----------------------------------------------------------------------------

  async function start() {
    readColors();
    const address = around ? "/api/graph?note=" + encodeURIComponent(around) : "/api/graph";
    const response = await fetch(address, { headers: { accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) { stats.textContent = "Could not load the map (" + response.status + ")."; return; }
    const data = await response.json();
    const degree = new Array(data.nodes.length).fill(0);
    for (const [a, b] of data.edges) { degree[a]++; degree[b]++; }
    nodes = data.nodes.map(([path, title, group, type, conflicted, role], i) => ({
      path, title, group, type, conflicted: conflicted === 1, x: 0, y: 0, role,
      r: role === 0 ? 10 : 4 + Math.min(5, Math.sqrt(degree[i])),
    }));
    edges = data.edges;
    groups = data.projects.map((name) => ({ name, n: 0 }));
    for (const node of nodes) groups[node.group].n += 1;
    groups.forEach((group, g) => { group.ci = colorIndex(g); group.color = PALETTE[group.ci]; });
    byPriority = nodes.map((node, i) => i).sort((a, b) => degree[b] - degree[a] || a - b);
    const t0 = performance.now();
    if (around) radialLayout(); else layout();
    const layoutMs = performance.now() - t0;
    resize();
    fit();
    if (around && data.focus !== null && data.focus !== undefined) focus = data.focus;
    draw();
    const renderMs = performance.now();
    fillLegend(data);
    const c = data.counts;
    const count = (n, one, many) => n + " " + (n === 1 ? one : many);
    stats.textContent = around
      ? count(c.nodes - 1, "note", "notes") + " around it · " + count(c.links, "link", "links") + " · "
        + c.tag_edges + " sharing tags"
      : count(c.nodes, "note", "notes") + " · " + count(c.links, "link", "links") + " · "
        + count(c.tag_edges, "shared-tag line", "shared-tag lines");
    bind();
    window.anamnesisMap = {
      ready: true,
      nodes: nodes.length,
      edges: edges.length,
      layoutMs,
      renderMs, // since navigation start: page, data, layout and first full draw
      labels: () => placedLabels.map((r) => ({ x: r.x, y: r.y, w: r.w, h: r.h, text: r.text, kind: r.kind })),
      roles: () => Object.fromEntries(nodes.map((n) => [n.path, n.role])),
      focusPath: () => (focus >= 0 ? nodes[focus].path : null),
      view: () => ({ k: view.k, w: view.w, h: view.h }),
      screenPoint(path) {
        const node = nodes.find((n) => n.path === path);
        if (!node) return null;
        const rect = canvas.getBoundingClientRect();
        return { x: rect.left + node.x * view.k + view.tx, y: rect.top + node.y * view.k + view.ty };
      },
      zoomTo(path, k) {
        const node = nodes.find((n) => n.path === path);
        if (!node) return;
        view.k = k;
        view.tx = view.w / 2 - node.x * k;
        view.ty = view.h / 2 - node.y * k;
        draw();
      },
      redrawNow() { draw(); },
    };
    document.documentElement.dataset.mapReady = "1";
  }

  start().catch((error) => { stats.textContent = "Map failed: " + error; });
})();
