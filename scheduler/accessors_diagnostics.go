package scheduler

import (
	"sort"

	"daskgo/protocol"
	"daskgo/scheduler/coord"
)

// Read-only accessors of the diagnostics RPCs (nbytes, get_task_status,
// get_task_prefix_states, call_stack, get_error_cause, get_runspec),
// called by a holder of the engine's lock between Handle calls (the rule:
// scheduler/server/doc.go, "The engine's lock"). An error is a
// *coord.RemoteException, raised by the caller as distributed raises it.

func keyError(k protocol.Key) *coord.RemoteException {
	return &coord.RemoteException{Module: "builtins", Class: "KeyError", Text: protocol.String(k.Value())}
}

// NBytes mirrors Scheduler.get_nbytes: the given keys' nbytes (-1 for
// unmeasured; KeyError for an unknown key), or every measured task's when
// keys is nil; with summary, summed per key_split.
func (s *State) NBytes(keys []protocol.Key, summary bool) (*protocol.Map, error) {
	out := &protocol.Map{}
	add := func(k protocol.Key, n int64) {
		out.Entries = append(out.Entries, protocol.Entry{Key: k, Value: n})
	}
	if keys != nil {
		for _, k := range keys {
			ts := s.tasks.get(k)
			if ts == nil {
				return nil, keyError(k)
			}
			add(k, ts.nbytes)
		}
	} else {
		for k, ts := range s.tasks.all() {
			if ts.nbytes >= 0 {
				add(k, ts.nbytes)
			}
		}
		sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Key.(protocol.Key) < out.Entries[j].Key.(protocol.Key) })
	}
	if !summary {
		return out, nil
	}
	sums := &protocol.Map{}
	at := map[string]int{}
	for _, e := range out.Entries {
		name := keySplit(e.Key.(protocol.Key))
		i, seen := at[name]
		if !seen {
			i = len(sums.Entries)
			at[name] = i
			sums.Entries = append(sums.Entries, protocol.Entry{Key: name, Value: int64(0)})
		}
		sums.Entries[i].Value = sums.Entries[i].Value.(int64) + e.Value.(int64)
	}
	return sums, nil
}

// TaskStatuses mirrors Scheduler.get_task_status: each key's state, None
// for a key the scheduler does not know.
func (s *State) TaskStatuses(keys []protocol.Key) *protocol.Map {
	out := &protocol.Map{Entries: make([]protocol.Entry, 0, len(keys))}
	for _, k := range keys {
		var v any
		if ts := s.tasks.get(k); ts != nil {
			v = ts.state.String()
		}
		out.Entries = append(out.Entries, protocol.Entry{Key: k, Value: v})
	}
	return out
}

// prefixStateNames are the states get_task_prefix_states reports.
var prefixStateNames = []Status{StatusMemory, StatusErred, StatusReleased, StatusProcessing, StatusWaiting}

// PrefixStates mirrors Scheduler.get_task_prefix_states: for each prefix
// with a task in one of prefixStateNames, its count in each, by name.
func (s *State) PrefixStates() *protocol.Map {
	names := make([]string, 0, len(s.prefixes))
	for name := range s.prefixes {
		names = append(names, name)
	}
	sort.Strings(names)
	out := &protocol.Map{}
	for _, name := range names {
		tp := s.prefixes[name]
		counts := &protocol.Map{}
		some := false
		for _, st := range prefixStateNames {
			n := tp.states[st]
			some = some || n > 0
			counts.Entries = append(counts.Entries, protocol.Entry{Key: st.String(), Value: int64(n)})
		}
		if some {
			out.Entries = append(out.Entries, protocol.Entry{Key: name, Value: counts})
		}
	}
	return out
}

// CallStackTargets mirrors the first half of Scheduler.get_call_stack:
// the processing tasks the keys lead to (walking the dependencies of
// waiting ones), grouped by the worker running them. KeyError for an
// unknown key.
func (s *State) CallStackTargets(keys []protocol.Key) (map[string][]protocol.Key, error) {
	stack := append([]protocol.Key(nil), keys...)
	seen := map[*TaskState]bool{}
	out := map[string][]protocol.Key{}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ts := s.tasks.get(k)
		if ts == nil {
			return nil, keyError(k)
		}
		switch {
		case ts.state == StatusWaiting:
			for _, dts := range ts.dependencies.Items() {
				stack = append(stack, dts.Key)
			}
		case ts.state == StatusProcessing && !seen[ts] && ts.processingOn != nil:
			seen[ts] = true
			out[ts.processingOn.Address] = append(out[ts.processingOn.Address], ts.Key)
		}
	}
	return out, nil
}

// ErrorCause mirrors ReplayTaskScheduler.get_error_cause: the key of the
// task to blame for the first of keys that erred (ok false: none did).
func (s *State) ErrorCause(keys []protocol.Key) (protocol.Key, bool) {
	for _, k := range keys {
		if ts := s.tasks.get(k); ts != nil && ts.blame() != nil {
			return ts.blame().Key, true
		}
	}
	return "", false
}

// RunSpecOf mirrors ReplayTaskScheduler.get_runspec: the task's run_spec,
// pickled as compute-task carries it (nil for a task without one, such as
// scattered data); KeyError for an unknown key.
func (s *State) RunSpecOf(k protocol.Key) (*protocol.Blob, error) {
	ts := s.tasks.get(k)
	if ts == nil {
		return nil, keyError(k)
	}
	if ts.runSpec == nil {
		return nil, nil
	}
	return ts.runSpec.Payload(), nil
}
