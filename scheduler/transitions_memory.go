package scheduler

import (
	"daskgo/protocol"
	"daskgo/protocol/pickle"
)

// actorLostPickle is distributed's RuntimeError for a lost actor holder.
func actorLostPickle() []byte {
	return pickle.Exception("builtins", "RuntimeError", "Worker holding Actor was lost")
}

// Transitions out of memory and erred, and forgetting.

func oneKey(ts *TaskState) []protocol.Key { return []protocol.Key{ts.Key} }

// transitionMemoryReleased mirrors _transition_memory_released: the last
// replica is gone (or nobody needs it): free every holder, tell wanting
// clients the data is lost, recompute if still needed.
func (s *State) transitionMemoryReleased(ts *TaskState, _ *transArgs) {
	if ts.actor {
		for _, ws := range ts.whoHas.Items() {
			ws.actors.Remove(ts)
		}
		if ts.whoWants.Len() > 0 {
			ts.setBlame(ts)
			ts.ext().exception = actorLostPickle()
			s.recommend(ts, StatusErred) // don't try to recreate
			return
		}
	}
	m := s.msgFreeTask(ts)
	for _, ws := range ts.whoHas.Items() {
		s.toWorker(ws, m)
	}
	s.removeAllReplicas(ts)
	s.setState(ts, StatusReleased)
	if ts.whoWants.Len() > 0 { // build lost-data only for someone to tell
		lost := msgLostData(ts.Key)
		for _, cs := range ts.whoWants.Items() {
			s.toClient(cs, lost)
		}
	}
	switch {
	case ts.runSpec == nil: // pure data
		s.recommend(ts, StatusForgotten)
	case ts.hasLostDependencies:
		s.recommend(ts, StatusForgotten)
	case (ts.whoWants.Len() > 0 || ts.waiters.Len() > 0) && !anyErredDependency(ts):
		s.recommend(ts, StatusWaiting)
	}
	for _, dts := range ts.waiters.Items() {
		switch dts.state {
		case StatusNoWorker, StatusProcessing, StatusQueued:
			s.recommend(dts, StatusWaiting)
		case StatusWaiting:
			dts.waitingOn.Add(ts)
		}
	}
}

func anyErredDependency(ts *TaskState) bool {
	for _, dts := range ts.dependencies.Items() {
		if dts.state == StatusErred {
			return true
		}
	}
	return false
}

// transitionReleasedErred mirrors _transition_released_erred: a dependency
// failed; blame it.
func (s *State) transitionReleasedErred(ts *TaskState, _ *transArgs) {
	failing := ts.blame()
	if failing == nil {
		s.impossible(ts, StatusReleased, StatusErred)
		return
	}
	for _, dts := range ts.dependents.Items() {
		if dts.whoHas.Len() == 0 {
			dts.setBlame(failing)
			s.recommend(dts, StatusErred)
		}
	}
	m := msgTaskErred(ts.Key, failing.x().exception, failing.x().traceback)
	for _, cs := range ts.whoWants.Items() {
		s.toClient(cs, m)
	}
	s.setState(ts, StatusErred)
}

// transitionErredReleased mirrors _transition_erred_released (retry).
func (s *State) transitionErredReleased(ts *TaskState, _ *transArgs) {
	ts.clearException()
	for _, dts := range ts.dependents.Items() {
		if dts.state == StatusErred {
			s.recommend(dts, StatusWaiting)
		}
	}
	m := s.msgFreeTask(ts)
	for _, addr := range ts.x().erredOn {
		if ws := s.workers[addr]; ws != nil {
			s.toWorker(ws, m)
		}
	}
	if ts.extra != nil {
		ts.extra.erredOn = nil
	}
	r := msgTaskRetried(ts.Key)
	for _, cs := range ts.whoWants.Items() {
		s.toClient(cs, r)
	}
	s.setState(ts, StatusReleased)
}

// transitionMemoryErred mirrors _transition_memory_erred (actors only).
func (s *State) transitionMemoryErred(ts *TaskState, _ *transArgs) {
	m := s.msgFreeTask(ts)
	for _, ws := range ts.whoHas.Items() {
		s.toWorker(ws, m)
	}
	s.removeAllReplicas(ts)
	for _, dts := range ts.dependents.Items() {
		if dts.whoHas.Len() == 0 {
			dts.setBlame(ts)
			s.recommend(dts, StatusErred)
		}
	}
	exc := actorLostPickle()
	s.propagateErred(ts, &transArgs{cause: ts, exception: exc})
}

// transitionMemoryForgotten mirrors _transition_memory_forgotten.
func (s *State) transitionMemoryForgotten(ts *TaskState, _ *transArgs) {
	if ts.actor {
		for _, ws := range ts.whoHas.Items() {
			ws.actors.Remove(ts)
		}
	}
	s.propagateForgotten(ts)
	s.reportForgotten(ts)
	s.removeKey(ts)
}

// transitionReleasedForgotten mirrors _transition_released_forgotten.
func (s *State) transitionReleasedForgotten(ts *TaskState, _ *transArgs) {
	s.propagateForgotten(ts)
	s.reportForgotten(ts)
	s.removeKey(ts)
}

// reportForgotten mirrors _task_to_client_msgs for a forgotten task.
func (s *State) reportForgotten(ts *TaskState) {
	if ts.whoWants.Len() == 0 {
		return
	}
	m := taskReportMsg(ts)
	for _, cs := range ts.whoWants.Items() {
		s.toClient(cs, m)
	}
}

// propagateForgotten mirrors SchedulerState._propagate_forgotten.
func (s *State) propagateForgotten(ts *TaskState) {
	s.setState(ts, StatusForgotten)
	for _, dts := range ts.dependents.Items() {
		dts.hasLostDependencies = true
		dts.dependencies.Remove(ts)
		dts.waitingOn.Remove(ts)
		if dts.state != StatusMemory && dts.state != StatusErred {
			s.recommend(dts, StatusForgotten) // cannot compute it any more
		}
	}
	ts.dependents.Clear()
	ts.waiters.Clear()
	for _, dts := range ts.dependencies.Items() {
		dts.dependents.Remove(ts)
		dts.waiters.Remove(ts)
		if dts.dependents.Len() == 0 && dts.whoWants.Len() == 0 {
			s.recommend(dts, StatusForgotten) // not needed any more
		}
	}
	ts.dependencies.Clear()
	ts.waitingOn.Clear()
	if ts.whoHas.Len() > 0 {
		m := s.msgFreeTask(ts)
		for _, ws := range ts.whoHas.Items() {
			if !ws.closed {
				s.toWorker(ws, m)
			}
		}
	}
	s.removeAllReplicas(ts)
}

// removeKey mirrors SchedulerState._remove_key.
func (s *State) removeKey(ts *TaskState) {
	s.tasks.remove(ts)
	if s.tasks.Len() == 0 && s.tasks.peak > emptyMapKeep {
		// the slots of a forgotten 1M-task graph go back to the collector
		s.tasks.reset()
	}
	s.unrunnable.Remove(ts)
	for _, cs := range ts.whoWants.Items() {
		cs.wantsWhat.Remove(ts)
	}
	ts.whoWants.Clear()
	ts.processingOn = nil
	s.runs.drop(ts.runID)
	s.recent.drop(ts)
	ts.clearException()
}
