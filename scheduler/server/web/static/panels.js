// panels.js: the dashboard's DOM panels: the cluster summary, task counts
// per state, the progress bar of each task prefix, the workers' memory and
// processing bars, and withholding's queue. Each panel builds its elements
// once and then only updates text and widths, keyed by state, prefix or
// worker. Elements carry stable ids and data-* values (the browser test
// reads them).

import { history, rateMeter } from './dashboard.js';
import {
  STATES, STATE_COLORS, colorOf, el, fitCanvas, fmtBytes, fmtInt, fmtPercent, fmtSeconds, memoryColor, setData,
  setText,
} from './format.js';
import { host } from './workerbars.js';

// Summary: workers, threads, memory, clients, tasks done and the rate.
export class Summary {
  constructor(container) {
    this.rate = rateMeter(5);
    this.items = {};
    this.labels = {};
    const item = (id, label) => {
      const v = el('b', { id, 'data-value': 0, text: '–' });
      this.items[id] = v;
      this.labels[id] = el('span', { text: ` ${label}` });
      return el('span', { class: 'stat' }, v, this.labels[id]);
    };
    container.append(
      item('summary-workers', 'workers'), item('summary-threads', 'threads'),
      item('summary-memory', 'stored'), item('summary-clients', 'clients'),
      item('tasks-done', 'done'), item('task-rate', 'tasks/s'));
  }

  update(view) {
    const ws = view.workers;
    const threads = ws.reduce((a, w) => a + w.nthreads, 0);
    const managed = ws.reduce((a, w) => a + w.managed, 0);
    const limit = ws.reduce((a, w) => a + w.memory_limit, 0);
    const rate = this.rate(view.at, view.tasks_done);
    const set = (id, value, text) => {
      setData(this.items[id], 'value', value);
      setText(this.items[id], text);
    };
    setText(this.labels['summary-workers'], ws.length === 1 ? ' worker' : ' workers');
    setText(this.labels['summary-clients'], view.clients === 1 ? ' client' : ' clients');
    set('summary-workers', ws.length, fmtInt(ws.length));
    set('summary-threads', threads, fmtInt(threads));
    set('summary-memory', managed, limit ? `${fmtBytes(managed)} / ${fmtBytes(limit)}` : fmtBytes(managed));
    set('summary-clients', view.clients, fmtInt(view.clients));
    set('tasks-done', view.tasks_done, fmtInt(view.tasks_done));
    set('task-rate', rate.toFixed(1), rate >= 100 ? fmtInt(rate) : rate.toFixed(1));
  }
}

// Counts: a tile per state and a bar of their shares.
export class Counts {
  constructor(container) {
    this.bar = el('div', { class: 'stack', id: 'count-bar' });
    this.tiles = {};
    const grid = el('div', { class: 'tiles' });
    for (const st of STATES) {
      const n = el('div', { class: 'tile-n', id: `count-${st}`, 'data-count': 0, text: '0' });
      this.tiles[st] = n;
      grid.append(el('div', { class: 'tile', 'data-state': st, style: `--c:${STATE_COLORS[st]}` },
        n, el('div', { class: 'tile-label', text: st })));
    }
    this.total = el('span', { id: 'count-total', 'data-count': 0 });
    container.append(grid, this.bar, el('div', { class: 'muted caption' }, this.total, ' tasks held'));
  }

  update(view) {
    let total = 0;
    for (const st of STATES) {
      const n = view.counts[st] || 0;
      total += n;
      setData(this.tiles[st], 'count', n);
      setText(this.tiles[st], fmtInt(n));
      this.tiles[st].parentElement.classList.toggle('zero', n === 0);
    }
    setData(this.total, 'count', total);
    setText(this.total, fmtInt(total));
    const parts = STATES.filter((st) => view.counts[st]).map((st) => [STATE_COLORS[st], view.counts[st] / total]);
    setSegments(this.bar, parts);
  }
}

