// Package server is the scheduler's outer ring: the sockets, clocks and
// helper processes around the engine (package scheduler), which owns no
// goroutine and sees no wire value.
//
// # Data flow
//
//	clients ─┐  comm.Server: a goroutine per connection
//	workers ─┼─▶ RPC handlers (handlers.go, data.go, ...) ── call, submit, query ──▶ loop.events ◀── tickers,
//	nannies ─┘     │ (3) callNow: heartbeat_worker                                      │   helper results
//	             streams (streams.go: a reader per peer)                                │ (1) loop.run
//	               │ (2) handleBatch: the batch just read                               │
//	               ▼                                                                    ▼
//	             loop.enter, under loop.mu: the queued events first, then its own stimuli
//	             (typed at the edge: decode.go, coordination.go):
//	             State.Handle(st) ─▶ Outbox ─▶ dispatch ─┬─ stream messages: BatchedSend.Queue, then Flush
//	                                                     ├─ Replies ─▶ the waiting RPC goroutine
//	                                                     ├─ Helper, ShuffleRuns ─▶ compat.HelperPool
//	                                                     └─ Disconnect: BatchedSend.Shut; Logs
//
// Every input becomes a typed stimulus at the edge (decode.go; coordination
// ops are scheduler/coord ops wrapped in scheduler.CoordOp); a malformed
// field is an error reply naming the op and the field, never a panic.
//
// # The engine's lock
//
// This is the rule every other comment points to. Whoever holds loop.mu
// owns all of the engine's state (scheduler.State and what it points to)
// and the list of streams to flush; nobody touches them otherwise.
//
// The doors. loop.enter is the only way in, and three kinds of goroutine
// take it:
//
//  1. the loop goroutine (loop.run), woken when an event is queued
//     (loop.events: RPC stimuli and queries, ticks, helper results);
//  2. a stream's reader (streams.go, loop.handleBatch), for the batch of
//     stimuli it has just read from a client or worker, so that a
//     task-finished gets its compute-task back with no hand-off;
//  3. an RPC connection's goroutine (loop.callNow), for a stimulus answered
//     where nothing else waits: heartbeat_worker.
//
// Every holder first applies the events queued when it took the lock, in
// order, then its own stimuli, then flushes the streams they queued to,
// and lets go. Only holders receive from loop.events.
//
// What a holder may do: run State.Handle and queries, append to stream
// buffers (BatchedSend.Queue), deliver replies to waiting RPC goroutines,
// flip flags, queue work for others (a helper request, a nanny restart on a
// goroutine of the server's), log (the log's writer never blocks:
// cmd/dask-go-scheduler's logSink), and write to a socket only what it
// takes at once (BatchedSend.Flush). What it may never do: wait for a
// socket, a process, a timer, a channel another goroutine must drain, or a
// lock whose holder may wait for any of those. Closing a peer's stream is
// BatchedSend.Shut, which stops the stream at once and leaves the draining
// and the close to the stream's writer. The locks a holder takes inside
// are leaves held for memory operations only (Server.mu, BatchedSend.mu,
// loop.replyMu, the helper pool's queue, the log ring, the status
// subscribers); nothing holding one of them enters the engine.
//
// The order. Distributed's Scheduler runs on one event loop: a stream's
// messages apply in order (Server.handle_stream), an RPC's handler runs
// before its reply is written (Server.handle_comm), and what a handler
// queues on batched streams leaves after that reply. Ours gives the same:
//
//   - a stream's messages apply in the order they were sent;
//   - an event queued before a holder took the lock applies before that
//     holder's own stimuli, so nothing overtakes an RPC's stimulus once it
//     is queued;
//   - an RPC handler answers only after its stimuli have applied (call,
//     callNow, submitWait, query; submit is for stimuli no reply depends
//     on), so what a peer sends after reading a reply applies after the
//     RPC's stimulus, whichever connection carries it;
//   - an RPC whose stimulus sends on its caller's own stream holds that
//     stream until the reply is written (BatchedSend.Hold; retry), so the
//     reply arrives first.
//
// RPCs and stream messages that a peer sends concurrently, without waiting
// for a reply in between, have no order, in distributed or here.
//
// What callers keep. A query copies out what it needs: values, or maps and
// slices the accessor builds for the call (the accessors of
// scheduler/accessors.go say which they build). A *TaskState, a
// *WorkerState, or a map or slice of the engine's may not be kept or read
// after the query returns; a *protocol.Map an accessor returns is read-only
// (some are shared with the engine). loop_test.go tests the doors and the
// order.
//
// What the streams keep. The messages of an Outbox are the streams' until
// encoded. A holder tells the engine they are written
// (State.MessagesWritten, which lets it build later compute-tasks in the
// same objects) only when every stream queued to since it last did reports
// BatchedSend.Drained (loop.messagesWrittenMaybe); nothing else may keep a
// stream message past its dispatch.
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
//   - Server (goRun, joined by Shutdown): the loop goroutine; forwardResults (helper
//     answers to the loop); one periodic ticker per tick kind; the memory
//     returner (memreturn.go); and Serve's goroutine, which reports on
//     serveErr.
//   - comm.Server: one goroutine per accepted connection, which runs that
//     connection's RPC handlers and, for a worker or client, its stream's
//     read loop (streams.go) until the peer leaves; Shutdown waits for them.
//   - comm.BatchedSend: one writer per stream, stopped by Close or Abort
//     when the stream's reader ends, or by Shut when the engine drops the
//     peer (it then drains until a deadline and closes the connection). It
//     writes what a flush could not write at once, and what Send (not
//     Queue) appended.
//   - Fan-outs (data.go's get_data and update_data, broadcast, replicate's
//     gather_on_worker and free_keys, P2P barriers, restart's nanny kills):
//     one goroutine per worker, each joined (WaitGroup or a results
//     channel of the fan-out's size) before the handler returns.
//   - Diagnostics (diagnostics.go): the fan-outs of profile, call_stack,
//     benchmark_hardware and the cluster dump's dump_state (callEach),
//     joined before the handler returns; one goroutine per running
//     MemorySampler sample (memsampler.go) and one per get_task_metadata
//     collection (taskmetadata.go), owned by the server (goRun), each
//     ending with its sample or collection, or with the server; the system
//     monitor's sampler (sysmon.go), started on its first read and ending
//     with the server.
//   - feed (feed.go): the connection's goroutine runs the feed until its
//     final message or the client's hang-up, with a reader goroutine that
//     ends when the connection closes (joined before the handler returns)
//     and a watcher that turns the hang-up into the feed's cancellation
//     (ending with the handler's context).
//   - terminate starts Shutdown on a goroutine of its own, so that the RPC
//     can answer before the server it runs in stops.
//   - The scheduler-side Python host (compat.Host, host.go): none until the
//     first call that needs it; then per host process the goroutine that
//     serves it and its pipe's writer, and one goroutine per call the host
//     makes to Go (snapshot, rpc, close), all owned by the Host and joined
//     by Shutdown (Host.Close). A call to the host (run_function, a
//     forwarded op) waits on its RPC's goroutine, never under loop.mu; the
//     host's calls enter the engine as any RPC does (loop.query,
//     submitWait), and a stream op for the host is posted, never waited for.
//   - The hook pump (hooks.go, pumpHooks; goRun): takes the scheduler
//     plugin events that engine lock holders queued (hookQueue.push, a
//     leaf lock, never waiting) and calls the Python host with them, one
//     batch in flight; it ends with the server.
//
// # Locks
//
//   - Server.mu: the stream maps (workers, clients). Held only to look up,
//     add or remove a stream, never across I/O or a stream's close.
//   - Server.rngMu: rng, for scatter's and gather's random choices.
//   - Server.replicaMu: replicate and rebalance exclude each other
//     (Scheduler._replica_lock).
//   - loop.replyMu: the reply slots of RPCs waiting for the engine.
//   - loop.mu: the engine and the streams to flush: "The engine's lock"
//     above. A query from inside a holder would deadlock.
package server
