// dashboard.js: the dashboard's data feed for a page. The Views (view.go)
// come from the scheduler's event stream, one per engine snapshot, through
// feed-worker.js (a SharedWorker: one stream for all the pages of the
// origin), or through feed.js directly where shared workers are missing;
// either falls back to polling state.json when the stream fails. The page
// keeps the task runs it has seen (each event carries only new ones) in a
// capped buffer, and hands the latest View and the runs to its render
// function at most once per animation frame. URLs are relative to the
// page, so the pages work under --dashboard-prefix and behind
// jupyter-server-proxy alike.

import { follow } from './feed.js';
import { byAddress } from './format.js';

// MAX_RUNS caps the task runs a page keeps (the task stream draws a time
// window of them); the server sends at most its stream length per View.
export const MAX_RUNS = 20000;

export function startFeed(render) {
  const runs = [];
  let seen = 0; // stream.index of the last View merged
  let latest = null;
  let frame = 0;
  let first = true;
  const status = document.getElementById('feed-status');

  function setMode(mode) {
    if (!status || status.dataset.mode === mode) return;
    status.dataset.mode = mode;
    status.textContent = mode;
    status.title = {
      live: 'updated from the scheduler\u2019s event stream',
      polling: 'event stream unavailable: polling state.json',
      offline: 'the scheduler does not answer',
    }[mode] || '';
  }

  // merge takes the runs of view.stream the page has not seen: the runs
  // are numbered index-len+1 .. index, so a whole View (state.json, or an
  // event stream's first) and an increment merge alike. A View older than
  // the one shown (a worker's event queued while state.json loaded) is
  // dropped; another scheduler at the same address starts afresh.
  function merge(view) {
    const s = view.stream || { index: 0, runs: [] };
    if (latest && view.scheduler.id === latest.scheduler.id && view.at < latest.at) return;
    if (latest && view.scheduler.id !== latest.scheduler.id) {
      runs.length = 0;
      seen = 0;
    }
    let fresh = s.runs || [];
    const n = s.index - seen;
    if (seen > 0 && n < fresh.length) fresh = fresh.slice(fresh.length - Math.max(0, n));
    seen = s.index;
    for (const r of fresh) runs.push(r);
    if (runs.length > MAX_RUNS) runs.splice(0, runs.length - MAX_RUNS);
    view.workers.sort(byAddress);
    latest = view;
    if (first) {
      first = false;
      draw(); // at once: the first render is what a user waits for
      document.body.dataset.rendered = performance.now().toFixed(0);
    } else if (!frame) {
      frame = requestAnimationFrame(draw);
    }
  }

  // dashboardStats is the page's own drawing cost (the load bench reads it).
  const stats = (window.dashboardStats = { renders: 0, total_ms: 0, max_ms: 0 });
  function draw() {
    frame = 0;
    const t = performance.now();
    render(latest, runs);
    const d = performance.now() - t;
    stats.renders++;
    stats.total_ms += d;
    stats.max_ms = Math.max(stats.max_ms, d);
  }

  const emit = (mode, text) => {
    setMode(mode);
    if (text) merge(JSON.parse(text));
  };
  setMode('connecting');
  if (!shared(emit)) follow(new URL('.', location.href), emit);
}

// shared follows the Views through feed-worker.js; false when this browser
// has no module shared workers. A page joining the worker's stream midway
// first reads the whole View from state.json, and merges what the worker
// sends after it.
function shared(emit) {
  if (typeof SharedWorker !== 'function') return false;
  let worker;
  try {
    worker = new SharedWorker(new URL('feed-worker.js', import.meta.url), { type: 'module', name: 'dask-dashboard' });
  } catch {
    return false;
  }
  let pending = [];
  let fallback = false;
  worker.onerror = () => { // a module worker that cannot start
    if (!fallback) {
      fallback = true;
      follow(new URL('.', location.href), emit);
    }
  };
  worker.port.onmessage = (e) => {
    if (fallback) return;
    if (pending) pending.push(e.data);
    else emit(e.data.mode, e.data.text);
  };
  worker.port.start();
  addEventListener('pagehide', () => worker.port.postMessage('bye'));
  addEventListener('pageshow', (e) => e.persisted && worker.port.postMessage('hello'));
  fetch('dashboard/state.json', { cache: 'no-store' })
    .then((r) => (r.ok ? r.text() : null), () => null)
    .then((text) => {
      if (text && !fallback) emit(pending.at(-1)?.mode || 'live', text);
      const queued = pending;
      pending = null;
      for (const m of queued) emit(m.mode, m.text);
    });
  return true;
}

// rateMeter turns successive (time, count) samples into a rate per second
// over the last `span` seconds.
export function rateMeter(span = 5) {
  const samples = [];
  return (t, count) => {
    samples.push([t, count]);
    while (samples.length > 2 && samples[0][0] < t - span) samples.shift();
    const [t0, c0] = samples[0];
    return t > t0 ? Math.max(0, (count - c0) / (t - t0)) : 0;
  };
}

// history keeps the last n values of a series (the sparklines).
export function history(n = 240) {
  const values = [];
  return {
    values,
    push(v) {
      values.push(v);
      if (values.length > n) values.shift();
    },
  };
}
