package scheduler

import (
	"fmt"
	"math"
	"sort"
	"time"

	"daskgo/protocol"
)

// Worker membership stimuli: register, status, heartbeat, removal, ttl.

// CheckNewWorker reports why register-worker must be refused (distributed
// answers {"status":"error","message":...}); nil means AddWorker will
// succeed. The outer ring calls it before sending AddWorker.
func (s *State) CheckNewWorker(addr, name string) error {
	if _, ok := s.workers[addr]; ok {
		return fmt.Errorf("Worker already exists %s", addr)
	}
	if _, ok := s.aliases[name]; ok {
		return fmt.Errorf("name taken, %s", name)
	}
	return nil
}

// handleAddWorker mirrors Scheduler.add_worker's state changes.
func (s *State) handleAddWorker(x *AddWorker) {
	if err := s.CheckNewWorker(x.Address, x.Name); err != nil {
		s.logf(LogWarn, "", x.Address, "", "register-worker refused: %v", err)
		return
	}
	if x.NThreads <= 0 {
		s.logf(LogWarn, "", x.Address, "", "register-worker with nthreads=%d refused", x.NThreads)
		return
	}
	status := x.Status
	if !workerStatuses[status] {
		s.logf(LogWarn, "", x.Address, "", "register-worker with unknown status %q; treating as init", status)
		status = "init"
	}
	ws := &WorkerState{
		Address: x.Address, Name: x.Name, NameValue: x.NameValue, Host: hostOf(x.Address), NThreads: x.NThreads,
		MemoryLimit: x.MemoryLimit, Resources: copyResources(x.Resources), Nanny: x.Nanny,
		Services: x.Services, LocalDirectory: x.LocalDirectory, PID: x.PID, ServerID: x.ServerID,
		Extra: x.Extra, Versions: x.Versions, status: status, lastSeen: s.now,
		processing: taskSet{role: roleProcessing}, hasWhat: taskSet{role: roleHasWhat},
	}
	if s.stealOn() {
		ws.steal = newStealWorker()
	}
	if x.Memory != nil { // add_worker's heartbeat_worker(metrics=...)
		ws.metrics = x.Metrics
		s.noteHeartbeatMemory(ws, x.Memory)
	}
	s.workers[ws.Address] = ws
	s.workerOrder.Add(ws)
	s.out.Joined = append(s.out.Joined, ws.Address)
	if ws.status == "running" {
		s.running.Add(ws)
	}
	hs := s.hosts[ws.Host]
	if hs == nil {
		hs = &oset[*WorkerState]{}
		s.hosts[ws.Host] = hs
	}
	hs.Add(ws)
	s.totalMemory += ws.MemoryLimit
	s.totalNThreads += ws.NThreads
	s.aliases[ws.Name] = ws.Address
	for r, q := range ws.Resources {
		if s.resources[r] == nil {
			s.resources[r] = map[string]float64{}
		}
		s.resources[r][ws.Address] = q
	}
	s.checkIdleSaturated(ws)
	if s.hookMask != 0 {
		s.hook(HookEvent{Hook: HookAddWorker, Worker: ws.Address})
	}
	if ws.status == "running" {
		s.refreshNoWorkersSince()
		s.workerBecameRunning(ws)
	}
}

