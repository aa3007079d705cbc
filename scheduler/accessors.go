package scheduler

import (
	"sort"

	"daskgo/protocol"
)

// Read-only accessors for the outer ring's RPCs. They are called under the
// outer ring's lock, between Handle calls (scheduler/server/doc.go says
// what a caller may keep); none of them mutates state. Those returning
// maps or slices build them for the call unless their comment says they
// share the engine's.

// WhoHas maps each key to the addresses holding it (distributed's who_has
// RPC). nil keys means every task; unknown keys map to an empty list.
func (s *State) WhoHas(keys []protocol.Key) map[protocol.Key][]string {
	out := map[protocol.Key][]string{}
	if keys == nil {
		for k, ts := range s.tasks.all() {
			out[k] = workerAddrs(ts.whoHas.Items())
		}
		return out
	}
	for _, k := range keys {
		if ts := s.tasks.get(k); ts != nil {
			out[k] = workerAddrs(ts.whoHas.Items())
		} else {
			out[k] = []string{}
		}
	}
	return out
}

// Holders appends the addresses of the workers holding key k to buf[:0]
// (none for a key the scheduler does not know): WhoHas for one key,
// without a map or a slice per key (Server.gather picks a holder per key
// of thousands).
func (s *State) Holders(k protocol.Key, buf []string) []string {
	buf = buf[:0]
	if ts := s.tasks.get(k); ts != nil {
		for _, w := range ts.whoHas.Items() {
			buf = append(buf, w.Address)
		}
	}
	return buf
}

func workerAddrs(ws []*WorkerState) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Address)
	}
	return out
}

func taskKeys(ts []*TaskState) []protocol.Key {
	out := make([]protocol.Key, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Key)
	}
	return out
}

// selectWorkers resolves an RPC's workers argument: nil = all, unknown
// addresses are skipped.
func (s *State) selectWorkers(workers []string) []*WorkerState {
	if workers == nil {
		return s.workerOrder.Snapshot()
	}
	var out []*WorkerState
	for _, a := range workers {
		if ws := s.workers[a]; ws != nil {
			out = append(out, ws)
		}
	}
	return out
}

// HasWhat maps workers (nil = all) to the keys they hold.
func (s *State) HasWhat(workers []string) map[string][]protocol.Key {
	out := map[string][]protocol.Key{}
	for _, ws := range s.selectWorkers(workers) {
		out[ws.Address] = taskKeys(ws.hasWhat.Items())
	}
	return out
}

// Processing maps workers (nil = all) to the keys they are computing.
func (s *State) Processing(workers []string) map[string][]protocol.Key {
	out := map[string][]protocol.Key{}
	for _, ws := range s.selectWorkers(workers) {
		out[ws.Address] = taskKeys(ws.processing.Items())
	}
	return out
}

// NThreads maps workers (nil = all) to nthreads: the ncores RPC, or
// ncores_running with runningOnly.
func (s *State) NThreads(workers []string, runningOnly bool) map[string]int64 {
	out := map[string]int64{}
	for _, ws := range s.selectWorkers(workers) {
		if runningOnly && ws.status != "running" {
			continue
		}
		out[ws.Address] = int64(ws.NThreads)
	}
	return out
}

// RunningWorkers returns the schedulable workers' addresses, sorted.
func (s *State) RunningWorkers() []string {
	out := workerAddrs(s.running.Items())
	sort.Strings(out)
	return out
}

// WorkerAddresses returns every registered worker, in registration order.
func (s *State) WorkerAddresses() []string { return workerAddrs(s.workerOrder.Items()) }

// Worker returns the worker's state (read-only) or nil.
func (s *State) Worker(addr string) *WorkerState { return s.workers[addr] }

// WorkerNanny returns the nanny address of a worker ("" if none/unknown).
func (s *State) WorkerNanny(addr string) string {
	if ws := s.workers[addr]; ws != nil {
		return ws.Nanny
	}
	return ""
}

// TaskStatus returns a key's state; ok is false for unknown (forgotten) keys.
func (s *State) TaskStatus(k protocol.Key) (Status, bool) {
	ts := s.tasks.get(k)
	if ts == nil {
		return StatusForgotten, false
	}
	return ts.state, true
}

// Task returns the task's state (read-only) or nil.
func (s *State) Task(k protocol.Key) *TaskState { return s.tasks.get(k) }

// NumTasks is the number of known tasks.
func (s *State) NumTasks() int { return s.tasks.Len() }

// NumWorkers is len(workers), for register-worker's heartbeat-interval.
func (s *State) NumWorkers() int { return len(s.workers) }

