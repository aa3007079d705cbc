// Package server is the scheduler's outer ring: the sockets, clocks and
// helper processes around the engine (package scheduler), which owns no
// goroutine and sees no wire value.
//
// # Data flow
//
//	clients ─┐  comm.Server (one goroutine per connection)       helpers (compat.HelperPool)
//	workers ─┼─▶ RPC handlers (handlers.go, data.go, ...) ──┐        ▲            │
//	nannies ─┘   streams (streams.go: read loop per peer) ──┤   Submit│   Results  │
//	                                                        ▼        │            ▼
//	              decode.go, coordination.go: typed stimuli ──▶ loop.events ◀── forwardResults
//	              (a stream's batch: loop.handleBatch) ──┐            │ loop.run
//	                                                     ▼            ▼
//	                                 under loop.mu: State.Handle(st) ─▶ Outbox
//	                                                                  │
//	        comm.BatchedSend per stream ◀── dispatch ─┬─ Replies ─▶ the waiting RPC handler
//	        (Queue; loop.flush: Flush)                └─ Helper, ShuffleRuns, Disconnect, Logs
//
// Every input becomes a typed stimulus at the edge (decode.go; coordination
// ops are scheduler/coord ops wrapped in scheduler.CoordOp); a malformed
// field is an error reply naming the op and the field, never a panic. The
// engine is called under loop.mu, by the loop goroutine for events (RPC
// stimuli, ticks, helper results) and by a stream's reader for the batch
// it just read (loop.handleBatch: a task-finished gets its compute-task
// back from the goroutine that read it, issue 31): State.Handle, then
// dispatch, which queues on BatchedSends and returns the stimuli its own
// failures produce (a helper gone), handled next in order; after the event
// or batch, loop.flush writes each stream it touched once, from the same
// goroutine, taking only what the socket accepts at once (the rest goes to
// the stream's writer), so the engine's holder never blocks on a peer.
// Queries of the engine's state (identity, who_has, the story) run on the
// loop too (loop.query), between stimuli.
//
// # Time
//
// The engine has no clock: every stimulus is stamped with Clock.Now, and
// the periodic ticks (Tick for worker-ttl and leases, StealTick, AMMTick),
// RPC timeouts and polls come from Clock.After and Clock.NewTicker
// (clock.go; Config.Clock, the wall clock by default). Socket deadlines
// alone are wall time.
//
// # Goroutines, and who owns them
//
//   - Server (goRun, joined by Shutdown): the loop; forwardResults (helper
//     answers to the loop); one periodic ticker per tick kind; the memory
//     returner (memreturn.go); and Serve's goroutine, which reports on
//     serveErr.
//   - comm.Server: one goroutine per accepted connection, which runs that
//     connection's RPC handlers and, for a worker or client, its stream's
//     read loop (streams.go) until the peer leaves; Shutdown waits for them.
//   - comm.BatchedSend: one writer per stream, stopped by Close or Abort
//     when the stream's reader ends. It writes what a flush could not
//     write at once, and what Send (not Queue) appended.
//   - Fan-outs (data.go's get_data and update_data, broadcast, replicate's
//     gather_on_worker and free_keys, P2P barriers, restart's nanny kills):
//     one goroutine per worker, each joined (WaitGroup or a results
//     channel of the fan-out's size) before the handler returns.
//   - Diagnostics (diagnostics.go): the fan-outs of profile, call_stack,
//     benchmark_hardware and the cluster dump's dump_state (callEach),
//     joined before the handler returns; one goroutine per running
//     MemorySampler sample (memsampler.go) and one per get_task_metadata
//     collection (taskmetadata.go), owned by the server (goRun), each
//     ending with its sample or collection, or with the server.
//   - terminate starts Shutdown on a goroutine of its own, so that the RPC
//     can answer before the server it runs in stops.
//
// # Locks
//
//   - Server.mu: the stream maps (workers, clients). Held only to look up,
//     add or remove a stream, never across I/O.
//   - Server.rngMu: rng, for scatter's and gather's random choices.
//   - Server.replicaMu: replicate and rebalance exclude each other
//     (Scheduler._replica_lock).
//   - loop.replyMu: the reply slots of RPCs waiting for the engine.
//   - loop.mu: the engine and the streams to flush. Held for one event or
//     one stream batch; never while waiting for a peer or for another lock
//     holder (a query from inside would deadlock, as it did on the loop).
//
// The engine's state is touched only under loop.mu.
package server
