package scheduler

import (
	"daskgo/protocol"
)

// Stimuli from worker streams about tasks, and worker removal.

// handleRemoveWorker mirrors Scheduler.remove_worker.
func (s *State) handleRemoveWorker(addr string, expected, closeIt bool, reason string) {
	ws := s.workers[addr]
	if ws == nil {
		return
	}
	s.out.Left = append(s.out.Left, addr)
	if closeIt {
		s.toWorker(ws, msgClose("scheduler-remove-worker"))
		s.out.Disconnect = append(s.out.Disconnect, addr)
	}
	for r := range ws.Resources {
		delete(s.resources[r], addr)
	}
	if hs := s.hosts[ws.Host]; hs != nil {
		hs.Remove(ws)
		if hs.Len() == 0 {
			delete(s.hosts, ws.Host)
		}
	}
	s.totalMemory -= ws.MemoryLimit
	s.totalNThreads -= ws.NThreads
	if s.aliases[ws.Name] == addr {
		delete(s.aliases, ws.Name)
	}
	s.idle.Remove(ws)
	s.idleTaskCount.Remove(ws)
	s.saturated.Remove(ws)
	s.coHandBack(ws)
	delete(s.workers, addr)
	s.workerOrder.Remove(ws)
	ws.closed = true
	ws.status = "closed"
	s.running.Remove(ws)

	for _, ts := range ws.processing.Snapshot() {
		if !expected {
			ts.ext().suspicious++
			ts.prefix.suspicious++
			if ts.x().suspicious > s.cfg.allowedFailures() {
				s.logf(LogError, ts.Key, addr, "", "task %s marked as failed because %d workers died while trying to run it", ts.Key, ts.x().suspicious)
				s.transition(ts, StatusErred, &transArgs{
					worker: addr, cause: ts, exception: s.killedWorkerPickle(ts, addr),
				})
				continue
			}
		}
		s.recommend(ts, StatusReleased)
	}
	var recompute, lost []protocol.Key
	for _, ts := range ws.hasWhat.Snapshot() {
		s.removeReplica(ts, ws)
		switch {
		case ws.actors.Has(ts):
			s.recommend(ts, StatusErred)
		case ts.whoHas.Len() == 0 && ts.runSpec != nil:
			recompute = append(recompute, ts.Key)
			s.recommend(ts, StatusReleased)
		case ts.whoHas.Len() == 0:
			lost = append(lost, ts.Key)
			s.recommend(ts, StatusForgotten)
		}
	}
	if len(recompute) > 0 {
		s.logf(LogWarn, "", addr, "", "removing worker %s lost %d computed task(s), which will be recomputed elsewhere (%s)", addr, len(recompute), reason)
	}
	if len(lost) > 0 {
		s.logf(LogError, "", addr, "", "removing worker %s lost %d scattered key(s), which can't be recovered (%s)", addr, len(lost), reason)
	}
	s.runTransitions()
	s.refreshNoWorkersSince()
	if s.hookMask != 0 {
		s.hook(HookEvent{Hook: HookRemoveWorker, Worker: addr})
	}
	s.shuffleWorkerLeft(addr)
	// one message for every worker (read-only once built, like report's):
	// when all of 1,000 workers leave, that is 1,000 maps less per removal
	m := msgRemoveWorker(addr, s.stimulusID)
	for _, other := range s.workerOrder.Items() {
		s.toWorker(other, m)
	}
}

