package scheduler

import (
	"maps"

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
// are keys in one shared array (Refs), workers and clients are names in
// another (Names), and the few wire values it carries (annotations,
// metrics, event messages, services) are never mutated by the engine once
// stored (a heartbeat replaces metrics, it does not write into them).

// Span is a slice [Lo, Hi) of ClusterDump.Refs or ClusterDump.Names.
type Span struct{ Lo, Hi int32 }

// ClusterDump is the engine's part of a cluster dump.
type ClusterDump struct {
	At       float64 // unix seconds of the copy
	Identity *protocol.Map
	Tasks    []TaskDump
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
	Refs  []protocol.Key
	Names []string
}

// TaskDump is one task: TaskState's public members.
type TaskDump struct {
	Key                                  protocol.Key
	State                                Status
	Group, Prefix                        string
	Priority                             [3]float64
	HasPriority                          bool
	NBytes, RunID                        int64
	Retries, Suspicious                  int
	Dependencies, Dependents             Span // Refs
	Waiters, WaitingOn                   Span // Refs
	WhoHas, WhoWants, ErredOn            Span // Names
	WorkerRestrictions, HostRestrictions Span // Names
	ResourceRestrictions                 map[string]float64
	ProcessingOn                         string
	Blame                                protocol.Key // exception_blame's key, when HasBlame
	HasBlame                             bool
	ExceptionText, TracebackText         string
	Loose, Actor, LostDependencies       bool
	HasRunSpec                           bool
	Annotations, Metadata                any // as received, opaque
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

// KeysIn returns the task references of sp.
func (d *ClusterDump) KeysIn(sp Span) []protocol.Key { return d.Refs[sp.Lo:sp.Hi] }

// NamesIn returns the worker or client names of sp.
func (d *ClusterDump) NamesIn(sp Span) []string { return d.Names[sp.Lo:sp.Hi] }

// DumpState copies what the cluster dump needs. Its cost is one pass over
// tasks, groups, workers and clients, appending to a few arrays sized up
// front.
func (s *State) DumpState() *ClusterDump {
	d := &ClusterDump{At: s.unixNow(), Identity: s.Identity(-1), TransitionCounter: s.log.total,
		Memory: s.Memory(), Stealing: s.StealStats(), AMMRunning: s.ammRunning,
		Log: s.log.entries()}
	n := s.tasks.Len()
	d.Tasks = make([]TaskDump, 0, n)
	d.Refs = make([]protocol.Key, 0, 2*n)
	d.Names = make([]string, 0, 2*n)
	for _, ts := range s.tasks.all() {
		d.Tasks = append(d.Tasks, s.dumpTask(d, ts))
	}
	for _, tg := range s.groups {
		d.Groups = append(d.Groups, dumpGroup(tg))
	}
	for _, ws := range s.workerOrder.Items() {
		d.Workers = append(d.Workers, s.dumpWorker(d, ws))
	}
	for _, cs := range s.clientOrder.Items() {
		d.Clients = append(d.Clients, ClientDump{ID: cs.ID, LastSeen: unixSeconds(cs.lastSeen),
			WantsWhat: d.refs(cs.wantsWhat.Items())})
	}
	for name, t := range s.broker.topics {
		d.Topics = append(d.Topics, TopicDump{Name: name, Events: t.ordered()})
	}
	return d
}

func (s *State) dumpTask(d *ClusterDump, ts *TaskState) TaskDump {
	x := ts.x()
	t := TaskDump{Key: ts.Key, State: ts.state, Group: ts.group.Name, Prefix: ts.prefix.Name,
		Priority: ts.priority, HasPriority: ts.hasPriority, NBytes: ts.nbytes, RunID: ts.runID,
		Retries: x.retries, Suspicious: x.suspicious,
		Dependencies: d.refs(ts.dependencies.Items()), Dependents: d.refs(ts.dependents.Items()),
		Waiters: d.refs(ts.waiters.Items()), WaitingOn: d.refs(ts.waitingOn.Items()),
		WhoHas: d.workerNames(ts.whoHas.Items()), ErredOn: d.names(x.erredOn),
		WorkerRestrictions: d.names(x.workerRestrictions), HostRestrictions: d.names(x.hostRestrictions),
		ResourceRestrictions: maps.Clone(x.resourceRestrictions),
		ExceptionText:        x.exceptionText, TracebackText: x.tracebackText,
		Loose: x.looseRestrictions, Actor: ts.actor, LostDependencies: ts.hasLostDependencies,
		HasRunSpec: ts.runSpec != nil, Annotations: ts.annotations, Metadata: x.metadata}
	lo := int32(len(d.Names))
	for _, cs := range ts.whoWants.Items() {
		d.Names = append(d.Names, cs.ID)
	}
	t.WhoWants = Span{lo, int32(len(d.Names))}
	if ts.processingOn != nil {
		t.ProcessingOn = ts.processingOn.Address
	}
	if ts.exceptionBlame != nil {
		t.Blame, t.HasBlame = ts.exceptionBlame.Key, true
	}
	return t
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
	w := WorkerDump{Address: ws.Address, Host: ws.Host, Status: ws.status, Nanny: ws.Nanny, ServerID: ws.ServerID,
		LocalDirectory: ws.LocalDirectory, NameValue: ws.nameValue(), NThreads: ws.NThreads,
		MemoryLimit: ws.MemoryLimit, NBytes: ws.nbytes, PID: ws.PID, LastSeen: unixSeconds(ws.lastSeen),
		Occupancy: s.occupancy(ws), Memory: s.WorkerMemory(ws), Resources: maps.Clone(ws.Resources),
		UsedResources: maps.Clone(ws.usedResources), Metrics: ws.metrics, Services: ws.Services, Extra: ws.Extra,
		HasWhat: d.refs(ws.hasWhat.Items()), Processing: d.refs(ws.processing.Items()),
		LongRunning: d.refs(ws.longRunning.Items()), Actors: d.refs(ws.actors.Items()),
		Executing: maps.Clone(ws.executing)}
	return w
}

func (d *ClusterDump) refs(ts []*TaskState) Span {
	lo := int32(len(d.Refs))
	for _, t := range ts {
		d.Refs = append(d.Refs, t.Key)
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

func (d *ClusterDump) names(ns []string) Span {
	lo := int32(len(d.Names))
	d.Names = append(d.Names, ns...)
	return Span{lo, int32(len(d.Names))}
}
