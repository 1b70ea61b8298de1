// Anamnesis memory map: notes as dots grouped by project, links and shared tags as lines.
// Plain canvas, a small force layout (grid-bucketed repulsion, springs, pull to the project's centre),
// zoom with the wheel or the buttons, drag to pan, click a dot to open its note.
"use strict";

(() => {
  const PALETTE = ["#5b5bd6", "#e0663f", "#1f9d6b", "#c2378f", "#d9a21b", "#2b8fd6",
    "#8c5bd6", "#5f8f1f", "#d04e5e", "#199aa5", "#a0702b", "#6b7280"];
  const SPACING = 16;       // world units between neighbouring dots
  const ITERATIONS = 140;   // force steps (the initial sunflower layout is already even)
  const LINK = 0;
  const GLOBAL = "(global)";

  const canvas = document.getElementById("map");
  if (!canvas) return;
  const ctx = canvas.getContext("2d");
  const tip = document.getElementById("map-tip");
  const stats = document.getElementById("map-stats");
  const legend = document.getElementById("map-legend");
  const filterBox = document.getElementById("map-filter");

  const view = { k: 1, tx: 0, ty: 0, w: 0, h: 0, dpr: 1 };
  let nodes = [];      // {path, title, group, type, conflicted, x, y, r, deg}
  let edges = [];      // [a, b, kind]
  let groups = [];     // {name, x, y, R, n}
  let hover = -1;
  let matches = null;  // Set of node indexes matching the filter, or null
  let colors = {};

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
      ctx.globalAlpha = alpha;
      ctx.lineWidth = width / Math.sqrt(k);
      ctx.stroke();
    }
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
    // Labels in screen space so they keep their size.
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    ctx.font = "600 12px system-ui, sans-serif";
    for (let g = 0; g < groups.length; g++) {
      const group = groups[g];
      const x = group.lx * k + tx;
      const y = group.ly * k + ty - 6;
      if (x < -200 || x > view.w + 200 || y < -20 || y > view.h + 40) continue;
      ctx.fillStyle = colors.bg;
      ctx.globalAlpha = 0.75;
      const label = group.name;
      const w = ctx.measureText(label).width;
      ctx.fillRect(x - w / 2 - 4, y - 15, w + 8, 17);
      ctx.globalAlpha = 1;
      ctx.fillStyle = group.color;
      ctx.fillText(label, x, y);
    }
    if (k >= 1.4) {
      ctx.font = "11px system-ui, sans-serif";
      ctx.fillStyle = colors.text;
      ctx.textBaseline = "top";
      let drawn = 0;
      for (let i = 0; i < nodes.length && drawn < 400; i++) {
        const node = nodes[i];
        const x = node.x * k + tx;
        const y = node.y * k + ty;
        if (x < 0 || y < 0 || x > view.w || y > view.h) continue;
        if (matches !== null && !matches.has(i)) continue;
        ctx.fillText(short(node.title), x, y + node.r * k + 2);
        drawn++;
      }
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
    where.textContent = groups[node.group].name + " · " + node.type + (node.conflicted ? " · conflict" : "");
    tip.append(title, where);
    tip.hidden = false;
    tip.style.left = Math.min(sx + 14, view.w - 330) + "px";
    tip.style.top = (sy + 14) + "px";
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
    filterBox.addEventListener("input", () => {
      const words = filterBox.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
      if (!words.length) { matches = null; redraw(); return; }
      matches = new Set();
      nodes.forEach((node, i) => {
        const hay = (node.title + " " + node.path + " " + groups[node.group].name).toLowerCase();
        if (words.every((w) => hay.includes(w))) matches.add(i);
      });
      redraw();
    });
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
    if (!data.projects.length) legend.hidden = true;
  }

  // ---- start ----------------------------------------------------------------------------

  async function start() {
    readColors();
    const response = await fetch("/api/graph", { headers: { accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) { stats.textContent = "Could not load the map (" + response.status + ")."; return; }
    const data = await response.json();
    const degree = new Array(data.nodes.length).fill(0);
    for (const [a, b] of data.edges) { degree[a]++; degree[b]++; }
    nodes = data.nodes.map(([path, title, group, type, conflicted], i) => ({
      path, title, group, type, conflicted: conflicted === 1, x: 0, y: 0,
      r: 4 + Math.min(5, Math.sqrt(degree[i])),
    }));
    edges = data.edges;
    groups = data.projects.map((name) => ({ name }));
    groups.forEach((group, g) => { group.ci = colorIndex(g); group.color = PALETTE[group.ci]; });
    const t0 = performance.now();
    layout();
    const layoutMs = performance.now() - t0;
    resize();
    fit();
    draw();
    const renderMs = performance.now();
    fillLegend(data);
    const c = data.counts;
    stats.textContent = c.nodes + " notes · " + c.links + " links · " + c.tag_edges + " shared-tag lines";
    bind();
    window.anamnesisMap = {
      ready: true,
      nodes: nodes.length,
      edges: edges.length,
      layoutMs,
      renderMs, // since navigation start: page, data, layout and first full draw
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
    };
    document.documentElement.dataset.mapReady = "1";
  }

  start().catch((error) => { stats.textContent = "Map failed: " + error; });
})();
