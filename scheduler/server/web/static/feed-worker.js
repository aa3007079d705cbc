// feed-worker.js: one event stream for every dashboard page of an origin
// (a SharedWorker). Over HTTP/1.1 a browser keeps at most 6 connections
// per host, and each EventSource holds one for good: a JupyterLab session
// with several dashboard panels in iframes, or a few tabs, would leave
// the next page waiting forever. Pages connect here instead and get each
// View the one stream delivers (dashboard.js).

import { follow } from './feed.js';

const ports = new Set();
let mode = 'connecting';

follow(new URL('../', import.meta.url), (m, text) => {
  mode = m;
  for (const port of ports) port.postMessage({ mode, text });
});

// A page says 'bye' when it goes away and 'hello' when it comes back from
// the back-forward cache.
self.onconnect = (e) => {
  const port = e.ports[0];
  ports.add(port);
  port.onmessage = (m) => {
    if (m.data === 'bye') ports.delete(port);
    else if (m.data === 'hello') ports.add(port);
  };
  port.postMessage({ mode, text: null });
};
