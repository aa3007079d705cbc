package server

import (
	"context"
	"fmt"
	"time"

	"daskgo/comm"
	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The scheduler-side Python host (compat/host.go) seen from the server:
// the ops that run Python there (run_function; forwarded ops, which a
// plugin, extension or run_on_scheduler function registered in
// dask_scheduler.handlers), and the services the host calls back
// (snapshot, rpc, close). Nothing here runs under the engine's lock: a
// call to the host blocks only the RPC goroutine that made it, and the
// engine's state reaches the host as a copy (hostSnapshot).

// hostRPCOps are the server's own ops the host may call through the "rpc"
// service (dask_scheduler's members that Go serves): each handler works
// without a connection (comm.Request.Conn nil).
var hostRPCOps = map[string]bool{
	"identity": true, "get_task_stream": true, "get_logs": true, "logs": true,
	"log_event": true, "events": true, "retire_workers": true,
	"register_worker_plugin": true, "unregister_worker_plugin": true,
	"register_nanny_plugin": true, "unregister_nanny_plugin": true,
	"who_has": true, "has_what": true, "ncores": true, "processing": true,
}

// startHost prepares the host (no process starts) and its services.
func (s *Server) startHost(env []string) {
	s.host = compat.NewHost(compat.HostConfig{Python: s.cfg.Python, Env: env, Log: s.log})
	s.host.Serve("snapshot", s.hostSnapshot)
	s.host.Serve("rpc", s.hostRPC)
	s.serveReportData() // performance_report's data (perfreport.go)
	s.host.Serve("close", func(ctx context.Context, args *protocol.Map) (any, error) {
		reason, _ := args.Get("reason").(string)
		s.log.Info().Str("reason", reason).Msg("the Python host closes the scheduler")
		return s.terminate(ctx, &comm.Request{Op: "terminate", Log: s.log})
	})
}

// Host is the scheduler-side Python host, for code that adds to it
// (plugins, feeds): its services, posts and exit hooks.
func (s *Server) Host() *compat.Host { return s.host }

// runFunction is Scheduler.run_function (Client.run_on_scheduler): the
// host runs the function (compat/host_run.py) and its answer, {"status":
// "OK", "result"} or distributed's error_message, is the reply, which
// Client._run_on_scheduler reads. Like distributed, it logs a
// "run-function" event on the "all" topic first.
func (s *Server) runFunction(ctx context.Context, req *comm.Request) (any, error) {
	if req.Args.Get("function") == nil {
		return nil, fmt.Errorf("run_function: no function")
	}
	ev := &scheduler.LogEvent{Base: s.base("run-function"), Topics: []string{"all"},
		Msg: protocol.NewMap("action", "run-function", "function", req.Args.Get("function"))}
	if err := s.loop.submitWait(ctx, ev); err != nil {
		return nil, err
	}
	ctx, stop := callerContext(ctx, req.Conn) // a caller that hung up waits no more
	defer stop()
	ans, err := s.host.Call(ctx, "run_function", req.Args)
	if err != nil {
		return nil, fmt.Errorf("run_on_scheduler: %w", err)
	}
	return ans, nil
}

// forwardedOp is the comm server's fallback: an op Go has no handler for
// that the running host serves from dask_scheduler.handlers.
func (s *Server) forwardedOp(op string) comm.Handler {
	if !s.host.Forwards(op) {
		return nil
	}
	return func(ctx context.Context, req *comm.Request) (any, error) {
		peer := ""
		if req.Conn != nil {
			peer = req.Conn.Peer()
		}
		ctx, stop := callerContext(ctx, req.Conn)
		defer stop()
		ans, err := s.host.Call(ctx, "handler", protocol.NewMap("name", op, "args", req.Args, "peer", peer))
		if err != nil {
			return nil, fmt.Errorf("op %q (served by the scheduler's Python host): %w", op, err)
		}
		if ans.Get("status") == "OK" {
			return ans.Get("result"), nil
		}
		// the handler raised: distributed answers error_message(e,
		// status="uncaught-error") (Server._handle_comm)
		ans.Set("status", "uncaught-error")
		return ans, nil
	}
}

// hostRPC serves the host's calls to one of the server's own ops.
func (s *Server) hostRPC(ctx context.Context, args *protocol.Map) (any, error) {
	op, _ := args.Get("rpc_op").(string)
	h := s.rpc.Handlers[op]
	if !hostRPCOps[op] || h == nil {
		return nil, fmt.Errorf("dask-go-scheduler does not serve %q to the Python host", op)
	}
	a, _ := args.Get("args").(*protocol.Map)
	if a == nil {
		a = protocol.NewMap()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return h(ctx, &comm.Request{Op: op, Args: a, Reply: true, Log: s.log.With().Str("op", op).Str("from", "host").Logger()})
}

// forwardStreamOp posts a stream op Go does not know to the host when the
// host has it in dask_scheduler.stream_handlers (Server.handle_stream calls
// it with extra={"client": id} or {"worker": address}); false if not.
// Posted, never waited for: a stream's reader must not wait on Python. The
// op applies after the ops before it that the engine took, but not in
// order with them.
func (s *Server) forwardStreamOp(m *protocol.Map, who, id string) bool {
	op, _ := m.Get("op").(string)
	if op == "" || !s.host.ForwardsStream(op) {
		return false
	}
	if !s.host.Post("stream", protocol.NewMap("name", op, "msg", m, who, id)) {
		s.log.Warn().Str("op", op).Msg("stream op for the Python host dropped: its queue is full")
	}
	return true
}
