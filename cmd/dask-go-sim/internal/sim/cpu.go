package sim

import (
	"container/heap"
	"math"
	"sort"
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
// With the interpreter lock (Config.GIL) the cores are shared among worker
// processes, not jobs: a worker's executing tasks are its shares (at least
// one), the transfers it receives take turns with them on those shares (a
// stock worker deserializes on its event loop, which holds the same GIL as
// its task threads), and the cores are divided among all the workers'
// shares. A worker busy receiving data then computes more slowly, where
// without the lock every transfer would bring its worker an extra share.
//
// Each worker's jobs form a group with its own virtual time v: the CPU work
// every job of the group has received since the group became busy; it
// advances at the group's common rate, so a job that starts at virtual time
// v0 with work W finishes when v reaches v0+W, and the group's earliest
// finisher is the minimum of v0+W (one heap per group). One pending
// completion event for the whole machine (its generation invalidates the
// older ones when a start or finish changes the rates).
//
// Invariant: every group's v describes the state at time last; every change
// to the running set first advances them all to now.
type cpu struct {
	cores  float64
	gil    bool
	last   float64 // real time the groups were last advanced to
	groups map[int32]*cpuGroup
	order  []int32 // the busy groups' workers, sorted (deterministic scans)
	gen    uint64  // generation of the one valid evCPU event
	seq    uint64  // FIFO among equal finish times (determinism)
}

// cpuGroup is one worker's jobs on the shared cores.
type cpuGroup struct {
	v     float64 // virtual time (CPU-seconds per job of the group)
	jobs  jobHeap
	tasks int // executing tasks among the jobs
}

// cpuJob is one executing task, or one transfer's (de)serialization and
// copying (transfer: task is the dependency, w its destination), on the
// shared cores.
type cpuJob struct {
	end      float64 // virtual finish time in its group
	seq      uint64
	transfer bool
	w        int32
	task     int32
	run      int64
	start    float64 // real start time (the worker reports start and stop)
}

func newCPU(cores float64, gil bool) *cpu {
	return &cpu{cores: cores, gil: gil, groups: map[int32]*cpuGroup{}}
}

// shares is how many of the machine's core shares a group holds: with the
// lock its executing tasks (at least one), without it each job.
func (c *cpu) shares(g *cpuGroup) int {
	if c.gil {
		return max(1, g.tasks)
	}
	return len(g.jobs)
}

// unit is the CPU-seconds per second one share receives.
func (c *cpu) unit() float64 {
	n := 0
	for _, g := range c.groups {
		n += c.shares(g)
	}
	if n == 0 || float64(n) <= c.cores {
		return 1
	}
	return c.cores / float64(n)
}

// rate is the CPU-seconds per second each job of g receives.
func (c *cpu) rate(g *cpuGroup, unit float64) float64 {
	return unit * float64(c.shares(g)) / float64(len(g.jobs))
}

// advance moves every group's virtual time to real time now at the
// current rates.
func (c *cpu) advance(now float64) {
	if dt := now - c.last; dt > 0 {
		u := c.unit()
		for _, g := range c.groups {
			g.v += dt * c.rate(g, u)
		}
	}
	c.last = now
}

// start adds a job with work seconds of CPU at time now.
func (c *cpu) start(now, work float64, j cpuJob) {
	c.advance(now)
	g := c.groups[j.w]
	if g == nil {
		g = &cpuGroup{}
		c.groups[j.w] = g
		c.order = append(c.order, j.w)
		sort.Slice(c.order, func(a, b int) bool { return c.order[a] < c.order[b] })
	}
	c.seq++
	j.end, j.seq, j.start = g.v+work, c.seq, now
	heap.Push(&g.jobs, j)
	if !j.transfer {
		g.tasks++
	}
}

// next is the real time of the earliest finish, and whether any job runs.
func (c *cpu) next() (float64, bool) {
	u := c.unit()
	best, ok := 0.0, false
	for _, w := range c.order {
		g := c.groups[w]
		at := c.last + math.Max(0, g.jobs[0].end-g.v)/c.rate(g, u)
		if !ok || at < best {
			best, ok = at, true
		}
	}
	return best, ok
}

// finished removes and returns the jobs done by time now (those within a
// rounding error of their group's virtual clock too, so a completion event
// never leaves its own job behind), in worker order.
func (c *cpu) finished(now float64) []cpuJob {
	c.advance(now)
	var out []cpuJob
	kept := c.order[:0]
	for _, w := range c.order {
		g := c.groups[w]
		eps := 1e-9 * math.Max(1, math.Abs(g.v))
		for len(g.jobs) > 0 && g.jobs[0].end <= g.v+eps {
			j := heap.Pop(&g.jobs).(cpuJob)
			if !j.transfer {
				g.tasks--
			}
			out = append(out, j)
		}
		if len(g.jobs) == 0 {
			delete(c.groups, w)
			continue
		}
		kept = append(kept, w)
	}
	c.order = kept
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
