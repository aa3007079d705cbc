package compat

import (
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// decodeAnnotations reads what the engine acts on from a task's annotations
// (the helper's msgpack-safe dict), as SchedulerState._apply_annotations
// and _set_priorities read them; the dict itself goes on verbatim to
// compute-task. A malformed value is ignored with a warning, as the engine
// used to do: one odd annotation must not fail the graph. nil: none.
func decodeAnnotations(key protocol.Key, m *protocol.Map) (*scheduler.Annotations, []string) {
	if m == nil || m.Len() == 0 {
		return nil, nil
	}
	a := &scheduler.Annotations{Verbatim: m}
	var warns []string
	warn := func(format string, args ...any) {
		warns = append(warns, fmt.Sprintf("task %s: ", key)+fmt.Sprintf(format, args...))
	}
	for _, e := range m.Entries {
		name, _ := e.Key.(string)
		switch name {
		case "priority":
			if f, ok := number(e.Value); ok {
				a.Priority, a.HasPriority = f, true
			}
		case "workers", "restrictions":
			a.Workers = workerRestrictions(e.Value, warn)
		case "allow_other_workers", "loose_restrictions":
			a.LooseRestrictions = truthy(e.Value)
		case "resources":
			a.Resources, a.ResourcesVerbatim = resources(e.Value, warn)
		case "span":
			a.Span = spanAnnotation(e.Value, warn)
		case "retries":
			if n, ok := e.Value.(int64); ok {
				a.Retries, a.HasRetries = int(n), true
			} else if e.Value != nil {
				warn("retries annotation %s is not an int; ignored", protocol.String(e.Value))
			}
		}
	}
	return a, warns
}

func workerRestrictions(v any, warn func(string, ...any)) []string {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case protocol.Set:
		items = x
	case nil:
		return nil
	default:
		items = []any{x}
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		w, ok := it.(string)
		if !ok {
			warn("worker restriction %s is not a string; ignored", protocol.String(it))
			continue
		}
		out = append(out, w)
	}
	return out
}

func resources(v any, warn func(string, ...any)) (map[string]float64, any) {
	m, ok := v.(*protocol.Map)
	if !ok {
		if v != nil {
			warn("resources annotation %s is not a dict; ignored", protocol.String(v))
		}
		return nil, nil
	}
	req := map[string]float64{}
	for _, e := range m.Entries {
		name, ok1 := e.Key.(string)
		q, ok2 := number(e.Value)
		if !ok1 || !ok2 {
			warn("resource %s=%s ignored", protocol.String(e.Key), protocol.String(e.Value))
			continue
		}
		req[name] = q
	}
	return req, m
}

// truthy is Python's bool() for the values an annotation can hold.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	}
	return true
}

// spanAnnotation reads distributed.span's annotation, {"name": (tag, ...),
// "ids": (id, ...)} of the same non-zero length, all strings.
func spanAnnotation(v any, warn func(string, ...any)) *scheduler.SpanAnnotation {
	m, ok := v.(*protocol.Map)
	if !ok {
		warn("span annotation %s is not a dict; ignored", protocol.String(v))
		return nil
	}
	name, okName := stringList(m.Get("name"))
	ids, okIDs := stringList(m.Get("ids"))
	if !okName || !okIDs || len(name) == 0 || len(name) != len(ids) {
		warn("span annotation %s is not {name: tags, ids: ids} of one length; ignored", protocol.String(v))
		return nil
	}
	return &scheduler.SpanAnnotation{Name: name, IDs: ids}
}

func stringList(v any) ([]string, bool) {
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(items))
	for i, it := range items {
		if out[i], ok = it.(string); !ok {
			return nil, false
		}
	}
	return out, true
}
