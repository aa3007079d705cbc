package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The P2P shuffle RPCs of distributed's ShuffleSchedulerPlugin
// (distributed/shuffle/_scheduler_plugin.py). The engine owns the runs (scheduler/shuffle.go);
// these handlers decode the requests, wait for the engine's reply, and make
// the one call the engine cannot: the barrier's shuffle_inputs_done round
// to every participant.

// Barrier broadcast pacing, as ShuffleSchedulerPlugin.barrier: retry the
// workers whose comm failed after a pause, and give up after this many
// rounds without progress.
const (
	barrierRetryPause    = 100 * time.Millisecond
	barrierMaxNoProgress = 3
)

func (s *Server) shuffleGetOrCreate(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	st := &scheduler.ShuffleGetOrCreate{Base: s.base("p2p-get-or-create"),
		ShuffleID: f.str("shuffle_id"), Key: f.key("key"), Worker: f.str("worker")}
	if f.err != nil {
		return nil, f.err
	}
	return s.loop.call(ctx, func(to int64) scheduler.Stimulus { st.ReplyTo = to; return st })
}

func (s *Server) shuffleGet(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	st := &scheduler.ShuffleGet{Base: s.base("p2p-get"),
		ShuffleID: f.str("id"), Worker: f.str("worker")}
	if f.err != nil {
		return nil, f.err
	}
	return s.loop.call(ctx, func(to int64) scheduler.Stimulus { st.ReplyTo = to; return st })
}

func (s *Server) shuffleRestrictTask(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	st := &scheduler.ShuffleRestrictTask{Base: s.base("p2p-restrict-task"),
		ShuffleID: f.str("id"), RunID: f.int("run_id"), Key: f.key("key"), Worker: f.str("worker")}
	if f.err != nil {
		return nil, f.err
	}
	return s.loop.call(ctx, func(to int64) scheduler.Stimulus { st.ReplyTo = to; return st })
}

// shuffleBarrier mirrors ShuffleSchedulerPlugin.barrier: the engine checks
// the run (or restarts an inconsistent shuffle), then every participant
// hears shuffle_inputs_done before the barrier task is answered. Errors go
// back as uncaught errors, which the worker raises in the barrier task.
func (s *Server) shuffleBarrier(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	st := &scheduler.ShuffleBarrier{Base: s.base("p2p-barrier"),
		ShuffleID: f.str("id"), RunID: f.int("run_id"), Consistent: f.bool("consistent")}
	if f.err != nil {
		return nil, f.err
	}
	v, err := s.loop.call(ctx, func(to int64) scheduler.Stimulus { st.ReplyTo = to; return st })
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case error:
		return nil, x
	case scheduler.ShuffleBarrierPlan:
		return nil, s.inputsDone(ctx, st.ShuffleID, st.RunID, x.Participants)
	}
	return nil, nil
}

// inputsDone calls shuffle_inputs_done on every participant, retrying
// those whose comm failed while they are still in the cluster.
func (s *Server) inputsDone(ctx context.Context, id string, runID int64, workers []string) error {
	msg := protocol.NewMap("close", false, "op", "shuffle_inputs_done", "shuffle_id", id, "run_id", runID, "reply", true)
	noProgress := 0
	for len(workers) > 0 {
		failed, err := s.broadcastInputsDone(ctx, msg, workers)
		if err != nil {
			return fmt.Errorf("P2P barrier of shuffle %s[%d]: %w", id, runID, err)
		}
		if len(failed) == 0 {
			return nil
		}
		s.log.Warn().Str("shuffle_id", id).Strs("workers", failed).Msg("failure during broadcast of shuffle_inputs_done; retrying")
		var gone []string
		if err := s.loop.query(ctx, func(st *scheduler.State) {
			for _, w := range failed {
				if st.Worker(w) == nil {
					gone = append(gone, w)
				}
			}
		}); err != nil {
			return err
		}
		if len(gone) > 0 {
			return fmt.Errorf("worker %v left during shuffle %s[%d]", gone, id, runID)
		}
		if len(failed) == len(workers) {
			if noProgress++; noProgress >= barrierMaxNoProgress {
				return fmt.Errorf("broadcast of shuffle_inputs_done not making progress for shuffle %s[%d]; "+
					"aborting. This is possibly due to overloaded workers. Increasing config "+
					"`distributed.comm.timeouts.connect` timeout may help", id, runID)
			}
		}
		select {
		case <-s.clock.After(barrierRetryPause):
		case <-ctx.Done():
			return ctx.Err()
		}
		workers = failed
	}
	return nil
}

// broadcastInputsDone sends msg to every worker at once and returns those
// whose comm failed (distributed retries OSErrors). A worker that answered
// with an error fails the barrier.
func (s *Server) broadcastInputsDone(ctx context.Context, msg *protocol.Map, workers []string) ([]string, error) {
	type result struct {
		worker string
		err    error
	}
	results := make(chan result, len(workers))
	for _, w := range workers {
		go func() {
			_, err := s.pool.Call(ctx, w, msg)
			results <- result{w, err}
		}()
	}
	var failed []string
	var remote error
	for range workers {
		r := <-results
		var rerr *comm.RemoteError
		switch {
		case r.err == nil:
		case errors.As(r.err, &rerr):
			if remote == nil {
				remote = fmt.Errorf("unexpected error encountered during P2P barrier on %s: %w", r.worker, r.err)
			}
		default:
			failed = append(failed, r.worker)
		}
	}
	sort.Strings(failed)
	return failed, remote
}
