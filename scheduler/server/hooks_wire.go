package server

import (
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The hook events as the host reads them (compat/host_plugins.py): one
// list per event, the hook's name first, then the stimulus id and the
// hook's arguments in SchedulerPlugin's order. Built by the pump goroutine,
// outside every lock.

func hookEventsWire(evs []scheduler.HookEvent) []any {
	out := make([]any, len(evs))
	for i := range evs {
		out[i] = hookEventWire(&evs[i])
	}
	return out
}

func hookEventWire(e *scheduler.HookEvent) []any {
	name, sid := e.Hook.String(), e.StimulusID
	switch e.Hook {
	case scheduler.HookTransition:
		var kw any
		if e.Kwargs != nil {
			kw = transitionKwargsWire(e.Kwargs)
		}
		return []any{name, sid, e.Key, e.Start.String(), e.Finish.String(), kw}
	case scheduler.HookUpdateGraph:
		g := e.Graph
		prios := make([]any, len(g.Priorities))
		for i, p := range g.Priorities {
			prios[i] = scheduler.PriorityWire(p)
		}
		annots := make([]any, len(g.Annotations))
		for i, a := range g.Annotations {
			annots[i] = []any{a.Key, a.Values}
		}
		return []any{name, sid, e.Client, keysWire(g.Keys), keysWire(g.Tasks), prios, annots}
	case scheduler.HookAddWorker, scheduler.HookRemoveWorker:
		return []any{name, sid, e.Worker}
	case scheduler.HookAddClient, scheduler.HookRemoveClient:
		return []any{name, sid, e.Client}
	case scheduler.HookLogEvent:
		return []any{name, sid, e.Topic, e.Msg}
	}
	return []any{name, sid}
}

func keysWire(ks []protocol.Key) []any {
	out := make([]any, len(ks))
	for i, k := range ks {
		out[i] = k
	}
	return out
}

// transitionKwargsWire is **kwargs as distributed passes them to
// SchedulerPlugin.transition: TaskFinishedMsg's fields (minus key, run_id,
// stimulus_id) for processing -> memory; cause and TaskErredMsg's for
// -> erred.
func transitionKwargsWire(k *scheduler.TransitionKwargs) *protocol.Map {
	m := &protocol.Map{}
	if k.Worker != "" {
		m.Set("worker", k.Worker)
	}
	switch {
	case k.Finished:
		var typ any
		if k.Type != nil {
			typ = k.Type
		}
		m.Set("status", "OK")
		m.Set("nbytes", k.NBytes)
		m.Set("type", typ)
		m.Set("typename", k.TypeName)
		m.Set("metadata", orEmptyMap(k.Metadata))
		m.Set("thread", k.Thread)
		m.Set("startstops", startStopsWire(k.StartStops))
	case k.Erred:
		m.Set("cause", k.Cause)
		if k.StartStops != nil { // from the worker's task-erred, not the scheduler's own erring
			m.Set("status", "error")
		}
		if k.Exception != nil {
			m.Set("exception", k.Exception)
		}
		if k.Traceback != nil {
			m.Set("traceback", k.Traceback)
		}
		if k.ExceptionText != "" || k.TracebackText != "" {
			m.Set("exception_text", k.ExceptionText)
			m.Set("traceback_text", k.TracebackText)
		}
		if k.Thread != nil {
			m.Set("thread", k.Thread)
		}
		if k.StartStops != nil {
			m.Set("startstops", startStopsWire(k.StartStops))
		}
	}
	return m
}

func orEmptyMap(v any) any {
	if v == nil {
		return &protocol.Map{}
	}
	return v
}

func startStopsWire(ss []scheduler.StartStop) []any {
	out := make([]any, len(ss))
	for i, x := range ss {
		m := protocol.NewMap("action", x.Action, "start", x.Start, "stop", x.Stop)
		if x.Source != "" {
			m.Set("source", x.Source)
		}
		out[i] = m
	}
	return out
}
