// Package coord holds the scheduler's coordination extensions: what
// distributed's scheduler runs beside its task state for Lock and
// Semaphore (semaphore.go: SemaphoreExtension), MultiLock (multilock.go:
// MultiLockExtension), Event (event.go: EventExtension), Variable
// (variable.go: VariableExtension), Queue (queue.go: QueueExtension),
// published datasets (publish.go: PublishExtension) and the scheduler's
// metadata (metadata.go: set_metadata/get_metadata).
//
// # Role
//
// It is part of the engine's inner ring: a pure state machine with no
// sockets, goroutines or clocks. The engine (scheduler.State) owns one
// Coordinator and is its only caller; the coordination ops reach it as the
// stimulus scheduler.CoordOp, under the engine's lock (the rule is written
// once, in scheduler/server/doc.go, "The engine's lock").
//
// # Data flow
//
//	client RPC / stream op
//	   │ scheduler/server decodes it into a typed Op (ops.go lists them)
//	   ▼
//	State.Handle(&CoordOp{Op, At}) ──▶ Coordinator.Handle(op, now)
//	                                       │ answers through Host.Reply now,
//	                                       │ or parks the RPC (waits.go)
//	State.Handle(Tick)  ──────────────▶ Coordinator.Tick(now): semaphore leases
//	State.Handle(&CoordOp{CancelWait}) ─▶ a parked RPC gives its timeout answer
//	                                       ▼
//	Host (scheduler/coordination.go's coordHost over the engine):
//	  Reply → Outbox.Replies, Logf → the engine's log,
//	  DesireKeys/ReleaseKeys/RemoveClient → pseudo-clients that hold futures
//	  FutureState → a task's state for a Variable or Queue getter
//
// # Invariants
//
//   - Time enters only as the now of Handle and Tick; a Coordinator never
//     reads a clock. A caller's timeout is the outer ring's: it sends
//     CancelWait when the timeout passes or the caller leaves, and the
//     parked RPC then answers as distributed's wait_for would (false, a
//     TimeoutError). A CancelWait for an RPC already answered changes
//     nothing: that answer stands.
//   - Every RPC handed in is answered exactly once: at once, later by
//     another op (a release that frees a lease, an event set, a put on a
//     queue), or by CancelWait. Parked(id) reports the ones still waiting.
//   - A future held by a Variable, a Queue or a published dataset is held
//     by a pseudo-client through Host.DesireKeys, as a client holds it, and
//     released through Host.ReleaseKeys when the value is replaced or
//     deleted; the task's lifetime rules stay the engine's.
//   - Semaphore leases not refreshed within their timeout are dropped on
//     the Tick after lease-validation-interval, as SemaphoreExtension's
//     periodic _check_lease_timeout does; a lock is a semaphore of one.
package coord