// setSegments sets a stacked bar's coloured parts ([colour, fraction]).
function setSegments(bar, parts) {
  while (bar.children.length < parts.length) bar.append(el('span'));
  [...bar.children].forEach((seg, i) => {
    const [color, f] = parts[i] || ['transparent', 0];
    seg.style.background = color;
    seg.style.width = `${(100 * f).toFixed(3)}%`;
  });
}

// Progress: a bar per task prefix, from its state counts and totals (as
// distributed's progress bars, plus what finished and was forgotten):
// done (computed, then released or forgotten), in memory, erred,
// processing, no-worker, and what is left (waiting, queued) as the track.
// Tasks released or forgotten without computing (cancelled) are left out.
// Active prefixes first, then finished ones, each by name; at most maxRows.
export class Progress {
  constructor(container, maxRows = 40) {
    this.maxRows = maxRows;
    this.rows = new Map();
    this.list = el('div', { class: 'progress', id: 'progress-list' });
    this.more = el('div', { class: 'muted more' });
    this.empty = el('div', { class: 'muted empty', text: 'no tasks yet' });
    container.append(this.list, this.more, this.empty);
  }

  update(view) {
    const items = view.prefixes.map(progressOf).filter((p) => p.all > 0);
    items.sort((a, b) => (b.active - a.active) || a.name.localeCompare(b.name));
    const shown = items.slice(0, this.maxRows);
    const keep = new Set(shown.map((p) => p.name));
    for (const [name, row] of this.rows) if (!keep.has(name)) { row.el.remove(); this.rows.delete(name); }
    shown.forEach((p, i) => {
      let row = this.rows.get(p.name);
      if (!row) {
        row = this.row(p.name);
        this.rows.set(p.name, row);
      }
      if (this.list.children[i] !== row.el) this.list.insertBefore(row.el, this.list.children[i] || null);
      this.fill(row, p);
    });
    setText(this.more, items.length > shown.length ? `+ ${items.length - shown.length} more prefixes` : '');
    this.empty.hidden = items.length > 0;
  }

  row(name) {
    const c = colorOf(name);
    const bar = el('div', { class: 'pbar' });
    const count = el('span', { class: 'pcount' });
    const e = el('div', { class: 'prow', 'data-prefix': name },
      el('div', { class: 'phead' }, el('span', { class: 'swatch', style: `background:${c}` }),
        el('span', { class: 'pname', text: name, title: name }), count),
      bar);
    return { el: e, bar, count, color: c };
  }

  fill(row, p) {
    setData(row.el, 'done', p.done);
    setData(row.el, 'total', p.all);
    row.el.classList.toggle('finished', !p.active);
    let text = `${fmtInt(p.done)} / ${fmtInt(p.all)}`;
    if (p.processing) text += ` \u00b7 ${fmtInt(p.processing)} running`;
    if (p.erred) text += ` \u00b7 ${fmtInt(p.erred)} erred`;
    if (p.noWorker) text += ` \u00b7 ${fmtInt(p.noWorker)} no-worker`;
    setText(row.count, text);
    row.bar.title = `done and released ${fmtInt(p.released)}, memory ${fmtInt(p.memory)}, erred ${fmtInt(p.erred)}, `
      + `processing ${fmtInt(p.processing)}, queued ${fmtInt(p.queued)}, waiting ${fmtInt(p.waiting)}, no-worker ${fmtInt(p.noWorker)}`;
    setSegments(row.bar, [
      [`color-mix(in srgb, ${row.color} 45%, white)`, p.released / p.all],
      [row.color, p.memory / p.all],
      ['#111827', p.erred / p.all],
      [`repeating-linear-gradient(135deg, ${row.color} 0 4px, color-mix(in srgb, ${row.color} 55%, white) 4px 8px)`, p.processing / p.all],
      [STATE_COLORS['no-worker'], p.noWorker / p.all],
    ]);
  }
}

