package scheduler

import (
	"daskgo/protocol"
)

// applyAnnotations mirrors SchedulerState._apply_annotations for one new
// task. The materializer has already merged global and layer annotations
// and evaluated callables; values are kept verbatim for compute-task and
// interpreted here. Malformed values are logged and ignored.
func (s *State) applyAnnotations(ts *TaskState, gt *GraphTask) {
	if gt == nil || gt.Annotations == nil || gt.Annotations.Len() == 0 {
		return
	}
	ts.annotations = gt.Annotations
	for _, e := range gt.Annotations.Entries {
		name, _ := e.Key.(string)
		switch name {
		case "workers", "restrictions":
			s.applyWorkerRestrictions(ts, e.Value)
		case "allow_other_workers", "loose_restrictions":
			ts.ext().looseRestrictions = truthy(e.Value)
		case "resources":
			s.applyResources(ts, e.Value)
		case "retries":
			if n, ok := e.Value.(int64); ok {
				ts.ext().retries = int(n)
			} else if e.Value != nil {
				s.logf(LogWarn, ts.Key, "", "", "retries annotation %s is not an int; ignored", protocol.String(e.Value))
			}
		}
	}
}

func (s *State) applyWorkerRestrictions(ts *TaskState, v any) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case protocol.Set:
		items = x
	case nil:
		return
	default:
		items = []any{x}
	}
	var hosts, workers []string
	for _, it := range items {
		w, ok := it.(string)
		if !ok {
			s.logf(LogWarn, ts.Key, "", "", "worker restriction %s is not a string; ignored", protocol.String(it))
			continue
		}
		if addr, ok := s.coerceAddress(w); ok {
			workers = appendUnique(workers, addr)
		} else {
			hosts = appendUnique(hosts, w)
		}
	}
	if len(hosts) > 0 {
		ts.ext().hostRestrictions = hosts
	}
	if len(workers) > 0 {
		ts.ext().workerRestrictions = workers
	}
}

func (s *State) applyResources(ts *TaskState, v any) {
	m, ok := v.(*protocol.Map)
	if !ok {
		if v != nil {
			s.logf(LogWarn, ts.Key, "", "", "resources annotation %s is not a dict; ignored", protocol.String(v))
		}
		return
	}
	req := map[string]float64{}
	for _, e := range m.Entries {
		name, ok1 := e.Key.(string)
		q, ok2 := toFloat(e.Value)
		if !ok1 || !ok2 {
			s.logf(LogWarn, ts.Key, "", "", "resource %s=%s ignored", protocol.String(e.Key), protocol.String(e.Value))
			continue
		}
		req[name] = q
	}
	ts.ext().resourceRestrictions = req
	ts.ext().resourcesRaw = m
}

func appendUnique(xs []string, x string) []string {
	if containsString(xs, x) {
		return xs
	}
	return append(xs, x)
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
