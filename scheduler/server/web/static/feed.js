// feed.js: follows the scheduler's Views from `base` (the dashboard's
// root URL): the server-sent events at dashboard/events, and when that
// stream fails, polling dashboard/state.json, trying the stream again now
// and then. emit(mode, text) gets each View as JSON text, mode being
// 'live', 'polling' or 'offline' (text null). Used by a page directly, or
// by feed-worker.js on behalf of every page of the origin.

const POLL_MS = 1000;
const RETRY_STREAM_POLLS = 15; // polls before trying the event stream again

export function follow(base, emit) {
  const events = new URL('dashboard/events', base).href;
  const stateURL = new URL('dashboard/state.json', base).href;
  let mode = 'connecting';

  function openStream() {
    const es = new EventSource(events);
    es.onmessage = (e) => {
      mode = 'live';
      emit(mode, e.data);
    };
    es.onerror = () => {
      es.close(); // EventSource would retry by itself; poll meanwhile
      poll();
    };
  }

  async function poll() {
    for (let i = 1; ; i++) {
      try {
        const r = await fetch(stateURL, { cache: 'no-store' });
        if (!r.ok) throw new Error(`state.json: HTTP ${r.status}`);
        const text = await r.text();
        mode = 'polling';
        emit(mode, text);
      } catch {
        mode = 'offline';
        emit(mode, null);
      }
      if (i % RETRY_STREAM_POLLS === 0 && mode === 'polling') {
        openStream();
        return;
      }
      await new Promise((ok) => setTimeout(ok, POLL_MS));
    }
  }

  if (typeof EventSource === 'function') openStream();
  else poll();
}
