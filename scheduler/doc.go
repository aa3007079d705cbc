// Package scheduler is the engine of the Go dask scheduler: distributed's
// SchedulerState rewritten as a pure, synchronous state machine.
//
// # Role
//
// The engine decides: which task runs where, what every worker and client
// must be told, what is forgotten. It never touches a socket, a clock, a
// goroutine, global randomness or viper. The outer ring (scheduler/server)
// decodes wire messages into the stimuli of api.go, calls State.Handle on a
// single goroutine, and sends the returned Outbox. Time enters only as
// Base.At; time-based rules run on Tick.
//
// # Data flow
//
//	worker / client streams, RPCs, timers        materializer helper
//	             |                                  ^        |
//	             v                                  |        v
//	  +--------------------+  Stimulus   +----------------------------+
//	  | outer ring (server)| ----------> | State.Handle               |
//	  |  sockets, clocks,  |             |  dispatch -> stimulus_*    |
//	  |  helper process    | <---------- |  recommendations loop      |
//	  +--------------------+   Outbox    |   (transition table)       |
//	    Workers / Clients msgs,          |  placement policies        |
//	    Helper requests, Replies,        |  validate (tests)          |
//	    Disconnect, Logs                 +----------------------------+
//
// update-graph is two stimuli: UpdateGraph emits a HelperRequest and holds
// that client's later stream stimuli; GraphMaterialized applies the graph
// (Scheduler.update_graph after materialization) and replays what was held,
// in order.
//
// P2P shuffles (shuffle*.go) follow distributed's ShuffleSchedulerPlugin:
// the shuffle RPCs are stimuli whose replies may wait; creating a run emits
// Outbox.ShuffleRuns for the helper (the partition -> worker map and the
// ShuffleRunSpec pickle need Python) and ShuffleRunCreated activates it. A
// hook after every transition ends a run whose barrier is released, erred
// or forgotten; worker removal fails the runs it took part in and
// restarts their shuffles.
//
// # Structure
//
// One function per transition pair, named after distributed's
// (transitionWaitingProcessing mirrors _transition_waiting_processing), in
// transitionTable keyed by (from, to); pairs not in the table go through
// released, exactly as SchedulerState._transition does. Transitions write
// their recommendations into State.recs, which behaves like distributed's
// recommendations dict (insertion order, in-place updates, LIFO pop), and
// their messages straight into the Outbox, so per-peer order is the order
// distributed would send. Placement lives in policy_*.go (root-ish queuing,
// decide_worker); the queue is a sorted run plus a heap with lazy deletion,
// so each decision is O(1) for tasks queued in priority order and O(log n)
// otherwise, and each removal from the queue is amortized O(1).
//
// # Invariants (checked after every Handle when Config.ValidateInvariants)
//
//   - dependencies/dependents, who_has/has_what, who_wants/wants_what are
//     symmetric; waiting_on ⊆ dependencies, waiters ⊆ dependents.
//   - a task is processing iff processing_on is set and it is in that
//     worker's processing set; memory iff it has a replica; queued iff it
//     is in the queue; no-worker iff it is in unrunnable.
//   - ready tasks (queued, processing, no-worker) have every dependency in
//     memory and are waiters of each of them.
//   - tasks are queued only when queuing is on (finite worker-saturation),
//     they are unrestricted, and no running worker has a free slot; tasks
//     placed by the queuing policy never exceed a worker's slot limit
//     max(ceil(saturation*nthreads), 1). With root-task-co-assignment,
//     queued tasks sit in per-worker runs (a worker's dealt families, a
//     contiguous range of its partition's block); WITHHOLDING.md lists
//     those invariants and the complexity of each decision.
//   - only running workers are in running/idle/saturated sets; removed
//     workers are in none; needs_what, prefix counts and total threads
//     match a recount.
//
// A broken invariant is an engine bug: Handle panics with the task's story
// from the bounded transition log. Bad peer input (unknown keys or workers,
// stale run_ids, malformed annotations) is never a panic: it is ignored as
// distributed ignores it, and reported in Outbox.Logs.
//
// Everything iterated to produce output is insertion-ordered (oset, recs),
// so the same stimuli always produce byte-identical outboxes.
package scheduler
