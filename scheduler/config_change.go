package scheduler

import "daskgo/protocol"

// handleConfigChange applies x. Tasks already processing stay where they
// are; what they count against the slot limit is recounted from now on
// (viaQueuePolicy is cleared: the limit they were placed under is gone).
// Turning withholding off sends every queued task through waiting again, in
// priority order, so they are co-assigned as distributed does with inf;
// turning co-assignment off returns the runs to the priority queue.
func (s *State) handleConfigChange(x *ConfigChange) {
	if !(x.WorkerSaturation > 0) {
		s.logf(LogWarn, "", "", "", "config change with worker-saturation %v ignored: it must be > 0", x.WorkerSaturation)
		return
	}
	s.coDisband()
	s.cfg.WorkerSaturation = x.WorkerSaturation
	s.cfg.RootTaskCoAssignment = x.RootTaskCoAssignment
	for _, ws := range s.workerOrder.Items() {
		for _, ts := range ws.processing.Items() {
			ts.viaQueuePolicy = false
		}
		s.checkIdleSaturated(ws)
	}
	s.stealRequeueAll() // roots placed by the queue are stealable now
	if !s.queuingOff() {
		return // end() fills the slots that opened
	}
	var queued []*TaskState
	for ts := s.queued.pop(); ts != nil; ts = s.queued.pop() {
		queued = append(queued, ts)
	}
	for _, ts := range queued { // heap order: most urgent first
		// queued -> released -> waiting -> processing, now with the
		// queuing-disabled policy (co-assigned by task group)
		s.transitionTo(ts, StatusWaiting)
	}
}

// WithholdingMode names the root-task policy in effect: "off" (inf:
// distributed's co-assignment by task group), "withholding", or
// "withholding+co-assignment".
func (s *State) WithholdingMode() string {
	switch {
	case s.queuingOff():
		return "off"
	case s.coOn():
		return "withholding+co-assignment"
	}
	return "withholding"
}

// effectiveConfig is the "config" entry of identity (scheduler_info): the
// effective root-task settings under their dask keys. inf is the string
// "inf", as dask config spells it, since the scheduler file is JSON.
func (s *State) effectiveConfig() *protocol.Map {
	var sat any = s.cfg.WorkerSaturation
	if s.queuingOff() {
		sat = "inf"
	}
	return protocol.NewMap(
		"distributed.scheduler.worker-saturation", sat,
		"distributed.scheduler.root-task-co-assignment", s.cfg.RootTaskCoAssignment,
		"distributed.scheduler.root-task-co-assignment-depth", max(s.coFamilyDepth(), 0),
		"withholding-mode", s.WithholdingMode(),
		"distributed.scheduler.work-stealing", s.stealOn(),
		"distributed.scheduler.work-stealing-interval", s.cfg.WorkStealingInterval.Seconds(),
	)
}
