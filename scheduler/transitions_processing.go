package scheduler

import (
	"fmt"
	"sort"

	"daskgo/protocol/pickle"
)

// Transitions into and out of processing.

// addToProcessing mirrors SchedulerState._add_to_processing: assign ts to
// ws and send compute-task.
func (s *State) addToProcessing(ts *TaskState, ws *WorkerState) {
	s.wsAddToProcessing(ws, ts)
	ts.processingOn = ws
	s.setState(ts, StatusProcessing)
	s.acquireResources(ts, ws)
	s.checkIdleSaturated(ws)
	s.nTasks++
	if ts.actor {
		ws.actors.Add(ts)
	}
	var depBytes int64
	for _, dts := range ts.dependencies.Items() {
		depBytes += dts.nbytes
	}
	if ws.MemoryLimit > 0 && depBytes > ws.MemoryLimit {
		// A crude guard against order-of-magnitude mistakes, as distributed's.
		msg := fmt.Sprintf("Task %s has %d bytes worth of input dependencies, but worker %s has memory_limit set to %d bytes.",
			ts.Key.String(), depBytes, ws.Address, ws.MemoryLimit)
		if ts.dependents.Len() == 0 {
			msg += " It seems like you called client.compute() on a huge collection. Consider writing to distributed storage or slicing/reducing first."
		}
		s.logf(LogError, ts.Key, ws.Address, "", "%s", msg)
		s.transition(ts, StatusErred, &transArgs{
			worker: ws.Address, cause: ts,
			exception: pickle.Exception("builtins", "MemoryError", msg),
		})
		return
	}
	s.toWorker(ws, s.taskToMsg(ts))
}

// exitProcessingCommon mirrors _exit_processing_common; it returns the
// worker if it is still part of the cluster.
func (s *State) exitProcessingCommon(ts *TaskState) *WorkerState {
	ws := ts.processingOn
	ts.processingOn = nil
	ts.viaQueuePolicy = false
	s.runs.drop(ts.runID)
	s.wsRemoveFromProcessing(ws, ts)
	if ws.closed { // a worker leaves s.workers as it closes (removeWorker)
		return nil
	}
	s.checkIdleSaturated(ws)
	s.releaseResources(ts, ws)
	return ws
}

// transitionProcessingMemory mirrors _transition_processing_memory.
func (s *State) transitionProcessingMemory(ts *TaskState, a *transArgs) {
	if a == nil {
		s.impossible(ts, StatusProcessing, StatusMemory)
		return
	}
	ws := a.ws
	if ws == nil || ws.closed {
		ws = s.workers[a.worker]
	}
	if ws == nil {
		s.recommend(ts, StatusReleased)
		return
	}
	if ws != ts.processingOn {
		// stimulusTaskFinished only gets here for the current worker
		s.impossible(ts, StatusProcessing, StatusMemory)
		return
	}
	for _, ss := range a.startStops {
		ts.prefix.addDuration(ss.Action, ss.Start, ss.Stop)
	}
	s.setNBytes(ts, a.nbytes)
	s.exitProcessingCommon(ts)
	s.addToMemory(ts, ws, a.typ, a.typeName)
}

// addToMemory mirrors SchedulerState._add_to_memory.
func (s *State) addToMemory(ts *TaskState, ws *WorkerState, typ []byte, typeName string) {
	s.recent.put(ts)
	s.addReplica(ts, ws)
	deps := ts.dependents.Items()
	if len(deps) > 1 {
		// recommendations pop LIFO: lowest priority first in, runs last.
		// Sort a copy in a reused buffer (dependents keep their order);
		// nothing below re-enters addToMemory before the loop ends.
		s.scratchTS = append(s.scratchTS[:0], deps...)
		deps = s.scratchTS
		sort.SliceStable(deps, func(i, j int) bool { return deps[j].priority.less(deps[i].priority) })
	}
	for _, dts := range deps {
		if dts.waitingOn.Remove(ts) && dts.waitingOn.Len() == 0 {
			s.recommend(dts, StatusProcessing)
		}
	}
	for _, dts := range ts.dependencies.Items() {
		dts.waiters.Remove(ts)
		if dts.waiters.Len() == 0 && dts.whoWants.Len() == 0 {
			s.recommend(dts, StatusReleased)
		}
	}
	if ts.waiters.Len() == 0 && ts.whoWants.Len() == 0 {
		s.recommend(ts, StatusReleased)
	} else if ts.whoWants.Len() > 0 {
		// built only when a client will get it: most tasks in memory are
		// waited on by dependents and wanted by no client
		m := msgKeyInMemoryTask(ts, typ)
		for _, cs := range ts.whoWants.Items() {
			s.toClient(cs, m)
		}
	}
	s.setState(ts, StatusMemory)
	if tg := ts.group; typeName != "" && typeName != tg.lastType {
		if tg.types == nil {
			tg.types = map[string]struct{}{}
		}
		tg.types[typeName] = struct{}{}
		tg.lastType = typeName
	}
	s.releaseFireAndForget(ts)
	clear(s.scratchTS) // pins no task
}

// transitionProcessingReleased mirrors _transition_processing_released.
func (s *State) transitionProcessingReleased(ts *TaskState, _ *transArgs) {
	if ws := s.exitProcessingCommon(ts); ws != nil {
		s.toWorker(ws, s.msgFreeTask(ts))
	}
	s.propagateReleased(ts)
}

// transitionProcessingErred mirrors _transition_processing_erred.
func (s *State) transitionProcessingErred(ts *TaskState, a *transArgs) {
	if ts.actor {
		ts.processingOn.actors.Remove(ts)
	}
	s.exitProcessingCommon(ts)
	s.propagateErred(ts, a)
}

// propagateErred mirrors SchedulerState._propagate_erred.
func (s *State) propagateErred(ts *TaskState, a *transArgs) {
	s.setState(ts, StatusErred)
	if a == nil {
		a = &transArgs{}
	}
	if a.worker != "" && !containsString(ts.x().erredOn, a.worker) {
		ts.ext().erredOn = append(ts.ext().erredOn, a.worker)
	}
	if a.exception != nil {
		ts.ext().exception = a.exception
		ts.ext().exceptionText = a.exceptionText
	}
	if a.traceback != nil {
		ts.ext().traceback = a.traceback
		ts.ext().tracebackText = a.tracebackText
	}
	if a.cause != nil {
		ts.setBlame(a.cause)
	} else if ts.blame() == nil {
		ts.setBlame(ts) // never reached in distributed (asserted)
	}
	failing := ts.blame()
	for _, dts := range ts.waiters.Items() {
		dts.setBlame(failing)
		s.recommend(dts, StatusErred)
	}
	for _, dts := range ts.dependencies.Items() {
		dts.waiters.Remove(ts)
		if dts.waiters.Len() == 0 && dts.whoWants.Len() == 0 {
			s.recommend(dts, StatusReleased)
		}
	}
	ts.waiters.Clear()
	m := msgTaskErred(ts.Key, failing.x().exception, failing.x().traceback)
	for _, cs := range ts.whoWants.Items() {
		s.toClient(cs, m)
	}
	s.releaseFireAndForget(ts)
}

// killedWorkerPickle is the exception distributed sends when a task's
// workers keep dying (raw pickle bytes, traceback nil).
func (s *State) killedWorkerPickle(ts *TaskState, worker string) []byte {
	return pickle.KilledWorker(ts.Key, worker, s.cfg.allowedFailures())
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
