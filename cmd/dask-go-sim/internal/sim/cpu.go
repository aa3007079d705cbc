package sim

import (
	"container/heap"
	"math"
)

// cpu models a machine whose cores are shared by every executing task and
// every transfer of the cluster (Config.Cores > 0): processor sharing. With n tasks running
// on c cores each progresses at min(1, c/n) CPU-seconds per second, so a
// task's Duration is its CPU work, and its wall time stretches while more
// tasks than cores run. This is what the small-scale benchmark does: four
// single-threaded worker processes on a 2-core machine, where the workers'
// own execute metrics show thread-noncpu time (waiting for a core) about
// as large as thread-cpu time, and the worker processes spend more CPU
// outside tasks (moving data over loopback) than inside them
// (scripts/sim/results/calibration/README.md).
//
// Virtual time v is the CPU work every running task has received since the
// processor-sharing period began; it advances at the common rate, so a task
// that starts at virtual time v0 with work W finishes when v reaches v0+W,
// and the earliest finisher is the minimum of v0+W: one heap, and one
// pending completion event (its generation invalidates the older ones when
// a start or finish changes the rate).
//
// Invariant: v and last describe the state at time last; every change to
// the running set first advances v to now.
type cpu struct {
	cores float64
	v     float64 // virtual time (CPU-seconds per running task)
	last  float64 // real time v was last advanced to
	jobs  jobHeap
	gen   uint64 // generation of the one valid evCPU event
	seq   uint64 // FIFO among equal finish times (determinism)
}

// cpuJob is one executing task, or one transfer's (de)serialization and
// copying (transfer: task is the dependency, w its destination), on the
// shared cores.
type cpuJob struct {
	end      float64 // virtual finish time
	seq      uint64
	transfer bool
	w        int32
	task     int32
	run      int64
	start    float64 // real start time (the worker reports start and stop)
}

func newCPU(cores float64) *cpu { return &cpu{cores: cores} }

// rate is the CPU-seconds per second each of n running tasks receives.
func (c *cpu) rate(n int) float64 {
	if n == 0 || float64(n) <= c.cores {
		return 1
	}
	return c.cores / float64(n)
}

// advance moves virtual time to real time now at the current rate.
func (c *cpu) advance(now float64) {
	c.v += (now - c.last) * c.rate(len(c.jobs))
	c.last = now
}

// start adds a job with work seconds of CPU at time now.
func (c *cpu) start(now, work float64, j cpuJob) {
	c.advance(now)
	c.seq++
	j.end, j.seq, j.start = c.v+work, c.seq, now
	heap.Push(&c.jobs, j)
}

// next is the real time of the earliest finish, and whether any task runs.
func (c *cpu) next() (float64, bool) {
	if len(c.jobs) == 0 {
		return 0, false
	}
	return c.last + math.Max(0, c.jobs[0].end-c.v)/c.rate(len(c.jobs)), true
}

// finished removes and returns the tasks done by time now (those within a
// rounding error of the virtual clock too, so a completion event never
// leaves its own task behind).
func (c *cpu) finished(now float64) []cpuJob {
	c.advance(now)
	eps := 1e-9 * math.Max(1, math.Abs(c.v))
	var out []cpuJob
	for len(c.jobs) > 0 && c.jobs[0].end <= c.v+eps {
		out = append(out, heap.Pop(&c.jobs).(cpuJob))
	}
	return out
}

type jobHeap []cpuJob

func (h jobHeap) Len() int { return len(h) }
func (h jobHeap) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return h[i].seq < h[j].seq
}
func (h jobHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)   { *h = append(*h, x.(cpuJob)) }
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	*h = old[:len(old)-1]
	return j
}
