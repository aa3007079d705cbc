package server

import (
	"context"
	"fmt"

	"daskgo/comm"
	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The event log's RPCs (Scheduler.log_event, get_events under op
// "events") and the task stream's (get_task_stream,
// get_task_stream_index). The state lives in the engine; these decode
// arguments and read it.

// logEvent is the log_event RPC: topic is a str or a list of str.
func (s *Server) logEvent(ctx context.Context, req *comm.Request) (any, error) {
	topics, err := topicsOf(req.Args.Get("topic"))
	if err != nil {
		return nil, err
	}
	st := &scheduler.LogEvent{Base: s.base("log-event"), Topics: topics, Msg: req.Args.Get("msg")}
	return nil, s.loop.submitWait(ctx, st)
}

// topicsOf reads log_event's topic: a str, or a collection of str.
func topicsOf(v any) ([]string, error) {
	if t, ok := v.(string); ok {
		return []string{t}, nil
	}
	f := &fields{op: "log_event", m: protocol.NewMap("topic", v)}
	ts := f.strings("topic")
	if f.err != nil || ts == nil {
		return nil, fmt.Errorf("log_event: topic must be a str or a list of str, got %s", protocol.String(v))
	}
	return ts, nil
}

// events is Scheduler.get_events: the topic's (time, msg) events, or
// {topic: events} without a topic.
func (s *Server) events(ctx context.Context, req *comm.Request) (any, error) {
	var out any
	switch topic := req.Args.Get("topic").(type) {
	case nil:
		err := s.loop.query(ctx, func(st *scheduler.State) { out = st.AllEvents() })
		return out, err
	case string:
		err := s.loop.query(ctx, func(st *scheduler.State) { out = st.Events(topic) })
		return out, err
	default:
		return nil, fmt.Errorf("events: topic must be a str or None, got %s", protocol.String(topic))
	}
}

// taskStream is Scheduler.get_task_stream. start and stop are unix times
// or durations back from now ("10s"), as TaskStreamPlugin.collect takes.
func (s *Server) taskStream(ctx context.Context, req *comm.Request) (any, error) {
	var q scheduler.TaskStreamQuery
	var err error
	if q.Start, err = streamTime(req.Args.Get("start"), s.unixNow()); err != nil {
		return nil, fmt.Errorf("get_task_stream: start: %w", err)
	}
	if q.Stop, err = streamTime(req.Args.Get("stop"), s.unixNow()); err != nil {
		return nil, fmt.Errorf("get_task_stream: stop: %w", err)
	}
	if q.Count, err = optInt(req.Args.Get("count")); err != nil {
		return nil, fmt.Errorf("get_task_stream: count: %w", err)
	}
	if q.StartIndex, err = optInt(req.Args.Get("start_index")); err != nil {
		return nil, fmt.Errorf("get_task_stream: start_index: %w", err)
	}
	var out []*protocol.Map
	if err := s.startTaskStream(ctx); err != nil {
		return nil, err
	}
	err = s.loop.query(ctx, func(st *scheduler.State) { out = st.TaskStream(q) })
	return out, err
}

func (s *Server) taskStreamIndex(ctx context.Context, _ *comm.Request) (any, error) {
	var n int
	if err := s.startTaskStream(ctx); err != nil {
		return nil, err
	}
	err := s.loop.query(ctx, func(st *scheduler.State) { n = st.TaskStreamIndex() })
	return int64(n), err
}

// startTaskStream makes the engine record the task stream from now on
// (a no-op once it does).
func (s *Server) startTaskStream(ctx context.Context) error {
	return s.loop.submitWait(ctx, &scheduler.StartTaskStream{Base: s.base("task-stream")})
}

func streamTime(v any, now float64) (*float64, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case float64:
		return &x, nil
	case int64:
		f := float64(x)
		return &f, nil
	case string:
		d, err := compat.ParseTimedelta(x)
		if err != nil {
			return nil, err
		}
		t := now - d.Seconds()
		return &t, nil
	default:
		return nil, fmt.Errorf("want a time or a duration, got %s", protocol.String(v))
	}
}

func optInt(v any) (*int, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int64:
		n := int(x)
		return &n, nil
	default:
		return nil, fmt.Errorf("want an int, got %s", protocol.String(v))
	}
}
