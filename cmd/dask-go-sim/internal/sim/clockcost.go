package sim

import (
	"slices"
	"time"
)

// clockCost is what two back-to-back threadCPU reads measure with nothing
// between them: the part of the clock's own system calls (the return of the
// first, the entry of the second) that every interval measured around
// State.Handle contains. It is the simulator's bookkeeping, not the
// engine's work, and on a machine whose system calls are slow it was
// about a tenth of the engine's CPU per task; Result subtracts it once per
// Handle (engine_cpu_s) and keeps the uncorrected sum (engine_cpu_raw_s).
// The median of many pairs ignores the pairs a preemption or an interrupt
// lengthened.
func clockCost() time.Duration {
	const pairs = 2001
	d := make([]time.Duration, pairs)
	for i := range d {
		c0 := threadCPU()
		d[i] = threadCPU() - c0
	}
	slices.Sort(d)
	return d[pairs/2]
}
