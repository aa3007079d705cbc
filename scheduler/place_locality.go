package scheduler

import "sort"

// Placement of ordinary tasks: near their data, within their restrictions
// (distributed/scheduler.py: SchedulerState.decide_worker_non_rootish,
// valid_workers, and the module function decide_worker). The stages mirror
// those functions.

// placeNonRootish mirrors SchedulerState.decide_worker_non_rootish.
func (s *State) placeNonRootish(ts *TaskState) Placement {
	if s.running.Len() == 0 {
		return noWorker(0)
	}
	valid, restricted := s.validWorkers(ts)
	if !restricted && s.running.Len() < len(s.workers) {
		valid, restricted = s.running.Items(), true
	}
	if ts.dependencies.Len() > 0 || restricted {
		ws := s.decideWorker(ts, valid, restricted)
		if ws == nil {
			return noWorker(len(valid))
		}
		if restricted && len(valid) < s.running.Len() {
			return Placement{Worker: ws, Reason: Reason{Rule: RuleRestricted, N1: float64(len(valid))}}
		}
		return Placement{Worker: ws, Reason: s.localityReason(ts, ws)}
	}
	return s.roundRobinIdle()
}

// localityReason is RuleLocality's: the dependency bytes ws already holds
// and its expected start.
func (s *State) localityReason(ts *TaskState, ws *WorkerState) Reason {
	var held int64
	for _, dts := range ts.dependencies.Items() {
		if ws.hasWhat.Has(dts) {
			held += s.getNBytes(dts)
		}
	}
	return Reason{Rule: RuleLocality, N1: float64(held), N2: s.workerObjective(ts, ws).startTime}
}

// roundRobinIdle is decide_worker_non_rootish's fast path for tasks with
// no dependencies and no restrictions: the least occupied idle (else any)
// worker, round-robin among unoccupied ones.
func (s *State) roundRobinIdle() Placement {
	pool := s.idle.Items()
	idle := 1.0
	if len(pool) == 0 {
		pool, idle = s.workerOrder.Items(), 0
	}
	n := len(pool)
	if n == 0 {
		return noWorker(0)
	}
	why := Reason{Rule: RuleIdle, N1: float64(n), N2: idle}
	if n >= 20 {
		return Placement{Worker: pool[s.nTasks%int64(n)], Reason: why}
	}
	// idle is a SortedDict by address in distributed
	sorted := append(make([]*WorkerState, 0, n), pool...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Address < sorted[j].Address })
	var ws *WorkerState
	best := 0.0
	for _, w := range sorted {
		if o := s.occupancy(w); ws == nil || o < best {
			ws, best = w, o
		}
	}
	if best == 0 {
		start := int(s.nTasks % int64(n))
		for i := 0; i < n; i++ {
			w := sorted[(i+start)%n]
			if s.occupancy(w) == 0 {
				return Placement{Worker: w, Reason: why}
			}
		}
	}
	return Placement{Worker: ws, Reason: why}
}

// decideWorker mirrors distributed.scheduler.decide_worker: among running
// workers holding a dependency (and valid when restricted), the one that
// can start soonest.
func (s *State) decideWorker(ts *TaskState, valid []*WorkerState, restricted bool) *WorkerState {
	var cand []*WorkerState
	if ts.actor {
		cand = s.running.Items()
	} else {
		// a reused set: a local one escapes (its items are returned) and
		// allocates on every placement; only the recursion below re-enters,
		// after cand's last use
		seen := &s.scratchWS
		seen.reset()
		for _, dts := range ts.dependencies.Items() {
			for _, ws := range dts.whoHas.Items() {
				if ws.status == "running" && !ws.closed {
					seen.Add(ws)
				}
			}
		}
		cand = seen.Items()
	}
	if !restricted {
		if len(cand) == 0 {
			cand = s.running.Items()
		}
	} else {
		cand = intersectWorkers(cand, valid)
		if len(cand) == 0 {
			cand = valid
			if len(cand) == 0 && ts.x().looseRestrictions {
				return s.decideWorker(ts, nil, false)
			}
		}
	}
	switch len(cand) {
	case 0:
		return nil
	case 1:
		return cand[0]
	}
	return s.minObjective(ts, cand)
}

func intersectWorkers(a, b []*WorkerState) []*WorkerState {
	var out []*WorkerState
	for _, ws := range a {
		for _, w := range b {
			if w == ws {
				out = append(out, ws)
				break
			}
		}
	}
	return out
}
