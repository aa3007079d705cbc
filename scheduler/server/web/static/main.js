// main.js: builds the page named by <body data-page> (status, workers,
// tasks, individual) and feeds it Views (dashboard.js). An individual page
// draws the one panel its path names (/individual-task-stream, ...), the
// pages the JupyterLab extension shows in its iframes.

import { startFeed } from './dashboard.js';
import { STATE_COLORS, el, fmtBytes, fmtInt, memoryColor, setText } from './format.js';
import { Counts, Progress, SchedulerFacts, Summary, Withholding, WorkerList } from './panels.js';
import { TaskStream } from './taskstream.js';
import { WorkerBars } from './workerbars.js';
import { WorkersTable } from './workers.js';

const app = document.getElementById('app');

// panel is a titled card; returns [card, body, header actions].
function panel(title, id, cls = '') {
  const actions = el('div', { class: 'actions' });
  const body = el('div', { class: 'body' });
  const card = el('section', { class: `card ${cls}`, id }, el('header', {}, el('h2', { text: title }), actions), body);
  return [card, body, actions];
}

function topBar(active) {
  const logo = el('span', { class: 'logo', 'aria-hidden': true });
  logo.innerHTML = '<svg viewBox="0 0 24 24" width="22" height="22"><rect x="2" y="3" width="5" height="18" rx="2.5" fill="#fdA061"/>'
    + '<rect x="9.5" y="1" width="5" height="20" rx="2.5" fill="#ef1161"/><rect x="17" y="5" width="5" height="16" rx="2.5" fill="#ffc11e"/></svg>';
  const nav = el('nav', {}, ...['status', 'workers', 'tasks'].map((p) =>
    el('a', { href: p, class: p === active ? 'on' : '', text: p[0].toUpperCase() + p.slice(1) })));
  const summary = el('div', { class: 'summary' });
  const top = el('div', { class: 'topbar' },
    el('div', { class: 'brand' }, logo, el('span', { text: 'Dask' }), el('span', { class: 'go', text: 'Go scheduler' })),
    nav, summary, el('span', { id: 'scheduler-address', class: 'addr' }), el('span', { id: 'feed-status', class: 'feed', 'data-mode': 'connecting', text: 'connecting' }));
  document.body.prepend(top);
  return new Summary(summary);
}

function statusPage() {
  const summary = topBar('status');
  const [countsCard, countsBody] = panel('Tasks by state', 'panel-task-counts');
  const [workersCard, workersBody] = panel('Workers', 'panel-workers');
  const [whCard, whBody] = panel('Withholding', 'panel-withholding');
  const [schedCard, schedBody] = panel('Scheduler', 'panel-scheduler');
  const [streamCard, streamBody, streamActions] = panel('Task stream', 'panel-task-stream', 'stream');
  const [progCard, progBody] = panel('Progress', 'panel-progress');
  app.className = 'status-grid';
  app.append(el('div', { class: 'col-left' }, countsCard, workersCard, whCard, schedCard),
    el('div', { class: 'col-right' }, streamCard, progCard));
  const counts = new Counts(countsBody);
  const workers = new WorkerList(workersBody, 10);
  const wh = new Withholding(whBody);
  const sched = new SchedulerFacts(schedBody);
  const stream = new TaskStream(streamBody, { window: 30 });
  streamActions.append(stream.controls);
  const progress = new Progress(progBody, 30);
  return (view, runs) => {
    summary.update(view);
    counts.update(view);
    workers.update(view);
    wh.update(view);
    sched.update(view);
    stream.draw(view, runs);
    progress.update(view);
  };
}

function workersPage() {
  const summary = topBar('workers');
  const [card, body] = panel('Workers', 'panel-workers-table', 'fill');
  app.className = 'single';
  app.append(card);
  const table = new WorkersTable(body);
  return (view) => {
    summary.update(view);
    table.update(view);
  };
}

function tasksPage() {
  const summary = topBar('tasks');
  const [card, body, actions] = panel('Task stream', 'panel-task-stream', 'stream fill');
  app.className = 'single';
  app.append(card);
  const stream = new TaskStream(body, { window: 60 });
  actions.append(stream.controls);
  return (view, runs) => {
    summary.update(view);
    stream.draw(view, runs);
  };
}

const memorySpec = {
  id: 'workers-memory-canvas', title: 'memory', value: (w) => w.managed, limit: (w) => w.memory_limit,
  text: (w) => `${fmtBytes(w.managed)} / ${fmtBytes(w.memory_limit)}`, color: memoryColor,
};
const processingSpec = {
  id: 'nprocessing-canvas', title: 'tasks processing', value: (w) => w.processing, limit: (w) => w.nthreads,
  text: (w) => `${fmtInt(w.processing)} / ${w.nthreads} threads`, color: () => STATE_COLORS.processing,
};

// INDIVIDUAL: path -> [title, builder(body, actions) -> render].
const INDIVIDUAL = {
  'individual-task-stream': ['Task stream', (body, actions) => {
    const s = new TaskStream(body, { window: 30 });
    actions.append(s.controls);
    return (view, runs) => s.draw(view, runs);
  }],
  'individual-progress': ['Progress', (body) => {
    const p = new Progress(body, 100);
    return (view) => p.update(view);
  }],
  'individual-workers-memory': ['Workers memory', (body) => {
    const b = new WorkerBars(body, memorySpec);
    return (view) => b.draw(view.workers);
  }],
  'individual-nprocessing': ['Tasks processing per worker', (body) => {
    const b = new WorkerBars(body, processingSpec);
    return (view) => b.draw(view.workers);
  }],
  'individual-task-counts': ['Tasks by state', (body) => {
    const c = new Counts(body);
    return (view) => c.update(view);
  }],
  'individual-withholding': ['Withholding', (body) => {
    const w = new Withholding(body);
    return (view) => w.update(view);
  }],
};

function individualPage() {
  const name = location.pathname.split('/').filter(Boolean).pop() || '';
  const entry = INDIVIDUAL[name];
  app.className = 'individual';
  if (!entry) {
    app.append(el('p', { class: 'muted', id: 'unknown-panel', text: `no panel named ${name}` }));
    return () => {};
  }
  document.title = `Dask: ${entry[0]}`;
  const [card, body, actions] = panel(entry[0], `panel-${name.replace('individual-', '')}`, 'fill');
  app.append(card);
  return entry[1](body, actions);
}

const pages = { status: statusPage, workers: workersPage, tasks: tasksPage, individual: individualPage };
const render = (pages[document.body.dataset.page] || statusPage)();
const address = document.getElementById('scheduler-address');
startFeed((view, runs) => {
  render(view, runs);
  if (address) {
    setText(address, view.scheduler.address);
    address.title = `${view.scheduler.id} \u00b7 version ${view.version}`;
  }
});