export function progressOf(p) {
  const s = p.states;
  const t = p.totals;
  const r = {
    name: p.name, memory: s.memory || 0, erred: s.erred || 0, processing: s.processing || 0,
    queued: s.queued || 0, waiting: s.waiting || 0, noWorker: s['no-worker'] || 0,
  };
  // Entries into memory or erred, less those still held, are the runs
  // whose results are gone (a recomputed task counts twice: capped).
  const gone = (t.memory || 0) + (t.erred || 0) - r.memory - r.erred;
  r.released = Math.max(0, Math.min(gone, (s.released || 0) + (t.forgotten || 0)));
  r.done = r.released + r.memory + r.erred;
  const left = r.processing + r.queued + r.waiting + r.noWorker;
  r.all = r.done + left;
  r.active = left > 0 ? 1 : 0;
  return r;
}

// WorkerList: each worker's memory bar (managed bytes of its limit) and
// processing bar (tasks processing of its threads), a page at a time.
export class WorkerList {
  constructor(container, pageSize = 12) {
    this.pageSize = pageSize;
    this.page = 0;
    this.body = el('tbody');
    this.pager = el('div', { class: 'pager' });
    container.append(
      el('table', { class: 'wlist', id: 'status-workers' },
        el('thead', {}, el('tr', {}, el('th', { text: 'worker' }), el('th', { text: 'memory' }),
          el('th', { text: 'processing / threads' }))),
        this.body),
      this.pager);
  }

  update(view) {
    const ws = view.workers;
    const pages = Math.max(1, Math.ceil(ws.length / this.pageSize));
    this.page = Math.min(this.page, pages - 1);
    const slice = ws.slice(this.page * this.pageSize, (this.page + 1) * this.pageSize);
    while (this.body.children.length < slice.length) this.body.append(this.row());
    while (this.body.children.length > slice.length) this.body.lastChild.remove();
    slice.forEach((w, i) => fillWorkerRow(this.body.children[i], w));
    this.pager.hidden = pages <= 1;
    if (pages > 1) this.drawPager(pages, ws.length, view);
    if (!ws.length) this.body.append(el('tr', {}, el('td', { colspan: 3, class: 'muted', text: 'no workers yet' })));
  }

  row() {
    const bar = () => el('div', { class: 'hbar' }, el('span', { class: 'fill' }), el('span', { class: 'hbar-text' }));
    return el('tr', {}, el('td', { class: 'waddr' }), el('td', {}, bar()), el('td', {}, bar()));
  }

  drawPager(pages, n, view) {
    const go = (p) => () => { this.page = p; this.update(view); };
    const from = this.page * this.pageSize + 1;
    const to = Math.min(n, from + this.pageSize - 1);
    this.pager.replaceChildren(
      el('button', { type: 'button', text: '\u2039', disabled: this.page === 0, onclick: go(this.page - 1) }),
      el('span', { text: `${fmtInt(from)}\u2013${fmtInt(to)} of ${fmtInt(n)}` }),
      el('button', { type: 'button', text: '\u203a', disabled: this.page >= pages - 1, onclick: go(this.page + 1) }),
      el('a', { href: 'workers', text: 'all workers' }));
  }
}

function fillWorkerRow(tr, w) {
  setData(tr, 'worker', w.address);
  const [addr, mem, proc] = tr.children;
  setText(addr, host(w.address));
  addr.title = w.name ? `${w.name} \u00b7 ${w.address}` : w.address;
  const mf = w.memory_limit > 0 ? w.managed / w.memory_limit : 0;
  setBar(mem.firstChild, mf, memoryColor(mf, true),
    `${fmtBytes(w.managed)}${w.memory_limit ? ` / ${fmtBytes(w.memory_limit)}` : ''}`);
  const pf = w.nthreads > 0 ? w.processing / w.nthreads : 0;
  setBar(proc.firstChild, pf, '#6ee7b7', `${fmtInt(w.processing)} / ${w.nthreads}`);
  setData(proc.firstChild, 'processing', w.processing);
  setData(mem.firstChild, 'managed', w.managed);
}

export function setBar(bar, fraction, color, text) {
  const [fill, label] = bar.children;
  fill.style.width = `${Math.min(100, 100 * fraction).toFixed(2)}%`;
  fill.style.background = color;
  setText(label, text);
  bar.title = `${text} (${fmtPercent(fraction)})`;
}

