package scheduler

import (
	"strconv"

	"daskgo/protocol"
)

// Builders of every message the engine sends. Field sets and order are
// exact: a stock worker builds dataclasses from these dicts (an extra or
// missing field kills it) and client handlers drop messages with unknown
// fields (distributed/scheduler.py: _task_to_msg, report, the worker's
// stream handlers in distributed/worker.py and worker_state_machine.py
// ComputeTaskEvent and friends, the client's handlers in client.py).

func msgFreeKeys(keys []protocol.Key, sid string) *protocol.Map {
	return map3("op", "free-keys", "keys", keys, "stimulus_id", sid)
}

// map3/map2 allocate a message and its entries in one object.
func map3(k1 string, v1 any, k2 string, v2 any, k3 string, v3 any) *protocol.Map {
	b := &struct {
		m  protocol.Map
		es [3]protocol.Entry
	}{}
	b.es = [3]protocol.Entry{{Key: k1, Value: v1}, {Key: k2, Value: v2}, {Key: k3, Value: v3}}
	b.m.Entries = b.es[:]
	return &b.m
}

func map2(k1 string, v1 any, k2 string, v2 any) *protocol.Map {
	b := &struct {
		m  protocol.Map
		es [2]protocol.Entry
	}{}
	b.es = [2]protocol.Entry{{Key: k1, Value: v1}, {Key: k2, Value: v2}}
	b.m.Entries = b.es[:]
	return &b.m
}

// Messages sit on hot paths (several per task), so they are built as
// literal entry lists rather than through NewMap's variadic []any.
func entry(k string, v any) protocol.Entry { return protocol.Entry{Key: k, Value: v} }

// emptyAnnotations is compute-task's "annotations": {} for tasks without
// any. Shared: Outbox messages are read-only once returned.
var emptyAnnotations = &protocol.Map{}

// freeTaskMsg is free-keys for one task in one allocation: the map, its
// entries and the keys list.
type freeTaskMsg struct {
	m    protocol.Map
	es   [3]protocol.Entry
	list []protocol.Key
	keys [1]protocol.Key
}

// msgFreeTask is free-keys for one task, built in a written one when the
// ring has said so (message_reuse.go).
func (s *State) msgFreeTask(ts *TaskState) *protocol.Map {
	b := s.reuse.freeTask.get()
	b.keys[0] = ts.Key
	b.list = b.keys[:]
	b.es = [3]protocol.Entry{{Key: "op", Value: "free-keys"}, {Key: "keys", Value: protocol.KeysAt(&b.list)}, {Key: "stimulus_id", Value: s.sidAny()}}
	b.m.Entries = b.es[:]
	return &b.m
}

func msgKeyInMemoryTask(ts *TaskState, typ []byte) *protocol.Map {
	if typ == nil {
		return map2("op", "key-in-memory", "key", ts.keyAny())
	}
	return map3("op", "key-in-memory", "key", ts.keyAny(), "type", typ)
}

// sidAny is the stimulus id boxed once per value (boxing a string
// allocates, and every worker message carries it).
func (s *State) sidAny() any {
	if s.sidBoxedFor != s.stimulusID || s.sidBoxed == nil {
		s.sidBoxedFor = s.stimulusID
		s.sidBoxed = s.stimulusID
	}
	return s.sidBoxed
}

func msgRemoveReplicas(keys []protocol.Key, sid string) *protocol.Map {
	return protocol.NewMap("op", "remove-replicas", "keys", keys, "stimulus_id", sid)
}

// msgKeyInMemory omits type when typ is nil (re-reports, scatter).
func msgKeyInMemory(k protocol.Key, typ []byte) *protocol.Map {
	if typ == nil {
		return protocol.NewMap("op", "key-in-memory", "key", k)
	}
	return protocol.NewMap("op", "key-in-memory", "key", k, "type", typ)
}

func msgTaskErred(k protocol.Key, exc, tb any) *protocol.Map {
	return protocol.NewMap("op", "task-erred", "key", k, "exception", exc, "traceback", tb)
}

func msgLostData(k protocol.Key) *protocol.Map {
	return protocol.NewMap("op", "lost-data", "key", k)
}

func msgCancelledKeys(keys []protocol.Key, reason, msg any) *protocol.Map {
	return protocol.NewMap("op", "cancelled-keys", "keys", keys, "reason", reason, "msg", msg)
}

func msgTaskRetried(k protocol.Key) *protocol.Map {
	return protocol.NewMap("op", "task-retried", "key", k)
}

func msgRemoveWorker(addr, sid string) *protocol.Map {
	return protocol.NewMap("op", "remove-worker", "worker", addr, "stimulus_id", sid)
}

func msgClose(reason string) *protocol.Map {
	return protocol.NewMap("op", "close", "reason", reason)
}

// computeSIDNow is distributed's f"compute-task-{time()}", built once per
// Handle since logical time does not move inside one.
func (s *State) computeSIDNow() any {
	if s.computeSID == nil || !s.computeSIDAt.Equal(s.now) {
		s.computeSID = "compute-task-" + strconv.FormatFloat(s.unixNow(), 'f', -1, 64)
		s.computeSIDAt = s.now
	}
	return s.computeSID
}

