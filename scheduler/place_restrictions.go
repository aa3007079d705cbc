package scheduler

import "strings"

// Restrictions: which running workers a task may run on (its workers=,
// host and resource annotations, and P2P's pinning of output tasks), as
// SchedulerState.valid_workers and Scheduler.coerce_address decide them.

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
