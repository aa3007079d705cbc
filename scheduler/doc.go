// Package scheduler is the engine of the Go dask scheduler: distributed's
// SchedulerState rewritten as a pure, synchronous state machine.
//
// # Role
//
// The engine decides: which task runs where, what every worker and client
// must be told, what is forgotten. It never touches a socket, a clock, a
// goroutine, global randomness or viper. The outer ring (scheduler/server)
// decodes wire messages into the stimuli of stimulus.go, calls State.Handle
// from one goroutine at a time, under its lock (the rule:
// scheduler/server/doc.go), and sends the returned Outbox. Time enters only as
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
// # Where each concept lives
//
//	concept                      files
//	State, Handle, dispatch      state.go (the one mutator), config.go, config_change.go
//	stimuli (the inputs)         stimulus.go, stimuli_worker.go, stimuli_client.go,
//	                             stimuli_helper.go, stimuli_shuffle.go, stimuli_tick.go,
//	                             stimuli_diagnostics.go
//	the outbox (the outputs)     outbox.go, messages.go (every message built, field for field)
//	tasks, workers, clients      task.go, taskset.go, worker.go, worker_needs.go,
//	                             membership.go, client.go
//	graphs                       graph.go (update_graph), annotations.go, keysplit.go
//	transitions                  transitions.go (table, loop, log, cascade cap),
//	                             transitions_waiting.go, transitions_processing.go,
//	                             transitions_memory.go; task_events.go (what workers report)
//	placement                    place.go (placeReady, Placement, Reason), place_rootish.go,
//	                             place_locality.go, place_restrictions.go
//	withholding                  withhold.go (filling slots), withhold_queue.go (queue, slot heap),
//	                             withhold_validate.go; WITHHOLDING.md
//	co-assignment                coassign.go (runs, dealing out), coassign_family.go,
//	                             coassign_deal.go, coassign_pace.go, coassign_place.go,
//	                             coassign_validate.go
//	work stealing                steal.go (balance), steal_races.go (the exchange with workers)
//	memory manager, cluster ops  amm.go (ReduceReplicas), amm_control.go (amm_handler),
//	                             cluster_replicas.go (replicate, rebalance), cluster_retire.go
//	                             (RetireWorker), cluster_restart.go, worker_resources.go
//	P2P shuffles                 shuffle.go, shuffle_cleanup.go
//	coordination primitives      coordination.go, and package coord (Lock, Semaphore,
//	                             MultiLock, Event, Variable, Queue, datasets, metadata)
//	event log, task stream       eventlog.go, taskstream.go, plugins.go
//	scheduler plugin hooks       hooks.go (SchedulerPlugin's calls, as Outbox.Hooks, only
//	                             while a listener is set)
//	checks and views             validate.go, footprint.go, accessors.go, exported.go
//	diagnostics                  memory.go (MemoryState), memsampler.go (MemorySampler),
//	                             taskmetadata.go (get_task_metadata), dump.go (the cluster
//	                             dump's copy), accessors_diagnostics.go (nbytes, call_stack,
//	                             error causes, run_specs), progress.go (progress bars'
//	                             Progress / MultiProgress, while a feed is open)
//	collections                  oset.go
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
// distributed would send.
//
// Placement is one entry point, placeReady (and placeQueued for queued
// tasks), composed of stages that each return the worker with the reason
// they chose it (Reason: a rule and its figures, rendered only when read).
// The reason is recorded with the transition in the bounded transition log,
// which Client.story (get_story), the transcript tests and a broken
// invariant's panic show. Work stealing records its moves there too. The
// queue is a sorted run plus a heap with lazy deletion, so each decision is
// O(1) for tasks queued in priority order and O(log n) otherwise, and each
// removal from the queue is amortized O(1).
//
// The engine sees no wire value: the outer ring decodes every field it acts
// on (stimulus.go); what it only relays (run_specs, annotations for
// compute-task, datasets, exceptions) it carries opaque.
//
// Tests: unit tests per concept (*_test.go), and transcript tests
// (testdata/*.txt, transcript_test.go): stories of stimuli with the outbox
// each produced and the placement reasons, rewritten with -rewrite.
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
//   - a stimulus causes at most Config.TransitionCounterMax transitions (a
//     recommendation cycle is a bug: it panics with the task's story).
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
