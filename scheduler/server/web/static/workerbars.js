// workerbars.js: one quantity per worker on a canvas (the individual
// "workers memory" and "nprocessing" panels). With few workers, a labelled
// bar each; when they no longer fit a readable row, a histogram of the
// workers by fill fraction instead (as distributed's dashboard switches to
// its histograms), so that 1,000 workers cost one small drawing.

import { fitCanvas, fmtInt, setText } from './format.js';

const ROW = 18; // px per labelled bar, at least
const ROW_MAX = 34;
const BINS = 10;

export class WorkerBars {
  // spec: {title, value(w), limit(w), text(w), color(fraction)}.
  constructor(container, spec) {
    this.spec = spec;
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'bars-canvas';
    this.canvas.id = spec.id;
    this.caption = document.createElement('div');
    this.caption.className = 'caption';
    container.append(this.canvas, this.caption);
    new ResizeObserver(() => this.workers && this.draw(this.workers)).observe(this.canvas);
  }

  draw(workers) {
    this.workers = workers;
    const { ctx, w, h } = fitCanvas(this.canvas);
    const fits = workers.length * ROW <= h;
    this.canvas.dataset.mode = fits ? 'bars' : 'histogram';
    this.canvas.dataset.workers = String(workers.length);
    if (fits) this.bars(ctx, w, workers, Math.min(ROW_MAX, h / Math.max(1, workers.length)));
    else this.histogram(ctx, w, h, workers);
  }

  fraction(wk) {
    const lim = this.spec.limit(wk);
    return lim > 0 ? this.spec.value(wk) / lim : 0;
  }

  bars(ctx, w, workers, rowH) {
    const { spec } = this;
    const left = Math.min(170, w * 0.3);
    const right = Math.min(150, w * 0.25);
    const span = w - left - right;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const pad = Math.max(3, rowH * 0.2);
    workers.forEach((wk, i) => {
      const y = i * rowH;
      const f = this.fraction(wk);
      ctx.fillStyle = '#eef2f7';
      ctx.fillRect(left, y + pad, span, rowH - 2 * pad);
      ctx.fillStyle = spec.color(f);
      ctx.fillRect(left, y + pad, Math.max(f > 0 ? 1 : 0, span * Math.min(1, f)), rowH - 2 * pad);
      if (f > 1) { // over the limit: a dark tip
        ctx.fillStyle = '#0f172a';
        ctx.fillRect(left + span - 3, y + pad, 3, rowH - 2 * pad);
      }
      ctx.fillStyle = '#334155';
      ctx.fillText(label(wk), 4, y + rowH / 2, left - 10);
      ctx.fillStyle = '#64748b';
      ctx.fillText(spec.text(wk), left + span + 8, y + rowH / 2, right - 10);
    });
    setText(this.caption, `${workers.length} worker${workers.length === 1 ? '' : 's'}`);
  }

  histogram(ctx, w, h, workers) {
    const counts = new Array(BINS + 1).fill(0); // the last bin: over the limit
    for (const wk of workers) {
      const f = this.fraction(wk);
      counts[f > 1 ? BINS : Math.min(BINS - 1, Math.floor(f * BINS))]++;
    }
    const top = Math.max(1, ...counts);
    const base = h - 22;
    const bw = (w - 16) / counts.length;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'center';
    counts.forEach((n, i) => {
      const x = 8 + i * bw;
      const bh = (base - 18) * (n / top);
      ctx.fillStyle = this.spec.color(i >= BINS ? 1.01 : (i + 0.5) / BINS);
      ctx.fillRect(x + 2, base - bh, bw - 4, bh);
      ctx.fillStyle = '#334155';
      if (n) ctx.fillText(fmtInt(n), x + bw / 2, base - bh - 8);
      ctx.fillStyle = '#64748b';
      ctx.fillText(i >= BINS ? '>100%' : `${i * 10}\u2013${(i + 1) * 10}%`, x + bw / 2, base + 12);
    });
    ctx.textAlign = 'start';
    setText(this.caption, `${fmtInt(workers.length)} workers by ${this.spec.title} (share of limit)`);
  }
}

export function label(wk) {
  return wk.name && wk.name !== wk.address ? `${wk.name}  ${host(wk.address)}` : host(wk.address);
}

export function host(address) {
  return address.replace(/^[a-z]+:\/\//, '');
}
