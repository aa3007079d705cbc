package server

import (
	"context"
	"fmt"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The replay extension's RPCs (distributed.recreate_tasks.
// ReplayTaskScheduler), behind Client.recreate_error_locally and
// recreate_task_locally: which task to blame for an error, and that task's
// run_spec, pickled as compute-task carries it, which the client unpickles
// and runs with its dependencies' values.

// getErrorCause is ReplayTaskScheduler.get_error_cause: the key to blame
// for the first erred key of keys, None when none erred.
func (s *Server) getErrorCause(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := optionalKeys(req, "keys")
	if err != nil {
		return nil, err
	}
	var cause protocol.Key
	var found bool
	if err := s.loop.query(ctx, func(st *scheduler.State) { cause, found = st.ErrorCause(keys) }); err != nil {
		return nil, err
	}
	if !found {
		return nil, nil
	}
	return cause, nil
}

// getRunspec is ReplayTaskScheduler.get_runspec: ToPickle(ts.run_spec).
func (s *Server) getRunspec(ctx context.Context, req *comm.Request) (any, error) {
	key, err := protocol.KeyOf(req.Args.Get("key"))
	if err != nil {
		return nil, fmt.Errorf("get_runspec: key: %w", err)
	}
	return s.queryResult(ctx, func(st *scheduler.State) (any, error) {
		spec, err := st.RunSpecOf(key)
		if spec == nil {
			return nil, err // a nil *Blob in an any would not be None
		}
		return spec, err
	})
}
