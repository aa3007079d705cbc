package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// retireWorkers mirrors Scheduler.retire_workers with the RetireWorker
// policy of the active memory manager: the workers go closing_gracefully
// (scheduler and worker side), the engine plans a replica of every key
// only they hold on another running worker, we send acquire-replicas and
// poll until the replicas are registered (add-keys), then remove and/or
// close the workers. It returns {address: worker identity} for the
// workers retired; when the data cannot go anywhere the workers get
// their previous status back and are not listed, as distributed does.
// Without workers or names it retires those workers_to_close picks, with
// the call's other arguments (n, target, memory_ratio, minimum).
//
// Difference: the workers of one call are retired together (one joint
// plan instead of one policy per worker).
func (s *Server) retireWorkers(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	closeWorkers := f.bool("close_workers")
	remove := req.Args.Get("remove") != false
	sid := f.str("stimulus_id")
	if f.err != nil {
		return nil, f.err
	}
	names, workers := req.Args.Get("names"), req.Args.Get("workers")
	if names != nil && workers != nil {
		return nil, errors.New("TypeError: names and workers are mutually exclusive")
	}
	if names == nil && workers == nil {
		q, err := closeQuery(req)
		if err != nil {
			return nil, err
		}
		var addrs []string
		if err := s.loop.query(ctx, func(st *scheduler.State) { addrs = st.WorkersToClose(q) }); err != nil {
			return nil, err
		}
		workers = stringsAny(addrs)
	}
	return s.retire(ctx, names, workers, closeWorkers, remove, sid)
}

// retire retires the workers named (names) or addressed (workers);
// unknown ones are ignored, as there.
func (s *Server) retire(ctx context.Context, names, workers any, closeWorkers, remove bool, sid string) (*protocol.Map, error) {
	if sid == "" {
		sid = fmt.Sprintf("retire-workers-%f", s.unixNow())
	}
	addrs, prev, info, err := s.startRetiring(ctx, names, workers, sid)
	if err != nil || len(addrs) == 0 {
		return &protocol.Map{}, err
	}
	s.log.Info().Strs("workers", addrs).Str("stimulus_id", sid).Msg("retire workers")
	ok, err := s.replicateOffRetiring(ctx, addrs, sid)
	if err != nil || !ok {
		for _, a := range addrs { // abort: back to the previous status
			s.setWorkerStatus(ctx, a, prev[a], sid)
		}
		if err != nil {
			return nil, err
		}
		s.log.Warn().Strs("workers", addrs).Msg("could not retire workers: unique data could not be moved to any other worker")
		return &protocol.Map{}, nil
	}
	out := &protocol.Map{}
	for _, a := range addrs {
		if remove {
			st := &scheduler.RemoveWorker{Base: s.base(sid), Worker: a, Expected: true, Close: closeWorkers, Reason: "retire-workers"}
			if err := s.loop.submitWait(ctx, st); err != nil {
				return nil, err
			}
		} else if closeWorkers {
			if b := s.workerStream(a); b != nil {
				_ = b.Send(protocol.NewMap("op", "close", "reason", "retire-workers"))
			}
		}
		out.Set(a, info[a])
		s.log.Info().Str("worker", a).Msg("retired worker")
	}
	return out, nil
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, x := range ss {
		out[i] = x
	}
	return out
}

// startRetiring resolves names or addresses to known workers and sets them
// closing_gracefully; it returns their addresses, previous statuses and
// identities.
func (s *Server) startRetiring(ctx context.Context, names, workers any, sid string) ([]string, map[string]string, map[string]*protocol.Map, error) {
	var addrs []string
	prev := map[string]string{}
	info := map[string]*protocol.Map{}
	err := s.loop.query(ctx, func(st *scheduler.State) {
		wanted := map[string]bool{}
		for _, n := range anyList(names) {
			if str, ok := n.(string); ok {
				wanted[str] = true
			} else { // str(name), as distributed compares names
				wanted[protocol.String(n)] = true
			}
		}
		for _, w := range anyList(workers) {
			if a, ok := w.(string); ok {
				wanted[a] = true
			}
		}
		for _, a := range st.WorkerAddresses() {
			ws := st.Worker(a)
			if (names != nil && wanted[ws.Name]) || (workers != nil && wanted[a]) {
				addrs = append(addrs, a)
				prev[a] = ws.Status()
				info[a] = st.WorkerIdentity(ws)
			}
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, a := range addrs {
		s.setWorkerStatus(ctx, a, "closing_gracefully", sid)
	}
	return addrs, prev, info, nil
}

func anyList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case protocol.Set:
		return x
	case nil:
		return nil
	default:
		return []any{x}
	}
}

// setWorkerStatus changes the status on both sides, as retire_workers
// does (handle_worker_status_change, then worker-status-change on the
// worker's stream). The change applies before the handler goes on (doc.go's
// ordering rule), also when the caller has gone: an aborted retirement
// must still put its workers back.
func (s *Server) setWorkerStatus(ctx context.Context, addr, status, sid string) {
	_ = s.loop.submitWait(context.WithoutCancel(ctx), &scheduler.WorkerStatusChange{Base: s.base(sid), Worker: addr, Status: status})
	if b := s.workerStream(addr); b != nil {
		_ = b.Send(protocol.NewMap("op", "worker-status-change", "status", status, "stimulus_id", sid))
	}
}

// amInterval is how often acquire-replicas is re-sent for keys still
// unique (distributed.scheduler.active-memory-manager.interval).
const amInterval = 2 * time.Second

// replicateOffRetiring runs RetireWorker rounds until no key is unique to
// the retiring workers (true) or no recipient exists (false).
func (s *Server) replicateOffRetiring(ctx context.Context, addrs []string, sid string) (bool, error) {
	var lastSent time.Time
	for {
		var plan scheduler.RetirePlan
		var msgs map[string]*protocol.Map
		if err := s.loop.query(ctx, func(st *scheduler.State) {
			plan = st.PlanRetire(addrs)
			msgs = st.AcquireReplicasMsgs(plan.Acquire, sid)
		}); err != nil {
			return false, err
		}
		if plan.Done() {
			return true, nil
		}
		if plan.NoRecipients {
			return false, nil
		}
		if s.clock.Now().Sub(lastSent) >= amInterval {
			for _, to := range sortedKeys(plan.Acquire) {
				if b := s.workerStream(to); b != nil {
					_ = b.Send(msgs[to])
				}
			}
			lastSent = s.clock.Now()
		}
		// distributed's _track_retire_worker: 10 ms to 500 ms by key count
		poll := min(500*time.Millisecond, max(10*time.Millisecond, time.Duration(plan.Unique)*time.Second/400))
		select {
		case <-s.clock.After(poll):
		case <-ctx.Done():
			return false, ctx.Err()
		case <-s.ctx.Done():
			return false, errShuttingDown
		}
	}
}
