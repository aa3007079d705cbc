package scheduler

import (
	"testing"

	"daskgo/protocol"
)

// A span-annotated task puts its group in the span (and its parents in the
// registry), compute-task carries the span id, and heartbeat metrics are
// summed per span; metrics of an unknown span are dropped.
func TestSpansObserveAndSumMetrics(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	inner := &SpanAnnotation{Name: []string{"outer", "inner"}, IDs: []string{"id-o", "id-i"}}
	a := task("busy-0")
	a.Annotations = &Annotations{Verbatim: protocol.NewMap("span", "x"), Span: inner}
	b := task("busy-1") // same group, no annotation: the group's span
	plain := task("other-0")
	out := s.submit("c1", []GraphTask{a, b, plain})
	spanOf := map[string]any{}
	for _, p := range out.Workers {
		for _, m := range p.Msgs {
			if m.Get("op") == "compute-task" {
				spanOf[m.Get("key").(protocol.Key).String()] = m.Get("span_id")
			}
		}
	}
	eq(t, spanOf["busy-0"], any("id-i"), "annotated task's span_id")
	eq(t, spanOf["busy-1"], any("id-i"), "its group's span_id")
	eq(t, spanOf["other-0"], any(nil), "no span")

	key := []any{"execute", "busy", "thread-cpu", "seconds"}
	hb := func(v float64, id string) {
		s.handle(&WorkerHeartbeat{Worker: addr("w1"), SpanMetrics: []HeartbeatSpanMetric{{SpanID: id, Key: key, Value: v}}})
	}
	hb(0.5, "id-i")
	hb(0.25, "id-i")
	hb(9, "unknown")
	spans := s.Spans()
	eq(t, len(spans), 2, "outer and inner")
	eq(t, spans[0].IDs[0], "id-o", "parent first")
	eq(t, len(spans[1].Metrics), 1, "one metric key")
	eq(t, spans[1].Metrics[0].Value, 0.75, "summed")
	eq(t, len(spans[0].Metrics), 0, "the parent's own metrics")
}
