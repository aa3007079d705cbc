package scheduler

// Transitions out of released and waiting, and the ready states (queued,
// no-worker) that wait for a worker.

// transitionReleasedWaiting mirrors _transition_released_waiting.
func (s *State) transitionReleasedWaiting(ts *TaskState, _ *transArgs) {
	if ts.runSpec == nil {
		// Only reachable through a malformed graph (a requested key without
		// a spec): leave it released rather than run nothing.
		s.logf(LogWarn, ts.Key, "", "", "task %s has no run_spec; not scheduling it", ts.Key)
		return
	}
	if ts.hasLostDependencies {
		s.recommend(ts, StatusForgotten)
		return
	}
	s.setState(ts, StatusWaiting)
	for _, dts := range ts.dependencies.Items() {
		if dts.whoHas.Len() == 0 {
			ts.waitingOn.Add(dts)
		}
		if dts.state == StatusReleased {
			s.recommend(dts, StatusWaiting)
		} else {
			dts.waiters.Add(ts)
		}
	}
	ts.waiters.Clear()
	for _, dts := range ts.dependents.Items() {
		if dts.state == StatusWaiting {
			ts.waiters.Add(dts)
		}
	}
	if ts.waitingOn.Len() == 0 {
		// waiting -> processing sends it to queued or no-worker as needed
		s.recommend(ts, StatusProcessing)
	}
}

// transitionWaitingReleased mirrors _transition_waiting_released.
func (s *State) transitionWaitingReleased(ts *TaskState, _ *transArgs) {
	for _, dts := range ts.dependencies.Items() {
		if dts.waiters.Remove(ts) && dts.waiters.Len() == 0 && dts.whoWants.Len() == 0 {
			s.recommend(dts, StatusReleased)
		}
	}
	ts.waitingOn.Clear()
	s.setState(ts, StatusReleased)
	switch {
	case ts.hasLostDependencies:
		s.recommend(ts, StatusForgotten)
	case ts.blame() == nil && (ts.whoWants.Len() > 0 || ts.waiters.Len() > 0):
		s.recommend(ts, StatusWaiting)
	default:
		ts.waiters.Clear()
	}
}

// transitionWaitingProcessing mirrors _transition_waiting_processing: the
// primary dispatch of ready tasks.
func (s *State) transitionWaitingProcessing(ts *TaskState, _ *transArgs) {
	p := s.placeReady(ts)
	if p.Worker == nil {
		s.placed = p.Reason
		s.recommend(ts, p.Wait)
		return
	}
	s.assign(ts, p)
}

// assign puts ts on the worker a placement chose and records why.
func (s *State) assign(ts *TaskState, p Placement) {
	s.placed = p.Reason
	s.addToProcessing(ts, p.Worker)
	if p.ViaQueue {
		ts.viaQueuePolicy = true
	}
}

// transitionWaitingMemory mirrors _transition_waiting_memory: a race where
// a lost dependency was already re-acquired; nothing to do.
func (s *State) transitionWaitingMemory(*TaskState, *transArgs) {}

// transitionWaitingQueued mirrors _transition_waiting_queued.
func (s *State) transitionWaitingQueued(ts *TaskState, _ *transArgs) {
	s.setState(ts, StatusQueued)
	s.queueSeq++
	ts.queueSeq = s.queueSeq
	s.queued.push(ts)
}

// transitionWaitingNoWorker mirrors _transition_waiting_no_worker.
func (s *State) transitionWaitingNoWorker(ts *TaskState, _ *transArgs) {
	s.setState(ts, StatusNoWorker)
	s.unrunnable.Add(ts)
	s.noteUnrunnable(ts)
}

// transitionQueuedReleased mirrors _transition_queued_released.
func (s *State) transitionQueuedReleased(ts *TaskState, _ *transArgs) {
	s.unqueue(ts)
	s.propagateReleased(ts)
}

// transitionQueuedProcessing mirrors _transition_queued_processing. With
// co-assignment, coFill passes the placement it made (the worker whose run
// ts came from) in a.
func (s *State) transitionQueuedProcessing(ts *TaskState, a *transArgs) {
	p := s.placeQueued()
	if a != nil && a.placement.Worker != nil {
		p = a.placement
	}
	if p.Worker != nil {
		s.unqueue(ts)
		s.assign(ts, p)
	}
}

// transitionQueuedErred mirrors _transition_queued_erred.
func (s *State) transitionQueuedErred(ts *TaskState, a *transArgs) {
	s.unqueue(ts)
	s.propagateErred(ts, a)
}

// transitionNoWorkerReleased mirrors _transition_no_worker_released.
func (s *State) transitionNoWorkerReleased(ts *TaskState, _ *transArgs) {
	s.unrunnable.Remove(ts)
	s.propagateReleased(ts)
}

// transitionNoWorkerProcessing mirrors _transition_no_worker_processing.
func (s *State) transitionNoWorkerProcessing(ts *TaskState, _ *transArgs) {
	if p := s.placeNonRootish(ts); p.Worker != nil {
		s.unrunnable.Remove(ts)
		s.assign(ts, p)
	}
}

// transitionNoWorkerErred mirrors _transition_no_worker_erred.
func (s *State) transitionNoWorkerErred(ts *TaskState, a *transArgs) {
	s.unrunnable.Remove(ts)
	s.propagateErred(ts, a)
}

// propagateReleased mirrors SchedulerState._propagate_released.
func (s *State) propagateReleased(ts *TaskState) {
	s.setState(ts, StatusReleased)
	if ts.hasLostDependencies {
		s.recommend(ts, StatusForgotten)
	} else if ts.waiters.Len() > 0 || ts.whoWants.Len() > 0 {
		s.recommend(ts, StatusWaiting)
	}
	if r, ok := s.recs.get(ts); !ok || r != StatusWaiting {
		for _, dts := range ts.dependencies.Items() {
			if dts.state != StatusReleased {
				dts.waiters.Remove(ts)
				if dts.waiters.Len() == 0 && dts.whoWants.Len() == 0 {
					s.recommend(dts, StatusReleased)
				}
			}
		}
		ts.waiters.Clear()
	}
}
