package scheduler

import (
	"math"

	"daskgo/protocol"
)

// Scheduler plugin hooks: the events distributed's Scheduler calls its
// SchedulerPlugins with (distributed/diagnostics/plugin.py SchedulerPlugin).
// The plugins themselves live in the scheduler-side Python host; the
// engine only says what happened, in distributed's order, as Outbox.Hooks.
//
// Nothing is built unless a listener is registered (SetHookListener, sent
// by the outer ring while the host holds at least one plugin): the cost
// when nobody listens is one flag test per transition.
//
// The order follows distributed's Scheduler:
//   - transition: after each _transition, including both halves of one
//     that goes through released (the inner _transition(key, "released")
//     reports start -> released before released -> finish runs);
//   - update_graph: in _update_graph after the recommendations are made,
//     before they run;
//   - add_worker: in add_worker once the worker is known, before the
//     transitions its arrival allows (bulk_schedule_unrunnable_after_adding_worker);
//   - remove_worker: in remove_worker after its transitions;
//   - add_client / remove_client: add_client as the client registers;
//     remove_client after its keys are released;
//   - restart: after every client was told {"op": "restart"};
//   - log_event: Broker.publish, once per topic.

// Hook names a SchedulerPlugin method.
type Hook uint8

// The hooks, named as SchedulerPlugin's methods.
const (
	HookTransition Hook = iota
	HookUpdateGraph
	HookAddWorker
	HookRemoveWorker
	HookAddClient
	HookRemoveClient
	HookRestart
	HookLogEvent
)

var hookNames = [...]string{"transition", "update_graph", "add_worker", "remove_worker",
	"add_client", "remove_client", "restart", "log_event"}

func (h Hook) String() string {
	if int(h) < len(hookNames) {
		return hookNames[h]
	}
	return "unknown"
}

// HookEvent is one call of a SchedulerPlugin hook. Only the fields of its
// Hook are set. It holds no engine pointer: the outer ring reads it after
// the lock is released.
type HookEvent struct {
	Hook       Hook
	StimulusID string
	// transition
	Key           protocol.Key
	Start, Finish Status
	Kwargs        *TransitionKwargs // nil: the transition was called without kwargs
	// add_worker, remove_worker: the worker's address
	Worker string
	// add_client, remove_client, update_graph
	Client string
	Graph  *GraphHook
	// log_event
	Topic string
	Msg   any
}

// TransitionKwargs is what distributed passes as **kwargs to
// SchedulerPlugin.transition: the worker's TaskFinishedMsg fields for
// processing -> memory (stimulus_task_finished), TaskErredMsg's and cause
// for -> erred (stimulus_task_erred; remove_worker's KilledWorker;
// check_no_workers' timeout).
type TransitionKwargs struct {
	Worker string
	// processing -> memory
	Finished   bool
	NBytes     int64
	Type       []byte
	TypeName   string
	StartStops []StartStop
	Thread     any
	Metadata   any
	// -> erred
	Erred                        bool
	Cause                        protocol.Key
	Exception, Traceback         any
	ExceptionText, TracebackText string
}

// GraphHook is update_graph's arguments: keys the client wants, tasks the
// graph touched (with their priorities), and the annotations of those that
// have some, as {annotation: {key: value}} in task order.
type GraphHook struct {
	Keys        []protocol.Key
	Tasks       []protocol.Key
	Priorities  [][3]float64 // Tasks[i]'s (-user_priority, generation, order)
	Annotations []TaskAnnotations
}

// TaskAnnotations is one task's annotations, verbatim as the client sent
// them (a {name: value} map).
type TaskAnnotations struct {
	Key    protocol.Key
	Values any
}

// HookMask is a set of hooks, bit 1<<Hook.
type HookMask uint16

// AllHooks listens to every hook.
const AllHooks HookMask = 1<<(HookLogEvent+1) - 1

// Has reports whether h is in the set.
func (m HookMask) Has(h Hook) bool { return m&(1<<h) != 0 }

// SetHookListener sets which hooks are emitted (0: none). The outer ring
// sends the hooks the host's scheduler plugins define, so a plugin with
// only add_worker costs nothing per transition.
type SetHookListener struct {
	Base
	Hooks HookMask
}

// HookListener returns the hooks being emitted.
func (s *State) HookListener() HookMask { return s.hookMask }

func (s *State) setHooks(m HookMask) {
	s.hookMask = m
	s.hooks = m.Has(HookTransition)
}

// hook appends e if its hook is listened to.
func (s *State) hook(e HookEvent) {
	if !s.hookMask.Has(e.Hook) {
		return
	}
	e.StimulusID = s.stimulusID
	if s.out.Hooks == nil {
		s.out.Hooks, s.pool.hooks = s.pool.hooks, nil // nil too when none was handed back
	}
	s.out.Hooks = append(s.out.Hooks, e)
}

// hookTransition is the transition hook for start -> ts.state; a carries
// the transition's kwargs when the caller passed distributed's.
func (s *State) hookTransition(ts *TaskState, start Status, a *transArgs) {
	s.hook(HookEvent{Hook: HookTransition, Key: ts.Key, Start: start, Finish: ts.state, Kwargs: hookKwargs(a)})
}

// hookKwargs maps the engine's transition arguments to distributed's
// kwargs. A placement alone (queued -> processing) is ours: distributed
// passes nothing there.
func hookKwargs(a *transArgs) *TransitionKwargs {
	switch {
	case a == nil:
		return nil
	case a.cause != nil:
		return &TransitionKwargs{Erred: true, Worker: a.worker, Cause: a.cause.Key,
			Exception: a.exception, Traceback: a.traceback,
			ExceptionText: a.exceptionText, TracebackText: a.tracebackText,
			Thread: a.thread, StartStops: a.startStops}
	case a.worker != "":
		return &TransitionKwargs{Finished: a.finished, Worker: a.worker, NBytes: a.nbytes, Type: a.typ,
			TypeName: a.typeName, StartStops: a.startStops, Thread: a.thread, Metadata: a.metadata}
	}
	return nil
}

// hookUpdateGraph is _update_graph's plugin call for the touched tasks.
func (s *State) hookUpdateGraph(client string, keys []protocol.Key, touched []*TaskState) {
	g := &GraphHook{Keys: keys, Tasks: make([]protocol.Key, len(touched)), Priorities: make([][3]float64, len(touched))}
	for i, ts := range touched {
		g.Tasks[i] = ts.Key
		g.Priorities[i] = ts.priority
		if ts.annotations != nil {
			g.Annotations = append(g.Annotations, TaskAnnotations{Key: ts.Key, Values: ts.annotations})
		}
	}
	s.hook(HookEvent{Hook: HookUpdateGraph, Client: client, Graph: g})
}

// PriorityWire renders a priority tuple as distributed's: integral
// elements as ints, others as floats.
func PriorityWire(p [3]float64) []any {
	out := make([]any, 3)
	for i, f := range p {
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			out[i] = int64(f)
		} else {
			out[i] = f
		}
	}
	return out
}