// Withholding: root tasks held back on the scheduler (queued) until a
// worker has a free thread, the saturation in force, and co-assignment's
// family runs when it is on; a sparkline of the queue over the last
// minutes of this page.
export class Withholding {
  constructor(container) {
    this.hist = history(240);
    this.queued = el('div', { class: 'big', id: 'withhold-queued', 'data-count': 0, text: '0' });
    this.spark = el('canvas', { class: 'spark', id: 'withhold-spark' });
    this.facts = el('dl', { class: 'facts', id: 'withhold-facts' });
    container.append(el('div', { class: 'wh-top' },
      el('div', {}, this.queued, el('div', { class: 'muted', text: 'root tasks queued on the scheduler' })),
      this.spark), this.facts);
    new ResizeObserver(() => this.drawSpark()).observe(this.spark);
  }

  update(view) {
    const w = view.withholding;
    setData(this.queued, 'count', w.queued);
    setText(this.queued, fmtInt(w.queued));
    this.hist.push(w.queued);
    const facts = [
      ['worker-saturation', w.saturation === null ? 'inf (withholding off)' : String(w.saturation)],
      ['co-assignment', w.coassignment ? 'on' : 'off'],
    ];
    if (w.coassignment) {
      facts.push(['family runs', fmtInt(w.runs)], ['roots dealt to families', fmtInt(w.coassigned)]);
    }
    facts.push(['no-worker', fmtInt(view.counts['no-worker'] || 0)]);
    setFacts(this.facts, facts);
    this.drawSpark();
  }

  drawSpark() {
    const { ctx, w, h } = fitCanvas(this.spark);
    const vs = this.hist.values;
    ctx.fillStyle = '#e2e8f0';
    ctx.fillRect(0, h - 1, w, 1);
    if (vs.length < 2) return;
    const top = Math.max(1, ...vs);
    const x = (i) => (i / (vs.length - 1)) * w;
    const y = (v) => h - 2 - (h - 6) * (v / top);
    ctx.beginPath();
    ctx.moveTo(x(0), h);
    vs.forEach((v, i) => ctx.lineTo(x(i), y(v)));
    ctx.lineTo(x(vs.length - 1), h);
    ctx.fillStyle = 'rgba(167, 139, 250, 0.25)';
    ctx.fill();
    ctx.beginPath();
    vs.forEach((v, i) => (i ? ctx.lineTo(x(i), y(v)) : ctx.moveTo(x(i), y(v))));
    ctx.strokeStyle = STATE_COLORS.queued;
    ctx.lineWidth = 1.5;
    ctx.stroke();
  }
}

// setFacts fills a <dl> with [term, value] pairs, when they changed.
function setFacts(dl, facts) {
  const key = JSON.stringify(facts);
  if (dl.dataset.key === key) return;
  dl.dataset.key = key;
  dl.replaceChildren(...facts.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]));
}

// SchedulerFacts: uptime, version, transitions, adaptive target, idleness
// and work stealing.
export class SchedulerFacts {
  constructor(container) {
    this.facts = el('dl', { class: 'facts flush', id: 'scheduler-facts' });
    container.append(this.facts);
  }

  update(view) {
    const st = view.stealing;
    setFacts(this.facts, [
      ['up', fmtSeconds(Math.max(0, view.at - view.scheduler.started)).replace(/\.\d+ s$/, ' s')],
      ['version', view.version],
      ['transitions', fmtInt(view.transitions)],
      ['adaptive target', `${fmtInt(view.desired_workers)} workers`],
      ['idle', view.idle_since === null ? 'no' : `for ${fmtSeconds(view.at - view.idle_since).replace(/\.\d+ s$/, ' s')}`],
      ['stealing', `${fmtInt(st.requests)} request${st.requests === 1 ? '' : 's'}, ${fmtInt(st.confirmed)} confirmed, ${fmtInt(st.rejected)} rejected`
        + (st.in_flight ? `, ${fmtInt(st.in_flight)} in flight` : '')],
    ]);
  }
}
