// Package web is the scheduler's HTTP server on the dashboard address:
// the routes dask's deployment tools and users call (distributed/http/),
// Prometheus metrics, and the live dashboard, served from files embedded
// in the binary.
//
//	route                      route module (distributed.scheduler.http.routes)
//	/health                    distributed.http.health: "ok" (Kubernetes probes)
//	/json/counts.json          distributed.http.scheduler.json CountsJSON
//	/json/identity.json        distributed.http.scheduler.json IdentityJSON
//	/metrics                   distributed.http.scheduler.prometheus
//	/individual-plots.json     distributed.http.scheduler.info IndividualPlots
//	/info -> /workers          distributed.http.scheduler.info
//	/api/v1, /api/v1/...       distributed.http.scheduler.api (not in the
//	                           default list, as in distributed)
//	/  ->  /status             the dashboard (static/): /status, /workers,
//	                           /tasks, /individual-*; always, as Bokeh's are
//	/statics/                  the dashboard's scripts and styles; always
//	/dashboard/state.json      ours: the dashboard's data (view.go)
//	/dashboard/events          ours: the same, pushed (server-sent events)
//
// distributed.http.proxy (jupyter-server-proxy) is accepted and not
// served; any other module is an error at start (route_groups.go).
// Every route is under the --dashboard-prefix, as in distributed.
//
// Invariants: a handler never touches the engine. It reads the Snapshot
// the engine published on its last tick (Backend.Snapshot, an atomic
// load; the engine builds one on a tick only while routes read it, and a
// read after a quiet spell has one built on the spot, so it is never more
// than two ticks old), or calls one of Backend's RPC-like methods (retire_workers and
// the like: one request to the engine each, not one per task). Every
// connection has deadlines (a slow or abandoned client cannot hold a
// goroutine): read timeouts on every request, a write timeout on every
// response but the event stream, which sends a comment every 15 s and ends
// when its client does or the server stops.
package web
