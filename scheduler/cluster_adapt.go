package scheduler

import (
	"math"
	"sort"
	"time"
)

// Adaptive scaling and idleness: what cluster managers ask of a scheduler
// to grow and shrink it (distributed/deploy/adaptive.py calls these
// through the RPCs of the same names; the dask-kubernetes operator through
// /api/v1 or the RPCs). Read-only accessors, but for the idle clock, which
// Tick advances.

// adaptiveSample is how many ready tasks adaptive_target prices one by one
// (take(100, ...)); the rest are counted at their average.
const adaptiveSample = 100

// AdaptiveTarget mirrors Scheduler.adaptive_target: the workers needed to
// run the work assigned and ready (queued, withheld roots included, and
// unrunnable) in about targetDuration, or to hold the data when memory is
// more than 60 % used, or the workers that would remain after
// workers_to_close when fewer are needed.
func (s *State) AdaptiveTarget(targetDuration time.Duration) int {
	if targetDuration <= 0 {
		targetDuration = 5 * time.Second // distributed.adaptive.target-duration
	}
	ready := s.queuedLen() + s.unrunnable.Len()
	var queuedOcc float64
	sampled := 0
	s.eachReady(adaptiveSample, func(ts *TaskState) {
		queuedOcc += s.prefixDuration(ts.prefix)
		sampled++
	})
	if ready > adaptiveSample && sampled > 0 {
		queuedOcc *= float64(ready) / adaptiveSample
	}
	cpu := int(math.Ceil((s.totalOccupancy() + queuedOcc) / targetDuration.Seconds()))
	tasksReady := ready
	capped := true
	for _, ws := range s.workerOrder.Items() {
		if tasksReady > cpu {
			capped = false
			break
		}
		tasksReady += ws.processing.Len()
	}
	if capped {
		cpu = min(tasksReady, cpu)
	}
	if len(s.workers) > 0 && s.totalNThreads > 0 {
		cpu = int(math.Ceil(float64(cpu) / float64(s.totalNThreads) * float64(len(s.workers))))
	}
	if ready > 0 && len(s.workers) == 0 {
		cpu = max(1, cpu)
	}
	var limit, used int64
	for _, ws := range s.workerOrder.Items() {
		limit += ws.MemoryLimit
		used += ws.nbytes
	}
	memory := 0
	if limit > 0 && float64(used) > 0.6*float64(limit) {
		memory = 2 * len(s.workers)
	}
	target := max(memory, cpu)
	if target >= len(s.workers) {
		return target
	}
	return len(s.workers) - len(s.WorkersToClose(CloseQuery{N: -1, Target: -1}))
}

// eachReady calls fn for up to n ready tasks: the queued ones
// (eachQueued), then the unrunnable ones.
func (s *State) eachReady(n int, fn func(*TaskState)) {
	left := n
	s.eachQueued(func(ts *TaskState) bool {
		if left == 0 {
			return false
		}
		fn(ts)
		left--
		return true
	})
	for _, ts := range s.unrunnable.Items() {
		if left == 0 {
			return
		}
		fn(ts)
		left--
	}
}

// eachQueued calls fn for every queued task, the pool's (unowned) first,
// then those dealt to co-assignment runs, until fn returns false. fn must
// not change the queue.
func (s *State) eachQueued(fn func(*TaskState) bool) {
	for _, list := range [][]heapEntry{s.queued.run[s.queued.head:], s.queued.items} {
		for i := range list {
			if e := &list[i]; e.alive() && !fn(e.ts) {
				return
			}
		}
	}
	for _, r := range s.co.bySize.items {
		for i := r.lo; i < r.hi; i++ {
			if ts := r.block.tasks[i]; ts != nil && !fn(ts) {
				return
			}
		}
	}
}

// CloseQuery is workers_to_close's arguments. N and Target are counts, -1
// when not given (the zero value asks to close every worker); MemoryRatio
// 0 means not given; Minimum 0 means none.
type CloseQuery struct {
	N, Target   int
	MemoryRatio float64
	Minimum     int
}

// WorkersToClose mirrors Scheduler.workers_to_close without a key
// function (each worker is its own group): the workers that can close with
// the least data to move, idle ones first, keeping Target (or all but N),
// and while their memory limit is not needed (memory_ratio 2 by default).
func (s *State) WorkersToClose(q CloseQuery) []string {
	n, target := q.N, q.Target
	if target >= 0 && n < 0 {
		n = len(s.workers) - target
	}
	if n >= 0 {
		n = max(n, 0)
		target = len(s.workers) - n
	}
	memoryRatio := q.MemoryRatio
	if n < 0 && memoryRatio == 0 {
		memoryRatio = 2
	}
	if n <= 0 && s.allProcessing() {
		return nil
	}
	var valid []*WorkerState
	var total int64
	for _, ws := range s.workerOrder.Items() {
		total += ws.nbytes
		if ws.longRunning.Len() == 0 {
			valid = append(valid, ws)
		}
	}
	// pop from the end of (is_idle, -nbytes): idle workers with the least
	// data close first; ties by address, for a deterministic answer
	sort.SliceStable(valid, func(i, j int) bool {
		ii, ij := valid[i].processing.Len() == 0, valid[j].processing.Len() == 0
		if ii != ij {
			return !ii
		}
		if valid[i].nbytes != valid[j].nbytes {
			return valid[i].nbytes > valid[j].nbytes
		}
		return valid[i].Address > valid[j].Address
	})
	var limit int64
	for _, ws := range s.workerOrder.Items() {
		limit += ws.MemoryLimit
	}
	var out []string
	remain := len(s.workers)
	for i := len(valid) - 1; i >= 0; i-- {
		ws := valid[i]
		if n < 0 && ws.processing.Len() > 0 {
			break
		}
		if q.Minimum > 0 && remain-1 < q.Minimum {
			break
		}
		limit -= ws.MemoryLimit
		if (n >= 0 && remain-1 >= max(target, 0)) || (memoryRatio > 0 && float64(limit) >= memoryRatio*float64(total)) {
			remain--
			out = append(out, ws.Address)
		} else {
			break
		}
	}
	return out
}

func (s *State) allProcessing() bool {
	for _, ws := range s.workerOrder.Items() {
		if ws.processing.Len() == 0 {
			return false
		}
	}
	return len(s.workers) > 0
}

// tickIdle mirrors the idleness part of Scheduler.check_idle, run on every
// Tick: the scheduler is busy if a transition happened since the last
// tick, a graph is in a helper, or tasks are queued, unrunnable or
// processing; otherwise idle since the first idle tick.
func (s *State) tickIdle() {
	switch {
	case s.log.total != s.idleTransitions, len(s.pending) > 0, s.queuedLen() > 0, s.unrunnable.Len() > 0,
		s.anyProcessing():
		s.idleTransitions = s.log.total
		s.idleSince = time.Time{}
	case s.idleSince.IsZero():
		s.idleSince = s.now
	}
}

func (s *State) anyProcessing() bool {
	for _, ws := range s.workerOrder.Items() {
		if ws.processing.Len() > 0 {
			return true
		}
	}
	return false
}

// IdleSince is check_idle's answer: when the scheduler became idle (zero
// while busy). It starts idle at the scheduler's start, as distributed's
// does (dask-gateway relies on it).
func (s *State) IdleSince() time.Time { return s.idleSince }
