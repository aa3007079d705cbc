// workers.js: the /workers page's table: every worker, sortable by any
// column, filtered by a search box, a page of PAGE rows at a time. Only
// the rows of the page exist in the DOM (a pool reused on each update), so
// 1,000 workers cost a sort of 1,000 small objects per View and PAGE rows.

import {
  compareNatural, el, fmtAgo, fmtBytes, fmtInt, fmtSeconds, memoryColor, setData, setText,
} from './format.js';
import { setBar } from './panels.js';

const PAGE = 50;

// Columns: header, sort key, cell filler (td, worker, view).
const COLUMNS = [
  ['address', (w) => w.address, (td, w) => setText(td, w.address)],
  ['name', (w) => w.name, (td, w) => setText(td, w.name)],
  ['status', (w) => w.status, (td, w) => {
    setText(td, w.status);
    td.className = `st st-${w.status.replace(/[^a-z_-]/gi, '')}`;
  }],
  ['threads', (w) => w.nthreads, (td, w) => setText(td, fmtInt(w.nthreads)), 'num'],
  ['memory', (w) => w.managed, (td, w) => {
    const f = w.memory_limit > 0 ? w.managed / w.memory_limit : 0;
    setBar(td.firstChild, f, memoryColor(f, true),
      `${fmtBytes(w.managed)}${w.memory_limit ? ` / ${fmtBytes(w.memory_limit)}` : ''}`);
  }, 'bar'],
  ['processing', (w) => w.processing, (td, w) => {
    const f = w.nthreads > 0 ? w.processing / w.nthreads : 0;
    setBar(td.firstChild, f, '#6ee7b7', `${fmtInt(w.processing)} / ${w.nthreads}`);
  }, 'bar'],
  ['in memory', (w) => w.in_memory, (td, w) => setText(td, fmtInt(w.in_memory)), 'num'],
  ['occupancy', (w) => w.occupancy, (td, w) => setText(td, fmtSeconds(w.occupancy)), 'num'],
  ['last seen', (w) => -w.last_seen, (td, w, view) => setText(td, fmtAgo(view.at - w.last_seen)), 'num'],
];

export class WorkersTable {
  constructor(container) {
    this.sort = 0;
    this.desc = false;
    this.page = 0;
    this.filter = '';
    this.search = el('input', {
      type: 'search', id: 'workers-filter', placeholder: 'filter by address, name or status',
      oninput: () => { this.filter = this.search.value.trim().toLowerCase(); this.page = 0; this.refresh(); },
    });
    this.count = el('span', { class: 'muted', id: 'workers-count' });
    this.head = el('tr');
    COLUMNS.forEach(([name, , , kind], i) => this.head.append(el('th', {
      class: kind || '', 'data-col': name, tabindex: 0, onclick: () => this.sortBy(i),
      onkeydown: (e) => e.key === 'Enter' && this.sortBy(i),
    }, name)));
    this.body = el('tbody');
    this.pager = el('div', { class: 'pager' });
    container.append(
      el('div', { class: 'toolbar' }, this.search, this.count),
      el('div', { class: 'table-wrap' }, el('table', { class: 'grid', id: 'workers-table' }, el('thead', {}, this.head), this.body)),
      this.pager);
    this.markSort();
  }

  sortBy(i) {
    if (this.sort === i) this.desc = !this.desc;
    else { this.sort = i; this.desc = false; }
    this.markSort();
    this.refresh();
  }

  markSort() {
    [...this.head.children].forEach((th, i) => {
      th.dataset.sort = i === this.sort ? (this.desc ? 'desc' : 'asc') : '';
    });
  }

  refresh() {
    if (this.view) this.update(this.view);
  }

  update(view) {
    this.view = view;
    let ws = view.workers;
    if (this.filter) {
      ws = ws.filter((w) => `${w.address} ${w.name} ${w.status}`.toLowerCase().includes(this.filter));
    }
    const key = COLUMNS[this.sort][1];
    const dir = this.desc ? -1 : 1;
    const cmp = (x, y) => (typeof x === 'string' ? compareNatural(x, y) : x < y ? -1 : x > y ? 1 : 0);
    ws = [...ws].sort((a, b) => dir * cmp(key(a), key(b)) || compareNatural(a.address, b.address));
    const pages = Math.max(1, Math.ceil(ws.length / PAGE));
    this.page = Math.min(this.page, pages - 1);
    const slice = ws.slice(this.page * PAGE, (this.page + 1) * PAGE);
    while (this.body.children.length < slice.length) this.body.append(this.row());
    while (this.body.children.length > slice.length) this.body.lastChild.remove();
    slice.forEach((w, i) => {
      const tr = this.body.children[i];
      setData(tr, 'worker', w.address);
      COLUMNS.forEach(([, , fill], j) => fill(tr.children[j], w, view));
    });
    const total = view.workers.length;
    setText(this.count, this.filter ? `${fmtInt(ws.length)} of ${fmtInt(total)} workers` : `${fmtInt(total)} workers`);
    setData(this.count, 'total', total);
    this.drawPager(pages, ws.length);
  }

  row() {
    return el('tr', {}, ...COLUMNS.map(([, , , kind]) => el('td', { class: kind || '' },
      kind === 'bar' ? el('div', { class: 'hbar' }, el('span', { class: 'fill' }), el('span', { class: 'hbar-text' })) : null)));
  }

  drawPager(pages, n) {
    const key = `${this.page}/${pages}/${n}`;
    if (key === this.pagerKey) return;
    this.pagerKey = key;
    const go = (p) => () => { this.page = p; this.refresh(); };
    const from = n ? this.page * PAGE + 1 : 0;
    this.pager.replaceChildren(
      el('button', { type: 'button', text: '\u00ab', disabled: this.page === 0, onclick: go(0) }),
      el('button', { type: 'button', text: '\u2039', disabled: this.page === 0, onclick: go(this.page - 1) }),
      el('span', { text: `${fmtInt(from)}\u2013${fmtInt(Math.min(n, (this.page + 1) * PAGE))} of ${fmtInt(n)}` }),
      el('button', { type: 'button', text: '\u203a', disabled: this.page >= pages - 1, onclick: go(this.page + 1) }),
      el('button', { type: 'button', text: '\u00bb', disabled: this.page >= pages - 1, onclick: go(pages - 1) }));
  }
}