// computeTaskMsg is a compute-task message in one allocation: the map, its
// entries and the values its interfaces point at (protocol.Int64At).
type computeTaskMsg struct {
	m     protocol.Map
	es    [12]protocol.Entry
	prio  priorityWire
	runID int64
}

// computeTaskWithDeps is a compute-task with its who_has and nbytes, still
// one allocation.
type computeTaskWithDeps struct {
	computeTaskMsg
	deps computeTaskDeps
}

// computeTaskDeps is who_has and nbytes of a compute-task in one
// allocation, with room inline for the common few dependencies and
// holders (a tree reduction's two inputs, one holder each): a compute-task
// was about seven allocations, a third of the engine's per task
// (BenchmarkEngineReplay).
type computeTaskDeps struct {
	whoHas protocol.KeyList[[]string]
	nbytes protocol.KeyList[int64]
	wh     [2]protocol.KeyItem[[]string]
	nb     [2]protocol.KeyItem[int64]
	addrs  [2]string
}

// taskToMsg mirrors SchedulerState._task_to_msg: a fresh run_id per send.
func (s *State) taskToMsg(ts *TaskState) *protocol.Map {
	if ts.runID != 0 {
		s.runs.drop(ts.runID) // sent again (stolen): the old run is over
	}
	s.runIDs++
	ts.runID = s.runIDs
	s.runs.add(ts.runID, ts)
	// key-ordered lists, not maps: encoded alike, built without hashing
	// (protocol.KeyList); nil for a root task, which encodes as {}
	var whoHas *protocol.KeyList[[]string]
	var nbytes *protocol.KeyList[int64]
	var b *computeTaskMsg
	if deps := ts.dependencies.Items(); len(deps) == 0 {
		b = s.reuse.compute.get()
	} else {
		bd := s.reuse.computeDeps.get()
		b = &bd.computeTaskMsg
		d := &bd.deps
		whoHas, nbytes = &d.whoHas, &d.nbytes
		whoHas.Items, nbytes.Items = d.wh[:0], d.nb[:0]
		total := 0
		for _, dts := range deps {
			total += dts.whoHas.Len()
		}
		all := d.addrs[:0] // one backing array for every dependency's holders
		if total > len(d.addrs) {
			all = make([]string, 0, total)
		}
		for _, dts := range deps {
			start := len(all)
			for _, ws := range dts.whoHas.Items() {
				all = append(all, ws.Address)
			}
			whoHas.Items = append(whoHas.Items, protocol.KeyItem[[]string]{Key: dts.Key, Value: all[start:len(all):len(all)]})
			nbytes.Items = append(nbytes.Items, protocol.KeyItem[int64]{Key: dts.Key, Value: dts.nbytes})
		}
		whoHas.Sort()
		nbytes.Sort()
	}
	ann := ts.annotations
	if ann == nil {
		ann = emptyAnnotations
	}
	es := b.es[:]
	b.m.Entries = es
	es[0] = entry("op", "compute-task")
	es[1] = entry("key", ts.keyAny())
	b.runID = ts.runID
	es[2] = entry("run_id", protocol.Int64At(&b.runID))
	// built per message, not held per task: most tasks are sent once
	es[3] = entry("priority", ts.priority.wireInto(&b.prio))
	es[4] = entry("stimulus_id", s.computeSIDNow())
	es[5] = entry("who_has", whoHas)
	es[6] = entry("nbytes", nbytes)
	var runSpec *protocol.Blob
	if ts.runSpec != nil {
		runSpec = ts.runSpec.Payload()
	}
	es[7] = entry("run_spec", runSpec)
	es[8] = entry("resource_restrictions", ts.x().resourcesRaw)
	es[9] = entry("actor", ts.actor)
	es[10] = entry("annotations", ann)
	es[11] = entry("span_id", ts.group.spanAny) // nil outside a span (spans.go)
	return &b.m
}

// ---- sending -----------------------------------------------------------------

// report mirrors Scheduler.report(msg, ts, client): every client wanting ts
// plus client (which may not want it yet).
func (s *State) report(m *protocol.Map, ts *TaskState, client string) {
	if ts != nil {
		for _, cs := range ts.whoWants.Items() {
			if cs.ID != client {
				s.toClient(cs, m)
			}
		}
	}
	if client != "" {
		if cs := s.clients[client]; cs != nil {
			s.toClient(cs, m)
		}
	}
}

// reportAll sends m to every connected client.
func (s *State) reportAll(m *protocol.Map) {
	for _, cs := range s.clientOrder.Items() {
		s.toClient(cs, m)
	}
}

// taskReportMsg mirrors _task_to_report_msg.
func taskReportMsg(ts *TaskState) *protocol.Map {
	switch ts.state {
	case StatusForgotten:
		return protocol.NewMap("op", "cancelled-keys", "keys", []protocol.Key{ts.Key}, "reason", "already forgotten")
	case StatusMemory:
		return msgKeyInMemoryTask(ts, nil)
	case StatusErred:
		f := ts.blame()
		if f == nil {
			f = ts
		}
		return msgTaskErred(ts.Key, f.x().exception, f.x().traceback)
	}
	return nil
}

// reportOnKey mirrors Scheduler.report_on_key(ts=ts, client=client).
func (s *State) reportOnKey(ts *TaskState, client string) {
	if m := taskReportMsg(ts); m != nil {
		s.report(m, ts, client)
	}
}
