package server

import (
	"context"

	"daskgo/comm"
	"daskgo/scheduler"
)

// ammHandler is ActiveMemoryManagerExtension.amm_handler (Client.amm):
// start, stop, running and run_once against the engine's manager, whose
// one policy is ReduceReplicas (scheduler/amm.go, amm_control.go).
func (s *Server) ammHandler(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	method := f.str("method")
	if f.err != nil {
		return nil, f.err
	}
	switch method {
	case "start", "stop", "running", "run_once":
	default:
		return pyError("AssertionError", "amm_handler method %q is not one of start, stop, run_once, running", method), nil
	}
	v, err := s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.AMMControl{Base: s.base("amm-handler"), Method: method, ReplyTo: id}
	})
	if err != nil {
		return nil, err
	}
	return rpcResult(v), nil
}
