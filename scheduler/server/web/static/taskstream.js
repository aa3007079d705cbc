// taskstream.js: the task stream, drawn on one canvas: a row per worker,
// a rectangle per task run from its start to its stop, coloured by task
// prefix (erred runs in black). It draws the runs of the last `window`
// seconds, however many the page keeps (dashboard.js caps them), so the
// cost of a frame is bounded by the buffer, never by the graph. Hovering a
// rectangle names the run.

import { colorOf, el, fitCanvas, fmtSeconds, niceStep, setText } from './format.js';

export const WINDOWS = [10, 30, 60, 300];
const AXIS = 20; // px under the rows for the time axis
const LABEL_MIN_ROW = 12; // rows thinner than this get no worker label

export class TaskStream {
  // container: the element to fill; opts.window: seconds shown at first.
  constructor(container, opts = {}) {
    this.window = opts.window || 30;
    this.canvas = el('canvas', { class: 'stream-canvas', id: 'task-stream-canvas' });
    this.tip = el('div', { class: 'tooltip', hidden: true });
    this.legend = el('ul', { class: 'legend', id: 'task-stream-legend' });
    this.empty = el('div', { class: 'stream-empty', hidden: true });
    this.controls = this.windowButtons();
    const plot = el('div', { class: 'stream-plot' }, this.canvas, this.empty, this.tip);
    container.append(plot, this.legend);
    this.boxes = []; // drawn rectangles for hover: [x, y, w, h, run]
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => (this.tip.hidden = true));
    new ResizeObserver(() => this.last && this.draw(...this.last)).observe(plot);
  }

  // windowButtons are the window choices, for a panel header.
  windowButtons() {
    const group = el('div', { class: 'seg', role: 'group', 'aria-label': 'time window' });
    for (const s of WINDOWS) {
      const b = el('button', {
        type: 'button', text: s < 60 ? `${s} s` : `${s / 60} min`, 'data-window': s,
        onclick: () => {
          this.window = s;
          this.markWindow(group);
          if (this.last) this.draw(...this.last);
        },
      });
      group.append(b);
    }
    this.markWindow(group);
    return group;
  }

  markWindow(group) {
    for (const b of group.children) b.classList.toggle('on', Number(b.dataset.window) === this.window);
  }

  draw(view, runs) {
    this.last = [view, runs];
    const { ctx, w, h } = fitCanvas(this.canvas);
    const workers = view.workers;
    const row = new Map(workers.map((wk, i) => [wk.address, i]));
    const lastStop = runs.length ? runs[runs.length - 1].stop : 0;
    const t1 = Math.max(view.at, lastStop);
    const t0 = t1 - this.window;
    const plotH = h - AXIS;
    const rh = workers.length ? plotH / workers.length : plotH;
    const labels = rh >= LABEL_MIN_ROW;
    const left = labels ? Math.min(140, Math.max(70, w * 0.12)) : 4;
    const scale = (w - left - 8) / this.window;
    this.drawRows(ctx, workers, rh, left, w, labels);
    this.drawAxis(ctx, t0, t1, left, scale, plotH, w);

    // The runs in the window, by start, each worker's row split into a lane
    // per thread: a run takes the first lane free at its start.
    const vis = [];
    for (let i = runs.length - 1; i >= 0; i--) {
      const r = runs[i];
      if (r.stop >= t0 && row.has(r.worker)) vis.push(r);
    }
    vis.sort((a, b) => a.start - b.start);
    const lanes = workers.map((wk) => new Array(rh / Math.max(1, wk.nthreads) >= 3 ? Math.max(1, wk.nthreads) : 1).fill(-Infinity));
    const seen = new Map();
    this.boxes.length = 0;
    for (const r of vis) {
      const y = row.get(r.worker);
      const ends = lanes[y];
      let lane = ends.findIndex((end) => end <= r.start + 1e-4);
      if (lane < 0) lane = ends.indexOf(Math.min(...ends));
      ends[lane] = r.stop;
      const lh = rh / ends.length;
      const pad = lh > 6 ? Math.min(2, lh * 0.12) : 0;
      const x = left + Math.max(0, r.start - t0) * scale;
      const x2 = left + Math.min(this.window, r.stop - t0) * scale;
      const bw = Math.max(1, x2 - x);
      const top = y * rh + lane * lh + pad;
      const bh = Math.max(0.5, lh - 2 * pad);
      ctx.fillStyle = r.erred ? '#111827' : colorOf(r.prefix);
      ctx.fillRect(x, top, bw, bh);
      if (this.boxes.length < 5000) this.boxes.push([x, top, bw, bh, r]);
      seen.set(r.prefix, (seen.get(r.prefix) || 0) + 1);
    }
    const shown = vis.length;
    this.canvas.dataset.runs = String(shown);
    this.canvas.dataset.workers = String(workers.length);
    this.empty.hidden = shown > 0;
    setText(this.empty, workers.length
      ? `no task finished in the last ${fmtSeconds(this.window)}`
      : 'no workers');
    this.drawLegend(seen);
  }

  drawRows(ctx, workers, rh, left, w, labels) {
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (let i = 0; i < workers.length; i++) {
      if (i % 2 === 1) {
        ctx.fillStyle = '#f8fafc';
        ctx.fillRect(left, i * rh, w - left, rh);
      }
      if (!labels) continue;
      ctx.fillStyle = '#475569';
      const wk = workers[i];
      const name = wk.name && wk.name !== wk.address ? wk.name : wk.address.replace(/^[a-z]+:\/\//, '');
      ctx.fillText(clip(ctx, name, left - 8), 4, i * rh + rh / 2);
    }
  }

  drawAxis(ctx, t0, t1, left, scale, y, w) {
    ctx.strokeStyle = '#cbd5e1';
    ctx.beginPath();
    ctx.moveTo(left, y + 0.5);
    ctx.lineTo(w - 8, y + 0.5);
    ctx.stroke();
    ctx.fillStyle = '#64748b';
    ctx.textBaseline = 'top';
    ctx.textAlign = 'center';
    const step = niceStep(this.window, Math.max(2, Math.floor((w - left) / 90)));
    for (let a = 0; a <= this.window + 1e-9; a += step) {
      const x = left + (this.window - a) * scale;
      ctx.fillRect(x, y, 1, 4);
      ctx.fillText(a === 0 ? 'now' : `\u2212${fmtSeconds(a)}`, Math.min(Math.max(x, left + 14), w - 22), y + 6);
    }
    ctx.textAlign = 'start';
  }

  drawLegend(seen) {
    const top = [...seen.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12);
    const key = top.map(([p]) => p).sort().join('\u0000');
    if (key === this.legendKey) return;
    this.legendKey = key;
    this.legend.replaceChildren(...top.map(([p]) => p).sort().map((p) =>
      el('li', {}, el('span', { class: 'swatch', style: `background:${colorOf(p)}` }), p)));
  }

  hover(e) {
    const rect = this.canvas.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const y = e.clientY - rect.top;
    const hit = this.boxes.find(([bx, by, bw, bh]) => x >= bx - 1 && x <= bx + bw + 1 && y >= by && y <= by + bh);
    if (!hit) {
      this.tip.hidden = true;
      return;
    }
    const r = hit[4];
    this.tip.textContent = `${r.prefix}${r.erred ? ' (erred)' : ''} \u00b7 ${fmtSeconds(r.stop - r.start)} \u00b7 ${r.worker}`;
    this.tip.style.left = `${Math.min(x + 12, rect.width - 260)}px`;
    this.tip.style.top = `${y + 12}px`;
    this.tip.hidden = false;
  }
}

function clip(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  while (text.length > 1 && ctx.measureText(`${text}\u2026`).width > width) text = text.slice(1);
  return `\u2026${text}`;
}
