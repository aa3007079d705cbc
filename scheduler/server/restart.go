package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// restart is Scheduler.restart: release every key (clients get "restart"),
// then restart_workers: nanny-managed workers are killed by their nanny,
// which starts a fresh worker process; workers without a nanny are closed.
// With wait_for_workers the reply waits until as many workers as before are
// back, and a timeout is reported as distributed's TimeoutError text.
func (s *Server) restart(ctx context.Context, req *comm.Request) (any, error) {
	timeout := 30 * time.Second
	switch t := req.Args.Get("timeout").(type) {
	case int64:
		timeout = time.Duration(t) * time.Second
	case float64:
		timeout = time.Duration(t * float64(time.Second))
	}
	waitForWorkers := true
	if w, ok := req.Args.Get("wait_for_workers").(bool); ok {
		waitForWorkers = w
	}
	stimulusID, _ := req.Args.Get("stimulus_id").(string)
	if stimulusID == "" {
		stimulusID = fmt.Sprintf("restart-%d", s.clock.Now().UnixNano())
	}

	old := map[string]string{} // worker -> nanny ("" without one)
	if err := s.loop.query(ctx, func(st *scheduler.State) {
		for _, w := range st.WorkerAddresses() {
			old[w] = st.WorkerNanny(w)
		}
	}); err != nil {
		return nil, err
	}
	if err := s.loop.submitWait(ctx, &scheduler.Restart{Base: scheduler.Base{ID: stimulusID, At: s.clock.Now()}}); err != nil {
		return nil, err
	}
	req.Log.Info().Int("workers", len(old)).Msg("restarting workers and releasing all keys")

	deadline := s.clock.Now().Add(timeout)
	nannies := map[string]string{}
	for w, nanny := range old {
		if nanny == "" {
			if err := s.loop.submitWait(ctx, &scheduler.RemoveWorker{Base: s.base("restart-no-nanny"), Worker: w, Close: true, Reason: stimulusID}); err != nil {
				return nil, err
			}
			continue
		}
		nannies[w] = nanny
	}
	failed := s.killViaNannies(ctx, nannies, stimulusID, deadline)
	if len(failed) > 0 {
		return nil, fmt.Errorf("TimeoutError: %d/%d nanny worker(s) did not shut down within %v: %v",
			len(failed), len(old), timeout, failed)
	}
	if !waitForWorkers {
		return nil, nil
	}
	return nil, s.waitForNewWorkers(ctx, old, deadline, timeout)
}

// killViaNannies asks each worker's nanny to kill it (Nanny.kill; the nanny
// then starts a fresh worker process, whose registration is a new worker)
// and waits for the answers until deadline. Workers whose nanny failed or
// did not answer in time are removed and closed, so no old worker stays
// (restart_workers' bad_nannies); they are returned.
func (s *Server) killViaNannies(ctx context.Context, nannies map[string]string, reason string, deadline time.Time) []string {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for w, nanny := range nannies {
		wg.Add(1)
		go func() { // owned by this call, which waits for it
			defer wg.Done()
			kctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			if _, err := s.pool.Call(kctx, nanny, protocol.NewMap("op", "kill", "reason", reason, "reply", true)); err != nil {
				mu.Lock()
				failed = append(failed, w)
				mu.Unlock()
				s.log.Warn().Err(err).Str("worker", w).Str("nanny", nanny).Msg("nanny kill failed")
			}
		}()
	}
	wg.Wait()
	for _, w := range failed { // applied before the caller answers, even if it has gone
		_ = s.loop.submitWait(context.WithoutCancel(ctx), &scheduler.RemoveWorker{Base: s.base("restart-kill-failed"), Worker: w, Close: true, Reason: reason})
	}
	return failed
}

// restartSilentWorkers carries out the engine's RestartViaNanny (worker-ttl)
// on a goroutine of the server's, off the engine's lock: distributed awaits restart_workers(timeout=30)
// inside check_worker_ttl.
func (s *Server) restartSilentWorkers(reqs []scheduler.NannyRestart) {
	nannies := map[string]string{}
	reason := ""
	for _, r := range reqs {
		nannies[r.Worker], reason = r.Nanny, r.Reason
	}
	s.goRun(func() {
		s.killViaNannies(s.ctx, nannies, reason, s.clock.Now().Add(30*time.Second))
	})
}

// waitForNewWorkers waits until as many running workers as before the
// restart are registered, none of them an old one.
func (s *Server) waitForNewWorkers(ctx context.Context, old map[string]string, deadline time.Time, timeout time.Duration) error {
	for {
		fresh := 0
		if err := s.loop.query(ctx, func(st *scheduler.State) {
			for _, w := range st.RunningWorkers() {
				if _, was := old[w]; !was {
					fresh++
				}
			}
		}); err != nil {
			return err
		}
		if fresh >= len(old) {
			return nil
		}
		if s.clock.Now().After(deadline) {
			return fmt.Errorf("TimeoutError: waited for %d worker(s) to reconnect after restarting but, "+
				"after %v, only %d have returned. Consider a longer timeout, or wait_for_workers=False. "+
				"Workers without a nanny were just shut down instead of restarted",
				len(old), timeout, fresh)
		}
		select {
		case <-s.clock.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
