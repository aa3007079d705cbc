package scheduler

import (
	"fmt"
	"sort"
)

// validateCoAssignment checks the invariants of WITHHOLDING.md about
// co-assignment: its runs are contiguous, owned by running workers,
// ordered, and account for every owned task.
func (s *State) validateCoAssignment() {
	if !s.coOn() {
		if s.co.owned != 0 || s.co.bySize.Len() != 0 {
			panic(fmt.Sprintf("scheduler invariant broken: %d runs (%d tasks) without co-assignment", s.co.bySize.Len(), s.co.owned))
		}
		return
	}
	if s.queued.Len() > 0 && s.running.Len() > 0 {
		panic(fmt.Sprintf("scheduler invariant broken: %d unowned queued tasks with %d running workers", s.queued.Len(), s.running.Len()))
	}
	byBlock := map[*coBlock][]*coRun{}
	live := 0
	for i, r := range s.co.bySize.items {
		if r.sizeIdx != i {
			panic(fmt.Sprintf("scheduler invariant broken: run %d at size index %d says %d", r.id, i, r.sizeIdx))
		}
		live += s.validateRun(r)
		byBlock[r.block] = append(byBlock[r.block], r)
	}
	if live != s.co.owned {
		panic(fmt.Sprintf("scheduler invariant broken: runs hold %d live tasks, owned count %d", live, s.co.owned))
	}
	for _, runs := range byBlock {
		sort.Slice(runs, func(i, j int) bool { return runs[i].lo < runs[j].lo })
		for i := 1; i < len(runs); i++ {
			if runs[i-1].hi > runs[i].lo {
				panic(fmt.Sprintf("scheduler invariant broken: runs %d and %d overlap in one partition", runs[i-1].id, runs[i].id))
			}
		}
	}
	validateHeapOrder(&s.co.bySize, "run sizes")
	for _, ws := range s.workerOrder.Items() {
		if ws.coRuns != nil {
			validateHeapOrder(ws.coRuns, "runs of "+ws.Address)
		}
	}
}

// validateRun checks one run and returns its live task count. Stored keys
// may be stale only towards the top of their heaps: the stored head no
// later than the true head, the stored span no smaller than the true span.
func (s *State) validateRun(r *coRun) int {
	ws := r.owner
	if ws.closed || ws.status != "running" || s.workers[ws.Address] != ws {
		panic(fmt.Sprintf("scheduler invariant broken: run %d owned by %s (%s)", r.id, ws.Address, ws.status))
	}
	if ws.coRuns == nil || r.ownIdx < 0 || r.ownIdx >= ws.coRuns.Len() || ws.coRuns.items[r.ownIdx] != r {
		panic(fmt.Sprintf("scheduler invariant broken: run %d not in its owner's heap", r.id))
	}
	if r.lo < 0 || r.hi > len(r.block.tasks) || r.lo > r.hi || r.sizeKey < r.span() {
		panic(fmt.Sprintf("scheduler invariant broken: run %d range [%d,%d) of %d, size key %d", r.id, r.lo, r.hi, len(r.block.tasks), r.sizeKey))
	}
	n := 0
	var prev *TaskState
	for i := r.lo; i < r.hi; i++ {
		ts := r.block.tasks[i]
		if ts == nil {
			continue
		}
		if ts.state != StatusQueued || ts.coBlock != r.block || int(ts.coPos) != i || s.queued.has(ts) {
			s.broken(ts, "run %d slot %d inconsistent", r.id, i)
		}
		if prev == nil {
			hk := heapEntry{prio: ts.priority, seq: ts.queueSeq}
			if r.headKey.prio != hk.prio && !r.headKey.prio.less(hk.prio) {
				s.broken(ts, "run %d head key is later than its head", r.id)
			}
		} else if !prev.priority.less(ts.priority) && (prev.priority != ts.priority || prev.queueSeq >= ts.queueSeq) {
			s.broken(ts, "run %d is not in priority order", r.id)
		}
		prev = ts
		n++
	}
	return n
}
