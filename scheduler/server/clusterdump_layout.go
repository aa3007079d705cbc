package server

import (
	"maps"
	"slices"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// The records of the scheduler section, field by field, in the order
// recursive_to_dict writes them (inspect.getmembers: by name). See
// clusterdump_encode.go for the rules.

// schedulerTop are Scheduler._to_dict's own entries after identity's.
var schedulerTop = []string{"status", "transition_log", "transition_counter", "tasks", "task_groups",
	"clients", "memory", "events", "extensions"}

// schedulerSection writes Scheduler._to_dict(exclude).
func (e *dumpEncoder) schedulerSection() {
	d := e.d
	var ident []protocol.Entry
	for _, en := range d.Identity.Entries {
		if name, _ := en.Key.(string); !e.exclude[name] {
			ident = append(ident, en)
		}
	}
	top := e.kept(schedulerTop)
	e.mapLen(len(ident) + len(top))
	for _, en := range ident {
		e.value(en.Key)
		if en.Key == "workers" { // _to_dict's workers: the WorkerStates, not identity's
			e.workers()
			continue
		}
		e.value(en.Value)
	}
	for _, name := range top {
		e.str(name)
		switch name {
		case "status":
			e.str("running")
		case "transition_log":
			e.transitionLog()
		case "transition_counter":
			e.int(int64(d.TransitionCounter))
		case "tasks":
			e.tasks()
		case "task_groups":
			e.groups()
		case "clients":
			e.clients()
		case "memory":
			e.memory(d.Memory)
		case "events":
			e.events()
		case "extensions":
			e.extensions()
		}
		e.maybeFlush()
	}
}

// transitionLog writes the log as distributed's Transition tuples (key,
// start, finish, recommendations, stimulus_id, timestamp).
func (e *dumpEncoder) transitionLog() {
	e.arrLen(len(e.d.Log))
	for _, t := range e.d.Log {
		e.arrLen(6)
		e.key(t.Key)
		e.str(t.From.String())
		e.str(t.To.String())
		e.mapLen(0)
		e.str(t.StimulusID)
		e.float(float64(t.At.UnixNano()) / 1e9)
		e.maybeFlush()
	}
}

// taskFields are TaskState's members as _to_dict_no_nest lists them.
var taskFields = []string{"actor", "annotations", "dependencies", "dependents", "erred_on", "exception",
	"exception_blame", "exception_text", "group", "group_key", "has_lost_dependencies", "host_restrictions",
	"key", "loose_restrictions", "metadata", "nbytes", "prefix", "priority", "processing_on",
	"resource_restrictions", "retries", "run_id", "run_spec", "state", "suspicious", "traceback",
	"traceback_text", "type", "waiters", "waiting_on", "who_has", "who_wants", "worker_restrictions"}

func (e *dumpEncoder) tasks() {
	names := e.kept(taskFields)
	e.mapLen(len(e.d.Tasks))
	for i := range e.d.Tasks {
		t := &e.d.Tasks[i]
		e.taskKey(t.Key)
		e.mapLen(len(names))
		for _, n := range names {
			e.str(n)
			e.taskField(t, n)
		}
		e.maybeFlush()
	}
}

func (e *dumpEncoder) taskField(t *scheduler.TaskDump, name string) {
	d := e.d
	var rare *scheduler.TaskRare
	if t.Rare >= 0 {
		rare = &d.Rare[t.Rare]
	}
	switch name {
	case "actor":
		e.bool(t.Actor)
	case "annotations":
		e.dict(t.Annotations)
	case "dependencies":
		e.taskReprs(d.RefsIn(t.Dependencies), false)
	case "dependents":
		e.taskReprs(d.RefsIn(t.Dependents), false)
	case "group":
		e.str(e.groupRepr[t.Group])
	case "group_key":
		e.str(d.Groups[t.Group].Name)
	case "has_lost_dependencies":
		e.bool(t.LostDependencies)
	case "key":
		e.key(t.Key)
	case "nbytes":
		e.int(t.NBytes)
	case "prefix":
		e.str(e.prefixRepr[d.Groups[t.Group].Prefix])
	case "priority":
		e.priority(t)
	case "processing_on":
		if t.ProcessingOn < 0 {
			e.null()
		} else {
			e.str(e.workerReprOf(d.Workers[t.ProcessingOn].Address))
		}
	case "run_id":
		e.int(t.RunID)
	case "run_spec":
		if t.HasRunSpec {
			e.str("<pickled run_spec>") // user code, kept pickled by this scheduler
		} else {
			e.null()
		}
	case "state":
		e.str(scheduler.StatusName(t.State))
	case "type":
		e.null() // the engine keeps result types per task group
	case "waiters":
		e.taskReprs(d.RefsIn(t.Waiters), false)
	case "waiting_on":
		e.taskReprs(d.RefsIn(t.WaitingOn), true)
	case "who_has":
		e.workerReprs(d.NamesIn(t.WhoHas), true)
	case "who_wants":
		e.clientReprs(d.NamesIn(t.WhoWants))
	default:
		e.rareField(rare, name)
	}
}

// rareField writes the members ClusterDump.Rare holds (nil: the task has
// none of them).
func (e *dumpEncoder) rareField(r *scheduler.TaskRare, name string) {
	if r == nil {
		r = &noRare
	}
	switch name {
	case "erred_on":
		e.strsOrNil(r.ErredOn)
	case "exception", "traceback":
		if r.ExceptionText == "" {
			e.null()
		} else {
			e.str("<distributed.protocol.serialize.Serialized object>")
		}
	case "exception_blame":
		if r.HasBlame {
			e.taskRepr(r.Blame)
		} else {
			e.null()
		}
	case "exception_text":
		e.strOrNil(r.ExceptionText)
	case "traceback_text":
		e.strOrNil(r.TracebackText)
	case "host_restrictions":
		e.strsOrNil(r.HostRestrictions)
	case "worker_restrictions":
		e.strsOrNil(r.WorkerRestrictions)
	case "loose_restrictions":
		e.bool(r.Loose)
	case "metadata":
		e.value(r.Metadata)
	case "resource_restrictions":
		if r.ResourceRestrictions == nil {
			e.null()
		} else {
			e.floats(r.ResourceRestrictions)
		}
	case "retries":
		e.int(int64(r.Retries))
	case "suspicious":
		e.int(int64(r.Suspicious))
	default:
		e.null() // a name taskFields lists and no case writes: a bug, kept readable
	}
}

// noRare is a task's rare members when it has none.
var noRare scheduler.TaskRare

// priority writes the priority tuple with integral elements as ints.
func (e *dumpEncoder) priority(t *scheduler.TaskDump) {
	if !t.HasPriority {
		e.null()
		return
	}
	e.arrLen(3)
	for _, f := range t.Priority {
		if f == float64(int64(f)) {
			e.int(int64(f))
		} else {
			e.float(f)
		}
	}
}

func (e *dumpEncoder) clientReprs(ids []string) {
	e.arrLen(len(ids))
	for _, id := range ids {
		e.str("<Client " + pyStrRepr(id) + ">")
	}
}

// groupFields are the TaskGroup members the engine keeps.
var groupFields = []string{"dependencies", "done", "last_worker", "last_worker_tasks_left", "name",
	"nbytes_total", "prefix", "states", "types"}

// stateOrder is TaskGroup.states' order (TaskStateState's members).
var stateOrder = []scheduler.Status{scheduler.StatusMemory, scheduler.StatusProcessing, scheduler.StatusErred,
	scheduler.StatusNoWorker, scheduler.StatusWaiting, scheduler.StatusForgotten, scheduler.StatusReleased,
	scheduler.StatusQueued}

func (e *dumpEncoder) groups() {
	names := e.kept(groupFields)
	e.mapLen(len(e.d.Groups))
	for i := range e.d.Groups {
		g := &e.d.Groups[i]
		e.str(g.Name)
		e.mapLen(len(names))
		for _, n := range names {
			e.str(n)
			e.groupField(g, n)
		}
	}
}

// groupReprOf is the repr of the group named name.
func (e *dumpEncoder) groupReprOf(name string) string {
	if e.groupIndex == nil {
		e.groupIndex = make(map[string]int, len(e.d.Groups))
		for i := range e.d.Groups {
			e.groupIndex[e.d.Groups[i].Name] = i
		}
	}
	if i, ok := e.groupIndex[name]; ok {
		return e.groupRepr[i]
	}
	return "<" + name + ": >"
}

func (e *dumpEncoder) groupField(g *scheduler.GroupDump, name string) {
	switch name {
	case "dependencies":
		deps := slices.Sorted(slices.Values(g.Dependencies))
		e.arrLen(len(deps))
		for _, dep := range deps {
			e.str(e.groupReprOf(dep))
		}
	case "done": // TaskGroup.done
		busy := g.States[scheduler.StatusWaiting] + g.States[scheduler.StatusQueued] +
			g.States[scheduler.StatusProcessing] + g.States[scheduler.StatusNoWorker]
		e.bool(busy == 0)
	case "last_worker":
		if g.LastWorker == "" {
			e.null()
		} else {
			e.str(e.workerReprOf(g.LastWorker))
		}
	case "last_worker_tasks_left":
		e.int(int64(g.LastWorkerTasksLeft))
	case "name":
		e.str(g.Name)
	case "nbytes_total":
		e.int(g.NBytesTotal)
	case "prefix":
		e.str(e.prefixRepr[g.Prefix])
	case "states":
		e.mapLen(len(stateOrder))
		for _, st := range stateOrder {
			e.str(scheduler.StatusName(st))
			e.int(int64(g.States[st]))
		}
	case "types":
		e.strs(slices.Sorted(slices.Values(g.Types)))
	}
}

// workerFields are the WorkerState members the engine keeps.
var workerFields = []string{"actors", "address", "executing", "extra", "has_what", "host", "last_seen",
	"local_directory", "long_running", "memory", "memory_limit", "metrics", "name", "nanny", "nbytes",
	"nthreads", "occupancy", "pid", "processing", "resources", "server_id", "services", "status",
	"used_resources"}

func (e *dumpEncoder) workers() {
	names := e.kept(workerFields)
	e.mapLen(len(e.d.Workers))
	for i := range e.d.Workers {
		w := &e.d.Workers[i]
		e.str(w.Address)
		e.mapLen(len(names))
		for _, n := range names {
			e.str(n)
			e.workerField(w, n)
		}
		e.maybeFlush()
	}
}

func (e *dumpEncoder) workerField(w *scheduler.WorkerDump, name string) {
	d := e.d
	switch name {
	case "actors":
		e.taskReprs(d.RefsIn(w.Actors), false)
	case "address":
		e.str(w.Address)
	case "executing":
		keys := slices.Sorted(maps.Keys(w.Executing))
		e.mapLen(len(keys))
		for _, k := range keys {
			e.taskRepr(scheduler.Ref{Key: k, State: scheduler.StatusProcessing})
			e.float(w.Executing[k])
		}
	case "extra":
		e.dict(w.Extra)
	case "has_what":
		e.taskReprs(d.RefsIn(w.HasWhat), false)
	case "host":
		e.str(w.Host)
	case "last_seen":
		e.float(w.LastSeen)
	case "local_directory":
		e.str(w.LocalDirectory)
	case "long_running":
		e.taskReprs(d.RefsIn(w.LongRunning), false)
	case "memory":
		e.memory(w.Memory)
	case "memory_limit":
		e.int(w.MemoryLimit)
	case "metrics":
		e.dict(w.Metrics)
	case "name":
		e.value(w.NameValue)
	case "nanny":
		e.strOrNil(w.Nanny)
	case "nbytes":
		e.int(w.NBytes)
	case "nthreads":
		e.int(int64(w.NThreads))
	case "occupancy":
		e.float(w.Occupancy)
	case "pid":
		e.int(w.PID)
	case "processing":
		e.taskReprs(d.RefsIn(w.Processing), false)
	case "resources":
		e.floats(w.Resources)
	case "server_id":
		e.str(w.ServerID)
	case "services":
		e.dict(w.Services)
	case "status": // recursive_to_dict writes the Status enum's repr
		e.str("<Status." + w.Status + ": " + pyStrRepr(w.Status) + ">")
	case "used_resources":
		e.floats(w.UsedResources)
	}
}

// clientFields are ClientState's members (versions excluded, as
// ClientState._to_dict_no_nest excludes them).
var clientFields = []string{"client_key", "last_seen", "wants_what"}

func (e *dumpEncoder) clients() {
	names := e.kept(clientFields)
	e.mapLen(len(e.d.Clients))
	for _, c := range e.d.Clients {
		e.str(c.ID)
		e.mapLen(len(names))
		for _, n := range names {
			e.str(n)
			switch n {
			case "client_key":
				e.str(c.ID)
			case "last_seen":
				e.float(c.LastSeen)
			case "wants_what":
				e.taskReprs(e.d.RefsIn(c.WantsWhat), false)
			}
		}
		e.maybeFlush()
	}
}

// events writes each topic's events, [[time, msg], ...], by topic name.
func (e *dumpEncoder) events() {
	topics := slices.Clone(e.d.Topics)
	slices.SortFunc(topics, func(a, b scheduler.TopicDump) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	e.mapLen(len(topics))
	for _, t := range topics {
		e.str(t.Name)
		e.arrLen(len(t.Events))
		for _, ev := range t.Events {
			e.arrLen(2)
			e.float(ev.Time)
			e.value(ev.Msg)
		}
		e.maybeFlush()
	}
}

// extensions writes the state of the engine's counterparts of
// distributed's scheduler extensions that have some.
func (e *dumpEncoder) extensions() {
	st := e.d.Stealing
	e.mapLen(2)
	e.str("amm")
	e.value(protocol.NewMap("policies", []string{"ReduceReplicas"}, "running", e.d.AMMRunning))
	e.str("stealing")
	e.value(protocol.NewMap("count", st.Balances, "requests", st.Requests, "confirmed", st.Confirmed,
		"rejected", st.Rejected, "rescheduled", st.Rescheduled, "in_flight", int64(st.InFlight)))
}
