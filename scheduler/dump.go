package scheduler

import (
	"maps"
	"slices"

	"daskgo/protocol"
)

// The cluster dump's copy of the engine (Scheduler._to_dict, behind
// Client.dump_cluster_state and dump_state): what SchedulerState._to_dict
// writes of tasks, task groups, workers, clients, the transition log, the
// memory and the event topics, copied under the engine's lock in a compact
// form and nothing more. The outer ring builds and encodes the dump from
// it outside the lock: on 100k tasks the copy is a few flat arrays, while
// the dump is hundreds of megabytes of text.
//
// A ClusterDump aliases no mutable engine state: references between tasks
// are keys (with the state each had) in one shared array (Refs), workers
// and clients are names in another (Names), groups and workers are
// indices, and the few wire values it carries (annotations, metrics,
// event messages, services) are never mutated by the engine once stored
// (a heartbeat replaces metrics, it does not write into them).

// Span is a slice [Lo, Hi) of ClusterDump.Refs or ClusterDump.Names.
type Span struct{ Lo, Hi int32 }

// ClusterDump is the engine's part of a cluster dump.
type ClusterDump struct {
	At       float64 // unix seconds of the copy
	Identity *protocol.Map
	Tasks    []TaskDump
	Rare     []TaskRare // the few tasks' restrictions, errors, metadata
	Groups   []GroupDump
	Workers  []WorkerDump
	Clients  []ClientDump
	// Log is the transition log, oldest first; TransitionCounter counts
	// every transition ever made.
	Log               []Transition
	TransitionCounter uint64
	Memory            MemoryState
	Topics            []TopicDump
	Stealing          StealStats
	AMMRunning        bool
	// Refs and Names hold the tasks' and workers' references (Span).
	Refs  []Ref
	Names []string
}

// Ref is a reference to a task: its key, and its state at the copy (the
// dump names a task by its repr, which shows both).
type Ref struct {
	Key   protocol.Key
	State Status
}

// TaskDump is one task: TaskState's public members; the rare ones are in
// ClusterDump.Rare. Kept small: the engine's lock is held while 100k of
// them are copied.
type TaskDump struct {
	Key                                  protocol.Key
	Annotations                          any // as received, opaque
	Priority                             [3]float64
	NBytes, RunID                        int64
	Dependencies, Dependents             Span  // Refs
	Waiters, WaitingOn                   Span  // Refs
	WhoHas, WhoWants                     Span  // Names
	Group                                int32 // in Groups
	ProcessingOn                         int32 // in Workers; -1: none
	Rare                                 int32 // in Rare; -1: none
	State                                Status
	HasPriority, Actor, LostDependencies bool
	HasRunSpec                           bool
}

// TaskRare is what few tasks have: restrictions, retries, an error.
type TaskRare struct {
	Retries, Suspicious                  int
	ErredOn                              []string
	WorkerRestrictions, HostRestrictions []string
	ResourceRestrictions                 map[string]float64
	Loose                                bool
	Blame                                Ref // exception_blame, when HasBlame
	HasBlame                             bool
	ExceptionText, TracebackText         string
	Exception, Traceback                 any // as the worker sent them, opaque and shared: read only
	Metadata                             any // the worker's, opaque
}

// GroupDump is one TaskGroup.
type GroupDump struct {
	Name, Prefix        string
	States              [numStatus]int
	NBytesTotal         int64
	Dependencies        []string // group names
	Types               []string
	LastWorker          string
	LastWorkerTasksLeft int
}

// WorkerDump is one WorkerState.
type WorkerDump struct {
	Address, Host, Status, Nanny, ServerID, LocalDirectory string
	NameValue                                              any
	NThreads                                               int
	MemoryLimit, NBytes, PID                               int64
	LastSeen, Occupancy                                    float64
	Memory                                                 MemoryState
	Resources, UsedResources                               map[string]float64
	Metrics                                                any
	Services, Extra                                        *protocol.Map
	HasWhat, Processing, LongRunning, Actors               Span // Refs
	Executing                                              map[protocol.Key]float64
}

// ClientDump is one ClientState.
type ClientDump struct {
	ID        string
	LastSeen  float64
	WantsWhat Span // Refs
}

// TopicDump is one event topic's events, oldest first.
type TopicDump struct {
	Name   string
	Events []Event
}