// Count is the number of tasks in status st.
func (s *State) Count(st Status) int {
	n := 0
	for _, tg := range s.groups {
		n += tg.states[st]
	}
	return n
}

// TotalThreads and TotalMemory are the cluster's totals.
func (s *State) TotalThreads() int { return s.totalNThreads }

// TotalMemory is the sum of the workers' memory limits.
func (s *State) TotalMemory() int64 { return s.totalMemory }

// Clients returns the registered clients with a stream, sorted.
func (s *State) Clients() []string {
	var out []string
	for _, cs := range s.clientOrder.Items() {
		if cs.connected {
			out = append(out, cs.ID)
		}
	}
	sort.Strings(out)
	return out
}

// WorkerIdentity mirrors WorkerState.identity().
func (s *State) WorkerIdentity(ws *WorkerState) *protocol.Map {
	res := &protocol.Map{}
	for r, q := range ws.Resources {
		res.Set(r, q)
	}
	sort.Slice(res.Entries, func(i, j int) bool { return res.Entries[i].Key.(string) < res.Entries[j].Key.(string) })
	m := protocol.NewMap(
		"type", "Worker",
		"id", ws.nameValue(),
		"host", ws.Host,
		"resources", res,
		"local_directory", ws.LocalDirectory,
		"name", ws.nameValue(),
		"nthreads", int64(ws.NThreads),
		"memory_limit", ws.MemoryLimit,
		"last_seen", unixSeconds(ws.lastSeen),
		"services", orEmpty(ws.Services),
		"metrics", orEmptyValue(ws.metrics),
		"status", ws.status,
		"nanny", nilIfEmpty(ws.Nanny),
	)
	if ws.Extra != nil {
		for _, e := range ws.Extra.Entries {
			if k, ok := e.Key.(string); ok {
				m.Set(k, e.Value)
			}
		}
	}
	return m
}

// Bandwidth is Scheduler.bandwidth: the cluster's estimate of bytes/s
// between workers, as the workers' heartbeats have moved it.
func (s *State) Bandwidth() float64 { return s.bandwidth }

// Identity mirrors Scheduler.identity(n_workers): nWorkers < 0 lists all.
func (s *State) Identity(nWorkers int) *protocol.Map {
	workers := &protocol.Map{}
	for i, ws := range s.workerOrder.Items() {
		if nWorkers >= 0 && i >= nWorkers {
			break
		}
		workers.Entries = append(workers.Entries, protocol.Entry{Key: ws.Address, Value: s.WorkerIdentity(ws)})
	}
	return protocol.NewMap(
		"type", "Scheduler",
		"id", s.cfg.SchedulerID,
		"address", s.cfg.SchedulerAddress,
		"services", orEmpty(s.cfg.Services),
		"started", unixSeconds(s.cfg.StartedAt),
		"n_workers", int64(len(s.workers)),
		"total_threads", int64(s.totalNThreads),
		"total_memory", s.totalMemory,
		"workers", workers,
		"config", s.effectiveConfig(), // ours: stock clients keep extra keys
		"stealing", s.stealIdentity(), // ours: work stealing's counters
	)
}

func orEmpty(m *protocol.Map) *protocol.Map {
	if m == nil {
		return &protocol.Map{}
	}
	return m
}

func orEmptyValue(v any) any {
	if v == nil {
		return &protocol.Map{}
	}
	return v
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Counts is distributed's json/counts.json (CountsJSON.get), but for
// desired_workers, which the caller adds: O(tasks), as there.
func (s *State) Counts() map[string]int64 {
	c := map[string]int64{"clients": int64(len(s.clients)), "workers": int64(len(s.workers)),
		"tasks": int64(s.tasks.Len()), "idle": int64(s.idle.Len()), "saturated": int64(s.saturated.Len()),
		"unrunnable": int64(s.unrunnable.Len()), "hosts": int64(len(s.hosts))}
	var bytes, cores, memory, processing int64
	for _, ws := range s.workerOrder.Items() {
		bytes += ws.nbytes
		cores += int64(ws.NThreads)
		memory += int64(ws.hasWhat.Len())
		processing += int64(ws.processing.Len())
	}
	c["bytes"], c["cores"], c["memory"], c["processing"] = bytes, cores, memory, processing
	var erred, released, waiting, waitingData int64
	for _, ts := range s.tasks.all() {
		switch {
		case ts.blame() != nil:
			erred++
		case ts.state == StatusReleased:
			released++
		}
		if ts.waitingOn.Len() > 0 {
			waiting++
		}
		if ts.waiters.Len() > 0 {
			waitingData++
		}
	}
	c["erred"], c["released"], c["waiting"], c["waiting_data"] = erred, released, waiting, waitingData
	return c
}
