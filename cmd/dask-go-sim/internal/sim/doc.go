// Package sim runs the real scheduler engine (package scheduler) against
// simulated workers and one simulated client: a deterministic
// discrete-event simulation of a dask cluster, used to compare the root-task
// policies (Modes: off, main, withholding, coassign; scheduler/WITHHOLDING.md)
// on exported graphs at 5 to 1,000 workers, faster and cheaper than real
// clusters. cmd/dask-go-sim parses flags; scripts/sim/README.md says how
// its results are made and checked against real runs.
//
// # Data flow
//
//	Graph (graph.go: scripts/export-graph.py's file, or synthetic.go)
//	   │ start: AddWorker ×N, AddClient, UpdateGraph at t=0
//	   ▼
//	event queue (events.go) ──evToScheduler──▶ scheduler.State.Handle
//	   ▲                                             │ Outbox
//	   │                                             ▼
//	   │                         dispatch: worker messages after the link
//	   │                         latency (evToWorker), client messages read
//	   │                                             │
//	workers (worker.go, workerops.go): compute-task runs on a thread (cpu.go
//	shares cores, with or without the interpreter lock), dependencies are
//	fetched over per-worker links (evTransferDone), memory is held and
//	spilled (memory.go, spill.go); each produces the stimuli a stock worker
//	would send (TaskFinished, AddKeys, ...) ──▶ back on the queue
//
// Periodic ticks (evStealTick, evAMMTick, evMemoryMonitor) are events too.
// When every wanted key is in memory the client releases them (finish), and
// the run ends when the queue is empty. Result (result.go) records the
// makespan, peak memory, bytes moved and the engine's CPU (engineclock.go
// times every Handle).
//
// # Invariants
//
//   - A run is a pure function of its Graph, Config and Seed: one event queue
//     ordered by (time, sequence), worker outboxes dispatched in address
//     order, and randomness only from the seeded generator (Sim.rand). The
//     engine's decisions can be digested (digest.go) and compared between
//     builds to the byte.
//   - The engine is the production engine, unchanged: the simulator only
//     builds stimuli and reads outboxes, as scheduler/server does, and hands
//     each outbox back to the engine (State.Recycle) as the real loop does,
//     so that the engine's CPU per task is production's.
//   - Simulated time is the engine's time: every stimulus is stamped with
//     the event's time (Sim.at), never the wall clock.
//   - A run that cannot finish fails: ErrStuck when the queue runs dry with
//     wanted keys outstanding, an error when a task errs.
package sim