// StatusName is a Status's name; the dump's renderer needs it per state
// index.
func StatusName(st Status) string { return st.String() }

// NumStatus is the number of task states (GroupDump.States' length).
const NumStatus = int(numStatus)

// RefsIn returns the task references of sp.
func (d *ClusterDump) RefsIn(sp Span) []Ref { return d.Refs[sp.Lo:sp.Hi] }

// NamesIn returns the worker or client names of sp.
func (d *ClusterDump) NamesIn(sp Span) []string { return d.Names[sp.Lo:sp.Hi] }

// DumpState copies what the cluster dump needs: one pass to size the
// arrays, one to fill them, plus the groups, workers and clients. On 100k
// tasks that is a few milliseconds of the engine's lock
// (BenchmarkDumpState), where building the dump would be seconds.
func (s *State) DumpState() *ClusterDump {
	d := &ClusterDump{At: s.unixNow(), Identity: s.Identity(-1), TransitionCounter: s.log.total,
		Memory: s.Memory(), Stealing: s.StealStats(), AMMRunning: s.ammRunning,
		Log: s.log.entries()}
	s.dumpTasks(d)
	for name, t := range s.broker.topics {
		d.Topics = append(d.Topics, TopicDump{Name: name, Events: t.ordered()})
	}
	return d
}

// DumpTasks copies what DumpState does of the tasks, workers and clients,
// without the transition log, the events and the identity: the scheduler
// side's view for the Python host (dask_scheduler.tasks).
func (s *State) DumpTasks() *ClusterDump {
	d := &ClusterDump{At: s.unixNow()}
	s.dumpTasks(d)
	return d
}

// DumpPeers copies the workers and clients only (their has_what,
// processing and wants_what as references): dask_scheduler.workers and
// clients, at a cost that does not grow with the tasks the workers do not
// hold.
func (s *State) DumpPeers() *ClusterDump {
	d := &ClusterDump{At: s.unixNow()}
	for _, ws := range s.workerOrder.Items() {
		d.Workers = append(d.Workers, s.dumpWorker(d, ws))
	}
	for _, cs := range s.clientOrder.Items() {
		d.Clients = append(d.Clients, ClientDump{ID: cs.ID, LastSeen: unixSeconds(cs.lastSeen),
			WantsWhat: d.refs(cs.wantsWhat.Items())})
	}
	return d
}

func (s *State) dumpTasks(d *ClusterDump) {
	nRefs, nNames, nRare := 0, 0, 0
	for _, ts := range s.tasks.all() {
		nRefs += ts.dependencies.Len() + ts.dependents.Len() + ts.waiters.Len() + ts.waitingOn.Len()
		nNames += ts.whoHas.Len() + ts.whoWants.Len()
		if ts.extra != nil {
			nRare++
		}
	}
	for _, ws := range s.workerOrder.Items() {
		nRefs += ws.hasWhat.Len() + ws.processing.Len() + ws.longRunning.Len() + ws.actors.Len()
	}
	for _, cs := range s.clientOrder.Items() {
		nRefs += cs.wantsWhat.Len()
	}
	d.Tasks = make([]TaskDump, 0, s.tasks.Len())
	d.Refs = make([]Ref, 0, nRefs)
	d.Names = make([]string, 0, nNames)
	d.Rare = make([]TaskRare, 0, nRare)
	groups := make(map[*TaskGroup]int32, len(s.groups))
	for _, tg := range s.groups {
		groups[tg] = int32(len(d.Groups))
		d.Groups = append(d.Groups, dumpGroup(tg))
	}
	workers := make(map[*WorkerState]int32, len(s.workers))
	for _, ws := range s.workerOrder.Items() {
		workers[ws] = int32(len(d.Workers))
		d.Workers = append(d.Workers, s.dumpWorker(d, ws))
	}
	for _, ts := range s.tasks.all() {
		d.Tasks = append(d.Tasks, d.task(ts, groups, workers))
	}
	for _, cs := range s.clientOrder.Items() {
		d.Clients = append(d.Clients, ClientDump{ID: cs.ID, LastSeen: unixSeconds(cs.lastSeen),
			WantsWhat: d.refs(cs.wantsWhat.Items())})
	}
}