// handleTaskFinished mirrors Scheduler.handle_task_finished and
// stimulus_task_finished, including stale run_id handling.
func (s *State) handleTaskFinished(x *TaskFinished) {
	ts := s.runs.find(x.RunID, x.Key) // s.tasks.get(x.Key), without the big table's misses
	ws := s.reportingWorker(ts, x.Worker)
	if ws == nil {
		return
	}
	if ts == nil {
		ts = s.tasks.get(x.Key)
	}
	switch {
	case ts == nil || ts.state == StatusReleased || ts.state == StatusQueued || ts.state == StatusNoWorker || ts.state == StatusErred:
		s.toWorker(ws, msgFreeKeys([]protocol.Key{x.Key}, s.stimulusID))
	case ts.runID != x.RunID:
		if ts.processingOn != ws {
			s.toWorker(ws, msgFreeKeys([]protocol.Key{x.Key}, s.stimulusID))
		} else {
			s.recommend(ts, StatusReleased)
		}
	case ts.state == StatusMemory:
		s.addKeys(x.Worker, []protocol.Key{x.Key})
	case ts.state == StatusProcessing:
		if x.Metadata != nil {
			ts.ext().metadata = x.Metadata
		}
		// s.finArgs, not a literal: args passed through the transition
		// table escape, and this is once per task. Nothing nested reads it.
		s.finArgs = finishedArgs(x, ws)
		s.transition(ts, StatusMemory, &s.finArgs)
		s.finArgs = transArgs{}
		if ts.state == StatusMemory {
			s.tasksDone++
			s.noteRun(ts, x.Worker, x.StartStops, false)
			if s.stream.on {
				s.recordRun(TaskStreamRecord{Key: x.Key, Worker: x.Worker, Status: "OK", NBytes: x.NBytes,
					TypeName: x.TypeName, Thread: x.Thread, RunID: x.RunID, StartStops: x.StartStops})
			}
		}
	default:
		// waiting: the race of _transition_waiting_memory; the worker will
		// get free-keys once the scheduler's own release reaches it.
		s.finArgs = finishedArgs(x, ws)
		s.transition(ts, StatusMemory, &s.finArgs)
		s.finArgs = transArgs{}
	}
	s.runTransitions()
	s.queueSlotsMaybeOpened()
}

// reportingWorker is s.workers[addr], read from the worker processing ts
// when that is the one reporting (nearly every task-finished): a probe of
// the workers map by address costs a string hash per task. A worker leaves
// s.workers when it is closed, and addresses are unique among the live.
func (s *State) reportingWorker(ts *TaskState, addr string) *WorkerState {
	if ts != nil {
		if ws := ts.processingOn; ws != nil && !ws.closed && ws.Address == addr {
			return ws
		}
	}
	return s.workers[addr]
}

// finishedArgs are stimulus_task_finished's kwargs to _transition.
func finishedArgs(x *TaskFinished, ws *WorkerState) transArgs {
	return transArgs{worker: x.Worker, ws: ws, nbytes: x.NBytes, typ: x.Type, typeName: x.TypeName,
		startStops: x.StartStops, thread: x.Thread, metadata: x.Metadata, finished: true}
}

// handleTaskErred mirrors Scheduler.handle_task_erred / stimulus_task_erred.
func (s *State) handleTaskErred(x *TaskErred) {
	ts := s.tasks.get(x.Key)
	if ts != nil && ts.state == StatusProcessing {
		switch {
		case ts.runID != x.RunID:
			if ts.processingOn != nil && ts.processingOn.Address == x.Worker {
				s.transition(ts, StatusReleased, nil)
			}
		case ts.x().retries > 0:
			ts.ext().retries--
			s.transition(ts, StatusWaiting, nil)
		default:
			s.transition(ts, StatusErred, &transArgs{
				worker: x.Worker, cause: ts, exception: x.Exception, traceback: x.Traceback,
				exceptionText: x.ExceptionText, tracebackText: x.TracebackText,
				thread: x.Thread, startStops: x.StartStops,
			})
			s.noteRun(ts, x.Worker, x.StartStops, true)
			if s.stream.on {
				s.recordRun(TaskStreamRecord{Key: x.Key, Worker: x.Worker, Status: "error", Thread: x.Thread,
					RunID: x.RunID, StartStops: x.StartStops, ExceptionText: x.ExceptionText,
					TracebackText: x.TracebackText})
			}
		}
	}
	s.runTransitions()
	s.queueSlotsMaybeOpened()
}

