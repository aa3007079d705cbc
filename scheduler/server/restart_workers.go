package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// restartWorkers is Scheduler.restart_workers (Client.restart_workers):
// each selected worker with a nanny is killed by it (killViaNannies; the
// nanny starts a fresh process, which registers under the same name),
// workers without one are closed and removed. The reply maps each worker
// to "OK", "removed" or "timed out"; with on_error="raise" a nanny that
// failed or did not answer within timeout raises TimeoutError (after its
// worker is removed, so that no old worker stays). With wait_for_workers
// the reply waits, within the same timeout, until the scheduler has as
// many workers as before and none of the killed ones; keys only a killed
// worker held are recomputed as on any worker loss.
func (s *Server) restartWorkers(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	client, onError, stimulusID := f.str("client"), f.str("on_error"), f.str("stimulus_id")
	wanted := f.strings("workers")
	timeout := 30 * time.Second
	if req.Args.Get("timeout") != nil {
		timeout = time.Duration(f.float("timeout") * float64(time.Second))
	}
	wait := true
	if b, ok := req.Args.Get("wait_for_workers").(bool); ok {
		wait = b
	}
	if f.err != nil {
		return nil, f.err
	}
	if stimulusID == "" {
		stimulusID = fmt.Sprintf("restart-workers-%d", s.clock.Now().UnixNano())
	}
	var nBefore int
	nannies := map[string]string{} // worker -> nanny
	serverIDs := map[string]bool{} // the killed processes' server_id
	var workers, noNanny []string
	if err := s.loop.query(ctx, func(st *scheduler.State) {
		nBefore = st.NumWorkers()
		if wanted == nil {
			wanted = st.WorkerAddresses()
		}
		for _, w := range wanted {
			if st.Worker(w) == nil {
				continue
			}
			workers = append(workers, w)
			if n := st.WorkerNanny(w); n != "" {
				nannies[w] = n
				serverIDs[st.Worker(w).ServerID] = true
			} else {
				noNanny = append(noNanny, w)
			}
		}
	}); err != nil {
		return nil, err
	}
	req.Log.Info().Strs("workers", workers).Str("stimulus_id", stimulusID).Msg("restarting workers")
	out := &protocol.Map{}
	for _, w := range noNanny {
		req.Log.Warn().Str("worker", w).Msg("worker has no nanny: closed without restarting it")
		s.loop.submit(&scheduler.RemoveWorker{Base: s.base("restart-workers-no-nanny"), Worker: w, Close: true, Reason: stimulusID})
		out.Set(w, "removed")
	}
	deadline := s.clock.Now().Add(timeout)
	failed := map[string]bool{}
	for _, w := range s.killViaNannies(ctx, nannies, stimulusID, deadline) {
		failed[w] = true
	}
	killed := make([]string, 0, len(nannies))
	for w := range nannies {
		killed = append(killed, w)
	}
	sort.Strings(killed)
	for _, w := range killed {
		if failed[w] {
			out.Set(w, "timed out")
		} else {
			out.Set(w, "OK")
		}
	}
	if len(failed) > 0 && onError != "return" {
		return pyError("TimeoutError", "%d/%d nanny worker(s) did not shut down within %vs: %v",
			len(failed), len(nannies), timeout.Seconds(), slices.Sorted(maps.Keys(failed))), nil
	}
	s.logRestartEvent(client, workers)
	if !wait {
		return out, nil
	}
	if s.waitForRestarted(ctx, nBefore, serverIDs, deadline) {
		return out, nil
	}
	msg := fmt.Sprintf("Waited for %d worker(s) to reconnect after restarting but, after %vs, they have not all returned. "+
		"Consider a longer timeout, or `wait_for_workers=False`.", len(workers), timeout.Seconds())
	if len(noNanny) > 0 {
		msg += fmt.Sprintf(" The %d worker(s) not using Nannies were just shut down instead of restarted "+
			"(restart is only possible with Nannies).", len(noNanny))
	}
	return pyError("TimeoutError", "%s", msg), nil
}

// logRestartEvent is restart_workers' log_event calls: to the client's
// topic and to "all".
func (s *Server) logRestartEvent(client string, workers []string) {
	if client != "" {
		s.loop.submit(&scheduler.LogEvent{Base: s.base("restart-workers"), Topics: []string{client},
			Msg: protocol.NewMap("action", "restart-workers", "workers", workers)})
	}
	s.loop.submit(&scheduler.LogEvent{Base: s.base("restart-workers"), Topics: []string{"all"},
		Msg: protocol.NewMap("action", "restart-workers", "workers", workers, "client", nilIfEmpty(client))})
}

// waitForRestarted waits until the scheduler has nBefore workers again,
// none of them a killed process (by server_id: a worker started with a
// fixed port comes back at the same address), or until deadline.
// distributed counts workers only, and may answer before a killed
// worker's removal reaches it.
func (s *Server) waitForRestarted(ctx context.Context, nBefore int, killed map[string]bool, deadline time.Time) bool {
	for {
		back := false
		if err := s.loop.query(ctx, func(st *scheduler.State) {
			back = st.NumWorkers() >= nBefore
			for _, w := range st.WorkerAddresses() {
				back = back && !killed[st.Worker(w).ServerID]
			}
		}); err != nil {
			return false
		}
		if back {
			return true
		}
		if !s.clock.Now().Before(deadline) {
			return false
		}
		select {
		case <-s.clock.After(200 * time.Millisecond):
		case <-ctx.Done():
			return false
		}
	}
}
