package server

import (
	"context"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// Span metrics (scheduler/spans.go): the heartbeat's extensions["spans"]
// decoded at the edge, and the host's "spans" service, which
// compat/host_spans.py builds distributed's SpansSchedulerExtension from.

// heartbeatSpans reads Worker.heartbeat's extensions: {"spans":
// {(context, span_id, prefix, activity, unit): value}}. Entries of another
// shape (no span id, a value that is not a number) are left out.
func heartbeatSpans(v any) []scheduler.HeartbeatSpanMetric {
	ext, _ := v.(*protocol.Map)
	if ext == nil {
		return nil
	}
	spans, _ := ext.Get("spans").(*protocol.Map)
	if spans == nil || spans.Len() == 0 {
		return nil
	}
	out := make([]scheduler.HeartbeatSpanMetric, 0, spans.Len())
	for _, e := range spans.Entries {
		key, ok := e.Key.([]any)
		if !ok || len(key) < 2 {
			continue
		}
		id, ok := key[1].(string)
		value, isNum := toFloat(e.Value)
		if !ok || !isNum {
			continue
		}
		rest := append([]any{key[0]}, key[2:]...)
		out = append(out, scheduler.HeartbeatSpanMetric{SpanID: id, Key: rest, Value: value})
	}
	return out
}

// spansService answers the host's "spans" call: [{"name": [tag...], "ids":
// [id...], "metrics": [[key, value], ...]}] in creation order, with the
// scheduler's start and thread count for Span's nthreads history.
func (s *Server) spansService(ctx context.Context, _ *protocol.Map) (any, error) {
	var spans []scheduler.SpanInfo
	var nthreads int64
	if err := s.loop.query(ctx, func(st *scheduler.State) {
		spans = st.Spans()
		nthreads = int64(st.TotalThreads())
	}); err != nil {
		return nil, err
	}
	list := make([]any, len(spans))
	for i, sp := range spans {
		metrics := make([]any, len(sp.Metrics))
		for j, m := range sp.Metrics {
			metrics[j] = []any{m.Key, m.Value}
		}
		list[i] = protocol.NewMap("name", sp.Name, "ids", sp.IDs, "metrics", metrics,
			"enqueued", unixSeconds(sp.Enqueued), "last", unixSeconds(sp.Last))
	}
	return protocol.NewMap("spans", list, "started", unixSeconds(s.started), "total_nthreads", nthreads), nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