func (d *ClusterDump) task(ts *TaskState, groups map[*TaskGroup]int32, workers map[*WorkerState]int32) TaskDump {
	t := TaskDump{Key: ts.Key, State: ts.state, Group: groups[ts.group], Priority: ts.priority,
		HasPriority: ts.hasPriority, NBytes: ts.nbytes, RunID: ts.runID, ProcessingOn: -1, Rare: -1,
		Dependencies: d.refs(ts.dependencies.Items()), Dependents: d.refs(ts.dependents.Items()),
		Waiters: d.refs(ts.waiters.Items()), WaitingOn: d.refs(ts.waitingOn.Items()),
		WhoHas: d.workerNames(ts.whoHas.Items()), Actor: ts.actor, LostDependencies: ts.hasLostDependencies,
		HasRunSpec: ts.runSpec != nil, Annotations: ts.annotations}
	lo := int32(len(d.Names))
	for _, cs := range ts.whoWants.Items() {
		d.Names = append(d.Names, cs.ID)
	}
	t.WhoWants = Span{lo, int32(len(d.Names))}
	if ts.processingOn != nil {
		t.ProcessingOn = workers[ts.processingOn]
	}
	if ts.extra != nil {
		t.Rare = int32(len(d.Rare))
		d.Rare = append(d.Rare, rareOf(ts))
	}
	return t
}

func rareOf(ts *TaskState) TaskRare {
	x := ts.x()
	r := TaskRare{Retries: x.retries, Suspicious: x.suspicious, ErredOn: slices.Clone(x.erredOn),
		WorkerRestrictions: slices.Clone(x.workerRestrictions), HostRestrictions: slices.Clone(x.hostRestrictions),
		ResourceRestrictions: maps.Clone(x.resourceRestrictions), Loose: x.looseRestrictions,
		ExceptionText: x.exceptionText, TracebackText: x.tracebackText, Metadata: x.metadata,
		Exception: x.exception, Traceback: x.traceback}
	if b := ts.blame(); b != nil {
		r.Blame, r.HasBlame = Ref{b.Key, b.state}, true
	}
	return r
}

func dumpGroup(tg *TaskGroup) GroupDump {
	g := GroupDump{Name: tg.Name, Prefix: tg.prefix.Name, States: tg.states, NBytesTotal: tg.nbytesTotal,
		LastWorkerTasksLeft: tg.lastWorkerTasksLeft}
	for dep := range tg.dependencies {
		g.Dependencies = append(g.Dependencies, dep.Name)
	}
	for typ := range tg.types {
		g.Types = append(g.Types, typ)
	}
	if tg.lastWorker != nil {
		g.LastWorker = tg.lastWorker.Address
	}
	return g
}

func (s *State) dumpWorker(d *ClusterDump, ws *WorkerState) WorkerDump {
	return WorkerDump{Address: ws.Address, Host: ws.Host, Status: ws.status, Nanny: ws.Nanny, ServerID: ws.ServerID,
		LocalDirectory: ws.LocalDirectory, NameValue: ws.nameValue(), NThreads: ws.NThreads,
		MemoryLimit: ws.MemoryLimit, NBytes: ws.nbytes, PID: ws.PID, LastSeen: unixSeconds(ws.lastSeen),
		Occupancy: s.occupancy(ws), Memory: s.WorkerMemory(ws), Resources: maps.Clone(ws.Resources),
		UsedResources: maps.Clone(ws.usedResources), Metrics: ws.metrics, Services: ws.Services, Extra: ws.Extra,
		HasWhat: d.refs(ws.hasWhat.Items()), Processing: d.refs(ws.processing.Items()),
		LongRunning: d.refs(ws.longRunning.Items()), Actors: d.refs(ws.actors.Items()),
		Executing: maps.Clone(ws.executing)}
}

func (d *ClusterDump) refs(ts []*TaskState) Span {
	lo := int32(len(d.Refs))
	for _, t := range ts {
		d.Refs = append(d.Refs, Ref{t.Key, t.state})
	}
	return Span{lo, int32(len(d.Refs))}
}

func (d *ClusterDump) workerNames(ws []*WorkerState) Span {
	lo := int32(len(d.Names))
	for _, w := range ws {
		d.Names = append(d.Names, w.Address)
	}
	return Span{lo, int32(len(d.Names))}
}
