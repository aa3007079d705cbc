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

// appendHookEvents writes evs as the msgpack array hookEventsWire's value
// encodes to, straight into b: the pump sends it as protocol.Raw and reuses
// b for the next batch. Building the value tree first cost 13 allocations
// an event on a finished task's three (the lists, a box per string, the
// kwargs map and its startstops; BenchmarkHookEventsWire), on every event a
// counting plugin sees; a map of 20k tasks makes five events a task. ok is false when an event holds
// serialized data (a pickled exception or a log_event message with frames),
// which needs frames of its own: then the caller sends hookEventsWire's
// value instead.
func appendHookEvents(b []byte, evs []scheduler.HookEvent) (out []byte, ok bool) {
	b = protocol.AppendArrayLen(b, len(evs))
	for i := range evs {
		e := &evs[i]
		if e.Hook != scheduler.HookTransition {
			var err error
			if b, err = protocol.AppendValue(b, hookEventWire(e)); err != nil {
				return b, false
			}
			continue
		}
		b = protocol.AppendArrayLen(b, 6)
		b = protocol.AppendStr(b, scheduler.HookTransition.String())
		b = protocol.AppendStr(b, e.StimulusID)
		b = append(b, e.Key...) // a Key is its msgpack already
		b = protocol.AppendStr(b, e.Start.String())
		b = protocol.AppendStr(b, e.Finish.String())
		if e.Kwargs == nil {
			b = protocol.AppendNil(b)
		} else if b, ok = appendTransitionKwargs(b, e.Kwargs); !ok {
			return b, false
		}
	}
	return b, true
}

// appendTransitionKwargs writes transitionKwargsWire(k)'s map, its entries
// in the same order: a finished task's directly, the rare others (erred,
// with pickled exceptions) through the generic encoder.
func appendTransitionKwargs(b []byte, k *scheduler.TransitionKwargs) ([]byte, bool) {
	if !k.Finished {
		v, err := protocol.AppendValue(b, transitionKwargsWire(k))
		return v, err == nil
	}
	if k.Worker == "" {
		b = protocol.AppendMapLen(b, 7)
	} else {
		b = protocol.AppendMapLen(b, 8)
		b = protocol.AppendStr(protocol.AppendStr(b, "worker"), k.Worker)
	}
	b = protocol.AppendStr(protocol.AppendStr(b, "status"), "OK")
	b = protocol.AppendInt(protocol.AppendStr(b, "nbytes"), k.NBytes)
	b = protocol.AppendStr(b, "type")
	if k.Type != nil {
		b = protocol.AppendBin(b, k.Type)
	} else {
		b = protocol.AppendNil(b)
	}
	b = protocol.AppendStr(protocol.AppendStr(b, "typename"), k.TypeName)
	var err error
	b = protocol.AppendStr(b, "metadata")
	if k.Metadata == nil {
		b = protocol.AppendMapLen(b, 0) // orEmptyMap's {}
	} else if b, err = protocol.AppendValue(b, k.Metadata); err != nil {
		return b, false
	}
	b = protocol.AppendStr(b, "thread")
	switch th := k.Thread.(type) {
	case nil:
		b = protocol.AppendNil(b)
	case int64: // what the worker sends: threading.get_ident()
		b = protocol.AppendInt(b, th)
	default:
		if b, err = protocol.AppendValue(b, th); err != nil {
			return b, false
		}
	}
	b = protocol.AppendArrayLen(protocol.AppendStr(b, "startstops"), len(k.StartStops))
	for _, x := range k.StartStops {
		fields := 3
		if x.Source != "" {
			fields++
		}
		b = protocol.AppendMapLen(b, fields)
		b = protocol.AppendStr(protocol.AppendStr(b, "action"), x.Action)
		b = protocol.AppendFloat64(protocol.AppendStr(b, "start"), x.Start)
		b = protocol.AppendFloat64(protocol.AppendStr(b, "stop"), x.Stop)
		if x.Source != "" {
			b = protocol.AppendStr(protocol.AppendStr(b, "source"), x.Source)
		}
	}
	return b, true
}
