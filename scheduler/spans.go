package scheduler

import (
	"time"

	"daskgo/protocol"
)

// Spans (distributed.spans, SpansSchedulerExtension), as far as span
// metrics need them: a task annotated with span(...) puts its TaskGroup in
// that span (the group's first annotated task decides, as observe_tasks
// does), compute-task carries the group's span_id so that workers file
// their fine performance metrics under it, and the metrics workers send in
// their heartbeats (extensions["spans"]: {(context, span_id, prefix,
// activity, unit): value}) are summed per span (Span.cumulative_worker_metrics).
// The outer ring hands the spans to the scheduler-side Python host, which
// builds distributed's own Span objects from them.
//
// Not kept: the ("default",) span of tasks without a span annotation
// (their compute-task says span_id None, so workers keep no per-span
// metrics for them), and each span's task groups (Span.states, durations,
// nbytes: the host's Spans have no groups).
//
// Spans live as long as the scheduler, as distributed's do.

// SpanAnnotation is a task's "span" annotation: its name (the tags, outer
// first) and the matching ids.
type SpanAnnotation struct {
	Name, IDs []string
}

type spanDef struct {
	name, ids []string
	// enqueued: when the span was first seen; last: when a heartbeat last
	// brought it metrics (the host's stand-in for its groups' start and stop)
	enqueued, last time.Time
	// metrics are the cumulative worker metrics, in arrival order, by the
	// msgpack of their key (context, prefix, activity, unit)
	metrics []SpanMetric
	index   map[string]int
}

// SpanMetric is one cumulative worker metric of a span: Key is the
// heartbeat's key without the span id, (context, *other).
type SpanMetric struct {
	Key   []any
	Value float64
}

// HeartbeatSpanMetric is one entry of a heartbeat's extensions["spans"].
type HeartbeatSpanMetric struct {
	SpanID string
	Key    []any // (context, *other)
	Value  float64
}

// SpanInfo is a span as the outer ring reads it (Spans).
type SpanInfo struct {
	Name, IDs      []string
	Metrics        []SpanMetric
	Enqueued, Last time.Time
}

type spanRegistry struct {
	byID  map[string]*spanDef
	order []string // creation order
}

// observeSpan mirrors observe_tasks for one new task: its group joins the
// annotated span unless it is in one already.
func (s *State) observeSpan(ts *TaskState, a *SpanAnnotation) {
	tg := ts.group
	if tg == nil || tg.spanID != "" {
		return
	}
	id := a.IDs[len(a.IDs)-1]
	tg.spanID, tg.spanAny = id, id
	for i := range a.IDs { // _ensure_span: the parents first
		s.ensureSpan(a.Name[:i+1], a.IDs[:i+1])
	}
}

func (s *State) ensureSpan(name, ids []string) {
	id := ids[len(ids)-1]
	if _, ok := s.spans.byID[id]; ok {
		return
	}
	if s.spans.byID == nil {
		s.spans.byID = map[string]*spanDef{}
	}
	s.spans.byID[id] = &spanDef{name: name, ids: ids, index: map[string]int{}, enqueued: s.now, last: s.now}
	s.spans.order = append(s.spans.order, id)
}

// spanHeartbeat mirrors SpansSchedulerExtension.heartbeat; metrics of a
// span this scheduler does not know are dropped (distributed would raise).
func (s *State) spanHeartbeat(ms []HeartbeatSpanMetric) {
	for _, m := range ms {
		sp := s.spans.byID[m.SpanID]
		if sp == nil {
			continue
		}
		sp.last = s.now
		raw, err := protocol.AppendValue(nil, m.Key)
		if err != nil {
			continue
		}
		if i, ok := sp.index[string(raw)]; ok {
			sp.metrics[i].Value += m.Value
			continue
		}
		sp.index[string(raw)] = len(sp.metrics)
		sp.metrics = append(sp.metrics, SpanMetric{Key: m.Key, Value: m.Value})
	}
}

// Spans copies out every span, in creation order.
func (s *State) Spans() []SpanInfo {
	out := make([]SpanInfo, 0, len(s.spans.order))
	for _, id := range s.spans.order {
		sp := s.spans.byID[id]
		out = append(out, SpanInfo{Name: sp.name, IDs: sp.ids, Metrics: append([]SpanMetric(nil), sp.metrics...),
			Enqueued: sp.enqueued, Last: sp.last})
	}
	return out
}
