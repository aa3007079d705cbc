package scheduler

// Stimuli of time and of the operator: the outer ring's periodic ticks for
// work stealing and the active memory manager (Tick, for worker-ttl and
// leases, is in stimulus.go), and run-time configuration changes.

// StealTick asks the engine to balance the work (WorkStealing.balance); the
// outer ring sends it every work-stealing-interval.
type StealTick struct {
	Base
}

// AMMTick runs the active memory manager once (the outer ring sends it
// every active-memory-manager.interval while it is on).
type AMMTick struct {
	Base
}

// ConfigChange switches withholding and co-assignment at run time
// (worker-saturation and root-task-co-assignment). distributed has no such
// stimulus (tests assign SchedulerState.WORKER_SATURATION); ours exists so
// that a configuration change is one more event that may open slots, and
// so that tests can move a loaded engine between the three modes.
type ConfigChange struct {
	Base
	// WorkerSaturation: > 0, or math.Inf(1) to stop withholding.
	WorkerSaturation     float64
	RootTaskCoAssignment bool
}