// handleReleaseWorkerData mirrors Scheduler.release_worker_data.
func (s *State) handleReleaseWorkerData(x *ReleaseWorkerData) {
	ts := s.tasks.get(x.Key)
	ws := s.workers[x.Worker]
	if ts == nil || ws == nil || !ts.whoHas.Has(ws) {
		return
	}
	s.removeReplica(ts, ws)
	if ts.whoHas.Len() == 0 {
		s.transitionTo(ts, StatusReleased)
	}
}

// addKeys mirrors Scheduler.add_keys: replicas of keys in memory are
// tracked (so they get free-keys later); the others are asked back.
func (s *State) addKeys(worker string, keys []protocol.Key) {
	ws := s.workers[worker]
	if ws == nil {
		return
	}
	var redundant []protocol.Key
	for _, k := range keys {
		ts := s.recent.find(k) // s.tasks.get(k), without the big table's misses
		if ts == nil {
			ts = s.tasks.get(k)
		}
		if ts != nil && ts.state == StatusMemory {
			s.addReplica(ts, ws)
		} else {
			redundant = append(redundant, k)
		}
	}
	if len(redundant) > 0 {
		s.toWorker(ws, msgRemoveReplicas(redundant, s.stimulusID))
	}
}

// handleLongRunning mirrors Scheduler.handle_long_running: the seceded task
// stops counting for occupancy and queue slots.
func (s *State) handleLongRunning(x *LongRunning) {
	if s.workers[x.Worker] == nil {
		return
	}
	ts := s.tasks.get(x.Key)
	if ts == nil || ts.processingOn == nil {
		return
	}
	ws := ts.processingOn
	if ws.Address != x.Worker || ts.runID != x.RunID || ws.longRunning.Has(ts) {
		s.logf(LogDebug, x.Key, x.Worker, "", "stale long-running ignored")
		return
	}
	if x.ComputeDuration >= 0 {
		if old := ts.prefix.durationAverage; old < 0 {
			ts.prefix.durationAverage = x.ComputeDuration
		} else {
			ts.prefix.durationAverage = (old + x.ComputeDuration) / 2
		}
	}
	s.stealRemove(ts) // a seceded task is never stolen
	s.wsAddToLongRunning(ws, ts)
	s.checkIdleSaturated(ws)
	s.queueSlotsMaybeOpened()
}

// handleReschedule mirrors Scheduler._reschedule.
func (s *State) handleReschedule(x *Reschedule) {
	ts := s.tasks.get(x.Key)
	if ts == nil {
		s.logf(LogWarn, x.Key, x.Worker, "", "reschedule of unknown task %s ignored", x.Key)
		return
	}
	if ts.state != StatusProcessing {
		return
	}
	if x.Worker != "" && ts.processingOn != nil && ts.processingOn.Address != x.Worker {
		return
	}
	s.transitionTo(ts, StatusReleased)
}

// handleRefreshWhoHas mirrors handle_request_refresh_who_has.
func (s *State) handleRefreshWhoHas(x *RequestRefreshWhoHas) {
	ws := s.workers[x.Worker]
	if ws == nil {
		return
	}
	var whoHas map[protocol.Key][]string
	var free []protocol.Key
	for _, k := range x.Keys {
		ts := s.tasks.get(k)
		if ts == nil {
			free = append(free, k)
			continue
		}
		if whoHas == nil {
			whoHas = map[protocol.Key][]string{}
		}
		addrs := make([]string, 0, ts.whoHas.Len())
		for _, h := range ts.whoHas.Items() {
			addrs = append(addrs, h.Address)
		}
		whoHas[k] = addrs
	}
	if whoHas != nil {
		s.toWorker(ws, protocol.NewMap("op", "refresh-who-has", "who_has", whoHas, "stimulus_id", s.stimulusID))
	}
	if free != nil {
		s.toWorker(ws, msgFreeKeys(free, s.stimulusID))
	}
}
