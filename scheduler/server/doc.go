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
//	                                                                  │
//	                                              loop.run: State.Handle(st) ─▶ Outbox
//	                                                                  │
//	        comm.BatchedSend per stream ◀── dispatch ─┬─ Replies ─▶ the waiting RPC handler
//	                                                  └─ Helper, ShuffleRuns, Disconnect, Logs
//
// Every input becomes a typed stimulus at the edge (decode.go; coordination
// ops are scheduler/coord ops wrapped in scheduler.CoordOp); a malformed
// field is an error reply naming the op and the field, never a panic. The
// loop is the only caller of the engine: State.Handle, then dispatch, which
// only appends to BatchedSends (it never blocks on a peer) and returns the
// stimuli its own failures produce (a helper gone), handled next in order.
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
//     when the stream's reader ends.
//   - Fan-outs (data.go's get_data and update_data, broadcast, replicate's
//     gather_on_worker and free_keys, P2P barriers, restart's nanny kills):
//     one goroutine per worker, each joined (WaitGroup or a results
//     channel of the fan-out's size) before the handler returns.
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
//
// No lock is held while calling the engine; the engine's state is touched
// only from the loop goroutine.
package server
