package server

import (
	"context"
	"fmt"

	"daskgo/comm"
	"daskgo/protocol"
)

// performance_report (distributed.client.performance_report and
// Scheduler.performance_report). Entering the block reads
// dask_scheduler.monitor.count through run_on_scheduler; leaving it calls
// the op, which renders the report's HTML with bokeh. Both run in the
// scheduler-side Python host (compat/host_perf.py), where distributed's own
// Scheduler.performance_report builds the document from what Go supplies:
// the task stream (get_task_stream), the workers' profiles (the profile
// op's merge; the scheduler's own profile is empty: there is no Python
// event loop to sample), bandwidth, the system monitor's series
// (sysmon.go), the log (get_logs) and the workers. The host pulls them
// through the services below; nothing here holds the engine's lock.

// serveReportData registers the host services performance_report reads.
func (s *Server) serveReportData() {
	s.host.Serve("monitor", s.monitorService)
	s.host.Serve("spans", s.spansService) // span metrics (spans.go)
	s.host.Serve("profile", func(ctx context.Context, args *protocol.Map) (any, error) {
		return s.profile(ctx, &comm.Request{Op: "profile", Args: args, Reply: true, Log: s.log})
	})
}

// performanceReport is Scheduler.performance_report: the reply is the
// report's HTML, or distributed's error_message when rendering raised.
func (s *Server) performanceReport(ctx context.Context, req *comm.Request) (any, error) {
	ctx, stop := callerContext(ctx, req.Conn)
	defer stop()
	ans, err := s.host.Call(ctx, "performance_report", req.Args)
	if err != nil {
		return nil, fmt.Errorf("performance_report: %w", err)
	}
	if ans.Get("status") != "OK" {
		ans.Set("status", "uncaught-error") // Server._handle_comm's answer to a handler that raised
		return ans, nil
	}
	return ans.Get("result"), nil
}
