package server

import (
	"context"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// get_task_metadata's RPCs (Scheduler.start_task_metadata and
// stop_task_metadata). The engine collects (scheduler/taskmetadata.go);
// here each running collection has one watcher goroutine that frees it
// when the connection that started it closes, since a client that
// vanished inside its `with get_task_metadata():` block never stops it
// (distributed keeps such a plugin until the scheduler stops). The
// watcher ends when the collection stops, or with the server.

// taskMetadataWatch is how often a collection's watcher looks at its
// starting connection and at the collection.
const taskMetadataWatch = time.Second

// startTaskMetadata is Scheduler.start_task_metadata.
func (s *Server) startTaskMetadata(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	name := f.str("name")
	if f.err != nil {
		return nil, f.err
	}
	v, err := s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.StartTaskMetadata{Base: s.base("start-task-metadata"), Name: name, ReplyTo: id}
	})
	if err != nil {
		return nil, err
	}
	gen, _ := v.(int64)
	if conn := req.Conn; conn != nil {
		s.goRun(func() { s.watchTaskMetadata(conn, name, gen) })
	}
	return nil, nil
}

// watchTaskMetadata frees the collection (name, gen) once conn's peer has
// gone, and returns once the collection no longer runs.
func (s *Server) watchTaskMetadata(conn *comm.Conn, name string, gen int64) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.clock.After(taskMetadataWatch):
		}
		if conn.PeerGone() {
			s.loop.submit(&scheduler.StopTaskMetadata{Base: s.base("task-metadata-caller-gone"), Name: name,
				CallerGone: true, Gen: gen})
			return
		}
		runs := false
		if err := s.loop.query(s.ctx, func(st *scheduler.State) { runs = st.TaskMetadataRuns(name, gen) }); err != nil || !runs {
			return
		}
	}
}

// stopTaskMetadata is Scheduler.stop_task_metadata: {"metadata": {key:
// metadata}, "state": {key: state}}.
func (s *Server) stopTaskMetadata(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	name := f.str("name")
	if f.err != nil {
		return nil, f.err
	}
	v, err := s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.StopTaskMetadata{Base: s.base("stop-task-metadata"), Name: name, ReplyTo: id}
	})
	if err != nil {
		return nil, err
	}
	return rpcResult(v), nil
}

// taskMetadata is task-finished's metadata as the engine keeps it: nil for
// None or the usual empty dict, else its msgpack (protocol.Raw, as the
// fast reader keeps it).
func taskMetadata(v any) any {
	if m, ok := v.(*protocol.Map); !ok || m.Len() == 0 {
		return nil
	}
	raw, err := protocol.AppendValue(nil, v)
	if err != nil {
		return nil // serialized data in metadata: not msgpack-able, as the worker requires it to be
	}
	return protocol.Raw(raw)
}

// taskMetadataFast reads task-finished's metadata from the undecoded
// stream item: nil for None or {} (one byte, no allocation), else a copy
// of its msgpack (the item's buffer is the stream's, reused).
func taskMetadataFast(f *protocol.Fields) (any, error) {
	raw, err := f.Raw()
	if err != nil || isNil(raw) || (len(raw) == 1 && raw[0] == 0x80) { // 0x80: {}
		return nil, err
	}
	return protocol.Raw(append([]byte(nil), raw...)), nil
}
