package server

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// Scheduler.replicate and Scheduler.rebalance: the engine plans
// (PlanReplicate, PlanRebalance), the workers copy peer to peer with their
// gather RPC (Scheduler.gather_on_worker) and drop replicas with free_keys
// (Scheduler.delete_worker_data); outcomes go back to the engine as
// AddKeys and ReleaseWorkerData.

// workerRPCTimeout bounds one worker RPC of these ops (a peer-to-peer
// copy of the keys of one round).
const workerRPCTimeout = 5 * time.Minute

// replicate mirrors Scheduler.replicate: None on success,
// {"status": "partial-fail", "keys"} when some key has no replica.
func (s *Server) replicate(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	keys := f.keys("keys")
	n, branching := int(f.int("n")), int(f.int("branching_factor"))
	del := req.Args.Get("delete") != false
	if f.err != nil {
		return nil, f.err
	}
	workers := optionalStrings(req.Args.Get("workers"))
	s.replicaMu.Lock()
	defer s.replicaMu.Unlock()
	for round := 0; ; round++ {
		var plan scheduler.ReplicatePlan
		var err error
		if qerr := s.loop.query(ctx, func(st *scheduler.State) { plan, err = st.PlanReplicate(keys, n, workers, branching) }); qerr != nil {
			return nil, qerr
		}
		if err != nil {
			return nil, fmt.Errorf("replicate: %w", err)
		}
		if len(plan.Missing) > 0 {
			return protocol.NewMap("status", "partial-fail", "keys", plan.Missing), nil
		}
		if round == 0 && del {
			s.deleteOnWorkers(ctx, plan.Delete)
		}
		if plan.Done {
			return nil, nil
		}
		// every round must add a replica, or the loop would never end (a
		// key copied to several recipients fails once per recipient)
		if _, failedCopies := s.gatherOnWorkersKeys(ctx, plan.Gather); failedCopies == countCopies(plan.Gather) {
			return nil, fmt.Errorf("replicate: no copy succeeded in round %d; see the scheduler log", round+1)
		}
	}
}

// rebalance mirrors Scheduler.rebalance's contract (see PlanRebalance for
// what is simplified): {"status": "OK"} or {"status": "partial-fail",
// "keys": [keys not moved]}.
func (s *Server) rebalance(ctx context.Context, req *comm.Request) (any, error) {
	var keys []protocol.Key
	if req.Args.Get("keys") != nil {
		f := &fields{op: req.Op, m: req.Args}
		if keys = f.keys("keys"); f.err != nil {
			return nil, f.err
		}
	}
	workers := optionalStrings(req.Args.Get("workers"))
	s.replicaMu.Lock()
	defer s.replicaMu.Unlock()
	var moves []scheduler.Move
	var err error
	if qerr := s.loop.query(ctx, func(st *scheduler.State) { moves, err = st.PlanRebalance(keys, workers) }); qerr != nil {
		return nil, qerr
	}
	if err != nil {
		return nil, fmt.Errorf("rebalance: %w", err)
	}
	gather := scheduler.WhoHasPlan{}
	for _, m := range moves {
		if gather[m.To] == nil {
			gather[m.To] = map[protocol.Key][]string{}
		}
		gather[m.To][m.Key] = []string{m.From}
	}
	failedKeys, _ := s.gatherOnWorkersKeys(ctx, gather)
	drop := map[string][]protocol.Key{}
	var failed []protocol.Key
	for _, m := range moves {
		if failedKeys[m.Key] {
			failed = append(failed, m.Key)
		} else {
			drop[m.From] = append(drop[m.From], m.Key)
		}
	}
	s.deleteOnWorkers(ctx, drop)
	if len(failed) > 0 {
		return protocol.NewMap("status", "partial-fail", "keys", failed), nil
	}
	return protocol.NewMap("status", "OK"), nil
}

// countCopies is how many (recipient, key) copies a plan asks for.
func countCopies(p scheduler.WhoHasPlan) int {
	n := 0
	for _, who := range p {
		n += len(who)
	}
	return n
}

// gatherOnWorkersKeys runs gather_on_worker for every recipient
// concurrently; it returns the keys that failed somewhere and how many
// (recipient, key) copies failed.
func (s *Server) gatherOnWorkersKeys(ctx context.Context, plan scheduler.WhoHasPlan) (map[protocol.Key]bool, int) {
	var mu sync.Mutex
	failed := map[protocol.Key]bool{}
	copies := 0
	var wg sync.WaitGroup
	for w, who := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bad := s.gatherOnWorker(ctx, w, who)
			mu.Lock()
			defer mu.Unlock()
			copies += len(bad)
			for _, k := range bad {
				failed[k] = true
			}
		}()
	}
	wg.Wait()
	return failed, copies
}

// gatherOnWorker mirrors Scheduler.gather_on_worker: the worker fetches
// who_has from its peers; the keys it got are registered as replicas.
func (s *Server) gatherOnWorker(ctx context.Context, worker string, who map[protocol.Key][]string) []protocol.Key {
	all := make([]protocol.Key, 0, len(who))
	for k := range who {
		all = append(all, k)
	}
	cctx, cancel := context.WithTimeout(ctx, workerRPCTimeout)
	defer cancel()
	v, err := s.pool.Call(cctx, worker, protocol.NewMap("op", "gather", "who_has", who, "reply", true))
	if err != nil {
		s.log.Warn().Err(err).Str("worker", worker).Msg("communication with worker failed during replication")
		return all
	}
	m, _ := v.(*protocol.Map)
	failed := map[protocol.Key]bool{}
	switch m.Get("status") {
	case "OK":
	case "partial-fail":
		ks, _ := protocol.KeysOf(m.Get("keys"))
		for _, k := range ks {
			failed[k] = true
		}
		s.log.Warn().Str("worker", worker).Int("keys", len(ks)).Msg("worker failed to acquire keys")
	default:
		s.log.Warn().Str("worker", worker).Str("reply", protocol.String(v)).Msg("unexpected gather reply")
		return all
	}
	var ok, bad []protocol.Key
	for _, k := range all {
		if failed[k] {
			bad = append(bad, k)
		} else {
			ok = append(ok, k)
		}
	}
	if len(ok) > 0 {
		_ = s.loop.submitWait(ctx, &scheduler.AddKeys{Base: s.base("gather-on-worker"), Worker: worker, Keys: ok})
	}
	return bad
}

// deleteOnWorkers mirrors Scheduler.delete_worker_data on each worker:
// free_keys, then the replicas are forgotten (never raises, as there).
func (s *Server) deleteOnWorkers(ctx context.Context, del map[string][]protocol.Key) {
	var wg sync.WaitGroup
	for w, keys := range del {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, workerRPCTimeout)
			defer cancel()
			sid := fmt.Sprintf("delete-data-%f", s.unixNow())
			_, err := s.pool.Call(cctx, w, protocol.NewMap("op", "free_keys", "keys", keys, "stimulus_id", sid, "reply", true))
			if err != nil {
				s.log.Warn().Err(err).Str("worker", w).Msg("communication with worker failed during replication")
				return
			}
			for _, k := range keys { // applied before the handler answers
				_ = s.loop.submitWait(context.WithoutCancel(ctx), &scheduler.ReleaseWorkerData{Base: s.base("delete-data"), Worker: w, Key: k})
			}
		}()
	}
	wg.Wait()
}

// sortedKeys lists a plan's recipients in order, for deterministic logs.
func sortedKeys(p scheduler.WhoHasPlan) []string {
	out := make([]string, 0, len(p))
	for w := range p {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}
