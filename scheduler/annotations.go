package scheduler

// applyAnnotations mirrors SchedulerState._apply_annotations for one new
// task. compat has decoded what the engine acts on (GraphTask.Annotations);
// the dict itself is kept verbatim for compute-task.
func (s *State) applyAnnotations(ts *TaskState, gt *GraphTask) {
	a := gt.Annotations
	if a == nil || a.Verbatim == nil {
		return
	}
	ts.annotations = a.Verbatim
	if len(a.Workers) > 0 {
		s.applyWorkerRestrictions(ts, a.Workers)
	}
	if a.LooseRestrictions {
		ts.ext().looseRestrictions = true
	}
	if a.Resources != nil {
		ts.ext().resourceRestrictions = a.Resources
		ts.ext().resourcesRaw = a.ResourcesVerbatim
	}
	if a.HasRetries {
		ts.ext().retries = a.Retries
	}
	if a.Span != nil {
		s.observeSpan(ts, a.Span)
	}
}

// applyWorkerRestrictions splits workers= entries into worker addresses
// (a worker's name becomes its address) and hosts, as
// Scheduler.coerce_address does.
func (s *State) applyWorkerRestrictions(ts *TaskState, entries []string) {
	var hosts, workers []string
	for _, w := range entries {
		if addr, ok := s.coerceAddress(w); ok {
			workers = appendUnique(workers, addr)
		} else {
			hosts = appendUnique(hosts, w)
		}
	}
	if len(hosts) > 0 {
		ts.ext().hostRestrictions = hosts
	}
	if len(workers) > 0 {
		ts.ext().workerRestrictions = workers
	}
}

func appendUnique(xs []string, x string) []string {
	if containsString(xs, x) {
		return xs
	}
	return append(xs, x)
}
