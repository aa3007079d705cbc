// Package compat holds what the Go scheduler needs from the Python side of
// dask to stay a drop-in replacement:
//
//   - the graph materializer (materializer*.go): a long-lived Python helper
//     process that turns a client's update-graph op into per-task facts, the
//     way distributed's Scheduler.update_graph / _materialize_graph do it;
//     graph_builder.go then culls (_cull) and orders (compat/order, the Go
//     port of dask.order) in Go; it also runs the Python half of P2P shuffles
//     (materializer_shuffle.go and .py: the ShuffleWorkerPlugin pickle for
//     register-worker, and shuffle_run, which builds a run's
//     ShuffleRunSpec); and feed_setup (helper_feed.go and .py), which
//     unpickles a feed op's closures once and says whether they are a
//     progress bar's;
//   - dask configuration (config.go, config_viper.go, settings.go,
//     settings_kinds.go): dask's YAML files and DASK_* environment
//     variables, merged into viper over DefaultSettings with dask's
//     precedence and spelling rules, read into a typed SchedulerSettings
//     whose Engine is the engine's scheduler.Config as it is passed on;
//   - the scheduler-side Python host (host*.go, host*.py): one Python
//     process, started on the first request that needs Python inside the
//     scheduler (run_on_scheduler, an op a plugin registered), that keeps
//     state: plugins, extensions, handlers, what run_on_scheduler functions
//     leave behind. It runs code written for distributed's Scheduler
//     against a dask_scheduler object (host_scheduler.py) that reads the
//     engine's state from Go on demand;
//   - the supervised-process piece both kinds of Python process sit on
//     (proc_spawn.go: spawn with the sources through fd 3, stderr to the
//     log, kill and exit status, framed reads and writes with a stall
//     deadline; proc_pipe.go: the host's bidirectional request/answer pipe;
//     proc_supervise.go: start on first need, fail every call in flight
//     when the process dies, start again on the next call);
//   - protocol/pickle: the few pickles the scheduler originates itself.
//
// Materializer data flow:
//
//	engine Outbox.Helper ──Submit──▶ queue ──writer──▶ helper stdin
//	                                                      │ python3 -c materializer.py
//	Results() ◀── GraphMaterialized ◀──reader── helper stdout (frames)
//	                                              helper stderr ──▶ zerolog
//
// Both pipes carry dask-framed messages (u64 N, u64 nframes, u64 lengths,
// frames) made by protocol.Encode on the Go side and by
// distributed.protocol.dumps on the Python side, so the __Serialized__ and
// __Pickled__ blobs of update-graph are relayed byte for byte. Every kind of
// request and answer is typed in helper_wire.py and helperwire.go. A task's
// run_spec comes back as its GraphNode pickled: in a graph of 64 tasks or
// more (and for a bulky spec in a smaller one) with references to its
// callables and bulky values, each pickled once per graph into an object
// table (memo gets for callables, persistent ids for bulky values;
// spec_pickling.py), which TaskSpec splices back (protocol/pickle) when the
// task is sent; in a smaller graph whole, as distributed's dumps pickles it.
//
// Invariants:
//   - Requests are answered in submission order; every Submit yields exactly
//     one GraphMaterialized on Results, and every SubmitShuffleRun one
//     ShuffleRunCreated (success, Python exception, or helper crash), except
//     for requests still queued when Close is called; FeedSetup waits for
//     its own answer (or its context, or Close).
//   - A request written to a helper is owned by that helper's incarnation:
//     when the process dies, every such request fails with an error naming
//     the exit status, and the helper is restarted for the rest.
//   - The supervisor (proc_supervise.go) owns each process's lifecycle: per
//     process one serving goroutine (the reader) and one writer, both joined
//     before the next starts (helpers) or by Close (the host).
package compat

//go:generate ../.venv/bin/python testdata/capture_update_graph.py