func copyResources(r map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

// workerBecameRunning schedules what the new running worker can take:
// bulk_schedule_unrunnable_after_adding_worker, then queue slots.
func (s *State) workerBecameRunning(ws *WorkerState) {
	var runnable []*TaskState
	for _, ts := range s.unrunnable.Items() {
		valid, restricted := s.validWorkers(ts)
		if !restricted || containsWorker(valid, ws) {
			runnable = append(runnable, ts)
		}
	}
	// recommendations pop LIFO: least urgent first in
	sort.SliceStable(runnable, func(i, j int) bool { return runnable[j].priority.less(runnable[i].priority) })
	for _, ts := range runnable {
		s.recommend(ts, StatusProcessing)
	}
	s.runTransitions()
	s.queueSlotsMaybeOpened()
}

func containsWorker(list []*WorkerState, ws *WorkerState) bool {
	for _, w := range list {
		if w == ws {
			return true
		}
	}
	return false
}

// handleWorkerStatusChange mirrors handle_worker_status_change.
func (s *State) handleWorkerStatusChange(x *WorkerStatusChange) {
	ws := s.workers[x.Worker]
	if ws == nil {
		return
	}
	if !workerStatuses[x.Status] {
		s.logf(LogWarn, "", x.Worker, "", "unknown worker status %q ignored", x.Status)
		return
	}
	prev := ws.status
	ws.status = x.Status
	if prev == ws.status {
		return
	}
	if ws.status == "running" {
		s.running.Add(ws)
		s.checkIdleSaturated(ws)
		s.refreshNoWorkersSince()
		s.workerBecameRunning(ws)
		return
	}
	s.running.Remove(ws)
	s.idle.Remove(ws)
	s.idleTaskCount.Remove(ws)
	s.saturated.Remove(ws)
	s.coHandBack(ws)
	s.refreshNoWorkersSince()
}

// handleHeartbeat mirrors Scheduler.heartbeat_worker.
func (s *State) handleHeartbeat(x *WorkerHeartbeat) {
	ws := s.workers[x.Worker]
	if ws == nil {
		s.reply(x.ReplyTo, protocol.NewMap("status", "missing"))
		return
	}
	if len(x.SpanMetrics) > 0 {
		s.spanHeartbeat(x.SpanMetrics)
	}
	if x.Metrics != nil {
		if total := x.Bandwidth; x.HasBandwidth && len(s.workers) > 0 {
			frac := 1 / float64(len(s.workers))
			s.bandwidth = s.bandwidth*(1-frac) + total*frac
			if s.bandwidth <= 0 || math.IsNaN(s.bandwidth) {
				s.bandwidth = s.cfg.Bandwidth
			}
		}
		ws.metrics = x.Metrics
	}
	ws.lastSeen = s.now
	if x.Memory != nil {
		s.noteHeartbeatMemory(ws, x.Memory)
	}
	if x.Executing != nil {
		ws.executing = x.Executing
		for k, d := range x.Executing {
			if ts := s.tasks.get(k); ts != nil {
				ts.prefix.addExecTime(d)
			}
		}
	}
	s.reply(x.ReplyTo, protocol.NewMap(
		"status", "OK",
		"time", s.unixNow(),
		"heartbeat-interval", heartbeatInterval(len(s.workers)),
	))
}

func (s *State) reply(to int64, v any) {
	s.out.Replies = append(s.out.Replies, Reply{To: to, Value: v})
}

// handleTick mirrors check_worker_ttl: workers silent for longer than
// max(worker-ttl, 10 heartbeat intervals) are restarted through their
// nanny (restart_workers: the nanny kills the process, which a SIGSTOP
// cannot resist, and starts a fresh one; the old one's stream closing
// removes it), or closed and removed when they have none. A restart is
// asked for once per worker: the nanny's kill takes seconds, and ticks
// keep coming.
func (s *State) handleTick() {
	if s.cfg.WorkerTTL == Never || len(s.workers) == 0 {
		return
	}
	ttl := max(s.cfg.WorkerTTL, time.Duration(10*heartbeatInterval(len(s.workers))*float64(time.Second)))
	var dead []*WorkerState
	for _, ws := range s.workerOrder.Items() {
		if s.now.Sub(ws.lastSeen) > ttl && !ws.ttlRestarting {
			dead = append(dead, ws)
		}
	}
	for _, ws := range dead {
		silent := s.now.Sub(ws.lastSeen)
		if ws.Nanny != "" {
			s.logf(LogWarn, "", ws.Address, "", "worker failed to heartbeat for %s; attempting restart", silent)
			ws.ttlRestarting = true
			s.out.RestartViaNanny = append(s.out.RestartViaNanny,
				NannyRestart{Worker: ws.Address, Nanny: ws.Nanny, Reason: s.stimulusID})
			continue
		}
		s.logf(LogWarn, "", ws.Address, "", "worker failed to heartbeat for %s; removing", silent)
		s.handleRemoveWorker(ws.Address, false, true, "worker-ttl-timed-out")
	}
}
