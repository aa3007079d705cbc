// format.js: number formats, colours and a small DOM helper shared by the
// dashboard's panels. No dependencies.

// The task states a View counts, in the order a task usually moves
// through them (distributed's names).
export const STATES = ['released', 'waiting', 'queued', 'no-worker', 'processing', 'memory', 'erred'];

export const STATE_COLORS = {
  released: '#94a3b8',
  waiting: '#cbd5e1',
  queued: '#a78bfa',
  'no-worker': '#f59e0b',
  processing: '#10b981',
  memory: '#3b82f6',
  erred: '#ef4444',
};

// A qualitative palette (Tableau's, less its near-twins, plus cyan,
// indigo and olive); a prefix keeps its colour across pages and reloads
// (a hash of its name), as distributed's color_of does.
const PALETTE = [
  '#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
  '#ff9da7', '#9c755f', '#17becf', '#a0cbe8', '#d37295', '#6b5b95', '#b6992d',
];
const colors = new Map();

export function colorOf(name) {
  let c = colors.get(name);
  if (c === undefined) {
    // FNV-1a, then murmur3's finalizer: FNV's low bits alone put add,
    // sum, mean and getitem on one colour.
    let h = 2166136261;
    for (let i = 0; i < name.length; i++) {
      h ^= name.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    c = PALETTE[(h >>> 0) % PALETTE.length];
    colors.set(name, c);
  }
  return c;
}

export const fmtInt = (n) => Math.round(n).toLocaleString('en-US');

export function fmtBytes(n) {
  if (!Number.isFinite(n) || n <= 0) return '0 B';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}

export function fmtSeconds(s) {
  if (!Number.isFinite(s)) return '–';
  if (s < 1e-3) return `${(s * 1e6).toFixed(0)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(s < 0.01 ? 1 : 0)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

export function fmtAgo(s) {
  if (s < 0) s = 0;
  if (s < 60) return `${s.toFixed(1)} s ago`;
  return `${fmtSeconds(s)} ago`;
}

export function fmtPercent(f) {
  return `${(100 * f).toFixed(f < 0.1 ? 1 : 0)}%`;
}

// Colour of a memory bar by how full the worker is (distributed turns it
// orange near the pause threshold); light, for bars with text on them.
export function memoryColor(fraction, light = false) {
  if (fraction >= 0.8) return light ? '#fca5a5' : '#ef4444';
  if (fraction >= 0.6) return light ? '#fcd34d' : '#f59e0b';
  return light ? '#93c5fd' : '#3b82f6';
}

// byAddress orders workers as people read addresses (10.0.0.9 before
// 10.0.0.10); the server sends them in byte order.
const collator = new Intl.Collator('en', { numeric: true });
export const byAddress = (a, b) => collator.compare(a.address, b.address);
export const compareNatural = (a, b) => collator.compare(a, b);

// el('div', {class: 'x', 'data-k': 1}, child, 'text') builds an element.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// setText updates an element's text only when it changed (keeps the DOM
// quiet on a page that redraws twice a second).
export function setText(e, text) {
  if (e.textContent !== text) e.textContent = text;
}

export function setData(e, key, value) {
  const v = String(value);
  if (e.dataset[key] !== v) e.dataset[key] = v;
}

// A canvas sized to its element in device pixels; returns the 2D context
// scaled so that drawing is in CSS pixels, and the CSS size.
export function fitCanvas(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, canvas.clientWidth);
  const h = Math.max(1, canvas.clientHeight);
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return { ctx, w, h };
}

// niceStep is a round axis step (1, 2, 5 × 10^k) giving about n ticks.
export function niceStep(span, n) {
  const raw = span / Math.max(1, n);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
  return 10 * p;
}
