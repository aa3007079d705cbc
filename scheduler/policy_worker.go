package scheduler

import (
	"sort"
	"strings"
)

// Placement of ordinary tasks: near their data, within their restrictions
// (distributed/scheduler.py: SchedulerState.decide_worker_non_rootish,
// valid_workers, and the module function decide_worker). The stages mirror
// those functions.

// decideWorkerNonRootish mirrors SchedulerState.decide_worker_non_rootish.
func (s *State) decideWorkerNonRootish(ts *TaskState) *WorkerState {
	if s.running.Len() == 0 {
		return nil
	}
	valid, restricted := s.validWorkers(ts)
	if !restricted && s.running.Len() < len(s.workers) {
		valid, restricted = s.running.Items(), true
	}
	if ts.dependencies.Len() > 0 || restricted {
		return s.decideWorker(ts, valid, restricted)
	}
	return s.roundRobinIdle()
}

// roundRobinIdle is decide_worker_non_rootish's fast path for tasks with
// no dependencies and no restrictions: the least occupied idle (else any)
// worker, round-robin among unoccupied ones.
func (s *State) roundRobinIdle() *WorkerState {
	pool := s.idle.Items()
	if len(pool) == 0 {
		pool = s.workerOrder.Items()
	}
	n := len(pool)
	if n == 0 {
		return nil
	}
	if n >= 20 {
		return pool[s.nTasks%int64(n)]
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
				return w
			}
		}
	}
	return ws
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

// validWorkers mirrors SchedulerState.valid_workers. restricted == false
// means every running worker is valid; otherwise the list (possibly empty)
// holds the valid running workers.
func (s *State) validWorkers(ts *TaskState) ([]*WorkerState, bool) {
	var set map[string]bool
	if len(ts.x().workerRestrictions) > 0 {
		set = map[string]bool{}
		for _, a := range ts.x().workerRestrictions {
			if s.workers[a] != nil {
				set[a] = true
			}
		}
	}
	if len(ts.x().hostRestrictions) > 0 {
		if set == nil {
			set = map[string]bool{}
		}
		for _, h := range ts.x().hostRestrictions {
			if hs := s.hosts[s.coerceHostname(h)]; hs != nil {
				for _, ws := range hs.Items() {
					set[ws.Address] = true
				}
			}
		}
	}
	if len(ts.x().resourceRestrictions) > 0 {
		ww := s.resourceWorkers(ts.x().resourceRestrictions)
		if set == nil {
			set = ww
		} else {
			for a := range set {
				if !ww[a] {
					delete(set, a)
				}
			}
		}
	}
	if set == nil {
		return nil, false
	}
	var out []*WorkerState
	for _, ws := range s.workerOrder.Items() {
		if set[ws.Address] && ws.status == "running" {
			out = append(out, ws)
		}
	}
	return out, true
}

func (s *State) resourceWorkers(req map[string]float64) map[string]bool {
	var out map[string]bool
	for r, need := range req {
		ok := map[string]bool{}
		for addr, supplied := range s.resources[r] {
			if supplied >= need {
				ok[addr] = true
			}
		}
		if out == nil {
			out = ok
			continue
		}
		for a := range out {
			if !ok[a] {
				delete(out, a)
			}
		}
	}
	return out
}

// coerceHostname mirrors SchedulerState.coerce_hostname: a worker name
// stands for its host.
func (s *State) coerceHostname(h string) string {
	if addr, ok := s.aliases[h]; ok {
		if ws := s.workers[addr]; ws != nil {
			return ws.Host
		}
	}
	return h
}

// coerceAddress resolves a `workers=` annotation entry the way
// Scheduler.coerce_address does: a worker name becomes its address, an
// address is kept, "host:port" gains tcp://, anything else is not an
// address (ok == false: a host restriction).
func (s *State) coerceAddress(w string) (string, bool) {
	if addr, ok := s.aliases[w]; ok {
		return addr, true
	}
	if strings.Contains(w, "://") {
		return w, true
	}
	if i := strings.LastIndex(w, ":"); i > 0 && i < len(w)-1 && allDigits(w[i+1:]) {
		return "tcp://" + w, true
	}
	return "", false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
